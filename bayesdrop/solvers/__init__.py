"""Optimisers of the collapsed objective ``J``, one module per optimiser.

* :mod:`.irls` -- variational IRLS (the MM algorithm of the model), SQUAREM-accelerated,
  with the zero-noise active-set polish;
* :mod:`.newton` -- Newton's method on ``J`` (exact Hessian with Cholesky, or truncated
  Newton-CG on ``O(nnz)`` Hessian-vector products);
* :mod:`.smoothing` -- the zero-noise hinge and epsilon-insensitive losses exactly:
  Newton on the Moreau-smoothed ``J`` with continuation, then the certified active-set
  polish (any number of examples, dense or sparse, up to 2000 parameters);
* :mod:`.dual` -- the zero-noise hinge loss exactly: SMO on the dual with the
  intercept's equality constraint, then the certified active-set polish (up to 5000
  examples, any number of features);
* :mod:`.homotopy` -- the same zero-noise losses along a path in ``C``: the exact
  solution path followed event by event from a neighbouring ``C``'s optimum (the
  cross-validation path of :mod:`bayesdrop.estimators.cv`);
* :mod:`.alternating` -- the latent models' alternation of IRLS and L-BFGS;
* :mod:`.lbfgs` -- L-BFGS-B with scikit-learn's tolerance scaling (smooth baselines).

All return a :class:`~bayesdrop.solvers.result.SolverResult`. :func:`fit_problem` is the
one entry point the estimators use (:func:`fit_path` for a path of fits over ``C``):
``solver=`` names the **optimiser**, ``linalg=`` the linear-algebra back-end
(:mod:`bayesdrop.linalg`).
"""

from __future__ import annotations

import time

import numpy as np

from .. import _jit
from .._threads import one_blas_thread, single_blas_pool, with_single_blas_pool
from .._validation import MAX_ITER, check_scalar
from ..linalg import wls
from ..linalg.wls import LINALG
from ..model.objective import check_theta
from ..model.problem import check_problem
from . import dual, homotopy, irls, newton, smoothing
from .bare import (
    bare_gap,
    bare_gap_rows,
    bare_intercepts,
    bare_newton,
    bare_newton_rows,
    bare_points,
    bare_sums,
    bare_value,
    descends_from,
)
from .result import SolverResult

__all__ = ["SOLVERS", "SolverResult", "check_solver", "choose_solver", "first_newton_runs",
           "fit_path", "fit_problem", "fit_rows"]

#: optimisers of ``J`` an estimator can use
SOLVERS = ("auto", "newton", "irls", "smoothing", "dual")

#: Newton steps ``solver="auto"`` allows before it hands over to IRLS (Newton converges
#: in well under 20 steps wherever ``J`` is smooth near its optimum)
AUTO_NEWTON_ITER = 40

#: Up to this many examples ``solver="auto"`` tries SMO (:mod:`.dual`) before the
#: smoothing solver on the zero-noise hinge loss: on small well-conditioned problems
#: its first stage usually certifies the optimum (breast cancer, standardised: 2 ms
#: against 4 ms); otherwise the smoothing solver continues from its point.
DUAL_FIRST_SAMPLES = 1000


def check_solver(solver, linalg):
    """Validate ``solver`` (optimiser) and ``linalg`` (back-end); return both.

    Examples
    --------
    >>> check_solver("auto", "cg")
    ('auto', 'cg')
    """
    if solver in LINALG and solver != "auto":
        raise ValueError(f"solver={solver!r} names a linear-algebra back-end: pass "
                         f"linalg={solver!r} (solver picks the optimiser, one of {SOLVERS})")
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    if linalg not in LINALG:
        raise ValueError(f"linalg must be one of {LINALG}, got {linalg!r}")
    if solver == "newton" and linalg == "woodbury":
        raise ValueError("linalg='woodbury' is an IRLS back-end; Newton uses 'cholesky' or 'cg'")
    return solver, linalg


def choose_solver(problem, solver="auto", linalg="auto"):
    """Resolve ``solver="auto"``: Newton when ``J`` is twice differentiable, the exact
    zero-noise solvers for piecewise-linear losses, else IRLS.

    (:func:`fit_problem` continues with IRLS if Newton has not converged within
    :data:`AUTO_NEWTON_ITER` steps.)

    1. Newton applies to the logistic and squared losses, and to the hinge and
       epsilon-insensitive losses under non-zero noise (:func:`.newton.applicable`).
    2. At zero noise the hinge loss with an intercept goes to the dual (SMO + exact
       polish, :mod:`.dual`) up to :data:`DUAL_FIRST_SAMPLES` examples, and when the
       smoothing solver does not apply (more than 2000 parameters, such as text) up to
       5000 examples;
    3. else the zero-noise hinge and epsilon-insensitive losses go to the smoothing
       solver (:mod:`.smoothing`, at most 2000 parameters: it forms the Hessian of the
       examples near a kink).
    4. IRLS (with its active-set polish) takes the rest: wide zero-noise problems with
       more than 5000 examples, the latent design, and ``linalg="woodbury"``.

    Examples
    --------
    >>> from bayesdrop import Problem, HingeLoss, Dropout
    >>> X = np.eye(3); y = np.array([1.0, -1.0, 1.0])
    >>> choose_solver(Problem.create(X, y, HingeLoss(1.0), Dropout(0.3)))
    'newton'
    >>> choose_solver(Problem.create(X, y, HingeLoss(1.0), "none"))
    'dual'
    >>> choose_solver(Problem.create(X, y, HingeLoss(1.0), "none", fit_intercept=False))
    'smoothing'
    """
    if solver != "auto":
        return solver
    if linalg != "woodbury" and newton.applicable(problem):
        return "newton"
    if dual.applicable(problem) and (problem.design.n_samples <= DUAL_FIRST_SAMPLES
                                     or not smoothing.applicable(problem)):
        return "dual"
    if linalg != "woodbury" and smoothing.applicable(problem):
        return "smoothing"
    return "irls"


