"""Newton's method on ``J``: exact Hessian with Cholesky, or truncated Newton-CG.

``J`` is smooth and strongly convex whenever every term is (the logistic loss always; the
hinge and epsilon-insensitive losses when the noise gives every example a positive score
variance), with Hessian (:mod:`bayesdrop.linalg.hessian`)::

    H = 2 I' + Xbar^T diag(d_mm) Xbar + diag(V^T (2 d_s), 0) + noise-curvature terms.

Each iteration computes the Newton direction ``p = -H^{-1} g`` -- with the dense Cholesky
factor of ``H`` (``linalg="cholesky"``, ``O(N D^2 + D^3)``), or by preconditioned conjugate
gradients on Hessian-vector products (``linalg="cg"``, ``O(nnz)`` per product, never a
``D x D`` matrix; the forcing term ``min(0.5, sqrt(||g|| / ||g_0||))`` of truncated Newton,
Nocedal & Wright 2006, section 7.1, floored at :data:`CG_FORCING_FLOOR`) -- and a
backtracking Armijo line search on ``J`` from the full step (far from the optimum an
exact step that passes, and lowered ``J`` by more than its quadratic model predicts, is
doubled while ``J`` keeps falling, :data:`EXPAND_STEPS`, :data:`EXPAND_RATIO`). The scores
are updated along the line (``m + t Xbar p``), so a trial point costs one product with
``V``.

Close to the optimum the Cholesky factor is **reused** (Shamanskii's variant: a chord
step ``p = -H_k^{-1} g`` with the ``H_k`` of an earlier step; :data:`REUSE_DECREMENT`,
:data:`CONTRACTION`) and **updated by BFGS** with the steps taken since (the two-loop
recursion with ``H_k^{-1}`` as its initial inverse, :data:`QN_MEMORY`): such a step costs
one pass over the data instead of a Hessian (``O(N D)`` instead of ``O(N D^2)``),
converges superlinearly, and is kept only while it shrinks the decrement at least
tenfold per step, otherwise ``H`` is recomputed. On a large dense design, where a Hessian
costs several passes, the factor is kept after any full step
(:data:`QN_REUSE_DECREMENT`), the first factor of a fit from zeros comes from a row
subsample (:data:`START_GRAM_ROWS`), and with many features (:data:`REFINE_MIN_FEATURES`)
a fresh direction is first **refined from the kept factor** -- conjugate gradients on the
current ``H``'s products, preconditioned by the kept factor, to nearly the exact step --
and a new factor is computed only when that takes too many products. The dense Hessian is assembled from
each example's 2 x 2 curvature in ``(m, s)`` split into signed squares, two BLAS ``syrk``
products (:func:`bayesdrop.linalg.kernels.dense_hessian_split`).

On a large dense design (``N D >= HESSIAN_BLOCKED_MIN``) those products -- and the Gram
product of the first IRLS step that gives the start -- run in **float32**, summed into a
float64 ``H``: the factor only shapes the direction, so a relative error of ``1e-7 cond(H)``
costs at most a Newton contraction of that size, while ``g``, ``J``, the line search and the
stopping rule stay float64 and the optimum is unchanged. A float32 factor is accepted
only when its diagonal shows ``cond(H) <= SINGLE_MAX_COND``; otherwise, or after a step
with it fails its line search, ``H`` is recomputed in float64.

Stopping rule: the **Newton decrement** ``lambda^2 = -g.p = g^T H^{-1} g`` (exact with
Cholesky) estimates twice the distance to the optimum, ``J - J* ~ lambda^2 / 2``. The
solver stops after the step whose decrement satisfies ``lambda^2 / 2 <= tol max(|J|, 1)``;
quadratic convergence then puts the final ``J`` far closer than ``tol`` (relative) to
``J*``. This is the stopping rule of scikit-learn's Newton solvers, applied to ``J``. A
step with a reused factor converges only linearly, so it stops the iteration at
:data:`CHORD_STOP` times that threshold: the final ``J`` is as close to ``J*``.

The iteration is written once, :func:`.loop.newton_loop`, over a step evaluator
(:mod:`.steps`: a dense or CSR ``Design``, a row back-end; :mod:`.compiled`: small dense
designs, and :mod:`.compiled_csr`: Newton-CG on CSR designs, the same function compiled
by numba). :func:`fit` and :func:`fit_rows` choose the
evaluator and the start and pass this module's constants (read at call time).
"""

from __future__ import annotations

import math
import threading
import time
import warnings
import weakref
from contextlib import nullcontext

import numpy as np
import scipy.linalg as sla
from sklearn.exceptions import ConvergenceWarning

from ... import _jit
from ..._threads import numba_threads, one_blas_thread, with_single_blas_pool
from ..._validation import MAX_ITER, check_scalar
from ...linalg import hessian as hess
from ...linalg.wls import MAX_CHOLESKY_PARAMS
from ...model.objective import penalised
from ...model.problem import subsample_rows
from ..result import SolverResult
from . import empty_rows, loop, steps

# the documented constants, read from this module at call time (so that they can be patched)
from .constants import (  # noqa: F401
    ARMIJO,
    CG_FORCING_FLOOR,
    CHORD_STOP,
    CONTRACTION,
    EXPAND_RATIO,
    EXPAND_STEPS,
    INTERPRET_MAX_ENTRIES,
    MAX_COMPILED_ENTRIES,
    MAX_COMPILED_FEATURES,
    MAX_COMPILED_ROWS,
    MIN_STEP,
    QN_CONTRACTION,
    QN_MEMORY,
    QN_REUSE_DECREMENT,
    RAY_LOG_RANGE,
    RAY_LOG_TOL,
    RAY_MIN_PARAMS,
    REFINE_MAXITER,
    REFINE_MIN_FEATURES,
    REFINE_REFRESH,
    REFINE_RTOL,
    REUSE_DECREMENT,
    RIDGE,
    ROW_SHORT_STEPS,
    ROW_TRIAL_STEPS,
    ROWS_SUBSAMPLE_STEP,
    SINGLE_MAX_COND,
    START_CG_RTOL,
    START_GRAM_ROWS,
    START_GRAM_ROWS_PER_PARAM,
    SUBSAMPLE_MAX_ITER,
    SUBSAMPLE_MIN_ROWS,
    SUBSAMPLE_STEP,
    TRAP_STEPS,
)

