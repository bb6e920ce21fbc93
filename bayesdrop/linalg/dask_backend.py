"""The dask row back-end: every reduction computed chunk by chunk on the workers.

A row-chunked ``dask.array`` design (dense numpy or ``scipy.sparse`` chunks; rows chunked,
columns in one chunk) never comes to the client. Each reduction of
:class:`bayesdrop.linalg.backend.RowBackend` -- ``J`` with its gradient and Hessian, the
IRLS system, one Gibbs sweep's system -- is one task per row chunk, which builds that
chunk's :class:`~bayesdrop.model.problem.Problem` (validating it: NaN, infinities,
overflow and labels are found on the worker and reported with the chunk's rows) and
returns ``D``-sized statistics; a tree of fan-in :data:`FAN_IN` sums them in chunk order
and at most :data:`FAN_IN` partial sums travel to the client. The sums are therefore the
same bits for any number of workers, and a Gibbs sweep draws chunk ``b``'s augmentation
variables from :func:`bayesdrop.linalg.backend.block_rng` (the chain's seed, the sweep,
``b``).

Per pass the data are read once and ``O(n_chunks (D + 1)^2)`` floats move between
processes. Persist ``X`` on the cluster (``X = X.persist()``) before fitting: otherwise
every pass recomputes it from its source. ``y`` and the weights are persisted here.

Dask is optional: this module imports it, :mod:`bayesdrop` does not.
"""

from __future__ import annotations

import numbers

import numpy as np

from .._validation import encode_labels
from .backend import RowBackend

__all__ = ["DaskRows", "is_dask_array", "placement_of", "check_dask_design", "map_rows",
           "labels_of", "FAN_IN"]

#: chunks summed per task of the reduction tree
FAN_IN = 8


def is_dask_array(X):
    """Whether ``X`` is a ``dask.array.Array`` (without importing dask).

    Examples
    --------
    >>> is_dask_array(np.ones(3))
    False
    """
    return type(X).__module__.split(".")[0] == "dask" and hasattr(X, "chunks") \
        and hasattr(X, "to_delayed")


def placement_of(X):
    """Where the examples of ``X`` live: ``"cluster"`` (the row chunks of a dask array)
    or ``"memory"`` -- the one question the estimators and the functional sampling API
    ask about their input (:mod:`bayesdrop.estimators._placement`,
    :func:`bayesdrop.posterior.sample_posterior`), answered here.

    Examples
    --------
    >>> placement_of(np.ones((2, 2)))
    'memory'
    """
    return "cluster" if is_dask_array(X) else "memory"


def _require_dask():
    try:
        import dask  # noqa: F401
        import dask.array  # noqa: F401
    except ImportError as exc:  # pragma: no cover - dask inputs imply dask
        raise ImportError("dask inputs need dask: pip install 'bayesdrop[dask]'") from exc


def check_dask_design(X, name="X"):
    """Validate the shape and chunking of a dask design; return ``(n_samples,
    n_features)``.

    Raises
    ------
    ValueError
        Not 2-D, unknown chunk sizes (``X.compute_chunk_sizes()`` fixes them), or columns
        split over several chunks (``X.rechunk({1: -1})`` fixes that).
    TypeError
        A non-numeric dtype.
    """
    if X.ndim != 2:
        raise ValueError(f"{name} must be 2-dimensional, got shape {X.shape}")
    if any(isinstance(c, float) and np.isnan(c) for c in X.chunks[0]) or any(
            isinstance(c, float) and np.isnan(c) for c in X.chunks[1]):
        raise ValueError(f"{name} has unknown chunk sizes; call {name}.compute_chunk_sizes() "
                         "first (e.g. after boolean indexing or a dataframe's .values)")
    if len(X.chunks[1]) != 1:
        raise ValueError(f"{name} is chunked along its columns ({len(X.chunks[1])} column "
                         f"chunks); the rows may be chunked, the columns not: use "
                         f"{name}.rechunk({{1: -1}})")
    kind = np.dtype(X.dtype).kind
    if kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers, got dtype {X.dtype}")
    return int(X.shape[0]), int(X.shape[1])