#: a Newton end point whose ``J`` is within this (relative) of ``J`` with ``w = 0`` (and its
#: intercept) is a near-kink trap (see :func:`fit_problem`)
TRAP_RTOL = 1e-6

#: Maps from IRLS's last iterate the bare model's duality-gap bound may take
#: (:func:`.bare.bare_gap`, each one weighted least-squares solve, as many as an IRLS
#: map; it gives up early where its rate of decrease would not reach the tolerance).
#: Below 1e-8 of ``J`` after 6 maps on digits 8-vs-rest (hinge, dropout 0.2, C = 0.1),
#: after about 25 on the same data as CSR (IRLS ends elsewhere; IRLS from the start takes
#: 180 solves there) and after 11 on a Fashion-MNIST class (dropout 0.5, C = 0.1)
BARE_MAPS = 32

#: IRLS maps tried after Newton stopped above the bare model (the trap check,
#: :data:`.newton.TRAP_STEPS`) before Newton takes over again, if they got below it
ESCAPE_MAPS = 3

#: After the escape maps (still above the bare model) the bare model's certificate is
#: tried; before each further try this many more IRLS maps run (tries after 3, 6 and 10
#: maps), then IRLS goes on to its tolerance (and the certificate is tried once more).
#: From an IRLS point not yet near the optimum the bound gives up after about two maps.
#: Digits 8-vs-rest: certified after the escape's 3 maps (24 -> 19 ms; IRLS to its
#: tolerance took 14); the Fashion-MNIST class at w = 0: after 10 (2.6 -> 2.4 s, 16).
CERTIFY_AFTER = (3, 4, 6)


def _bare_check(values, theta, fit_intercept, kinks=None):
    """``(trapped, bare, J_bare)``: whether ``theta`` is no better than a bare model
    ``(0, b)`` to :data:`TRAP_RTOL` -- ``b`` its own intercept or a kink position of the
    loss (``kinks``; the points ``bare`` of :func:`.bare.bare_points`, their ``J`` in
    ``J_bare``): the trap of :func:`fit_problem`, or an optimum at ``w = 0``, which IRLS
    from the start finds as well. ``values(thetas)`` gives ``J`` at each of a list of
    points (one pass over the rows for a row back-end, for ``theta`` and the bare models
    together)."""
    bare = bare_points(theta, fit_intercept, kinks)
    J, *J_bare = values([theta] + bare)
    J_bare = np.asarray(J_bare, dtype=float)
    return bool(J >= J_bare.min() - TRAP_RTOL * max(abs(J), 1.0)), bare, J_bare


def _trapped(values, theta, fit_intercept, kinks=None):
    """Whether ``theta`` is no better than a bare model (:func:`_bare_check`)."""
    return _bare_check(values, theta, fit_intercept, kinks)[0]


def _escape_trap(values, first, second, third, bare, start):
    """After a stall in the trap near ``w = 0`` (see :func:`fit_problem`): the lowest ``J``
    of IRLS from the stall (``second``), IRLS from the start (``third``; None when a bare
    model was certified optimal) and the bare models ``bare`` (``w = 0``); one
    :class:`SolverResult` counting every run."""
    runs = [first, second] + ([] if third is None else [third])
    points = [second.theta] + ([] if third is None else [third.theta]) + list(bare)
    J = np.asarray(values(points), dtype=float)
    k = int(np.argmin(J))  # ties: the earlier (IRLS before a bare model)
    best = second if third is None or J[0] <= J[1] else third
    if k >= len(runs) - 1:
        best = best._replace(theta=points[k], objective=np.append(best.objective, J[k]),
                             converged=True if third is None else best.converged)
    return best._replace(n_iter=sum(r.n_iter for r in runs),
                         n_solves=sum(r.n_solves for r in runs),
                         n_passes=sum(r.n_passes for r in runs),
                         time=time.perf_counter() - start, solver="newton+irls")


def _certified_bare(problem, near, bare, J, tol, linalg, refused):
    """``(point, maps)``: the bare model of lowest ``J`` among ``bare`` (their values
    ``J``) if it is within ``tol`` (relative) of the optimum by the duality-gap bound of
    :func:`.bare.bare_gap` (built from ``near``, IRLS's last iterate) or, where its maps
    stall above ``tol``, of :func:`.bare.bare_newton`, else None; and the weighted
    least-squares solves and Newton steps the bound took. ``refused``: the fit's bare
    models that :func:`.bare.bare_newton` did not certify (it does not depend on
    ``near``: not run again for them; this one is added if it fails)."""
    J = np.asarray(J, dtype=float)
    best = bare[int(np.argmin(J))]
    target = tol * max(abs(float(J.min())), 1.0)
    bound, maps = bare_gap(problem, best, near, linalg, maps=BARE_MAPS, target=target)
    if bound > target and maps > 0 and not _was_refused(best, refused):
        # the maps stalled above the tolerance (IRLS's point not yet near enough to
        # w = 0): Newton on the bound's own problem, which needs no such point
        bound, steps = bare_newton(problem, best, target)
        maps += steps
        if not bound <= target:
            refused.append(best)
    return (best, maps) if bound <= target else (None, maps)


def _was_refused(point, refused):
    """Whether :func:`.bare.bare_newton` already failed to certify the bare model
    ``point`` in this fit (it does not depend on any iterate: not run again)."""
    return any(np.array_equal(point, b) for b in refused)


