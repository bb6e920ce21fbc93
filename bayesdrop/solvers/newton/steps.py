"""The step evaluators of :func:`bayesdrop.solvers.newton.loop.newton_loop` in Python: a
``Design`` (dense or CSR; exact Hessian with Cholesky, or preconditioned CG on
Hessian-vector products) and a row back-end (one pass over the data per step).

Both implement the operations listed in :mod:`.loop`; the numerical choices (float32
Hessian products, the subsampled first Gram matrix, the CG preconditioner, the ridge of
a singular ``H``) are documented with their constants in :mod:`bayesdrop.solvers.newton`,
which passes them in.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import scipy.linalg as sla

from ... import _jit
from ...linalg import hessian as hess
from ...model.objective import penalised

__all__ = ["DesignSteps", "FactorOptions", "RowSteps", "cho_factor", "diagonal_condition",
           "direction_cg", "direction_refined", "factor_cholesky", "inverse_factor",
           "refine_applies"]


class FactorOptions(NamedTuple):
    """``ridge``: relative ridge of a singular ``H`` (``RIDGE``); ``single_max_cond``:
    largest condition estimate of a float32 factor (``SINGLE_MAX_COND``);
    ``start_rows``, ``start_rows_per_param``: the subsampled first Gram matrix
    (``START_GRAM_ROWS``, ``START_GRAM_ROWS_PER_PARAM``); ``refine_min_features``,
    ``refine_rtol``, ``refine_maxiter``, ``refine_refresh``: the directions refined from
    a kept factor (``REFINE_MIN_FEATURES``, ``REFINE_RTOL``, ``REFINE_MAXITER``,
    ``REFINE_REFRESH``)."""

    ridge: float
    single_max_cond: float
    start_rows: int
    start_rows_per_param: int
    refine_min_features: int = 0
    refine_rtol: float = 0.0
    refine_maxiter: int = 0
    refine_refresh: int = 0


def cho_factor(H, ridge):
    """``cho_factor`` of ``H`` (of a copy with the relative ridge ``ridge`` if ``H`` is
    singular to working precision)."""
    try:
        return sla.cho_factor(H, lower=True, check_finite=False)
    except np.linalg.LinAlgError:
        H = H.copy()
        H[np.diag_indices_from(H)] += ridge * max(float(np.max(np.diag(H))), 1.0)
        return sla.cho_factor(H, lower=True, check_finite=False)


def start_row_step(design, opts):
    """``k`` of the subsampled first factor (1: all rows; see ``START_GRAM_ROWS``)."""
    if not hess.single_applies(design):
        return 1
    keep = max(opts.start_rows, opts.start_rows_per_param * design.n_params)
    return max(design.n_samples // keep, 1)


def factor_cholesky(design, curv, opts, single=False, work=None):
    """``cho_factor`` of the Hessian and whether it came from the float32 products
    (accepted when its diagonal shows ``cond(H) <= single_max_cond``); at ``w = 0`` on a
    large dense design from the subsampled Gram matrix, under the same guard. ``work``:
    the products' block arrays, kept between calls (``hessian_matrix``'s)."""
    if single:
        step = 1 if np.any(curv.w) else start_row_step(design, opts)
        H = hess.hessian_matrix(design, curv, single=True, row_step=step, work=work)
        try:
            factor = sla.cho_factor(H, lower=True, check_finite=False)
        except np.linalg.LinAlgError:  # not positive definite in single precision
            factor = None
        if factor is not None and diagonal_condition(factor[0]) <= opts.single_max_cond:
            return factor, True
    return cho_factor(hess.hessian_matrix(design, curv, work=work), opts.ridge), False


@_jit.jitable
def diagonal_condition(L):
    """``(max |L_ii| / min |L_ii|)^2`` of a Cholesky factor ``L``: a lower bound on the
    condition number of ``L L^T`` (``inf`` for a zero pivot), the guard of the float32
    factor of :func:`factor_cholesky` (and of the compiled loop's,
    :mod:`bayesdrop.solvers.newton.compiled`)."""
    diag = np.abs(np.diag(L))
    low = float(np.min(diag))
    return (float(np.max(diag)) / low) ** 2 if low > 0.0 else np.inf


def cg_wide(design):
    """Whether the data part of ``H`` has rank below ``D`` (``2 N <= D``: ``Xbar`` and
    ``G`` have ``N`` rows each), so that :func:`cg_preconditioner` leaves it out."""
    return 2 * design.n_samples <= design.n_features


def cg_preconditioner(design, curv, ridge, diagonal=None):
    """The diagonal ``P`` whose inverse preconditions CG on ``H p = -g``.

    Weights: the diagonal of ``H`` (Jacobi; ``diagonal`` if already computed) -- or, on a
    wide design (:func:`cg_wide`), only that of the penalty and noise terms,
    ``2 + noise_diag``: ``H - P`` then has rank at most ``2 N``, so ``D - 2 N``
    eigenvalues of ``P^-1 H`` are exactly 1. Intercept: the mean curvature
    ``sum_n d_mm / N`` instead of its Jacobi entry ``sum_n d_mm``. The intercept's column
    is the densest of ``Xbar``; scaled to a unit diagonal its coupling with every
    feature spreads over the bulk of the spectrum, while ``N`` times the bulk's scale
    makes it an outlier that CG resolves in about one product.

    Measured (Hessian-vector products of a fit to the default ``tol``; Jacobi
    everywhere -> this rule): newsgroups 714 x 22178 logistic q = 0.5 49 -> 33, q = 0
    138 -> 60; 1427 x 22178 hinge q = 0.5 69 -> 59; random sparse q = 0.3, logistic /
    hinge: 2000 x 500 22 -> 17 / 25 -> 16, 500 x 5000 28 -> 23 / 52 -> 35,
    20000 x 2000 21 -> 16 / 24 -> 16. Jacobi weights with the mean intercept gave
    35 and 126 on the first two: the weights' rule matters on wide designs at zero noise,
    where ``P`` is then ``2 I``.
    """
    D = design.n_features
    if cg_wide(design):
        diag = np.empty(design.n_params)
        diag[:D] = 2.0 + curv.noise_diag
    else:
        diag = hess.hessian_diagonal(design, curv) if diagonal is None else diagonal.copy()
    if design.fit_intercept:
        diag[D] = np.mean(curv.d_mm)
    return np.maximum(diag, ridge * max(float(np.max(diag)), 1.0))


def direction_cg(design, curv, g, rtol, maxiter, ridge):
    """Preconditioned CG on ``H p = -g`` to ``||H p + g|| <= rtol ||g||``
    (preconditioner :func:`cg_preconditioner`); returns ``(p, iterations)``."""
    hvp = hess.hessian_operator(design, curv, diagonal=not cg_wide(design))
    inv_diag = 1.0 / cg_preconditioner(design, curv, ridge, getattr(hvp, "diagonal", None))
    if hasattr(hvp, "solve"):  # the same loop, compiled
        return hvp.solve(np.ascontiguousarray(g, dtype=np.float64), inv_diag, rtol, maxiter)
    p = np.zeros_like(g)
    r = -g.copy()
    z = inv_diag * r
    d = z.copy()
    rz = r @ z
    stop = rtol * np.linalg.norm(g)
    k = 0
    for k in range(1, maxiter + 1):
        Hd = hvp(d)
        dHd = d @ Hd
        if dHd <= 0.0:  # pragma: no cover - H is positive definite
            break
        alpha = rz / dHd
        p += alpha * d
        r -= alpha * Hd
        if np.linalg.norm(r) <= stop:
            break
        z = inv_diag * r
        rz_new = r @ z
        d = z + (rz_new / rz) * d
        rz = rz_new
    return p, k


def refine_applies(design, opts):
    """Whether Newton's fresh directions on ``design`` may be refined from a kept factor
    (:func:`direction_refined`): a large dense design (``hessian.single_applies``, where
    the Hessian is the blocked float32 product) with ``opts.refine_min_features``
    features or more, where a Hessian costs many Hessian-vector products."""
    return (opts.refine_maxiter > 0 and design.n_features >= opts.refine_min_features
            and hess.single_applies(design))


def direction_refined(hvp, precondition, g, rtol, maxiter):
    """The Newton direction ``p = -H^{-1} g`` by conjugate gradients on the products
    ``hvp`` of the current ``H``, preconditioned by ``precondition`` (``r -> P^{-1} r``,
    ``P`` an earlier Hessian: :func:`inverse_factor`), to ``||H p + g|| <= rtol ||g||``;
    returns ``(p, iterations)``, or ``(None, iterations)`` if that takes more than
    ``maxiter`` products (or ``H`` shows a non-positive curvature along an iterate:
    rounding in a nearly singular ``H``).

    Close to the earlier Hessian's point ``P^{-1} H`` is close to the identity, and CG
    needs a few products where a new factor costs ``O(N D^2 + D^3)``. Measured on
    Fashion-MNIST 4000 x 784 (hinge ``q = 0.5``, ``C = 0.1``; the fresh directions after
    each class's first): relative residual 1e-4 in 4-10 products, 1e-8 in 8-18.
    """
    p = np.zeros_like(g)
    r = -g
    z = precondition(r)
    d = z
    rz = r @ z
    stop = rtol * np.linalg.norm(g)
    for k in range(1, maxiter + 1):
        Hd = hvp(d)
        dHd = d @ Hd
        if not dHd > 0.0:
            return None, k
        alpha = rz / dHd
        p = p + alpha * d
        r = r - alpha * Hd
        if np.linalg.norm(r) <= stop:
            return p, k
        z = precondition(r)
        rz_new = r @ z
        d = z + (rz_new / rz) * d
        rz = rz_new
    return None, maxiter


def inverse_factor(factor):
    """``r -> (L L^T)^{-1} r`` for a ``cho_factor`` result ``factor`` (``(L, lower)``), by
    two matrix-vector products with ``W = L^{-1}`` in float32 (the triangle's copy and
    LAPACK ``strtri``, 5-6 ms at ``D = 784``; then 0.06 ms an application against 0.5-0.6
    ms for the two triangular solves of ``cho_solve`` on scipy's one-thread BLAS pool):
    ``W^T W`` is positive definite for any rounding, all a preconditioner needs."""
    L, lower = factor
    L = np.tril(L) if lower else np.triu(L).T
    W, info = sla.lapack.strtri(L.astype(np.float32), lower=1)
    if info != 0:  # pragma: no cover - a Cholesky factor has a positive diagonal
        raise np.linalg.LinAlgError(f"strtri: info {info}")

    def precondition(r):
        return (W.T @ (W @ r.astype(np.float32))).astype(np.float64)
    return precondition


class DesignSteps:
    """The steps of Newton's method on a :class:`~bayesdrop.model.problem.Problem` with a
    dense or CSR design, through the design's products and :mod:`bayesdrop.linalg.hessian`.

    ``linalg="cholesky"``: exact Hessian and Cholesky factor (in float32 where
    ``single``, with the float64 fallback); ``"cg"``: preconditioned CG to the loop's
    forcing term, at most ``cg_maxiter`` iterations. Along a line the scores are updated
    incrementally (``m + t Xbar p``), so a trial point costs one product with ``V``.
    ``factor``: a Cholesky factor to start with (a subsample's), or None.

    On a large dense design (:func:`refine_applies`) a fresh direction is first sought by
    :func:`direction_refined` from the kept factor, to the relative residual
    ``opts.refine_rtol`` (nearly the exact Newton step); only where that takes more than
    ``opts.refine_maxiter`` products is a new factor computed -- and also at the next
    fresh direction after one that took more than ``opts.refine_refresh`` (the kept
    factor has drifted from ``H``) or after a refined step whose line search failed.
    """

    def __init__(self, problem, linalg, opts, *, cg_maxiter=250, single=False,
                 factor=None, scores=None):
        self.problem = problem
        self.linalg = linalg
        self.exact = linalg == "cholesky"
        # CG without H's diagonal: the gradient's pass writes the products' entries
        self.entries = not self.exact and cg_wide(problem.design)
        self.opts = opts
        self.cg_maxiter = cg_maxiter
        self.single = single
        self.from_single = False
        self.ill_conditioned = False  # the last float64 factor's (see new_factor)
        self.hessian_work = {}  # the Hessian products' block arrays, kept for the fit
        self.factor = factor
        self.curv = None
        self.scores = scores  # (m, s) at the start, if known
        self.slots = [None, None]  # (m, s, terms) of the trial points
        self.xs = None
        self.refine = None  # refine_applies, when the first fresh direction is sought
        self.refresh = False  # the next fresh direction computes a new factor
        self.refined = False  # the last fresh direction was refined from a kept factor
        self.inverse = None  # the kept factor's inverse_factor, made when first used

    def start(self, theta):
        problem = self.problem
        m, s = problem.design.scores(theta) if self.scores is None else self.scores
        self.theta, self.m, self.s = theta, m, s
        if self.factor is None:
            J, g, self.curv = hess.curvature(problem, theta, m, s, self.entries)
        else:
            J, g = hess.gradient(problem, theta, m, s)
        return J, g

    def newton_direction(self, g, rtol):
        if self.curv is None:  # second derivatives at the current point
            _, _, self.curv = hess.curvature(self.problem, self.theta, self.m, self.s,
                                             self.entries)
        design = self.problem.design
        if self.exact:
            if self.refine is None:
                self.refine = refine_applies(design, self.opts)
            if self.refine and self.factor is not None and not self.refresh:
                opts = self.opts
                if self.inverse is None:
                    self.inverse = inverse_factor(self.factor)
                p, k = direction_refined(hess.single_operator(design, self.curv),
                                         self.inverse, g, opts.refine_rtol,
                                         opts.refine_maxiter)
                if p is not None and -(g @ p) > 0.0:  # (descent: CG's iterates are)
                    self.refined = True
                    self.refresh = k > opts.refine_refresh
                    return p
            self.refined = self.refresh = False
            self.new_factor(design)
            return -sla.cho_solve(self.factor, g, check_finite=False)
        return direction_cg(design, self.curv, g, rtol, self.cg_maxiter, self.opts.ridge)[0]

    def new_factor(self, design):
        """Factor the Hessian of ``self.curv`` on ``design`` (:func:`factor_cholesky`).

        The float32 products are skipped while the last float64 factor's condition
        estimate (:func:`diagonal_condition`) exceeded ``single_max_cond``: the Hessian
        changes little from step to step, and a float32 factor that its guard rejects
        costs most of a float64 one (Fashion-MNIST 6-vs-rest, hinge ``q = 0.5``,
        ``C = 0.1``, whose optimum is ``w = 0``: four rejected float32 Hessians of 38 ms
        each on the way into the trap near it)."""
        single = self.single and not self.ill_conditioned
        self.inverse = None
        self.factor, self.from_single = factor_cholesky(design, self.curv, self.opts,
                                                        single, work=self.hessian_work)
        if self.single and not self.from_single:
            self.ill_conditioned = (diagonal_condition(self.factor[0])
                                    > self.opts.single_max_cond)

    def chord_solve(self, q):
        return sla.cho_solve(self.factor, q, check_finite=False)

    def trial(self, theta, step, t, slot, derivs):
        design, loss, y = self.problem
        D = design.n_features
        if slot == 0 and t == 1.0:  # a new line
            self.xs = design.matvec(step)
        cand_w = theta[:D] + t * step[:D]
        m_c = self.m + t * self.xs
        s_c = design.noise_matvec(cand_w * cand_w)
        if derivs:
            terms = loss.terms(m_c, s_c, y)
            J_c = penalised(cand_w, terms[0])
        else:
            terms = None
            J_c = penalised(cand_w, loss.value(m_c, s_c, y))
        self.slots[slot] = (m_c, s_c, terms)
        return J_c

    def take_doubled(self):
        self.slots[0] = self.slots[1]

    def retry_exact(self, fresh):
        if fresh and self.refined:  # a new factor at the same point
            self.refresh = True
            return True
        if not self.from_single:
            return False
        if fresh:  # the float32 factor failed: float64 from now on
            self.single = False
        return True

    def accept(self, theta, second):
        self.theta = theta
        self.m, self.s, terms = self.slots[0]
        if second:
            J, g, self.curv = hess.curvature(self.problem, theta, self.m, self.s,
                                             self.entries)
        else:  # the next direction reuses the factor: first derivatives only
            J, g = hess.gradient(self.problem, theta, self.m, self.s, terms)
            self.curv = None
        return J, g


class RowSteps:
    """The steps of Newton's method through a row back-end
    (:class:`bayesdrop.linalg.backend.RowBackend`): every sum over rows is one pass.

    The pass at the full step's point returns ``J``, the gradient and the ``D x D``
    Hessian there together with ``J`` at ``theta + t p`` for ``t`` in ``trial_steps``
    (1/2 to 1/16), so that the line search and the next Newton system usually cost one
    pass; shorter steps (``short_steps``) are evaluated all in one objective-only pass.
    The Hessian is factored afresh every step (the loop's ``reuse`` is 0).
    """

    exact = True

    def __init__(self, rows, ridge, trial_steps, short_steps):
        self.rows = rows
        self.ridge = ridge
        self.trial_steps = trial_steps
        self.short_steps = short_steps
        self.H = None
        self.known = {}  # J at theta + t p along the current line, by t
        self.full = None  # (J, g, H) at theta + p
        self.t = None

    def start(self, theta):
        J, g, self.H, _ = self.rows.newton(theta)
        return J, g

    def newton_direction(self, g, rtol):
        self.factor = cho_factor(self.H, self.ridge)
        return -sla.cho_solve(self.factor, g, check_finite=False)

    def chord_solve(self, q):  # pragma: no cover - the loop never keeps a factor here
        return sla.cho_solve(self.factor, q, check_finite=False)

    def trial(self, theta, step, t, slot, derivs):
        if slot == 0 and t == 1.0:  # a new line: the full step and the trial steps
            trial = theta[None, :] + self.trial_steps[:, None] * step[None, :]
            J1, g1, H1, J_trial = self.rows.newton(theta + step, trial)
            self.full = (J1, g1, H1)
            self.known = {1.0: J1, **dict(zip(self.trial_steps.tolist(), J_trial))}
        if t not in self.known:  # shorter steps, all in one objective-only pass
            steps = self.short_steps
            values = self.rows.objective(theta[None, :] + steps[:, None] * step[None, :])
            self.known.update(zip(steps.tolist(), values))
        self.t = t
        return float(self.known[t])

    def take_doubled(self):  # pragma: no cover - no doublings here (expand_steps = 0)
        pass

    def retry_exact(self, fresh):
        return False

    def accept(self, theta, second):
        if self.t == 1.0:
            J, g, self.H = self.full
        else:
            J, g, self.H, _ = self.rows.newton(theta)
        return J, g