__all__ = ["LINALG", "applicable", "check_shared", "choose_linalg", "fit", "fit_path",
           "fit_problems", "ray_scale"]

#: linear-algebra back-ends of the Newton solver
LINALG = ("auto", "cholesky", "cg")


def applicable(problem):
    """Whether ``J`` of ``problem`` is twice differentiable, so Newton applies.

    True for the logistic and squared losses, and for the hinge / epsilon-insensitive
    losses when every example is noisy (their terms are smooth wherever ``s_n > 0``) or
    the examples without noise are empty rows (an all-zero row under dropout keeps
    ``s_n = 0`` and a kink in ``b`` alone: :mod:`.empty_rows` then finds the exact
    optimum); False for the latent design (full noise covariance: fitted by IRLS).

    Examples
    --------
    >>> from bayesdrop import Problem, HingeLoss, LogisticLoss, Dropout
    >>> X = np.eye(3); y = np.array([1.0, -1.0, 1.0])
    >>> applicable(Problem.create(X, y, HingeLoss(1.0), "none"))
    False
    >>> applicable(Problem.create(X, y, HingeLoss(1.0), Dropout(0.2)))
    True
    """
    from ...model.losses import Loss
    from ...model.losses.kernels import has_kernels

    design, loss, _ = problem
    second = has_kernels(loss) or type(loss).curvature is not Loss.curvature
    if not design.diagonal_noise or not second:
        return False  # a latent design, or a loss without second derivatives
    if loss.smooth or design.every_row_noisy:
        return True
    # quiet rows that are empty: their terms are piecewise linear in b alone, solved
    # exactly by :mod:`.empty_rows`
    return empty_rows.empty_rows(problem) is not None


def choose_linalg(design, linalg="auto"):
    """``"cholesky"`` (dense Hessian) up to :data:`MAX_CHOLESKY_PARAMS` parameters, else
    ``"cg"`` (matrix-free).

    Examples
    --------
    >>> from bayesdrop import Design
    >>> choose_linalg(Design(np.ones((4, 3)))), choose_linalg(Design(np.ones((4, 3))), "cg")
    ('cholesky', 'cg')
    """
    if linalg not in LINALG:
        raise ValueError(f"linalg must be one of {LINALG} for the Newton solver, got {linalg!r}")
    if linalg != "auto":
        return linalg
    return "cholesky" if design.n_params <= MAX_CHOLESKY_PARAMS else "cg"


def _subsample_applies(problem):
    from ...model.design import Design

    design = problem.design
    return type(design) is Design and design.n_samples >= SUBSAMPLE_MIN_ROWS


def start_row_step(design):
    """``k`` of the subsampled first factor (see :data:`START_GRAM_ROWS`; 1: all rows).

    Examples
    --------
    >>> from bayesdrop import Design
    >>> X = np.ones((10_000, 50))
    >>> start_row_step(Design(X, "dropout")), start_row_step(Design(X[:3000], "dropout"))
    (4, 1)
    """
    return steps.start_row_step(design, _factor_options())


def _factor_options():
    return steps.FactorOptions(RIDGE, SINGLE_MAX_COND, START_GRAM_ROWS,
                               START_GRAM_ROWS_PER_PARAM, REFINE_MIN_FEATURES, REFINE_RTOL,
                               REFINE_MAXITER, REFINE_REFRESH)


def _options(tol, max_iter, reuse, contraction=None, expand=True, bare_J=None,
             check_start=False):
    """The :class:`loop.NewtonOptions` of a run (``reuse`` and ``contraction``: see
    :func:`_reuse_rule`; ``contraction`` None: :data:`CONTRACTION`)."""
    contraction = CONTRACTION if contraction is None else contraction
    return loop.NewtonOptions(float(tol), int(max_iter), ARMIJO, MIN_STEP, float(reuse),
                              float(contraction), CHORD_STOP, EXPAND_STEPS if expand else 0,
                              EXPAND_RATIO, QN_MEMORY, CG_FORCING_FLOOR,
                              math.inf if bare_J is None else float(bare_J), int(TRAP_STEPS),
                              bool(check_start and bare_J is not None))


def _reuse_rule(design):
    """``(reuse, contraction)``: the decrement (relative to ``max(|J|, 1)``) below which a
    full step's factor is kept for the next direction, and the contraction a kept factor's
    directions must show -- :data:`QN_REUSE_DECREMENT` and :data:`QN_CONTRACTION` on a
    large dense design (a Hessian costs many steps), :data:`REUSE_DECREMENT` and
    :data:`CONTRACTION` elsewhere."""
    if QN_MEMORY and hess.single_applies(design):
        return QN_REUSE_DECREMENT, QN_CONTRACTION
    return REUSE_DECREMENT, CONTRACTION


def ray_scale(loss, y, m1, s1, w2):
    """``(alpha, J(alpha theta_1))``: the minimiser of ``J`` along the ray through
    ``theta_1`` (``w`` and ``b`` scaled together) from its scores ``(m_1, s_1)`` and
    ``||w_1||^2 = w2`` -- the scaled point's scores are ``alpha m_1`` and
    ``alpha^2 s_1``, so each evaluation costs the terms only, no product with ``X``.
    Golden-section search in ``log alpha`` over ``[-RAY_LOG_RANGE, RAY_LOG_RANGE]`` to a
    bracket of :data:`RAY_LOG_TOL` (``J`` is convex, so unimodal along the ray).

    Examples
    --------
    >>> from bayesdrop.model.losses import HingeLoss
    >>> m1, s1, y = np.array([2.0, -2.0]), np.zeros(2), np.array([1.0, -1.0])
    >>> alpha, J = ray_scale(HingeLoss(1.0), y, m1, s1, 1.0)  # a^2 + 4 max(0, 1 - 2a)
    >>> round(alpha, 1), round(J, 2)  # to the bracket: 0.5 and 0.25
    (0.5, 0.25)
    """
    def value(log_alpha):
        a = math.exp(log_alpha)
        return a * a * w2 + float(np.sum(loss.value(a * m1, a * a * s1, y)))

    g = 0.5 * (math.sqrt(5.0) - 1.0)
    lo, hi = -RAY_LOG_RANGE, RAY_LOG_RANGE
    c, d = hi - g * (hi - lo), lo + g * (hi - lo)
    fc, fd = value(c), value(d)
    while hi - lo > RAY_LOG_TOL:
        if fc <= fd:
            hi, d, fd = d, c, fc
            c = hi - g * (hi - lo)
            fc = value(c)
        else:
            lo, c, fc = c, d, fd
            d = lo + g * (hi - lo)
            fd = value(d)
    return (math.exp(c), fc) if fc <= fd else (math.exp(d), fd)