def _gradient_norm(problem, point):
    """``||grad J||_inf`` at ``point`` (a certified bare model: the result's
    ``grad_norm``, the gradient formula with the roots floored)."""
    grad = problem.objective(np.asarray(point, dtype=float), gradient=True)[1]
    return float(np.max(np.abs(grad), initial=0.0))


def _bare_result(first, point, J, steps, start, **changes):
    """``first`` (Newton's run to its trap check) continued by a certificate of ``steps``
    Newton steps that the bare model ``point`` (its ``J``) is the optimum: the fit's
    result there, converged (``"newton+bare"``, or ``"bare"`` where Newton stopped at
    its start)."""
    changes.setdefault("solver", "newton+bare")
    return first._replace(theta=np.array(point, dtype=float),
                          objective=np.append(first.objective, J), n_iter=first.n_iter + steps,
                          converged=True, stalled=False, time=time.perf_counter() - start,
                          **changes)


def _bare_at_start(problem, first, bare, bare_J, tol, start, refused):
    """Newton stopped at its start, no lower than the best bare model ``bare`` (its
    ``J``: ``bare_J``; ``check_start`` of :func:`.newton.fit`): ``(result, steps)`` --
    the result at ``bare`` if ``J`` does not fall from it towards the start
    (:func:`.bare.descends_from`, one pass over the scores) and :func:`.bare.bare_newton`
    certifies it optimal within ``tol`` (relative), else None (a model it did not certify
    added to ``refused``); and the certificate's Newton steps (0 where the test ruled the
    bare model out).

    Where the bare model is the optimum no point lies below it, and ``J``'s directional
    derivative there (``h`` of :func:`.bare.descends_from`) is non-negative in every
    direction. So a start below ``bare_J`` (no work: Newton's start comes with its
    ``J``), or with ``h < 0`` towards it, rules the bare model out, and only the other
    starts try the certificate -- before any Newton step; after the
    :data:`.newton.TRAP_STEPS` steps of the trap check those steps only confirmed the
    trap (digits 8-vs-rest, hinge, dropout 0.2, ``C = 0.1``: 3 Newton steps, about 3 ms;
    Fashion-MNIST 6-vs-rest, dropout 0.5: about 250 ms). On a digits one-vs-rest grid
    (hinge, dropout 0.2 / 0.3 / 0.5, ``C`` 0.01 / 0.02 / 0.1 / 1, 120 problems) the two
    tests ruled out 78 of the 88 classes whose optimum is not ``w = 0`` (59 by ``J``
    alone, 19 more by ``h``; the other 10 pay :func:`.bare.bare_newton`'s few steps to
    its exit) and none of the 32 whose optimum is."""
    design = problem.design
    m, s = design.scores(first.theta)
    if descends_from(problem, bare, m - (bare[-1] if design.fit_intercept else 0.0), s):
        return None, 0
    target = tol * max(abs(bare_J), 1.0)
    bound, steps = bare_newton(problem, bare, target)
    if not bound <= target:
        refused.append(bare)
        return None, steps
    return _bare_result(first, bare, bare_J, steps, start, solver="bare",
                        n_solves=first.n_solves + steps,
                        grad_norm=_gradient_norm(problem, bare)), steps


def _bare_first(problem, first, values, kinks, tol, start, refused):
    """After Newton stopped above the best bare model's ``J`` (the trap check of
    :data:`.newton.TRAP_STEPS`): ``(result, first)`` -- the result at that bare model if
    :func:`.bare.bare_newton` certifies it optimal within ``tol`` (relative), else None
    (and the model added to ``refused``, see :func:`_certified_bare`); and ``first`` with
    the Newton steps of the certificate added to its solves.

    The certificate needs no point near ``w = 0``, so it runs before any IRLS map: where
    the optimum is ``w = 0`` it ends the fit (digits 8-vs-rest, hinge, dropout 0.2,
    ``C = 0.1``: 8 steps, where 9 IRLS solves and 5 of the bound's maps did the same);
    where ``J`` falls from the bare model (the optimum just below it) its first steps find
    the direction and :func:`_leave_trap`'s IRLS maps go on."""
    bare = bare_points(first.theta, problem.design.fit_intercept, kinks)
    J = np.asarray(values(bare), dtype=float)
    k = int(np.argmin(J))
    if _was_refused(bare[k], refused):
        return None, first  # tried before Newton (_bare_at_start)
    target = tol * max(abs(float(J[k])), 1.0)
    bound, steps = bare_newton(problem, bare[k], target)
    first = first._replace(n_solves=first.n_solves + steps)
    if not bound <= target:
        refused.append(bare[k])
        return None, first
    return _bare_result(first, bare[k], J[k], steps, start,
                        grad_norm=_gradient_norm(problem, bare[k])), first


