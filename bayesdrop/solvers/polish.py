"""The certified polish shared by the exact solvers of the piecewise-linear losses at
zero noise (:mod:`.dual`, :mod:`.smoothing`): from a point near the optimum, the exact
optimum on its active set, returned as a converged result when its KKT certificate
holds."""

from __future__ import annotations

import time

import numpy as np

from .result import SolverResult

__all__ = ["certify", "exact_result"]


def certify(problem, theta, history, it, start, on_kink=None, rtol=1e-12):
    """The polished optimum from ``theta`` (and the start set ``on_kink``) as a result, if
    its KKT certificate holds (:func:`bayesdrop.solvers.irls.active_set_polish`) and it
    does not raise ``J`` above ``history[-1]`` (by more than ``rtol`` of it); else None."""
    from .irls import active_set_polish

    polished, J_p = active_set_polish(problem, theta, on_kink)
    if polished is None or J_p > history[-1] + rtol * abs(history[-1]) + 1e-300:
        return None
    return exact_result(problem, polished, history + [J_p], it, start, "dual", 1)


def exact_result(problem, theta, history, n_iter, start, solver, n_solves):
    """A converged :class:`SolverResult` at ``theta`` (an optimum certified by its caller)
    with the objective ``history`` ending at ``J(theta)``; ``start`` from
    ``time.perf_counter()``."""
    grad = problem.objective(theta, gradient=True)[1]
    return SolverResult(theta, np.array(history), n_iter, True,
                        float(np.max(np.abs(grad), initial=0.0)), time.perf_counter() - start,
                        solver, n_solves, "cholesky")
