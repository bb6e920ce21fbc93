"""The one result type of every optimiser of ``J``."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["SolverResult"]


class SolverResult(NamedTuple):
    """Outcome of a solver's ``fit``.

    Attributes
    ----------
    theta : ndarray of shape (n_params,)
        The minimiser found, ``(w, b)``.
    objective : ndarray
        History of ``J``: ``J(theta_0), J(theta_1), ...`` (non-increasing).
    n_iter : int
        Outer iterations (IRLS steps, Newton steps).
    converged : bool
    grad_norm : float
        ``||grad J(theta)||_inf`` at the result. Where ``J`` has a kink there (a
        zero-noise hinge point on the margin) this is the gradient formula with the root
        floored at ``ROOT_FLOOR``, not a subgradient certificate.
    time : float
        Wall-clock seconds.
    solver : str
        Which optimiser produced it (``"irls"``, ``"newton"``, ...).
    n_evals : int
        Work units: IRLS maps, or Newton linear solves.
    linalg : str
        The linear-algebra back-end used (``"cholesky"``, ``"cg"``, ...).
    """

    theta: np.ndarray
    objective: np.ndarray
    n_iter: int
    converged: bool
    grad_norm: float
    time: float
    solver: str
    n_evals: int
    linalg: str

    @property
    def n_maps(self):
        """IRLS maps evaluated (``n_evals``; kept for the IRLS result's old name)."""
        return self.n_evals