def _leave_trap(problem, first, bare_J, values, kinks, start, refused, *, tol, max_iter,
                accelerate, linalg, warn):
    """After Newton stopped above the best bare model's ``J`` (``bare_J``; the trap check
    of :data:`.newton.TRAP_STEPS`): ``(True, result)`` when done, else ``(False, irls)``
    -- IRLS's run to its tolerance, for :func:`fit_problem` to go on with.

    :data:`ESCAPE_MAPS` IRLS maps first; once they are below the bare model the trap is
    left and Newton converges from there. Otherwise (``w = 0`` is the optimum, or near
    it) the bare model's certificate is tried from IRLS's point, and again after each
    :data:`CERTIFY_AFTER` more maps, then IRLS runs to its tolerance."""
    fit_intercept = problem.design.fit_intercept
    escape = irls.fit(problem, first.theta, tol=tol, accelerate=accelerate, linalg=linalg,
                      warn=False, max_iter=ESCAPE_MAPS)
    if escape.objective[-1] < bare_J:
        last = newton.fit(problem, escape.theta, tol=tol, linalg=linalg, warn=False,
                          max_iter=AUTO_NEWTON_ITER)
        if last.converged:
            return True, last.after(escape.objective, escape.n_iter, escape.n_solves, start,
                                    "irls+newton").after(
                first.objective, first.n_iter, first.n_solves, start, "newton+irls+newton")
    point = escape
    for extra in CERTIFY_AFTER:
        bare = bare_points(point.theta, fit_intercept, kinks)
        certified, maps = _certified_bare(problem, point.theta, bare, values(bare), tol,
                                          linalg, refused)
        point = point._replace(n_solves=point.n_solves + maps)
        if certified is not None:
            return True, _escape_trap(values, first, point, None, [certified], start)
        more = irls.fit(problem, point.theta, tol=tol, accelerate=accelerate, linalg=linalg,
                        warn=False, max_iter=extra)
        point = more.after(point.objective, point.n_iter, point.n_solves, start, "irls")
        if more.converged:
            break
    second = irls.fit(problem, point.theta, tol=tol, accelerate=accelerate, linalg=linalg,
                      warn=warn, max_iter=max(max_iter - first.n_iter - point.n_iter, 1))
    return False, second.after(point.objective, point.n_iter, point.n_solves, start, "irls")


def fit_problem(problem, theta0=None, *, solver="auto", linalg="auto", tol=1e-8,
                max_iter=1000, accelerate=True, warn=True, theta0_scale=None, first=None):
    """Minimise ``J`` of ``problem`` with the chosen optimiser and back-end.

    Parameters
    ----------
    problem : Problem
    theta0 : ndarray, optional
        Warm start.
    solver : {"auto", "newton", "irls", "smoothing", "dual"}
        See :func:`choose_solver`.
    linalg : {"auto", "cholesky", "woodbury", "cg"}
    tol : float
        The optimiser's tolerance (see :func:`.newton.fit`, :func:`.irls.fit`).
    max_iter : int
    accelerate : bool
        SQUAREM acceleration (IRLS only).
    warn : bool
    theta0_scale : float, optional
        ``theta0`` is the exact optimum of this problem with ``C`` multiplied by
        ``theta0_scale`` (the previous point of a path over ``C``). With
        ``solver="auto"``, the zero-noise hinge and epsilon-insensitive losses then
        follow the solution path from there (:mod:`.homotopy`), and the chosen solver
        runs only where that walk cannot finish.
    first : tuple, optional
        This problem's item of :func:`first_newton_runs` (made with the other problems of
        its design, with the same options): the fit goes on from that first Newton run
        instead of making its own. Only from zero (``theta0`` None).

    Returns
    -------
    SolverResult

    Notes
    -----
    The first Newton fit of a process on a small dense design runs its kernels
    interpreted while numba is not loaded (:func:`bayesdrop._jit.interpret_first`): the
    same iteration, about 50 ms on breast cancer against about 0.4 s to import numba and
    load the compiled loop; later fits run compiled.

    Examples
    --------
    >>> from bayesdrop import Problem, LogisticLoss, Dropout
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100, 3)); y = np.sign(X[:, 0] + rng.normal(size=100))
    >>> problem = Problem.create(X, y, LogisticLoss(1.0), Dropout(0.3))
    >>> a, b = fit_problem(problem), fit_problem(problem, solver="irls", tol=1e-12)
    >>> a.solver, b.solver, bool(abs(a.objective[-1] - b.objective[-1]) < 1e-8)
    ('newton', 'irls', True)
    """
    check_problem(problem)
    if first is not None and theta0 is not None:
        raise ValueError("first: a first Newton run from zero, but theta0 is given")
    return _fit_problem(problem, _check_start(problem, theta0), solver=solver, linalg=linalg,
                        tol=tol, max_iter=max_iter, accelerate=accelerate, warn=warn,
                        theta0_scale=theta0_scale, first=first)


def _check_start(problem, theta0):
    """A caller's ``theta0`` checked (None stays None): a finite vector of
    ``problem.design.n_params`` values at which ``J`` is finite -- a ``ValueError`` naming
    ``theta0`` otherwise, not an error from inside a solver."""
    if theta0 is None:
        return None
    theta0 = check_theta(problem.design, theta0, "theta0")
    # BLAS on one thread: a multithreaded product here (``||w||^2`` of a wide ``w``)
    # leaves numpy's OpenBLAS threads spinning for a while, on the cores that Newton-CG's
    # products on numba's threads then share (newsgroups, a warm-started logistic fit:
    # 14 -> 27 ms, every fit of the CV path)
    with one_blas_thread():
        J = problem.objective(theta0)
    if not np.isfinite(J):
        raise ValueError("theta0: J is not finite there (its scores or its penalty "
                         "overflow float64); start nearer zero")
    return theta0


