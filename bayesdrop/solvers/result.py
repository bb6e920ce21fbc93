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
    n_solves : int
        Linear systems in the parameters solved: one per IRLS map, per Newton Hessian
        (factorisation or CG solve; a reused factor is not counted again) and per
        active-set polish; SMO's two-variable steps solve none (they are ``n_iter``).
    linalg : str
        The linear-algebra back-end used (``"cholesky"``, ``"cg"``, ...).
    stalled : bool
        Newton only: it stopped where its decrement was at the tolerance but the gradient
        was not small (a near-kink trap, not the optimum; ``converged`` is False).
    n_passes : int
        Passes over the data of a row back-end (each reads every row, or chunk, once);
        0 for in-memory problems.
    """

    theta: np.ndarray
    objective: np.ndarray
    n_iter: int
    converged: bool
    grad_norm: float
    time: float
    solver: str
    n_solves: int
    linalg: str
    stalled: bool = False
    n_passes: int = 0

    def after(self, history, n_iter, n_solves, start, solver, n_passes=0):
        """This result as the continuation of an earlier run that produced ``history``
        (ending at this run's starting point), ``n_iter`` iterations, ``n_solves``
        systems solved and ``n_passes`` passes, started at ``start``
        (``time.perf_counter()``); named ``solver``."""
        return self._replace(
            objective=np.concatenate([np.asarray(history, dtype=float), self.objective[1:]]),
            n_iter=n_iter + self.n_iter, n_solves=n_solves + self.n_solves,
            n_passes=n_passes + self.n_passes, time=time.perf_counter() - start,
            solver=solver)