#: design -> ``(rho, factor)`` of the last IRLS start on it (:func:`_start_factor`),
#: kept while the design lives
_START_FACTORS = weakref.WeakKeyDictionary()
_START_LOCK = threading.Lock()


def _start_factor(design, rho):
    """The Cholesky factor of the IRLS start's system ``A(rho)`` at ``w = 0`` (on a large
    dense design from float32 products of a row subsample, :data:`START_GRAM_ROWS`).

    The one-vs-rest problems of a classifier share their design, and at ``w = 0`` the
    hinge's weights ``rho_n = C w_n / |1 - y_n 0|`` do not depend on the labels: the
    classes' starts solve one system with different right-hand sides. So the factor of
    the last start on a design is kept (weakly: with the design) and reused for equal
    weights. Measured (the whole fit, 10 classes, hinge): Fashion-MNIST 4000 x 784 at
    q = 0.5 ten 24 ms factors -> one; digits 1797 x 64 at q = 0.2 ten 0.7 ms ones -> one.

    Examples
    --------
    >>> from bayesdrop import Design
    >>> design = Design(np.random.default_rng(0).normal(size=(50, 3)), "dropout")
    >>> first = _start_factor(design, np.full(50, 0.1))
    >>> _start_factor(design, np.full(50, 0.1)) is first  # the same weights: reused
    True
    >>> _start_factor(design, np.full(50, 0.2)) is first
    False
    """
    from ...linalg.wls import normal_matrix

    def make():
        A = normal_matrix(design, rho, single=hess.single_applies(design),
                          row_step=start_row_step(design))  # row step 1 unless single
        return steps.cho_factor(A, RIDGE)

    return _kept_factor(_START_FACTORS, design, rho, make)


def _kept_factor(cache, design, rho, make):
    """The factor kept in ``cache`` for ``design`` if it was made for the weights ``rho``,
    else ``make()``, kept in its place (one per design, while the design lives)."""
    with _START_LOCK:
        kept = cache.get(design)
    if kept is not None and np.array_equal(kept[0], rho):
        return kept[1]
    factor = make()
    with _START_LOCK:
        cache[design] = (np.array(rho, copy=True), factor)
    return factor


def _irls_start(problem, linalg, cg_maxiter):
    """One IRLS map from zero (a start where the piecewise-linear terms are smooth; with
    Cholesky the factor shared by the problems on one design, :func:`_start_factor`),
    only a starting point, kept only if it does not raise ``J``. On a large dense design
    (``hessian.single_applies``) its Gram product in float32, and with
    :data:`RAY_MIN_PARAMS` parameters or more the point scaled to the lowest ``J`` along
    its ray (:func:`ray_scale`, see :data:`RAY_LOG_RANGE`); with ``linalg="cg"`` its
    system ``A theta = r`` solved by the compiled Newton-CG loop to :data:`START_CG_RTOL`
    (``A`` is ``H`` at ``w = 0`` with ``d_mm = rho``: no noise cross terms there).
    Returns ``(theta, m, s)`` with the scores ``(m, s)`` at ``theta`` (at zero they are
    zero: no pass over the data)."""
    from ...linalg.wls import normal_rhs
    from ..irls import irls_map

    design, loss, y = problem
    zero, zeros = np.zeros(design.n_params), np.zeros(design.n_samples)
    if linalg in ("cholesky", "cg"):
        rho, t = loss.irls_weights(zeros, zeros, y)
    if linalg == "cholesky":
        theta = sla.cho_solve(_start_factor(design, rho), normal_rhs(design, t),
                              check_finite=False)
    elif linalg == "cg":
        curv = hess.Curvature(zero[:design.n_features], zeros, zeros, rho, zeros, zeros,
                              design.noise_rmatvec(rho))
        theta = steps.direction_cg(design, curv, -normal_rhs(design, t), START_CG_RTOL,
                                   cg_maxiter, RIDGE)[0]
    else:
        theta = irls_map(problem, zero, linalg=linalg)[0]
    m, s = design.scores(theta)
    w = theta[:design.n_features]
    if (linalg == "cholesky" and hess.single_applies(design)
            and design.n_params >= RAY_MIN_PARAMS):
        alpha, J = ray_scale(loss, y, m, s, float(w @ w))
        theta, m, s = alpha * theta, alpha * m, alpha * alpha * s
    else:
        J = penalised(w, loss.value(m, s, y))
    if J <= penalised(zero[:0], loss.value(zeros, zeros, y)):
        return theta, m, s
    return zero, zeros, zeros


def _dense_arrays(design, compiled="auto"):
    """``(X, M, scale)`` for the compiled dense loop, or None."""
    if design.sparse:
        return None
    if compiled == "auto" and (design.n_samples > MAX_COMPILED_ROWS
                               or design.n_features > MAX_COMPILED_FEATURES
                               or design.n_samples * design.n_features
                               > MAX_COMPILED_ENTRIES):
        return None
    return design.dense_kernel_arrays()


def _compiled_inputs(problem, linalg, compiled):
    """``(lp, (X, M, scale))`` for the compiled dense loop (:func:`fit` and
    :func:`fit_path`), or None where it does not apply: not Cholesky, ``compiled=False``,
    ``"auto"`` while the kernels run interpreted, a sparse or (``"auto"``) large design,
    a loss without compiled kernels (a non-smooth one: without its ``mean`` kernel, which
    the IRLS start needs)."""
    from ...model.losses.kernels import has_kernels, kernels_of

    if not _compiled_allowed(linalg, "cholesky", compiled):
        return None
    loss = problem.loss
    lp, arrays = loss.kernel_params, _dense_arrays(problem.design, compiled)
    if arrays is None or kernels_of(lp) is None or not (loss.smooth
                                                        or has_kernels(loss, "mean")):
        return None
    return lp, arrays