def _fit_problem(problem, theta0=None, *, solver="auto", linalg="auto", tol=1e-8,
                 max_iter=1000, accelerate=True, warn=True, theta0_scale=None, first=None):
    """:func:`fit_problem` from a checked ``theta0``."""
    solver, linalg = check_solver(solver, linalg)
    chosen = choose_solver(problem, solver, linalg)
    if (solver == "auto" and chosen in ("dual", "smoothing") and theta0 is not None
            and theta0_scale is not None and homotopy.applicable(problem)):
        followed = homotopy.follow(problem, theta0, theta0_scale)
        if followed is not None:
            return followed
    if chosen == "irls":
        return irls.fit(problem, theta0, tol=tol, max_iter=max_iter, accelerate=accelerate,
                        linalg=linalg, warn=warn)
    if chosen == "dual":
        return dual.fit(problem, theta0, tol=tol, max_iter=max_iter, warn=warn)
    if chosen == "smoothing":
        return smoothing.fit(problem, theta0, tol=tol, max_iter=max_iter, warn=warn)
    # the first small dense Newton fit of a process runs interpreted if numba is not
    # loaded: the designs of Newton's compiled loop, where the interpreter takes tens of
    # milliseconds (breast cancer: about 50 ms) against about 0.4 s to load numba
    design = problem.design
    with _jit.interpret_first(not design.sparse and design.n_samples * design.n_features
                              <= newton.INTERPRET_MAX_ENTRIES):
        if solver == "newton":
            return newton.fit(problem, theta0, tol=tol, max_iter=max_iter, linalg=linalg,
                              warn=warn)
        return _newton_auto(problem, theta0, tol=tol, max_iter=max_iter,
                            accelerate=accelerate, linalg=linalg, warn=warn, first=first)


def fit_path(problem, Cs, theta0=None, previous=None, *, solver="auto", linalg="auto",
             tol=1e-8, max_iter=1000, accelerate=True, warn=True):
    """Minimise ``J`` of ``problem`` with its loss at each ``C`` of ``Cs`` in turn
    (:meth:`~bayesdrop.model.losses.Loss.with_C`), each fit warm-started from the last: a
    regularisation path (the CV estimators', :mod:`bayesdrop.estimators.cv`).

    The ``i``-th fit (:func:`fit_problem`) starts from

    * ``i = 0``: ``theta0`` (None: a cold start);
    * with ``previous`` -- the fits at the same ``Cs`` of a neighbouring path, such as the
      previous noise level's -- the parallelogram of its three fitted neighbours,
      ``theta_{i-1} + previous[i] - previous[i-1]`` (first order in ``C`` and in the
      path's other parameter);
    * else, and where ``solver="auto"`` follows the exact solution path (the zero-noise
      hinge and epsilon-insensitive losses, :mod:`.homotopy`: ``previous`` is not used),
      ``theta_{i-1}``, the previous optimum, as ``fit_problem``'s ``theta0`` with
      ``theta0_scale = C_{i-1} / C_i``.

    Where Newton's compiled loop fits the problem (``solver`` choosing Newton, a small
    dense design, the loop's machine code at hand) consecutive fits run in one compiled
    call, :func:`.newton.fit_path`: the same iterations from the same starts, without
    Python between the fits (the trap check of ``solver="auto"`` compares with the bare
    model's ``J`` at the run's first ``C`` scaled to each ``C``: ``J(0, b)`` is linear in
    ``C``, equal to rounding). A fit it does not converge, and every other fit, goes
    through :func:`fit_problem` (IRLS after Newton where ``solver="auto"``).

    Parameters
    ----------
    problem : Problem
        Its loss's ``C`` is not used.
    Cs : array-like of float > 0
    theta0 : ndarray of shape (n_params,), optional
    previous : ndarray of shape (len(Cs), n_params), optional
    solver, linalg, tol, max_iter, accelerate, warn
        As :func:`fit_problem`'s.

    Returns
    -------
    list of SolverResult
        One per ``C``.

    Examples
    --------
    At zero noise the hinge's fits after the first follow the solution path:

    >>> from bayesdrop import Problem, HingeLoss
    >>> rng = np.random.default_rng(1)
    >>> X = rng.normal(size=(60, 2)); y = np.where(X[:, 1] + rng.normal(size=60) > 0, 1, -1)
    >>> problem = Problem.create(X, y, HingeLoss(1.0), "none")
    >>> path = fit_path(problem, [0.1, 1.0, 10.0])
    >>> alone = fit_problem(problem._replace(loss=HingeLoss(10.0)))  # a cold fit
    >>> [r.solver for r in path], bool(np.isclose(path[2].objective[-1], alone.objective[-1]))
    (['dual', 'homotopy', 'homotopy'], True)
    """
    check_problem(problem)
    solver, linalg = check_solver(solver, linalg)
    Cs = np.asarray(Cs, dtype=np.float64).ravel()
    theta0 = _check_start(problem, theta0)
    chosen = choose_solver(problem, solver, linalg)
    if previous is not None and not (solver == "auto" and chosen in ("dual", "smoothing")
                                     and homotopy.applicable(problem)):
        previous = np.asarray(previous, dtype=np.float64)
        shape = (Cs.size, problem.design.n_params)
        if previous.shape != shape:
            raise ValueError(f"previous must have shape {shape} (one fit per C), got "
                             f"{previous.shape}")
        if not np.all(np.isfinite(previous)):
            raise ValueError("previous contains NaN or infinity")
    else:  # the exact solution path from each optimum to the next
        previous = None
    results = []

    def start(i):  # (theta0, theta0_scale) of the i-th fit
        if i == 0:
            return theta0, None
        if previous is not None:
            return results[-1].theta + previous[i] - previous[i - 1], None
        return results[-1].theta, Cs[i - 1] / Cs[i]

    lane = chosen == "newton" and linalg in ("auto", "cholesky")
    kinks = problem.loss.kinks(problem.y)
    # the trap check of solver="auto" needs J of the best bare model at each C: J(0, b) is
    # piecewise linear in b with its minimum at a kink, so the start's intercept (an extra
    # candidate of bare_value) changes nothing where every kink is a candidate; and it is
    # linear in C, so one value serves the path (equal to rounding)
    lane = lane and (kinks is None or solver == "newton" or not problem.design.fit_intercept
                     or np.unique(kinks[0]).size <= 64)
    again = -1  # a fit the compiled runs did not converge: by fit_problem
    while len(results) < Cs.size:
        i = len(results)
        theta, scale = start(i)
        if lane and theta is not None and i != again:
            bare = None  # J(0, b) is linear in C: one bare value, scaled (to rounding)
            if kinks is not None and solver == "auto":
                bare = bare_value(problem._replace(loss=problem.loss.with_C(Cs[i])), None) \
                    * (Cs[i:] / Cs[i])
            runs = newton.fit_path(
                problem, Cs[i:], theta, None if previous is None else previous[i:], tol=tol,
                max_iter=min(max_iter, AUTO_NEWTON_ITER) if solver == "auto" else max_iter,
                bare_Js=bare)
            if runs is None:
                lane = False  # not at hand: fit_problem from here on
                continue
            if runs[-1].converged:
                results += runs
            else:
                results += runs[:-1]
                again = len(results)
            continue
        results.append(_fit_problem(problem._replace(loss=problem.loss.with_C(Cs[i])), theta,
                                    solver=solver, linalg=linalg, tol=tol, max_iter=max_iter,
                                    accelerate=accelerate, warn=warn, theta0_scale=scale))
    return results


