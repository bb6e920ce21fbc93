"""Where an estimator's examples live -- in this process, or in the chunks of a dask array
on a cluster -- decided once per call, here, and nowhere else in the estimators.

:func:`placement` returns :data:`IN_MEMORY` or :data:`ON_CLUSTER`; each carries the three
operations that differ between them, and the estimators call only those:

* ``fit(estimator, X, y, sample_weight)`` -- validated arrays and
  :class:`~bayesdrop.model.problem.Problem` objects, or row back-ends fitted where the
  chunks live (:func:`._dask.fit_dask`);
* ``sample_inputs(estimator, X, y, sample_weight)`` -- the fitted model's binary problems,
  their point estimates and what the InferenceData keeps of the examples;
* ``map(method, X, n_columns, dtype)`` -- a prediction method applied to ``X``, or
  mapped lazily over its row chunks (a dask array, as dask-ml's wrappers return).
"""

from __future__ import annotations

from ..linalg.dask_backend import map_rows, placement_of

__all__ = ["IN_MEMORY", "ON_CLUSTER", "placement"]


class _InMemory:
    """Examples in this process (ndarray or ``scipy.sparse``)."""

    name = "memory"

    @staticmethod
    def fit(estimator, X, y, sample_weight):
        return estimator._fit_in_memory(X, y, sample_weight)

    @staticmethod
    def sample_inputs(estimator, X, y, sample_weight):
        return estimator._sample_inputs_in_memory(X, y, sample_weight)

    @staticmethod
    def map(method, X, n_columns, dtype):
        return method(X)


class _OnCluster:
    """Examples in the row chunks of a dask array: every pass is one task per chunk."""

    name = "cluster"

    @staticmethod
    def fit(estimator, X, y, sample_weight):
        return estimator._fit_on_cluster(X, y, sample_weight)

    @staticmethod
    def sample_inputs(estimator, X, y, sample_weight):
        return estimator._sample_inputs_on_cluster(X, y, sample_weight)

    @staticmethod
    def map(method, X, n_columns, dtype):
        return map_rows(method, X, n_columns, dtype)


IN_MEMORY, ON_CLUSTER = _InMemory(), _OnCluster()


def placement(X):
    """:data:`ON_CLUSTER` for a dask array, else :data:`IN_MEMORY`
    (:func:`bayesdrop.linalg.dask_backend.placement_of`).

    Examples
    --------
    >>> import numpy as np
    >>> placement(np.zeros((2, 2))).name
    'memory'
    """
    return {"memory": IN_MEMORY, "cluster": ON_CLUSTER}[placement_of(X)]
