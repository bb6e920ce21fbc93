"""A learning problem: the corrupted design, an augmented loss and the targets."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .design import Design
from .losses import Loss
from .objective import objective

__all__ = ["Problem"]


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
    def create(cls, X, y, loss, noise="none", fit_intercept=True):
        """Validate inputs and build a problem.

        Parameters
        ----------
        X : ndarray or sparse matrix of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        loss : Loss
        noise : str, NoiseModel or FeatureVariance
        fit_intercept : bool
        """
        if not isinstance(loss, Loss):
            raise TypeError(f"loss must be a Loss instance, got {type(loss).__name__}")
        design = Design(X, noise, fit_intercept)
        return cls(design, loss, loss.check_target(y, design.n_samples))

    def objective(self, theta, gradient=False):
        """``J(theta)`` (and its gradient); see :func:`bayesdrop.model.objective.objective`."""
        return objective(self.design, self.loss, self.y, theta, gradient=gradient)

    def irls_weights(self, theta):
        """``(rho, t)`` of the weighted least-squares system at ``theta`` (E-step)."""
        m, s = self.design.scores(theta)
        return self.loss.irls_weights(m, s, self.y)