def _compiled_allowed(linalg, lane, compiled):
    """Whether a compiled loop for ``linalg == lane`` may run: ``compiled`` is not False,
    and with ``"auto"`` the kernels are not running interpreted."""
    return linalg == lane and bool(compiled) and not (compiled == "auto"
                                                      and _jit.interpreting())


def _labels_and_weights(problem):
    """``(y, sw)`` as the compiled loops take them (float64 labels; sample weights, ones
    where the loss has none)."""
    n = problem.design.n_samples
    sw = np.ones(n) if problem.loss.weights is None else problem.loss.weights
    return np.ascontiguousarray(problem.y, dtype=np.float64), sw


def _compiled_args(problem, theta, lp, arrays, opts):
    """The arguments of :func:`.compiled.newton_dense`: with float32 Hessian products
    (``sgram``) where the Python loop would use them (``hessian.single_applies``: a
    dense design with noise and ``HESSIAN_BLOCKED_MIN`` entries or more), under the same
    guard (:data:`SINGLE_MAX_COND`)."""
    from ..._blas import dpotrf_address, gram_pair, gram_pair_single

    X, M, scale = arrays
    y, sw = _labels_and_weights(problem)
    sgram = gram_pair_single() if hess.single_applies(problem.design) else (0, 0)
    return (lp, X, M, float(scale), problem.design.fit_intercept, y, sw, theta, opts,
            gram_pair(), dpotrf_address(), RIDGE, sgram, float(SINGLE_MAX_COND))


#: the argument kinds (loss parameter type, IRLS start, layouts) for which the compiled
#: loop is known to be at hand in this process (:func:`_compiled_ready`)
_READY = set()
#: the argument kinds found neither compiled nor in the on-disk cache, with the number of
#: machine codes the loop had then: looked up on disk again only once that number changed
#: (a lookup reads the cache index, about a millisecond -- once per fit on a CV path)
_MISSING = {}


def _compiled_ready(args, irls_start):
    """Whether the compiled loop (and the compiled IRLS start) for these arguments runs
    without compiling (see ``compiled`` of :func:`fit`)."""
    from .compiled import irls_start_factored, newton_dense, start_factor, start_weights

    def runs():  # the calls to look up (sample arguments of the start's types)
        out = [(newton_dense, args)]
        if irls_start:
            lp, X, M, scale, fi, y, sw = args[:7]
            rho = np.ones(y.shape[0])
            L = np.eye(args[7].shape[0])
            out += [(start_weights, (lp, y, sw)),
                    (start_factor, (X, M, scale, fi, rho, L.shape[0], args[9], args[10])),
                    (irls_start_factored, (*args[:7], L))]
        return out

    return _at_hand(("fit", irls_start), args, runs)


def _at_hand(tag, args, runs):
    """Whether every ``(dispatcher, arguments)`` of ``runs`` (a list, or a function that
    makes it: called only where the answer is not remembered yet) has machine code
    without compiling (:func:`.compiled.ready`), remembered per ``tag`` and argument kinds
    (the loss parameter type, the layouts of ``X`` and ``M`` in ``args``; ``M`` None:
    formed from ``X``)."""
    from .compiled import ready

    key = (tag, type(args[0])) + tuple(
        None if a is None else (a.flags.c_contiguous, a.flags.writeable, a.dtype.str)
        for a in args[1:3])
    if key in _READY:
        return True
    if callable(runs):
        runs = runs()

    def n_codes():
        return sum(len(dispatcher.overloads) for dispatcher, _ in runs)

    if _MISSING.get(key) == n_codes():
        return False
    if all(ready(dispatcher, *a) for dispatcher, a in runs):
        _READY.add(key)
        return True
    _MISSING[key] = n_codes()
    return False


#: design -> ``(rho, factor)`` of the last compiled IRLS start from zero on it
#: (:func:`_compiled_start`), kept while the design lives
_COMPILED_STARTS = weakref.WeakKeyDictionary()


def _compiled_start(design, args):
    """The compiled IRLS map from zero (``args``: :func:`_compiled_args` at zero) with the
    factor of its system shared by the problems on one design whose weights at zero are
    equal -- the one-vs-rest problems of a hinge classifier (the weights ``C w_n`` do not
    depend on the labels at zero, as for :func:`_start_factor`): one ``dsyrk`` and
    Cholesky factor for all classes instead of one per class (digits 10 classes, hinge:
    0.56 ms of a class's start, about 0.4 of it the factor). The same point as a map
    that factors its own system, bit for bit."""
    from .compiled import irls_start_factored, start_factor, start_weights

    lp, X, M, scale, fi, y, sw = args[:7]
    rho = start_weights(lp, y, sw)
    L = _kept_factor(_COMPILED_STARTS, design, rho, lambda: start_factor(
        X, M, scale, fi, rho, args[7].shape[0], args[9], args[10]))
    return irls_start_factored(*args[:7], L)


def _run_compiled(args, irls_start, design):
    """The loop compiled (:mod:`.compiled`); with ``irls_start`` (``theta`` zero) one
    compiled IRLS map from zero first (:func:`_compiled_start`)."""
    from .compiled import newton_dense

    if irls_start:
        theta = _compiled_start(design, args)
        args = args[:7] + (theta,) + args[8:]
    return newton_dense(*args)


def _run_csr(problem, theta, scores, linalg, compiled, opts, cg_maxiter):
    """Newton-CG's loop compiled for a CSR design (:mod:`.compiled_csr`) from ``theta``
    (whose scores are ``scores``, or None), or None where it does not apply (not CG,
    ``compiled=False``, interpreted kernels, a design without compiled row passes, a loss
    without compiled kernels) or, with ``"auto"``, is not at hand."""
    from ...linalg.kernels import row_chunks, threads_arg
    from ...model.losses.kernels import kernels_of

    design, loss, _ = problem
    if not _compiled_allowed(linalg, "cg", compiled):
        return None
    arrays = design.row_kernel_arrays() if design.sparse else None
    lp = loss.kernel_params
    if arrays is None or arrays[0] != "csr" or kernels_of(lp) is None:
        return None
    if scores is None:  # at zero they are zero: no pass over the data
        scores = (design.scores(theta) if theta.any()
                  else (np.zeros(design.n_samples), np.zeros(design.n_samples)))
    from .compiled_csr import newton_csr

    chunks = row_chunks(arrays[1][0])
    args = (lp, *arrays[1], float(arrays[2]), design.fit_intercept, design.n_features,
            *_labels_and_weights(problem), theta,
            *(np.ascontiguousarray(a, dtype=np.float64) for a in scores), opts, RIDGE,
            int(cg_maxiter), chunks, threads_arg(chunks, numba_threads()) is True)
    if compiled is not True and not _at_hand("csr", args, [(newton_csr, args)]):
        return None
    return newton_csr(*args)