def aligned_vector(v, chunks, name, n):
    """``v`` (dask or array-like, length ``n``) as a dask vector with row chunks
    ``chunks``, persisted on the cluster."""
    import dask.array as da

    if is_dask_array(v):
        if v.ndim != 1:
            raise ValueError(f"{name} must be 1-dimensional, got shape {v.shape}")
        if any(isinstance(c, float) and np.isnan(c) for c in v.chunks[0]):
            raise ValueError(f"{name} has unknown chunk sizes; call "
                             f"{name}.compute_chunk_sizes() first")
        if v.shape[0] != n:
            raise ValueError(f"{name} has {v.shape[0]} entries but X has {n} rows")
        if v.chunks[0] != tuple(chunks):
            v = v.rechunk((tuple(chunks),))
        return v.persist()
    v = np.asarray(v)
    if v.ndim != 1:
        raise ValueError(f"{name} must be 1-dimensional, got shape {v.shape}")
    if v.shape[0] != n:
        raise ValueError(f"{name} has {v.shape[0]} entries but X has {n} rows")
    return da.from_array(v, chunks=(tuple(chunks),)).persist()


def _blocks(v):
    return list(v.to_delayed().ravel())


class _Spec:
    """What a worker needs to build a chunk's problem (pickled into each task)."""

    def __init__(self, loss, noise, fit_intercept, positive=None, class_weight=None,
                 labels=None):
        self.loss, self.noise, self.fit_intercept = loss, noise, fit_intercept
        self.positive, self.class_weight = positive, class_weight
        self.labels = None if labels is None else np.asarray(labels)
        self.step = 1  # > 1: every step-th row of the chunk, weighted step (subsample)

    def problem(self, Xc, yc, wc, block, offset):
        from .._validation import check_sample_weight
        from ..model.problem import Problem

        n = Xc.shape[0]
        where = f"chunk {block} of X (rows {offset} to {offset + n - 1})"
        try:
            # chunks deserialised from another worker can sit at addresses that are not
            # multiples of 8 bytes; numpy then skips BLAS and its SIMD loops and the sums
            # round differently. Aligned copies make every chunk's statistics the same
            # bits on every worker (the draws do not depend on where a chunk lands).
            Xc = _aligned(Xc)
            yc = np.require(np.asarray(yc), requirements=["C", "A"])
            wc = None if wc is None else np.require(np.asarray(wc, dtype=np.float64),
                                                    requirements=["C", "A"])
            weights = None if wc is None else check_sample_weight(wc, n)
            if self.labels is not None:
                idx = np.clip(np.searchsorted(self.labels, yc), 0, len(self.labels) - 1)
                if not np.all(self.labels[idx] == yc):
                    raise ValueError("y contains labels not seen in fit: "
                                     f"{sorted(set(yc[self.labels[idx] != yc].tolist()))}")
            if self.class_weight is not None:
                keys = np.array(sorted(self.class_weight))
                values = np.array([self.class_weight[k] for k in keys], dtype=float)
                idx = np.clip(np.searchsorted(keys, yc), 0, len(keys) - 1)
                if not np.all(keys[idx] == yc):
                    raise ValueError("y contains labels not seen in fit: "
                                     f"{sorted(set(yc[keys[idx] != yc].tolist()))}")
                per = values[idx]
                weights = per if weights is None else weights * per
            if self.positive is not None:
                yc = np.where(yc == self.positive, 1.0, -1.0)
            if self.step > 1:  # every step-th row, weighted step (subsample_rows), sliced
                # before the problem is built: its validation and variances cost 1 / step
                rows = slice(0, None, self.step)
                Xc, yc = _aligned(Xc[rows]), yc[rows]
                weights = np.full(Xc.shape[0], float(self.step)) if weights is None \
                    else self.step * weights[rows]
            return Problem.create(Xc, yc, self.loss, self.noise, self.fit_intercept,
                                  sample_weight=weights)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None


def _aligned(Xc):
    """``Xc`` (dense or sparse chunk) with its float data 8-byte aligned and contiguous."""
    import scipy.sparse as sp

    if sp.issparse(Xc):
        Xc = sp.csr_matrix(Xc)
        if not (Xc.data.flags.aligned and Xc.data.dtype == np.float64):
            Xc = sp.csr_matrix((np.require(Xc.data, np.float64, ["C", "A"]),
                                Xc.indices.copy(), Xc.indptr.copy()), shape=Xc.shape)
        return Xc
    Xc = np.asarray(Xc)
    if Xc.dtype.kind not in "biuf":
        return Xc  # as_float_design raises the error
    return np.require(Xc, np.float64, ["C", "A"])


def _apply(statistic, spec, Xc, yc, wc, block, offset, *args):
    return statistic(spec.problem(Xc, yc, wc, block, offset), block, *args)


def _sum(*parts):
    from .backend import sum_terms

    return sum_terms(parts)


def _setup(problem, block):
    """Rows kept (weight > 0) and whether every one of them is noisy."""
    return float(problem.design.n_samples), float(problem.design.every_row_noisy)