def first_newton_runs(problems, *, solver="auto", linalg="auto", tol=1e-8, max_iter=1000,
                      warn=True):
    """The first Newton runs of :func:`fit_problem` from zero on each of ``problems`` --
    problems on one design with one loss, differing in their labels (a classifier's
    one-vs-rest problems) -- made in one compiled call (:func:`.newton.fit_problems`):
    pass each as ``first=`` to :func:`fit_problem`, which goes on from it exactly as from
    its own run. None where that call does not apply (not ``solver="auto"``, not Newton,
    a design or loss the compiled dense loop does not take, not at hand).

    Parameters
    ----------
    problems : list of Problem
        Two or more, sharing one design and one loss (``Problem._replace(y=...)`` of one
        problem).
    solver, linalg, tol, max_iter, warn : as :func:`fit_problem`'s
        Which must get the same.

    Returns
    -------
    list of tuple or None
        Per problem ``(kinks, best bare model, first run)``: the loss's kinks at its
        labels (:meth:`~bayesdrop.model.losses.Loss.kinks`), ``(J, b)`` of the best bare
        model (:func:`.bare.bare_value`; None for a smooth loss) and the
        :class:`SolverResult` of Newton's first run (at most ``AUTO_NEWTON_ITER`` steps,
        with the trap check at that ``J``).

    Examples
    --------
    >>> from bayesdrop import Problem, HingeLoss, Dropout
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 3)); y = np.sign(X[:, 0] + rng.normal(size=60))
    >>> one = Problem.create(X, y, HingeLoss(1.0), Dropout(0.3))
    >>> problems = [one, one._replace(y=-y)]
    >>> firsts = first_newton_runs(problems)
    >>> fits = [fit_problem(pr, first=f) for pr, f in zip(problems, firsts or [None] * 2)]
    >>> all(np.array_equal(a.theta, fit_problem(pr).theta) for a, pr in zip(fits, problems))
    True
    """
    solver, linalg = check_solver(solver, linalg)
    if solver != "auto" or len(problems) < 2:
        return None
    problem = problems[0]
    if choose_solver(problem, solver, linalg) != "newton" or linalg not in ("auto",
                                                                              "cholesky"):
        return None
    check_scalar(max_iter, "max_iter", min_val=1, max_val=MAX_ITER, integer=True)
    newton.check_shared(problems)
    with single_blas_pool():
        priors = [_bare_prior(pr, None) for pr in problems]  # one loss: all None or none
        bare = [best for _, best in priors]
        newton_iter, newton_warn, check_start = _first_run_rule(problem, None, bare[0],
                                                                max_iter, warn)
        runs = newton.fit_problems(
            problems, tol=tol, max_iter=newton_iter, warn=newton_warn,
            bare_Js=None if bare[0] is None else [best[0] for best in bare],
            check_start=check_start)
    if runs is None:
        return None
    return [(pieces, best, run) for (pieces, best), run in zip(priors, runs)]


def _bare_prior(problem, theta0):
    """``(pieces, best)`` of :func:`_newton_auto`: the loss's kinks at the labels and the
    best bare model ``(J, b)`` (:func:`.bare.bare_value`; both None for a smooth loss)."""
    pieces = problem.loss.kinks(problem.y)
    return pieces, bare_value(problem, theta0, pieces, with_intercept=True)


def _first_run_rule(problem, theta0, best, max_iter, warn):
    """``(max_iter, warn, check_start)`` of :func:`_newton_auto`'s first Newton run: at
    most ``AUTO_NEWTON_ITER`` steps, warning only where they are all the fit has; a start
    no lower than the best bare model ``best`` stops Newton before its first step, and the
    bare model's certificate comes first (:func:`_bare_at_start`), where it has a dense
    Hessian."""
    check_start = (best is not None and theta0 is None
                   and wls.choose_linalg(problem.design) == "cholesky")
    return min(max_iter, AUTO_NEWTON_ITER), warn and max_iter <= AUTO_NEWTON_ITER, check_start


