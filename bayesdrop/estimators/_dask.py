"""The estimators on dask arrays: fit and sample on the cluster, predict lazily.

``fit(X, y)`` with a row-chunked ``dask.array`` ``X`` builds one
:class:`~bayesdrop.linalg.dask_backend.DaskRows` per binary problem (the one-vs-rest
targets and class weights are computed inside the chunks, never on the client) and
minimises ``J`` with :func:`bayesdrop.solvers.fit_rows`; ``sample_posterior`` runs
:func:`bayesdrop.samplers.sample` on the row back-ends of :func:`dask_problems` (the
estimators' one sampling pipeline). The prediction methods map
themselves over the chunks and return dask arrays, as dask-ml's wrappers do.
"""

from __future__ import annotations

import numpy as np

from ..linalg.dask_backend import DaskRows, check_dask_design, is_dask_array, labels_of

__all__ = ["dask_problems", "fit_dask"]


def _class_weights(estimator, X, y, sample_weight, classes):
    """Label -> weight dict from ``class_weight`` (None: no class weights)."""
    import dask.array as da

    class_weight = getattr(estimator, "class_weight", None)
    if class_weight is None:
        return None
    if isinstance(class_weight, dict):
        return {c.item() if hasattr(c, "item") else c: float(class_weight.get(c, 1.0))
                for c in classes}
    if class_weight != "balanced":
        raise ValueError("class_weight must be None, 'balanced' or a dict, got "
                         f"{class_weight!r}")
    yd = y if is_dask_array(y) else da.from_array(np.asarray(y), chunks=(X.chunks[0],))
    if sample_weight is None:
        w = 1.0
    else:
        w = sample_weight if is_dask_array(sample_weight) else da.from_array(
            np.asarray(sample_weight, dtype=float), chunks=(X.chunks[0],))
    counts = np.array(da.compute(*[da.sum(w * (yd == c)) for c in classes]), dtype=float)
    per = counts.sum() / (len(classes) * counts)
    return {c.item() if hasattr(c, "item") else c: float(v) for c, v in zip(classes, per)}


def _rows(estimator, X, y, sample_weight, noise, loss, classes=None):
    """The binary problems' row back-ends; a classifier fitted afresh (``classes=None``)
    gets ``classes_`` from ``y``."""
    n, D = check_dask_design(X)
    if n == 0:
        raise ValueError("X has 0 samples")
    if D == 0:
        raise ValueError("X has 0 features")
    if not hasattr(estimator, "_targets"):  # regression: one problem, real targets
        return [DaskRows(X, y, loss, noise, estimator.fit_intercept, sample_weight)]
    if classes is None:
        classes = labels_of(y, n)
        if classes.shape[0] < 2:
            raise ValueError(f"y contains only one class ({classes[0]!r}); at least two "
                             "classes are needed")
        estimator.classes_ = classes
    cw = _class_weights(estimator, X, y, sample_weight, classes)
    positives = [classes[1]] if classes.shape[0] == 2 else list(classes)
    first = DaskRows(X, y, loss, noise, estimator.fit_intercept, sample_weight,
                     positive=positives[0], class_weight=cw, labels=classes)
    # one setup pass and one persisted y for all one-vs-rest problems
    return [first] + [first.for_class(c) for c in positives[1:]]


def fit_dask(estimator, X, y, sample_weight=None):
    """``estimator.fit`` on a dask ``X`` (see the module docstring); returns estimator.

    Besides the usual fitted attributes it sets ``n_passes_`` (per binary problem): the
    passes over the data the fit made (each reads every chunk once).
    """
    from ..solvers import fit_rows
    from ._base import BinaryFit

    noise = estimator._check_params()
    loss = estimator._make_loss()
    for attr in ("feature_names_in_",):
        if hasattr(estimator, attr):
            delattr(estimator, attr)
    rows = _rows(estimator, X, y, sample_weight, noise, loss)
    estimator.n_features_in_ = rows[0].n_features
    solver, _ = estimator._solvers()
    if solver in ("dual", "smoothing"):
        raise ValueError(f"solver={solver!r} needs the data in memory; use 'auto', "
                         "'newton' or 'irls' with a dask X")

    def fit_binary(k, _, start):
        r = rows[k]
        theta0 = None if start is None else np.append(start[0], start[1])[: r.n_params]
        res = fit_rows(r, theta0, solver=solver, tol=estimator.tol,
                       max_iter=estimator.max_iter, accelerate=estimator.accelerate)
        D = r.n_features
        intercept = float(res.theta[D]) if r.fit_intercept else 0.0
        return BinaryFit(res.theta[:D].copy(), intercept, res.n_iter, res.converged,
                         res.objective, {"solver_": res.solver, "n_passes_": res.n_passes})

    estimator.noise_ = noise
    estimator.loss_ = loss
    estimator.fit_problems(len(rows), fit_binary, rows[0].n_features)
    return estimator


def dask_problems(estimator, X, y, sample_weight=None):
    """The fitted ``estimator``'s binary problems on a dask ``(X, y)`` as row back-ends
    (its classes, noise and loss; the targets and class weights computed in the chunks),
    for ``sample_posterior``."""
    if X.shape[1] != estimator.n_features_in_:
        raise ValueError(f"X has {X.shape[1]} features, but {type(estimator).__name__} is "
                         f"expecting {estimator.n_features_in_} features as input")
    return _rows(estimator, X, y, sample_weight, estimator.noise_, estimator._make_loss(),
                 getattr(estimator, "classes_", None))
