"""Argument checks shared by the functional cores and the estimators."""

from __future__ import annotations

import numbers
import os

import numpy as np
import scipy.sparse as sp


#: Largest magnitude accepted in ``X`` and regression targets: squares (noise variances,
#: squared residuals) and their sums over ``N x D`` entries stay far below the float64
#: maximum (about 1.8e308).
MAX_ABS = 1e100


def seed_sequence(random_state):
    """A :class:`numpy.random.SeedSequence` from ``random_state`` (the one seed normaliser).

    None (fresh entropy), an int, a SeedSequence (used as is) or a Generator / bit
    generator (four words are drawn from it, so the same generator state gives the same
    streams). The legacy ``RandomState`` is refused: its ``wald`` sampler is inaccurate
    for large means.

    Examples
    --------
    >>> seed_sequence(3).entropy
    3
    """
    if isinstance(random_state, np.random.SeedSequence):
        return random_state
    if random_state is None:
        return np.random.SeedSequence()
    if isinstance(random_state, np.random.BitGenerator):
        random_state = np.random.Generator(random_state)
    if isinstance(random_state, np.random.Generator):
        return np.random.SeedSequence(random_state.integers(0, 2**63, size=4).tolist())
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(f"random_state must be a non-negative integer, got {random_state}")
        return np.random.SeedSequence(int(random_state))
    if isinstance(random_state, np.random.RandomState):
        raise TypeError(
            "random_state must be None, an int, a SeedSequence or a numpy Generator; the "
            "legacy RandomState is not supported (use numpy.random.default_rng)"
        )
    raise TypeError(
        "random_state must be None, an int, a SeedSequence or a numpy Generator, got "
        f"{type(random_state).__name__}"
    )


def check_random_state(random_state):
    """Turn ``random_state`` into a :class:`numpy.random.Generator`.

    A Generator is returned as is and a bit generator wrapped (so the caller's stream
    advances); anything else goes through :func:`seed_sequence`, so an int gives
    ``numpy.random.default_rng(int)``.

    Examples
    --------
    >>> float(check_random_state(0).random()) == float(np.random.default_rng(0).random())
    True
    """
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.BitGenerator):
        return np.random.Generator(random_state)
    return np.random.default_rng(seed_sequence(random_state))


def check_scalar(value, name, *, min_val=None, max_val=None, include_min=True,
                 include_max=True, integer=False):
    """Validate a real (or integer) scalar parameter and return it as float (or int)."""
    kind = numbers.Integral if integer else numbers.Real
    if isinstance(value, bool) or not isinstance(value, kind):
        raise TypeError(
            f"{name} must be {'an integer' if integer else 'a real number'}, "
            f"got {type(value).__name__}"
        )
    value = int(value) if integer else float(value)
    if not integer and not np.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if min_val is not None:
        bad = value < min_val if include_min else value <= min_val
        if bad:
            op = ">=" if include_min else ">"
            raise ValueError(f"{name} must be {op} {min_val}, got {value!r}")
    if max_val is not None:
        bad = value > max_val if include_max else value >= max_val
        if bad:
            op = "<=" if include_max else "<"
            raise ValueError(f"{name} must be {op} {max_val}, got {value!r}")
    return value


#: the range of ``C`` a loss accepts (``[MIN_C, MAX_C]``): beyond, ``2 C`` times the terms
#: overflows ``J`` in float64 (or a draw's variance ``1 / C`` does at the lower end)
MIN_C, MAX_C = 1e-100, 1e100
#: the most iterations a solver accepts (its history of ``J`` is preallocated: 80 MB)
MAX_ITER = 10**7


def check_C(C, name="C"):
    """``C`` as a float in ``[MIN_C, MAX_C]`` (:data:`MIN_C`), a ``ValueError`` naming it
    otherwise.

    Examples
    --------
    >>> check_C(2)
    2.0
    >>> check_C(1e300)
    Traceback (most recent call last):
    ...
    ValueError: C must be <= 1e+100, got 1e+300
    """
    C = check_scalar(C, name, min_val=0.0, include_min=False, max_val=MAX_C)
    if C < MIN_C:
        raise ValueError(f"{name} must be >= {MIN_C:g} (and > 0), got {C!r}")
    return C


def check_bool(value, name):
    """``value`` as a bool (``bool`` or ``numpy.bool_``), a ``TypeError`` naming it
    otherwise -- not a number that would pass as one (``fit_intercept=-1``).

    Examples
    --------
    >>> check_bool(np.True_, "fit_intercept")
    True
    >>> check_bool(1, "fit_intercept")
    Traceback (most recent call last):
    ...
    TypeError: fit_intercept must be True or False, got int
    """
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__}")
    return bool(value)