def _compute(parts):
    """``dask.compute(*parts)``; a cluster failure becomes a RuntimeError that says so.

    A worker lost mid-pass is handled by dask: its tasks run again elsewhere and lost
    chunks are recomputed from their graph, so the pass returns the same sums. Only when
    that is impossible (a chunk that was scattered, not computed, or a task that killed
    its workers repeatedly) does the pass fail -- never with a partial sum.
    """
    import dask

    try:
        return dask.compute(*parts)
    except (ValueError, TypeError, FloatingPointError, MemoryError, KeyboardInterrupt):
        raise
    except Exception as exc:
        if type(exc).__module__.split(".")[0] != "distributed":
            raise
        raise RuntimeError(
            f"the dask cluster could not compute a pass over the chunks of X "
            f"({type(exc).__name__}: {exc}); no result was returned. Workers may have been "
            "lost with data that cannot be recomputed (e.g. scattered chunks); persist X "
            "from a recomputable source, or retry") from exc


def map_rows(method, X, n_columns=None, dtype=np.float64):
    """``method`` (an in-memory prediction method) applied chunk by chunk, lazily.

    Returns a dask array of shape (n_samples,) (``n_columns=None``) or
    (n_samples, n_columns) with ``X``'s row chunks.
    """
    check_dask_design(X)
    if n_columns is None:
        return X.map_blocks(method, dtype=dtype, drop_axis=1, chunks=(X.chunks[0],),
                            meta=np.empty((0,), dtype=dtype))
    return X.map_blocks(method, dtype=dtype, chunks=(X.chunks[0], (int(n_columns),)),
                        meta=np.empty((0, 0), dtype=dtype))


def labels_of(y, n):
    """The sorted distinct labels of a dask (computed by ``dask.array.unique``) or in-memory
    label vector of ``n`` entries."""
    import dask.array as da

    if is_dask_array(y):
        if y.ndim != 1 or y.shape[0] != n:
            raise ValueError(f"y must have shape ({n},), got {y.shape}")
        return np.asarray(da.unique(y).compute())
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != n:
        raise ValueError(f"y must have shape ({n},), got {y.shape}")
    return encode_labels(y)[0]


