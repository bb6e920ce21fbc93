"""The one result type of every optimiser of ``J``."""

from __future__ import annotations

import time
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
        Work units: IRLS maps, Newton Hessians (factorisations or CG solves), passes
        over the data of a row back-end.
    linalg : str
        The linear-algebra back-end used (``"cholesky"``, ``"cg"``, ...).
    stalled : bool
        Newton only: it stopped where its decrement was at the tolerance but the gradient
        was not small (a near-kink trap, not the optimum; ``converged`` is False).
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
    stalled: bool = False

    def after(self, history, n_iter, n_evals, start, solver):
        """This result as the continuation of an earlier run that produced ``history``
        (ending at this run's starting point), ``n_iter`` iterations and ``n_evals`` work
        units, started at ``start`` (``time.perf_counter()``); named ``solver``."""
        return self._replace(
            objective=np.concatenate([np.asarray(history, dtype=float), self.objective[1:]]),
            n_iter=n_iter + self.n_iter, n_evals=n_evals + self.n_evals,
            time=time.perf_counter() - start, solver=solver)

    @property
    def n_maps(self):
        """IRLS maps evaluated (``n_evals``; kept for the IRLS result's old name)."""
        return self.n_evals
