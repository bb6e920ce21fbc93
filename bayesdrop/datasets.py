"""Data sets available offline."""

from __future__ import annotations

from importlib.resources import files

import numpy as np
import scipy.io as sio

__all__ = ["load_newsgroups"]


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
