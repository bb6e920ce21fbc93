"""Data sets available offline."""

from __future__ import annotations

from importlib.resources import files

import numpy as np
import scipy.io as sio

from .._validation import check_random_state, check_scalar

__all__ = [
    "load_newsgroups",
    "load_fashion_mnist",
    "load_digits",
    "load_breast_cancer",
    "make_long_servedio",
    "make_mease_wyner",
    "make_rare_features",
    "flip_labels",
]


def load_newsgroups():
    """The 20-newsgroups *alt.atheism* vs *soc.religion.christian* bag-of-words data.

    1427 documents, 22178 binary word features, labels 0 (atheism) / 1 (christian) as
    scikit-learn's loaders give them (``2 * y - 1`` for the +-1 targets of a
    :class:`~bayesdrop.model.problem.Problem`); bundled (MIT licence,
    see ``bayesdrop/data/newsgroups_atheism_christian.LICENSE``).

    Returns
    -------
    X : scipy.sparse.csr_matrix of shape (1427, 22178)
    y : ndarray of int of shape (1427,), values in {0, 1}

    Examples
    --------
    >>> X, y = load_newsgroups()
    >>> X.shape, sorted(set(y.tolist()))
    ((1427, 22178), [0, 1])
    """
    path = files("bayesdrop") / "data" / "newsgroups_atheism_christian.mat"
    with path.open("rb") as fh:
        d = sio.loadmat(fh)
    return d["X"].tocsr().astype(np.float64), (d["y"].ravel() > 0).astype(np.int64)


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

    Examples
    --------
    >>> load_fashion_mnist("/nonexistent")  # the error says how to get the data
    Traceback (most recent call last):
    ...
    FileNotFoundError: Fashion-MNIST not found (/nonexistent/train-images-idx3-ubyte.gz); install it with 'apt-get install dataset-fashion-mnist' or pass directory=
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


def load_digits():
    """scikit-learn's 8 x 8 digits (1797 images, 64 features scaled to [0, 1], 10 classes).

    Returns
    -------
    X : ndarray of shape (1797, 64)
    y : ndarray of shape (1797,), int

    Examples
    --------
    >>> X, y = load_digits()
    >>> X.shape, float(X.max()), len(set(y))
    ((1797, 64), 1.0, 10)
    """
    from sklearn.datasets import load_digits as _load

    d = _load()
    return d.data / 16.0, d.target.astype(int)


def load_breast_cancer(standardize=True):
    """scikit-learn's Wisconsin breast-cancer data (569 x 30), labels 0 (malignant) / 1
    (benign) as scikit-learn gives them.

    Parameters
    ----------
    standardize : bool, default=True
        Centre and scale each feature to unit variance (on the whole set; the features
        span five orders of magnitude otherwise).

    Returns
    -------
    X : ndarray of shape (569, 30)
    y : ndarray of int of shape (569,), values in {0, 1}

    Examples
    --------
    >>> X, y = load_breast_cancer()
    >>> X.shape, int((y == 1).sum())
    ((569, 30), 357)
    """
    from sklearn.datasets import load_breast_cancer as _load

    d = _load()
    X = d.data.astype(np.float64)
    if standardize:
        X = (X - X.mean(axis=0)) / X.std(axis=0)
    return X, d.target.astype(np.int64)


def flip_labels(y, rate, random_state=None):
    """Flip a fraction ``rate`` of the labels (exactly ``round(rate * n)`` of them).

    Binary labels are swapped; with more classes a flipped label becomes one of the other
    classes, chosen uniformly. Returns a new array and the boolean mask of flipped entries.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
    rate : float in [0, 1)
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    y_noisy : ndarray of shape (n_samples,)
    flipped : ndarray of bool, shape (n_samples,)

    Examples
    --------
    >>> y = np.array([1, -1] * 5)
    >>> y_noisy, flipped = flip_labels(y, 0.2, random_state=0)
    >>> int(flipped.sum()), bool(np.all(y_noisy[flipped] == -y[flipped]))
    (2, True)
    """
    rate = check_scalar(rate, "rate", min_val=0.0, max_val=1.0, include_max=False)
    y = np.asarray(y)
    rng = check_random_state(random_state)
    n = y.shape[0]
    classes = np.unique(y)
    if classes.shape[0] < 2:
        raise ValueError("y must contain at least two classes to flip labels")
    flipped = np.zeros(n, dtype=bool)
    flipped[rng.choice(n, size=int(round(rate * n)), replace=False)] = True
    y_noisy = y.copy()
    idx = np.searchsorted(classes, y[flipped])
    shift = rng.integers(1, classes.shape[0], size=idx.shape[0])
    y_noisy[flipped] = classes[(idx + shift) % classes.shape[0]]
    return y_noisy, flipped