@with_single_blas_pool
def _newton_auto(problem, theta0, *, tol, max_iter, accelerate, linalg, warn, first=None):
    """``solver="auto"`` where Newton applies (:func:`fit_problem`), with every BLAS but
    numpy's on one thread (:func:`bayesdrop._threads.single_blas_pool`) for the whole
    sequence, not only inside each solver: the trap's bare-model certificate
    (:func:`.bare.bare_gap`: numpy Gram products, scipy Cholesky factors) ran outside
    any limit, and each of its maps alternated between numpy's and scipy's OpenBLAS
    pools, whose spinning threads competed for the cores (Fashion-MNIST 4000 x 784, the
    class whose optimum is ``w = 0``: about 92 ms a map against 40 ms for an IRLS map
    inside the limit; the class's fit 1.20-1.28 -> 0.94-1.00 s)."""
    # "auto": Newton, and IRLS from where it stopped if it has not converged within
    # AUTO_NEWTON_ITER steps -- the optimum can sit where J is not twice differentiable
    # even under noise (w = 0 with examples exactly on the margin: the noise term then
    # acts like a group-lasso penalty on w)
    start = time.perf_counter()
    if first is None:
        pieces, best = _bare_prior(problem, theta0)
    else:  # made with the other problems of the design (first_newton_runs)
        pieces, best, first = first
        start -= first.time
    bare_J = None if best is None else best[0]

    def values(thetas):
        return [problem.objective(t) for t in thetas]

    fit_intercept = problem.design.fit_intercept
    kinks = None if pieces is None else pieces[0]
    refused = []  # bare models bare_newton did not certify (see _certified_bare)
    newton_iter, newton_warn, check_start = _first_run_rule(problem, theta0, best, max_iter,
                                                            warn)
    if first is None:
        first = newton.fit(problem, theta0, tol=tol, max_iter=newton_iter, linalg=linalg,
                           warn=newton_warn, bare_J=bare_J, check_start=check_start)
    if check_start and first.stalled and first.n_iter == 0:
        bare = np.zeros(problem.design.n_params)
        if fit_intercept:
            bare[-1] = best[1]
        certified, steps = _bare_at_start(problem, first, bare, bare_J, tol, start, refused)
        if certified is not None:
            return certified
        rest = newton.fit(problem, first.theta, tol=tol, max_iter=newton_iter, linalg=linalg,
                          warn=newton_warn, bare_J=bare_J)  # on from the start
        first = rest.after(first.objective, 0, first.n_solves + steps, start, "newton")
    if first.converged or max_iter <= AUTO_NEWTON_ITER:
        return first

    above = bare_J is not None and first.stalled and first.objective[-1] > bare_J
    if above:  # stopped by the trap check (newton.TRAP_STEPS)
        certified, first = _bare_first(problem, first, values, kinks, tol, start, refused)
        if certified is not None:
            return certified
        done, second = _leave_trap(problem, first, bare_J, values, kinks, start, refused,
                                   tol=tol, max_iter=max_iter, accelerate=accelerate,
                                   linalg=linalg, warn=warn)
        if done:
            return second
    else:
        second = irls.fit(problem, first.theta, tol=tol, max_iter=max_iter - first.n_iter,
                          accelerate=accelerate, linalg=linalg, warn=warn)
    trapped, bare, J_bare = _bare_check(values, second.theta, fit_intercept, kinks)
    if trapped:
        # a near-kink trap or an optimum at w = 0: with w near 0 every score variance
        # vanishes and the examples on their kinks give Newton (and the IRLS map, whose
        # weights ~ 1 / sqrt(s_n) pin them there) a curvature ~ C / sqrt(s_n) -- tiny
        # steps, J stuck near its value at w = 0 (Fashion-MNIST, hinge q = 0.5, C = 0.1:
        # 2e-4 above J*). IRLS from the start does not enter the trap; w = 0 with the best
        # intercept is the optimum where there is no trap but the tip itself: the lowest
        # of the three
        certified, maps = _certified_bare(problem, second.theta, bare, J_bare, tol, linalg,
                                          refused)
        second = second._replace(n_solves=second.n_solves + maps)
        if certified is not None:  # w = 0 is the optimum: no third run
            return _escape_trap(values, first, second, None, [certified], start)
        third = irls.fit(problem, None, tol=tol, max_iter=max_iter, accelerate=accelerate,
                         linalg=linalg, warn=False)
        return _escape_trap(values, first, second, third, bare, start)
    if above:
        # IRLS left the trap only after the escape maps: Newton from its end (IRLS's
        # tolerance leaves J about 1e-7 above J* where it converges slowly, digits
        # 2-vs-rest hinge q = 0.5, C = 0.02), where J is smooth, converges to rounding
        last = newton.fit(problem, second.theta, tol=tol, linalg=linalg, warn=False,
                          max_iter=AUTO_NEWTON_ITER)
        if last.converged and last.objective[-1] <= second.objective[-1]:
            second = last.after(second.objective, second.n_iter, second.n_solves, start,
                                "irls+newton")
    return second.after(first.objective, first.n_iter, first.n_solves, start,
                        "newton+" + second.solver,
                        first.n_passes)