def _result(out, start, linalg, warn, max_iter, tol, n_passes=0):
    """The :class:`SolverResult` of :func:`loop.newton_loop`'s output ``out``."""
    theta, _, g, history, it, status, n_factors = out
    if status == loop.NONFINITE_START:
        raise FloatingPointError("J is not finite at the starting point")
    if status == loop.NONFINITE_DIRECTION:
        raise FloatingPointError(f"the Newton direction is not finite at iteration {it}")
    converged = status == loop.CONVERGED
    if warn and status == loop.STALLED:
        warnings.warn("Newton stalled: its decrement reached the tolerance while the "
                      "gradient stayed large (a point where J is nearly not twice "
                      "differentiable); solver='auto' continues with IRLS",
                      ConvergenceWarning, stacklevel=3)
    elif warn and not converged:
        warnings.warn(f"Newton did not converge in max_iter={max_iter} iterations "
                      f"(tol={tol:g})", ConvergenceWarning, stacklevel=3)
    return SolverResult(theta, np.asarray(history), int(it), converged,
                        float(np.max(np.abs(g), initial=0.0)), time.perf_counter() - start,
                        "newton", n_factors, linalg, status == loop.STALLED, n_passes)


@with_single_blas_pool
def fit(problem, theta0=None, *, tol=1e-8, max_iter=100, linalg="auto", warn=True,
        cg_maxiter=None, compiled="auto", bare_J=None, check_start=False):
    """Minimise ``J`` by Newton's method with a backtracking line search.

    Parameters
    ----------
    problem : Problem
        With a twice-differentiable ``J`` (see :func:`applicable`).
    theta0 : ndarray of shape (n_params,), optional
        Starting point (warm start). By default zeros, or for the hinge and
        epsilon-insensitive losses one IRLS map from zero (at ``w = 0`` their terms sit on
        their kinks, where ``H`` is singular); from :data:`SUBSAMPLE_MIN_ROWS` examples on,
        the optimum of a subsample, whose last Cholesky factor also directs the first
        steps on all the data (``n_iter`` and ``n_solves`` then count the steps and
        Hessians on all the data).
    tol : float > 0
        Stop after the step whose Newton decrement satisfies
        ``lambda^2 / 2 <= tol * max(|J|, 1)``.
    max_iter : int >= 1
        Maximum Newton steps on all rows (the subsample start takes up to
        ``max(max_iter, SUBSAMPLE_MAX_ITER)`` of its own, so that ``max_iter=k`` stops the
        same iteration after its ``k``-th step).
    linalg : {"auto", "cholesky", "cg"}
        Dense Hessian and Cholesky, or matrix-free preconditioned CG (see
        :func:`choose_linalg`).
    warn : bool
        Emit a :class:`~sklearn.exceptions.ConvergenceWarning` if ``max_iter`` is reached.
    cg_maxiter : int, optional
        CG iterations per Newton step; default ``min(n_params, 250)``.
    compiled : {"auto", True, False}
        With ``linalg="cholesky"`` and a dense design, run the whole loop compiled
        (:mod:`bayesdrop.solvers.newton.compiled`: the same loop without Python between
        the steps; ``True`` compiles it if needed, about 10 s once per machine); with
        ``linalg="cg"`` and a CSR design whose noise variance has ``X``'s sparsity
        pattern, likewise Newton-CG's loop (:mod:`.compiled_csr`, about 7 s per loss).
        ``"auto"``: for dense designs up to :data:`MAX_COMPILED_ROWS` rows,
        :data:`MAX_COMPILED_FEATURES` features and :data:`MAX_COMPILED_ENTRIES` entries
        in ``X``, and only when its machine code is at hand -- compiled earlier
        in this process or held by numba's on-disk cache (``python -m bayesdrop
        compile`` puts it there) -- otherwise the same iteration runs in Python, which
        compiles next to nothing (a first fit in seconds rather than half a minute) --
        also under :func:`bayesdrop._jit.interpreted` while numba is not loaded.
        The two agree to rounding (the same steps; sums in a different order).
    bare_J : float, optional
        ``J`` of the best bare model ``(0, b)``: from :data:`TRAP_STEPS` steps on,
        an iterate still above it after a step the line search cut stops the run as a
        stall (``stalled=True``; see :func:`bayesdrop.solvers.fit_problem`).
    check_start : bool, default=False
        With ``bare_J``: a start (``theta0``, or the point computed from zero) whose
        ``J`` is at least ``bare_J`` stops the run before its first step, as a stall with
        ``n_iter = 0`` (where the bare model is the optimum no point lies below it:
        :func:`bayesdrop.solvers.fit_problem` then tries its certificate first).

    Returns
    -------
    SolverResult
        ``n_iter`` counts the steps, ``n_solves`` the Hessians (Cholesky) or CG solves
        (0 when the subsample's factor sufficed).

    Examples
    --------
    >>> from bayesdrop import Problem, LogisticLoss, Dropout
    >>> from bayesdrop.solvers import irls, newton
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 4)); y = np.sign(X[:, 0] + 0.5 * rng.normal(size=200))
    >>> problem = Problem.create(X, y, LogisticLoss(1.0), Dropout(0.3))
    >>> res = newton.fit(problem)
    >>> res.converged, res.n_iter < 10
    (True, True)
    >>> ref = irls.fit(problem, tol=1e-14)  # the IRLS fixed point is the same optimum
    >>> bool(abs(res.objective[-1] - ref.objective[-1]) <= 1e-10 * ref.objective[-1])
    True
    """
    # a sparse design's products run on numba's threads: numpy's BLAS on one thread
    # meanwhile (its idle workers spin and take the cores: newsgroups hinge 35 -> 65 ms)
    with one_blas_thread() if problem.design.sparse and numba_threads() else nullcontext():
        return _fit(problem, theta0, tol=tol, max_iter=max_iter, linalg=linalg, warn=warn,
                    cg_maxiter=cg_maxiter, compiled=compiled, bare_J=bare_J,
                    check_start=check_start)