class DaskRows(RowBackend):
    """Row back-end of a row-chunked dask design (see the module docstring).

    Parameters
    ----------
    X : dask.array.Array of shape (n_samples, n_features)
        Dense or ``scipy.sparse`` chunks; rows chunked, columns in one chunk.
    y : dask.array.Array or array-like of shape (n_samples,)
        Targets, or class labels with ``positive`` (then ``+1`` where ``y == positive``).
    loss : Loss
    noise : NoiseModel
        Its variances must be row-wise (every built-in noise model's are).
    fit_intercept : bool
    sample_weight : dask.array.Array or array-like of shape (n_samples,), optional
    positive : label, optional
        One-vs-rest: the label of the ``+1`` class.
    class_weight : dict, optional
        Label -> weight, multiplied into the sample weights.
    labels : ndarray, optional
        The sorted class labels; any other label in ``y`` raises (in its chunk).

    Attributes
    ----------
    n_samples : int
        Rows with positive weight (counted on the workers).
    n_passes : int
        Reductions computed so far.
    n_chunks : int

    Examples
    --------
    >>> import dask.array as da
    >>> from bayesdrop import LogisticLoss, Dropout, Problem
    >>> from bayesdrop.linalg.backend import InMemoryRows
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100, 3)); y = np.where(X[:, 0] > 0, 1.0, -1.0)
    >>> rows = DaskRows(da.from_array(X, chunks=(30, 3)), y, LogisticLoss(1.0), Dropout(0.3))
    >>> rows.n_chunks, rows.n_samples
    (4, 100)
    >>> ref = InMemoryRows(Problem.create(X, y, LogisticLoss(1.0), Dropout(0.3)))
    >>> theta = np.array([0.3, -0.1, 0.2, 0.05])
    >>> bool(np.allclose(rows.newton(theta)[2], ref.newton(theta)[2]))
    True
    """

    def __init__(self, X, y, loss, noise, fit_intercept=True, sample_weight=None, *,
                 positive=None, class_weight=None, labels=None):
        _require_dask()
        n, D = check_dask_design(X)
        self.chunks = tuple(int(c) for c in X.chunks[0])
        self.n_chunks = len(self.chunks)
        self.offsets = np.concatenate([[0], np.cumsum(self.chunks)[:-1]]).astype(int)
        self._x = _blocks(X)
        # the persisted vectors are held here: their chunks live as long as the back-end
        self.y = aligned_vector(y, self.chunks, "y", n)
        self._y = _blocks(self.y)
        self.sample_weight = None
        self._w = [None] * self.n_chunks
        if not (sample_weight is None or isinstance(sample_weight, numbers.Number)
                and sample_weight == 1):
            self.sample_weight = aligned_vector(sample_weight, self.chunks,
                                                "sample_weight", n)
            self._w = _blocks(self.sample_weight)
        self.spec = _Spec(loss, noise, bool(fit_intercept), positive, class_weight, labels)
        self.loss = loss
        self.n_features = D
        self.fit_intercept = bool(fit_intercept)
        self.n_params = D + int(self.fit_intercept)
        self.n_passes = 0
        kept, noisy = self.reduce(_setup, per_block=True)
        self.n_samples = int(round(sum(kept)))
        if self.n_samples == 0:
            raise ValueError("every example has sample weight 0")
        self.every_row_noisy = bool(all(v == 1.0 for v in noisy))

    def for_class(self, positive):
        """This back-end with ``+1`` for the label ``positive`` (one-vs-rest): the same
        persisted ``y`` and weights and the same setup pass, a new pass counter.

        Examples
        --------
        >>> import dask.array as da
        >>> from bayesdrop import LogisticLoss, Dropout
        >>> X = da.from_array(np.eye(4), chunks=(2, 4))
        >>> rows = DaskRows(X, np.array([0, 1, 2, 1]), LogisticLoss(), Dropout(0.1),
        ...                 positive=0, labels=np.array([0, 1, 2]))
        >>> other = rows.for_class(2)
        >>> other.spec.positive, rows.spec.positive, other.n_samples
        (2, 0, 4)
        """
        twin = self._twin()
        twin.spec.positive = positive
        twin.n_passes = 0
        return twin

    def _twin(self):
        """A shallow copy sharing the persisted chunks, with its own task spec."""
        import copy

        twin = copy.copy(self)
        twin.spec = copy.copy(self.spec)
        return twin

    def subsample(self, step):
        """This back-end on every ``step``-th row of each chunk, weighted ``step``: the
        same persisted chunks, sliced inside the tasks (no new arrays); its passes count
        into this back-end's :attr:`n_passes`.

        Examples
        --------
        >>> import dask.array as da
        >>> from bayesdrop import LogisticLoss, Dropout, Problem
        >>> from bayesdrop.model.problem import subsample_rows
        >>> rng = np.random.default_rng(0)
        >>> X = rng.normal(size=(100, 2)); y = np.where(X[:, 0] > 0, 1.0, -1.0)
        >>> rows = DaskRows(da.from_array(X, chunks=(50, 2)), y, LogisticLoss(), Dropout(0.2))
        >>> sub = rows.subsample(5)  # chunk rows 0, 5, ..., 45 of each chunk of 50
        >>> ref = subsample_rows(Problem.create(X, y, LogisticLoss(), Dropout(0.2)), 5)
        >>> theta = np.array([0.4, -0.2, 0.1])
        >>> bool(np.isclose(sub.objective(theta[None])[0], ref.objective(theta)))
        True
        >>> rows.n_passes  # the setup pass and the subsample's pass
        2
        """
        twin = self._twin()
        twin.spec.step = self.spec.step * int(step)
        twin.n_samples = max(self.n_samples // int(step), 1)
        twin.parent = self
        return twin

    def reduce(self, statistic, *args, per_block=False):
        """Sum ``statistic(chunk_problem, b, *args)`` over the chunks ``b`` on the cluster
        (the default dask scheduler: a ``distributed.Client`` if one is active) with a
        fixed summation tree; ``per_block=True`` returns the list of chunk results."""
        from dask import delayed

        parts = [delayed(_apply, pure=False)(statistic, self.spec, x, y, w, b,
                                              int(self.offsets[b]), *args)
                 for b, (x, y, w) in enumerate(zip(self._x, self._y, self._w))]
        self.n_passes += 1
        parent = getattr(self, "parent", None)
        while parent is not None:  # a subsample's pass is a pass over the same chunks
            parent.n_passes += 1
            parent = getattr(parent, "parent", None)
        if per_block:
            out = _compute(parts)
            return tuple(zip(*out)) if isinstance(out[0], tuple) else out
        while len(parts) > FAN_IN:
            parts = [delayed(_sum, pure=False)(*parts[i:i + FAN_IN])
                     for i in range(0, len(parts), FAN_IN)]
        # the last level on the client: at most FAN_IN results, one fewer round trip
        return _sum(*_compute(parts))
