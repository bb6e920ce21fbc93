"""Data sets available offline."""

from __future__ import annotations

from importlib.resources import files

import numpy as np
import scipy.io as sio

__all__ = ["load_newsgroups", "load_fashion_mnist"]


def load_newsgroups():
    """The 20-newsgroups *alt.atheism* vs *soc.religion.christian* bag-of-words data.

    1427 documents, 22178 binary word features, labels -1 / +1; bundled (MIT licence,
    see ``bayesdrop/data/newsgroups_atheism_christian.LICENSE``).

    Returns
    -------
    X : scipy.sparse.csr_matrix of shape (1427, 22178)
    y : ndarray of shape (1427,), values in {-1, +1}

    Examples
    --------
    >>> X, y = load_newsgroups()
    >>> X.shape, sorted(set(y))
    ((1427, 22178), [-1.0, 1.0])
    """
    path = files("bayesdrop") / "data" / "newsgroups_atheism_christian.mat"
    with path.open("rb") as fh:
        d = sio.loadmat(fh)
    return d["X"].tocsr().astype(np.float64), d["y"].ravel().astype(np.float64)


#: Where the Debian package ``dataset-fashion-mnist`` installs the IDX files.
FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"


def _read_idx(path):
    import gzip

    with gzip.open(path, "rb") as fh:
        data = fh.read()
    ndim = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim))
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


def load_fashion_mnist(directory=None):
    """Fashion-MNIST (60000 train / 10000 test, 28 x 28 grey images, 10 classes).

    Reads the gzipped IDX files installed by the Debian package ``dataset-fashion-mnist``
    (``apt-get install dataset-fashion-mnist``).

    Parameters
    ----------
    directory : str, optional
        Default :data:`FASHION_MNIST_DIR`.

    Returns
    -------
    X_train : ndarray of shape (60000, 784), float64 in [0, 1]
    y_train : ndarray of shape (60000,), int
    X_test : ndarray of shape (10000, 784)
    y_test : ndarray of shape (10000,)

    Raises
    ------
    FileNotFoundError
        Naming the install command when the files are missing.
    """
    import os

    directory = FASHION_MNIST_DIR if directory is None else directory
    names = ["train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
             "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"]
    paths = [os.path.join(directory, n) for n in names]
    missing = [p for p in paths if not os.path.exists(p)]
    if missing:
        raise FileNotFoundError(
            f"Fashion-MNIST not found ({missing[0]}); install it with "
            "'apt-get install dataset-fashion-mnist' or pass directory="
        )
    Xtr, ytr, Xte, yte = (_read_idx(p) for p in paths)
    return (Xtr.reshape(len(Xtr), -1) / 255.0, ytr.astype(int),
            Xte.reshape(len(Xte), -1) / 255.0, yte.astype(int))