def _fit(problem, theta0=None, *, tol=1e-8, max_iter=100, linalg="auto", warn=True,
         cg_maxiter=None, compiled="auto", bare_J=None, check_start=False):
    tol = check_scalar(tol, "tol", min_val=0.0, include_min=False)
    max_iter = check_scalar(max_iter, "max_iter", min_val=1, max_val=MAX_ITER, integer=True)
    if not applicable(problem):
        raise ValueError(
            f"J of this problem is not twice differentiable (the {problem.loss.name} loss "
            "with an example of zero noise variance, or a latent design); use the IRLS "
            "solver"
        )
    design, loss, y = problem
    linalg = choose_linalg(design, linalg)
    p_dim = design.n_params
    cg_maxiter = min(p_dim, 250) if cg_maxiter is None else int(cg_maxiter)
    start = time.perf_counter()
    factor0 = None
    compiled_run = _compiled_inputs(problem, linalg, compiled)
    if compiled_run is None and compiled is True and linalg == "cholesky":
        raise ValueError("compiled=True needs a dense design and a loss with compiled "
                         "kernels")
    if theta0 is None and _subsample_applies(problem):
        # many rows: start from the optimum of every SUBSAMPLE_STEP-th example (weighted
        # SUBSAMPLE_STEP, the same J in expectation); the subsample's Hessian there directs
        # the first steps on all rows (kept factor: often no Hessian of all rows is needed)
        sub_problem = subsample_rows(problem, SUBSAMPLE_STEP)
        sub = _fit(sub_problem, tol=tol, max_iter=max(max_iter, SUBSAMPLE_MAX_ITER),
                   linalg=linalg, warn=False, cg_maxiter=cg_maxiter, compiled=compiled)
        theta0 = sub.theta
        if linalg == "cholesky":
            _, _, sub_curv = hess.curvature(sub_problem, theta0)
            factor0 = steps.factor_cholesky(sub_problem.design, sub_curv, _factor_options(),
                                            hess.single_applies(sub_problem.design))[0]
    # at w = 0 every score variance is 0: a non-smooth loss's terms sit on their kinks and
    # the Hessian is singular. One IRLS map (a weighted least-squares solve; with CG an
    # approximate one) moves to a point where the terms are smooth, kept only if it does
    # not raise J (below: compiled, or _irls_start)
    scores = None
    if theta0 is None:
        theta = np.zeros(p_dim)
    else:
        theta = np.array(theta0, dtype=float, copy=True)
    if theta.shape != (p_dim,):
        raise ValueError(f"theta0 must have shape ({p_dim},), got {theta.shape}")
    opts = _options(tol, max_iter, *_reuse_rule(design), bare_J=bare_J,
                    check_start=check_start)
    irls_start = theta0 is None and not loss.smooth
    out = None
    if compiled_run is not None:
        args = _compiled_args(problem, theta, *compiled_run, opts)
        if compiled is True or _compiled_ready(args, irls_start):
            out = _run_compiled(args, irls_start, design)
        else:  # "auto": not compiled yet -- the same loop in Python, nothing to compile
            compiled_run = None
    if compiled_run is None:
        if irls_start and scores is None:
            theta, *scores = _irls_start(problem, linalg, cg_maxiter)
        out = _run_csr(problem, theta, scores, linalg, compiled, opts, cg_maxiter)
    if out is None:
        single = linalg == "cholesky" and hess.single_applies(design)
        ev = steps.DesignSteps(problem, linalg, _factor_options(), cg_maxiter=cg_maxiter,
                               single=single, factor=factor0, scores=scores)
        out = loop.newton_loop(ev, theta, opts, factor0 is None)
    if check_start and out[4] == 0 and out[5] == loop.STALLED:
        # stopped at its start by check_start: the caller goes on (from there, without
        # the check: then the empty rows' treatment too)
        return _result(out, start, linalg, False, max_iter, tol)
    if out[5] != loop.CONVERGED and not (loss.smooth or design.every_row_noisy):
        out = _empty_rows(problem, out, opts, linalg, cg_maxiter)
    return _result(out, start, linalg, warn, max_iter, tol)


def fit_path(problem, Cs, theta0, previous=None, *, tol=1e-8, max_iter=100, bare_Js=None,
             compiled="auto"):
    """Newton at each ``C`` of ``Cs`` in turn in one compiled call: the fits of a
    regularisation path on a small dense design, without Python between them.

    Each run is :func:`fit`'s compiled loop on ``problem`` with its loss at that ``C``,
    from the start :func:`bayesdrop.solvers.fit_path` documents (``theta0``, then the
    previous run's point, moved by the difference of ``previous``'s rows where given);
    the same iteration, so the same result as :func:`fit` from that start. The call stops
    after the first run that does not converge (its caller goes on from there).

    Parameters
    ----------
    problem : Problem
        Twice differentiable (:func:`applicable`); its loss's ``C`` is not used.
    Cs : array-like of float
    theta0 : ndarray of shape (n_params,)
    previous : ndarray of shape (len(Cs), n_params), optional
    tol, max_iter : see :func:`fit`
    bare_Js : array-like of float, optional
        ``bare_J`` of :func:`fit` at each ``C`` (None: no trap check).
    compiled : {"auto", True}
        As :func:`fit`'s: ``"auto"`` only where the machine code is at hand.

    Returns
    -------
    list of SolverResult or None
        One per run made (``time``: the call's time over the runs), or None where the
        compiled loop does not apply (a sparse or large design, a loss without compiled
        kernels, interpreted kernels) or, with ``"auto"``, is not at hand.

    Examples
    --------
    Each run is the compiled :func:`fit` from its start:

    >>> from bayesdrop import Problem, LogisticLoss
    >>> features = np.random.default_rng(3).normal(size=(90, 2))
    >>> labels = np.where(features.sum(axis=1) > 0.5, 1.0, -1.0)
    >>> problem = Problem.create(features, labels, LogisticLoss(1.0), "dropout")
    >>> runs = fit_path(problem, [1.0, 4.0], np.zeros(3), compiled=True)
    >>> alone = fit(problem._replace(loss=LogisticLoss(4.0)), runs[0].theta, compiled=True)
    >>> [r.converged for r in runs], bool(np.array_equal(runs[1].theta, alone.theta))
    ([True, True], True)
    """
    tol = check_scalar(tol, "tol", min_val=0.0, include_min=False)
    max_iter = check_scalar(max_iter, "max_iter", min_val=1, max_val=MAX_ITER, integer=True)
    design = problem.design
    inputs = (_compiled_inputs(problem, choose_linalg(design), compiled)
              if applicable(problem) else None)
    if inputs is None:
        return None
    lp, arrays = inputs
    Cs = np.ascontiguousarray(Cs, dtype=np.float64)
    p_dim = design.n_params
    theta = np.array(theta0, dtype=np.float64, copy=True)
    if theta.shape != (p_dim,):
        raise ValueError(f"theta0 must have shape ({p_dim},), got {theta.shape}")
    previous = (np.empty((0, p_dim)) if previous is None
                else np.ascontiguousarray(previous, dtype=np.float64))
    if previous.shape[0] and previous.shape != (Cs.size, p_dim):
        raise ValueError(f"previous must have shape ({Cs.size}, {p_dim}), got "
                         f"{previous.shape}")
    bare_Js = (np.full(Cs.size, math.inf) if bare_Js is None
               else np.ascontiguousarray(bare_Js, dtype=np.float64))
    opts = _options(tol, max_iter, *_reuse_rule(design))
    args = _compiled_args(problem, theta, lp, arrays, opts)
    path_args = args[:7] + (Cs, theta, previous, opts, bare_Js) + args[9:]
    from .compiled import newton_dense_path

    if compiled is not True and not _at_hand("path", args, [(newton_dense_path, path_args)]):
        return None
    start = time.perf_counter()
    k, thetas, J, grad_norm, n_iter, n_factors, status, histories = \
        newton_dense_path(*path_args)
    share = (time.perf_counter() - start) / k
    return [_result((thetas[i], J[i], grad_norm[i: i + 1], histories[i, : n_iter[i] + 1],
                     int(n_iter[i]), int(status[i]), int(n_factors[i])),
                    time.perf_counter() - share, "cholesky", False, max_iter, tol)
            for i in range(k)]