def check_verbose(value):
    """``verbose`` as an int >= 0 (a bool counts as 0 or 1)."""
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    return check_scalar(value, "verbose", min_val=0, integer=True)


def check_n_jobs(value):
    """``n_jobs`` as joblib takes it: None, or a non-zero integer (negative: counted from
    the number of CPUs)."""
    if value is None:
        return None
    value = check_scalar(value, "n_jobs", integer=True)
    if value == 0:
        raise ValueError("n_jobs must be None or a non-zero integer, got 0")
    return value


def physical_memory():
    """This machine's physical memory in bytes, or None where the OS does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # not POSIX
        return None


def check_fits_in_memory(nbytes, names, what, advice):
    """A ``ValueError`` naming ``names`` if ``nbytes`` (``what``) exceed the physical
    memory -- a clear error up front instead of numpy's ``MemoryError`` or a machine that
    swaps."""
    memory = physical_memory()
    if memory is not None and nbytes > memory:
        raise ValueError(f"{names}: {what} are {nbytes / 2**30:.3g} GiB, more than this "
                         f"machine's memory ({memory / 2**30:.3g} GiB); {advice}")


def reject_dask(X, name="X", where="this function"):
    """Raise a TypeError for a dask array: ``where`` would otherwise pull it into memory.

    Only the dropout estimators (``fit``, ``predict``, ``decision_function``,
    ``predict_proba``, ``sample_posterior``) and :func:`bayesdrop.posterior.sample_posterior`
    compute on dask data; everything else refuses it rather than calling ``np.asarray`` on
    a lazy, possibly huge array.

    Examples
    --------
    >>> reject_dask(np.ones((2, 2)))  # anything else passes
    """
    if type(X).__module__.split(".")[0] == "dask" and hasattr(X, "chunks"):
        raise TypeError(
            f"{name} is a dask array, which {where} would load into this process's memory. "
            "DropoutSVC, DropoutLogisticRegression and DropoutSVR (fit, predict, "
            "decision_function, predict_proba, sample_posterior) and "
            "bayesdrop.sample_posterior compute on dask arrays chunk by chunk (the latent "
            "models predict on them chunk by chunk); elsewhere "
            f"call {name}.compute() to load it deliberately")


def as_float_design(X, name="X"):
    """Return ``X`` as float64 dense array or CSR matrix, without copying if possible.

    Raises a ValueError naming ``name`` for NaN/inf, entries above :data:`MAX_ABS` (naming
    the feature) or a wrong number of dimensions, and a TypeError for a dask array
    (:func:`reject_dask`).
    """
    reject_dask(X, name)
    if sp.issparse(X):
        X = sp.csr_matrix(X, dtype=np.float64)
        data = X.data
    else:
        X = np.asarray(X, dtype=np.float64)
        data = X
    if X.ndim != 2:
        raise ValueError(f"{name} must be 2-dimensional, got shape {X.shape}")
    if data.size:
        # two allocation-free SIMD reductions; NaN propagates through max / min
        hi, lo = float(np.max(data)), float(np.min(data))
        if not (np.isfinite(hi) and np.isfinite(lo)):
            raise ValueError(f"{name} contains NaN or infinity")
    if data.size and max(hi, -lo) > MAX_ABS:
        flat = np.abs(data).ravel()
        k = int(np.argmax(flat))
        if flat[k] > MAX_ABS:
            col = int(X.indices[k]) if sp.issparse(X) else int(np.unravel_index(k, X.shape)[1])
            raise ValueError(
                f"{name} has an entry of magnitude {flat[k]:.3g} (feature {col}); values "
                f"above {MAX_ABS:g} overflow the noise variances (squares) and the "
                "objective in float64: rescale the features (e.g. StandardScaler)")
    return X


def as_float_vector(y, n, name="y"):
    """Return ``y`` as a finite float64 vector of length ``n``."""
    y = np.asarray(y, dtype=np.float64)
    if y.ndim != 1:
        raise ValueError(f"{name} must be 1-dimensional, got shape {y.shape}")
    if y.shape[0] != n:
        raise ValueError(f"{name} has {y.shape[0]} entries but X has {n} rows")
    if not np.all(np.isfinite(y)):
        raise ValueError(f"{name} contains NaN or infinity")
    if y.size and np.max(np.abs(y)) > MAX_ABS:
        raise ValueError(f"{name} has an entry of magnitude {np.max(np.abs(y)):.3g}; values "
                         f"above {MAX_ABS:g} overflow the objective in float64: rescale "
                         f"{name}")
    return y


def check_binary_labels(y, name="y"):
    """Check that ``y`` only holds -1 and +1."""
    if not np.all((y == 1.0) | (y == -1.0)):
        raise ValueError(f"{name} must hold only -1 and +1 for a binary loss")
    return y


def check_sample_weight(sample_weight, n, name="sample_weight"):
    """Validate per-example weights: None, a number, or ``n`` finite values ``>= 0``.

    Returns None when every weight is 1 (the unweighted problem), else a new float64
    array (the caller's array is never modified). Weights above :data:`MAX_ABS`, negative
    or non-finite weights, and weights that are all zero raise a ValueError naming
    ``name``.

    Examples
    --------
    >>> check_sample_weight(None, 3) is None, check_sample_weight(2.0, 2).tolist()
    (True, [2.0, 2.0])
    """
    if sample_weight is None:
        return None
    if isinstance(sample_weight, numbers.Number) and not isinstance(sample_weight, bool):
        sample_weight = np.full(n, float(sample_weight))
    # NaN / inf, shape and overflow checks as for any vector; then a copy of our own
    w = np.array(as_float_vector(sample_weight, n, name), copy=True)
    if np.any(w < 0):
        raise ValueError(f"{name} must be non-negative, got a minimum of {w.min():g}")
    if n and not np.any(w > 0):
        raise ValueError(f"{name} is zero for every example: nothing to fit")
    if np.all(w == 1.0):
        return None
    return w


# -- labels: the one encoder of class labels (estimators, the functional API, dask) ----------
def encode_labels(y, name="y"):
    """``(classes, index)``: the sorted distinct labels of the 1-D ``y`` and each entry's
    index among them, after scikit-learn's checks of classification targets (the one
    label encoder: the classifiers' ``classes_``, the functional API's binary targets and
    a dask fit's labels all come from it).

    Examples
    --------
    >>> classes, index = encode_labels(np.array(["b", "a", "b"]))
    >>> classes.tolist(), index.tolist()
    (['a', 'b'], [1, 0, 1])
    >>> encode_labels(np.array([0.5, 1.5]))
    Traceback (most recent call last):
    ...
    ValueError: Unknown label type: continuous. Maybe you are trying to fit a classifier, which expects discrete classes on a regression target with continuous values.
    """
    from sklearn.utils.multiclass import check_classification_targets

    if not _integral_labels(y):
        try:
            check_classification_targets(y)
        except TypeError:  # raised from inside its sort: say what is wrong instead
            _check_label_types(y, name)
            raise
    return np.unique(y, return_inverse=True)


def _check_label_types(y, name="y"):
    """Raise a ``ValueError`` naming ``name`` if the labels of an object array are of
    types that cannot be ordered together (e.g. strings and integers), which
    ``np.unique`` would report from inside its sort (scikit-learn's ``unique_labels``
    raises a ``ValueError`` for such a mix too).

    Examples
    --------
    >>> _check_label_types(np.array(["a", 1], dtype=object))
    Traceback (most recent call last):
    ...
    ValueError: y: labels must all be strings or all be numbers (a mix of label input types: int and str)
    """
    y = np.asarray(y)
    if y.dtype.kind != "O":
        return
    kinds = {"str" if isinstance(v, str) else "number"
             if isinstance(v, (bool, int, float, np.number)) else type(v).__name__
             for v in y.ravel()}
    if len(kinds) > 1:
        names = sorted({type(v).__name__ for v in y.ravel()})
        raise ValueError(f"{name}: labels must all be strings or all be numbers (a mix of "
                         f"label input types: {' and '.join(names)})")


def _integral_labels(y):
    """True if ``y`` is a 1-D numpy array of booleans, integers or finite integral floats:
    labels (``|y| <= 2^53``, below which every float is exactly an integer's cast) that
    scikit-learn's ``type_of_target`` calls ``"binary"`` or ``"multiclass"``,
    so that ``check_classification_targets`` would accept them. A cheap test for the
    common case (that check costs about 140 us per call, more than a whole small Newton
    solve); anything else goes through scikit-learn's check and its error messages.

    Examples
    --------
    >>> _integral_labels(np.array([0, 1, 1])), _integral_labels(np.array([0.0, 2.0]))
    (True, True)
    >>> _integral_labels(np.array([0.5, 1.0])), _integral_labels(np.array(["a", "b"]))
    (False, False)
    """
    if not isinstance(y, np.ndarray) or y.ndim != 1:
        return False
    if y.dtype.kind in "biu":
        return True
    if y.dtype.kind != "f":
        return False
    with np.errstate(invalid="ignore"):
        return bool(np.all(np.abs(y) <= 2.0**53) and np.all(y == np.trunc(y)))