def make_long_servedio(n_samples=1000, random_state=None):
    """The Long-Servedio (2010) data set, as described in the t-logistic paper (seed 003).

    21 features in {-1, +1} and labels ``y`` uniform in {-1, +1}. Each example plays one of
    three roles:

    - *large margin* (25%): ``x_1..21 = y``;
    - *puller* (25%): ``x_1..11 = y``, ``x_12..21 = -y``;
    - *penalizer* (50%): 5 random coordinates of the first 11 and 6 random coordinates
      of the last 10 are ``y``, the rest ``-y``.

    The clean data are separable by ``w = (1, ..., 1)``; minimisers of convex losses are
    fooled once some training labels are flipped (:func:`flip_labels`).

    Parameters
    ----------
    n_samples : int, default=1000
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    X : ndarray of shape (n_samples, 21)
    y : ndarray of shape (n_samples,), values in {-1, +1}
    role : ndarray of str, shape (n_samples,)
        ``"large_margin"``, ``"puller"`` or ``"penalizer"``.

    Examples
    --------
    >>> X, y, role = make_long_servedio(200, random_state=0)
    >>> X.shape, bool(np.all(np.sign(X.sum(axis=1)) == y))
    ((200, 21), True)
    """
    n_samples = check_scalar(n_samples, "n_samples", min_val=1, integer=True)
    rng = check_random_state(random_state)
    y = rng.choice(np.array([-1.0, 1.0]), size=n_samples)
    u = rng.random(n_samples)
    role = np.where(u < 0.25, "large_margin", np.where(u < 0.5, "puller", "penalizer"))
    X = np.ones((n_samples, 21))
    X[role == "puller", 11:] = -1.0
    for i in np.flatnonzero(role == "penalizer"):
        row = -np.ones(21)
        row[rng.choice(11, size=5, replace=False)] = 1.0
        row[11 + rng.choice(10, size=6, replace=False)] = 1.0
        X[i] = row
    return X * y[:, None], y, role


def make_mease_wyner(n_samples=1000, n_features=20, random_state=None):
    """The Mease-Wyner (2008) data set: uniform inputs, the label says whether the first five sum to 2.5 or more.

    ``x ~ U[0, 1]^20`` and ``y = +1`` iff ``x_1 + x_2 + x_3 + x_4 + x_5 >= 2.5``.

    Parameters
    ----------
    n_samples : int, default=1000
    n_features : int >= 5, default=20
    random_state : None, int or numpy.random.Generator

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,), values in {-1, +1}

    Examples
    --------
    >>> X, y = make_mease_wyner(100, random_state=0)
    >>> bool(np.all((X[:, :5].sum(axis=1) >= 2.5) == (y == 1)))
    True
    """
    n_samples = check_scalar(n_samples, "n_samples", min_val=1, integer=True)
    n_features = check_scalar(n_features, "n_features", min_val=5, integer=True)
    rng = check_random_state(random_state)
    X = rng.random((n_samples, n_features))
    return X, np.where(X[:, :5].sum(axis=1) >= 2.5, 1.0, -1.0)


def make_rare_features(n_samples=1000, n_rare=50, n_nuisance=1000, p_active=0.04,
                       signal=1.0, random_state=None, coef_random_state=0):
    """Rare-but-useful features (Wager et al. 2013, section 4.1).

    All the signal sits in ``n_rare`` binary features, each active with probability
    ``p_active``; ``n_nuisance`` Gaussian features are always active and carry none.
    Every column has ``E x_d^2 = 1`` (a rare feature is ``1/sqrt(p_active)`` when active)
    so that the experiment is not about feature scaling. Labels are drawn from the
    logistic model ``P(y = 1 | x) = sigmoid(sum_j beta_j x_j)`` with
    ``beta_j = +-signal`` on the rare features and 0 elsewhere; the signs come from
    ``coef_random_state``, so training and test sets drawn with different
    ``random_state`` share one model.

    The paper's appendix with its exact constants is not in the seed text; these choices
    (values, signs, signal) are ours.

    Parameters
    ----------
    n_samples, n_rare, n_nuisance : int
    p_active : float in (0, 1), default=0.04
    signal : float > 0, default=1.0
    random_state : None, int or numpy.random.Generator
        Draws the rows and labels.
    coef_random_state : None, int or numpy.random.Generator, default=0
        Draws the signs of ``beta``.

    Returns
    -------
    X : ndarray of shape (n_samples, n_rare + n_nuisance)
    y : ndarray of shape (n_samples,), values in {-1, +1}
    has_signal : ndarray of bool, shape (n_samples,)
        Whether at least one rare feature is active in the row.

    Examples
    --------
    >>> X, y, has_signal = make_rare_features(500, random_state=0)
    >>> X.shape, bool(abs((X ** 2).mean() - 1) < 0.05)
    ((500, 1050), True)
    """
    n_samples = check_scalar(n_samples, "n_samples", min_val=1, integer=True)
    n_rare = check_scalar(n_rare, "n_rare", min_val=1, integer=True)
    n_nuisance = check_scalar(n_nuisance, "n_nuisance", min_val=0, integer=True)
    p_active = check_scalar(p_active, "p_active", min_val=0.0, max_val=1.0,
                            include_min=False, include_max=False)
    signal = check_scalar(signal, "signal", min_val=0.0, include_min=False)
    rng = check_random_state(random_state)
    rare = (rng.random((n_samples, n_rare)) < p_active) / np.sqrt(p_active)
    nuisance = rng.standard_normal((n_samples, n_nuisance))
    beta = signal * check_random_state(coef_random_state).choice(np.array([-1.0, 1.0]),
                                                                 size=n_rare)
    logit = rare @ beta
    y = np.where(rng.random(n_samples) < 1.0 / (1.0 + np.exp(-logit)), 1.0, -1.0)
    return np.hstack([rare, nuisance]), y, rare.any(axis=1)