def check_shared(problems):
    """A ``ValueError`` unless ``problems`` share one design and one loss (the one-vs-rest
    problems of :func:`fit_problems`)."""
    design, loss = problems[0].design, problems[0].loss
    if any(pr.design is not design or pr.loss is not loss for pr in problems):
        raise ValueError("problems must share one design and one loss")


#: :func:`fit_problems` fits its problems in compiled calls of at most this many entries of
#: ``X`` in all (``N x D`` per problem; at least one problem a call)
PROBLEMS_CALL_ENTRIES = 4_000_000


def fit_problems(problems, *, tol=1e-8, max_iter=100, warn=True, bare_Js=None,
                 check_start=False, compiled="auto"):
    """:func:`fit` from zero on each of ``problems`` -- problems on one small dense design
    with one loss, differing in their labels (the one-vs-rest problems of a classifier)
    -- in one compiled call (:func:`.compiled.newton_dense_problems`): the same runs as
    :func:`fit` on each, without Python between them (whose code, run between compiled
    fits, finds the caches cold: digits 10 classes, about 0.3 ms a class).

    Parameters
    ----------
    problems : list of Problem
        Sharing one design and one loss (twice differentiable: :func:`applicable`), none
        of them with quiet rows unless the loss is smooth (:func:`fit` treats those
        after its loop).
    tol, max_iter, warn : as :func:`fit`'s
    bare_Js : array-like of float, optional
        ``bare_J`` of :func:`fit` for each problem (None: no trap check).
    check_start : bool
        As :func:`fit`'s (with ``bare_Js``).
    compiled : {"auto", True}
        As :func:`fit`'s: ``"auto"`` only where the machine code is at hand.

    Returns
    -------
    list of SolverResult or None
        One per problem (``time``: the call's time over the problems), or None where
        the compiled loop does not apply or, with ``"auto"``, is not at hand.

    Examples
    --------
    >>> from bayesdrop import Problem, HingeLoss
    >>> features = np.random.default_rng(3).normal(size=(90, 2))
    >>> labels = np.where(features.sum(axis=1) > 0.5, 1.0, -1.0)
    >>> one = Problem.create(features, labels, HingeLoss(1.0), "dropout")
    >>> runs = fit_problems([one, one._replace(y=-labels)], compiled=True)
    >>> alone = fit(one._replace(y=-labels), compiled=True)
    >>> bool(np.array_equal(runs[1].theta, alone.theta)), runs[1].n_iter == alone.n_iter
    (True, True)
    """
    tol = check_scalar(tol, "tol", min_val=0.0, include_min=False)
    max_iter = check_scalar(max_iter, "max_iter", min_val=1, max_val=MAX_ITER, integer=True)
    check_shared(problems)
    problem = problems[0]
    design, loss = problem.design, problem.loss
    inputs = (_compiled_inputs(problem, choose_linalg(design), compiled)
              if applicable(problem) and (loss.smooth or design.every_row_noisy) else None)
    if inputs is None:
        return None
    lp, arrays = inputs
    pairs = [_labels_and_weights(pr) for pr in problems]
    Y = np.ascontiguousarray([y for y, _ in pairs])
    SW = np.ascontiguousarray([sw for _, sw in pairs])
    bare_Js = (np.full(len(problems), math.inf) if bare_Js is None
               else np.ascontiguousarray(bare_Js, dtype=np.float64))
    opts = _options(tol, max_iter, *_reuse_rule(design), bare_J=0.0 if check_start else None,
                    check_start=check_start)
    irls_start = not loss.smooth
    args = _compiled_args(problem, np.zeros(design.n_params), lp, arrays, opts)
    many_args = args[:5] + (Y, SW, irls_start, opts, bare_Js) + args[9:]
    from .compiled import newton_dense_problems

    if compiled is not True and not _at_hand(("problems", irls_start), args,
                                             [(newton_dense_problems, many_args)]):
        return None
    start = time.perf_counter()
    # calls of at most PROBLEMS_CALL_ENTRIES entries of X in all (at least one problem):
    # back in Python often enough for Ctrl-C (a call of digits' 10 classes: about 15 ms)
    step = max(1, PROBLEMS_CALL_ENTRIES // max(design.n_samples * design.n_features, 1))
    parts = [newton_dense_problems(*args[:5], Y[k: k + step], SW[k: k + step], irls_start,
                                   opts, bare_Js[k: k + step], *args[9:])
             for k in range(0, len(problems), step)]
    thetas, J, grad_norm, n_iter, n_factors, status, histories = (
        np.concatenate([part[i] for part in parts]) for i in range(7))
    share = (time.perf_counter() - start) / len(problems)
    return [_result((thetas[k], J[k], grad_norm[k: k + 1], histories[k, : n_iter[k] + 1],
                     int(n_iter[k]), int(status[k]), int(n_factors[k])),
                    time.perf_counter() - share, "cholesky",
                    warn and not (check_start and n_iter[k] == 0), max_iter, tol)
            for k in range(len(problems))]


def _empty_rows(problem, out, opts, linalg, cg_maxiter):
    """Newton's output ``out`` on a problem whose empty rows keep kinks in ``b``: the
    certified optimum of :func:`.empty_rows.solve` when it finds one, else ``out``."""
    rows = empty_rows.empty_rows(problem)
    if rows is None:
        return out

    def rerun(theta):
        ev = steps.DesignSteps(problem, linalg, _factor_options(), cg_maxiter=cg_maxiter)
        return loop.newton_loop(ev, theta, opts, True)

    solved = empty_rows.solve(problem, rows, out, rerun, linalg=linalg,
                              cg_maxiter=cg_maxiter, opts=opts,
                              factor_opts=_factor_options())
    return out if solved is None else solved


@with_single_blas_pool
def fit_rows(rows, theta0=None, *, tol=1e-8, max_iter=100, warn=True, bare_J=None):
    """Newton's method through a row back-end: one pass over the data per step.

    The same iteration and stopping rule as :func:`fit` with ``linalg="cholesky"``, but
    every sum over rows comes from ``rows`` (:mod:`bayesdrop.linalg.backend`): one pass
    returns ``J``, the gradient and the ``D x D`` Hessian at the trial point
    ``theta + p`` together with ``J`` at ``theta + t p`` for ``t`` in
    :data:`ROW_TRIAL_STEPS` (1/2 to 1/16). When the full step satisfies the Armijo
    condition (always near the optimum) the next Newton system is already there;
    otherwise the longest acceptable ``t`` is taken (if none of these is, one
    objective-only pass tries :data:`ROW_SHORT_STEPS`) and one more pass computes the
    system at the new point.
    This is how the dask back-end fits: per step, the workers send back one
    ``(D + 1) x (D + 1)`` matrix per chunk and the client solves. From
    :data:`SUBSAMPLE_MIN_ROWS` rows on it starts, like :func:`fit`, from the optimum of
    every :data:`ROWS_SUBSAMPLE_STEP`-th row of each block (``RowBackend.subsample``; those
    passes read the same blocks and are counted in ``n_passes``).

    Parameters
    ----------
    rows : RowBackend
    theta0 : ndarray of shape (n_params,), optional
        Default: zeros, or one IRLS map from zeros for the hinge and epsilon-insensitive
        losses (their Hessian is singular at ``w = 0``).
    tol : float > 0
        Stop after the step whose Newton decrement satisfies
        ``lambda^2 / 2 <= tol * max(|J|, 1)``.
    max_iter : int >= 1
    warn : bool
    bare_J : float, optional
        ``J`` of the best bare model: the early trap check of :func:`fit` (from
        :data:`TRAP_STEPS` steps on, an iterate still above it after a cut step ends the
        run as a stall).

    Returns
    -------
    SolverResult
        ``n_solves`` counts the Hessians solved, ``n_passes`` the passes over the data.

    Examples
    --------
    >>> from bayesdrop import Problem, LogisticLoss, Dropout
    >>> from bayesdrop.linalg.backend import InMemoryRows
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 4)); y = np.sign(X[:, 0] + 0.5 * rng.normal(size=200))
    >>> problem = Problem.create(X, y, LogisticLoss(1.0), Dropout(0.3))
    >>> a, b = fit_rows(InMemoryRows(problem)), fit(problem)
    >>> bool(abs(a.objective[-1] - b.objective[-1]) <= 1e-13 * b.objective[-1])
    True
    >>> bool(np.allclose(a.theta, b.theta, rtol=1e-7, atol=1e-10))
    True
    """
    tol = check_scalar(tol, "tol", min_val=0.0, include_min=False)
    max_iter = check_scalar(max_iter, "max_iter", min_val=1, max_val=MAX_ITER, integer=True)
    loss = rows.loss
    if not (rows.diagonal_noise and (loss.smooth or rows.every_row_noisy)):
        raise ValueError(
            f"J of this problem is not twice differentiable (the {loss.name} loss with an "
            "example of zero noise variance); use the IRLS solver")
    start = time.perf_counter()
    p_dim = rows.n_params
    passes = rows.n_passes if hasattr(rows, "n_passes") else 0
    if theta0 is None and rows.n_samples >= SUBSAMPLE_MIN_ROWS:
        # as in fit: start from the optimum of every ROWS_SUBSAMPLE_STEP-th row of each
        # block (its passes touch 1 / ROWS_SUBSAMPLE_STEP of the rows)
        theta0 = fit_rows(rows.subsample(ROWS_SUBSAMPLE_STEP), tol=tol,
                          max_iter=max(max_iter, SUBSAMPLE_MAX_ITER), warn=False).theta
    if theta0 is None:
        theta = np.zeros(p_dim)
        if not loss.smooth:  # one IRLS map off the kinks at w = 0 (see :func:`fit`)
            J0, A, r = rows.irls(theta)
            cand = sla.cho_solve(sla.cho_factor(A, lower=True, check_finite=False), r,
                                 check_finite=False)
            if float(rows.objective(cand)[0]) <= J0:
                theta = cand
    else:
        theta = np.array(theta0, dtype=float, copy=True)
        if theta.shape != (p_dim,):
            raise ValueError(f"theta0 must have shape ({p_dim},), got {theta.shape}")
    ev = steps.RowSteps(rows, RIDGE, ROW_TRIAL_STEPS, ROW_SHORT_STEPS)
    out = loop.newton_loop(ev, theta, _options(tol, max_iter, 0.0, expand=False,
                                               bare_J=bare_J), True)
    n_passes = (rows.n_passes - passes) if hasattr(rows, "n_passes") else 0
    return _result(out, start, "cholesky", warn, max_iter, tol, n_passes=n_passes)
