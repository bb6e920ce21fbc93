"""A learning problem: the corrupted design, an augmented loss and the targets."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

import scipy.sparse as sp

from .._validation import check_sample_weight
from .design import Design
from .losses import Loss
from .noise import FeatureVariance
from .objective import check_theta, value_and_gradient

__all__ = ["Problem", "check_problem", "drop_zero_weights", "subsample_rows"]


class Problem(NamedTuple):
    """``(design, loss, y)``: everything IRLS and the Gibbs sampler need.

    Attributes
    ----------
    design : Design
    loss : Loss
    y : ndarray of shape (n_samples,)
        Targets, validated by the loss (labels in {-1, +1} for binary losses).

    Examples
    --------
    >>> from bayesdrop import HingeLoss, Dropout
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]); y = np.array([1.0, -1.0, 1.0])
    >>> problem = Problem.create(X, y, HingeLoss(1.0), Dropout(0.2))
    >>> J, grad = problem.objective(np.zeros(3), gradient=True)
    >>> float(J), grad.shape  # at theta = 0: C * (1 + 1) per example
    (6.0, (3,))
    """

    design: Design
    loss: Loss
    y: np.ndarray

    @classmethod
    def create(cls, X, y, loss, noise="none", fit_intercept=True, sample_weight=None):
        """Validate inputs and build a problem.

        Parameters
        ----------
        X : ndarray or sparse matrix of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        loss : Loss
        noise : str, NoiseModel or FeatureVariance
        fit_intercept : bool
        sample_weight : array-like of shape (n_samples,) or float, optional
            Scales each example's term of ``J`` (:meth:`Loss.weighted`). Examples of
            weight 0 are dropped (the same ``J`` and pseudo-posterior); negative or
            non-finite weights raise a ValueError.

        Examples
        --------
        >>> from bayesdrop import LogisticLoss
        >>> X = np.array([[1.0], [2.0], [3.0]]); y = np.array([1.0, -1.0, 1.0])
        >>> twice = Problem.create(X, y, LogisticLoss(), sample_weight=[2.0, 0.0, 1.0])
        >>> copies = Problem.create(X[[0, 0, 2]], y[[0, 0, 2]], LogisticLoss())
        >>> theta = np.array([0.3, -0.2])
        >>> bool(np.isclose(twice.objective(theta), copies.objective(theta)))
        True
        """
        if not isinstance(loss, Loss):
            raise TypeError(f"loss must be a Loss instance, got {type(loss).__name__}")
        weights = check_sample_weight(sample_weight, _n_rows(X))
        if weights is not None and not np.all(weights > 0):
            X, y, noise, weights = drop_zero_weights(X, y, noise, weights)
        design = Design(X, noise, fit_intercept)
        return cls(design, loss.weighted(weights), loss.check_target(y, design.n_samples))

    def objective(self, theta, gradient=False):
        """``J(theta)`` (and its gradient); see :func:`bayesdrop.model.objective.objective`.

        ``theta = (w, b)`` must be finite, of shape ``(design.n_params,)`` (a
        ``ValueError`` naming ``theta`` otherwise: no NaN ``J``, no error from inside the
        products)."""
        return value_and_gradient(self.design, self.loss, self.y,
                                  check_theta(self.design, theta), gradient)

    def irls_weights(self, theta):
        """``(rho, t)`` of the weighted least-squares system at ``theta`` (E-step)."""
        m, s = self.design.scores(theta)
        return self.loss.irls_weights(m, s, self.y)


def check_problem(problem, name="problem"):
    """``problem`` itself if it is a :class:`Problem`, else a ``TypeError`` naming it (not
    an ``AttributeError`` from inside a solver or sampler).

    Examples
    --------
    >>> check_problem((1, 2, 3))
    Traceback (most recent call last):
    ...
    TypeError: problem must be a Problem (Problem.create(X, y, loss, noise)), got tuple
    """
    if not isinstance(problem, Problem):
        raise TypeError(f"{name} must be a Problem (Problem.create(X, y, loss, noise)), got "
                        f"{type(problem).__name__}")
    return problem


def _n_rows(X):
    shape = getattr(X, "shape", None)
    return int(shape[0]) if shape is not None and len(shape) else len(X)


def drop_zero_weights(X, y, noise, weights):
    """``(X, y, noise, weights)`` without the examples of weight 0 (their terms vanish).

    Examples
    --------
    >>> X, y, _, w = drop_zero_weights(np.eye(3), np.arange(3.0), "none",
    ...                                np.array([1.0, 0.0, 2.0]))
    >>> X.shape, y.tolist(), w.tolist()
    ((2, 3), [0.0, 2.0], [1.0, 2.0])
    """
    keep = np.flatnonzero(weights > 0)
    X = X.tocsr()[keep] if sp.issparse(X) else np.asarray(X)[keep]
    y = np.asarray(y)[keep]
    if isinstance(noise, FeatureVariance):
        matrix = None if noise.matrix is None else noise.matrix[keep]
        noise = FeatureVariance(matrix, noise.scale, (keep.shape[0], noise.shape[1]))
    return X, y, noise, weights[keep]


def subsample_rows(problem, step):
    """Every ``step``-th example of ``problem``, its term of ``J`` weighted ``step`` times
    its weight: the same ``J`` in expectation over the offset, on ``1 / step`` of the rows
    (Newton's starting point on tall data, :data:`bayesdrop.solvers.newton.SUBSAMPLE_MIN_ROWS`).

    Examples
    --------
    >>> from bayesdrop import LogisticLoss, Dropout
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(40, 2)); y = np.where(X[:, 0] > 0, 1.0, -1.0)
    >>> sub = subsample_rows(Problem.create(X, y, LogisticLoss(), Dropout(0.2)), 4)
    >>> ref = Problem.create(X[::4], y[::4], LogisticLoss(), Dropout(0.2), sample_weight=4.0)
    >>> theta = np.array([0.5, -0.3, 0.1])
    >>> sub.design.n_samples, bool(np.isclose(sub.objective(theta), ref.objective(theta)))
    (10, True)
    """
    design, loss, y = problem
    rows = slice(0, None, int(step))
    X = design.X[rows]
    V = design.variance
    M = None if V.matrix is None else V.matrix[rows]
    sub = Design(X, FeatureVariance(M, V.scale, X.shape), design.fit_intercept)
    n = X.shape[0]
    weights = np.full(n, float(step)) if loss.weights is None else step * loss.weights[rows]
    return Problem(sub, loss.weighted(weights), y[rows])