def fit_rows(rows, theta0=None, *, solver="auto", tol=1e-8, max_iter=1000, accelerate=True,
             warn=True):
    """Minimise ``J`` through a row back-end (:mod:`bayesdrop.linalg.backend`; the dask
    path of the estimators).

    ``solver="auto"`` is Newton (:func:`.newton.fit_rows`, one pass per step) where ``J``
    is twice differentiable -- the logistic loss, and the hinge / epsilon-insensitive
    losses when every example is noisy -- continued by IRLS if it has not converged
    within :data:`AUTO_NEWTON_ITER` steps, and IRLS (:func:`.irls.fit_rows`, SQUAREM,
    one pass per map) otherwise. ``"smoothing"`` and ``"dual"`` need the rows in memory.
    For a classifier's hinge loss Newton is checked against the best bare model
    ``(0, b)`` as in :func:`fit_problem` (its ``J`` from one pass over the targets): a
    stall above it is followed by the bare model's certificate
    (:func:`.bare.bare_newton_rows`, a pass per step; digits 5-vs-rest, hinge
    ``q = 0.5``, ``C = 0.02``: 18 passes where IRLS and the maps' bound took 397), and
    where that fails, by Newton without the check; an IRLS end away from ``w = 0`` is
    finished by Newton.

    Examples
    --------
    >>> from bayesdrop import Problem, HingeLoss, Dropout
    >>> from bayesdrop.linalg.backend import InMemoryRows
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(80, 3)); y = np.sign(X[:, 0] + rng.normal(size=80))
    >>> problem = Problem.create(X, y, HingeLoss(1.0), Dropout(0.3))
    >>> a, b = fit_rows(InMemoryRows(problem)), fit_problem(problem)
    >>> a.solver, bool(np.allclose(a.theta, b.theta, atol=1e-7))
    ('newton', True)
    """
    if solver not in ("auto", "newton", "irls"):
        raise ValueError(f"solver must be 'auto', 'newton' or 'irls' for data in row "
                         f"chunks (dask), got {solver!r}")
    smooth = rows.loss.smooth or rows.every_row_noisy
    if solver == "irls" or (solver == "auto" and not smooth):
        return irls.fit_rows(rows, theta0, tol=tol, max_iter=max_iter,
                             accelerate=accelerate, warn=warn)
    if solver == "newton":
        return newton.fit_rows(rows, theta0, tol=tol, max_iter=max_iter, warn=warn)
    start = time.perf_counter()

    def values(thetas):  # one pass over the rows for all the points
        return rows.objective(np.stack(thetas))

    # the bare models at the kinks of +-1 targets for a classification loss (the targets
    # stay with the rows)
    kinks = rows.loss.kinks(np.array([-1.0, 1.0])) if rows.loss.binary else None
    kinks = None if kinks is None else kinks[0]
    newton_iter = min(max_iter, AUTO_NEWTON_ITER)
    bare_J, extra = None, 0
    if kinks is not None:  # Newton's early trap check, as in fit_problem (a pass of y)
        b0 = 0.0 if theta0 is None else float(np.asarray(theta0, dtype=float)[-1])
        candidates = bare_intercepts(b0, kinks) if rows.fit_intercept else np.zeros(1)
        bare_J, extra = float(np.min(rows.reduce(bare_sums, candidates))), 1
    first = newton.fit_rows(rows, theta0, tol=tol, max_iter=newton_iter,
                            warn=warn and max_iter <= AUTO_NEWTON_ITER, bare_J=bare_J)
    if bare_J is not None and first.stalled and first.objective[-1] > bare_J:
        # stopped by the trap check: the best bare model certified by Newton on the
        # bound's problem (bare_newton_rows), else Newton goes on without the check
        bare = bare_points(first.theta, rows.fit_intercept, kinks)
        J = np.asarray(values(bare), dtype=float)
        k = int(np.argmin(J))
        target = tol * max(abs(float(J[k])), 1.0)
        bound, passes = bare_newton_rows(rows, bare[k], target)
        extra += 1 + passes
        if bound <= target:
            return _bare_result(first, bare[k], J[k], passes, start,
                                n_solves=first.n_solves + passes,
                                n_passes=first.n_passes + extra)
        rest = newton.fit_rows(rows, first.theta, tol=tol,
                               max_iter=max(newton_iter - first.n_iter, 1),
                               warn=warn and max_iter <= AUTO_NEWTON_ITER)
        first = rest.after(first.objective, first.n_iter, first.n_solves + passes, start,
                           "newton", first.n_passes)
    first = first._replace(n_passes=first.n_passes + extra)
    if first.converged or max_iter <= AUTO_NEWTON_ITER:
        return first
    second = irls.fit_rows(rows, first.theta, tol=tol, max_iter=max_iter - first.n_iter,
                           accelerate=accelerate, warn=warn)
    trapped, bare, J = _bare_check(values, second.theta, rows.fit_intercept, kinks)
    if trapped:  # the trap of fit_problem, handled the same way
        target = tol * max(abs(float(J.min())), 1.0)
        bound, passes = bare_gap_rows(rows, bare[int(np.argmin(J))], second.theta,
                                      maps=BARE_MAPS, target=target)
        second = second._replace(n_passes=second.n_passes + passes,
                                 n_solves=second.n_solves + max(passes - 1, 0))
        if bound <= target:  # w = 0 is the optimum: no third run
            return _escape_trap(values, first, second, None, [bare[int(np.argmin(J))]],
                                start)
        third = irls.fit_rows(rows, None, tol=tol, max_iter=max_iter,
                              accelerate=accelerate, warn=False)
        return _newton_finish(rows, _escape_trap(values, first, second, third, bare, start),
                              tol, start)
    return _newton_finish(rows, second.after(first.objective, first.n_iter, first.n_solves,
                                             start, "newton+irls", first.n_passes), tol, start)


def _newton_finish(rows, result, tol, start):
    """``result`` of IRLS on a row back-end, or Newton's from its point where that
    converges lower: at IRLS's end ``J`` is smooth unless it is a bare model, and Newton
    converges to rounding where IRLS's tolerance leaves ``J`` above the optimum (digits/16
    2-vs-rest, hinge ``q = 0.5``, ``C = 0.02``, whose optimum lies 5e-4 below the bare
    model's: 7e-8 above ``J*``), as :func:`fit_problem` does after its trap."""
    w = result.theta[: rows.n_features]
    if not np.any(w):
        return result
    last = newton.fit_rows(rows, result.theta, tol=tol, max_iter=AUTO_NEWTON_ITER, warn=False)
    if not (last.converged and last.objective[-1] <= result.objective[-1]):
        return result._replace(n_passes=result.n_passes + last.n_passes)
    return last.after(result.objective, result.n_iter, result.n_solves, start,
                      result.solver + "+newton", result.n_passes)
