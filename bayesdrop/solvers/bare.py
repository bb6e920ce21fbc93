"""How far the bare model ``theta = (0, b)`` is from the optimum: a duality-gap bound.

At ``w = 0`` every score variance ``s_n = v_n . (w * w)`` vanishes. An example whose mean
score ``b`` sits on a kink of its term (the hinge's margin, an edge of the
epsilon-insensitive tube) then contributes ``C ||(zeta_n(theta), D_n w)||`` with
``D_n = diag(sqrt(v_n))``: a group-lasso penalty on ``w``. ``J`` is not differentiable at
the bare model, ``w = 0`` can be the exact optimum (digits 8-vs-rest, hinge, dropout 0.2,
C = 0.1), and Newton and IRLS only creep towards it.

**The bound.** ``J(theta) = ||w||^2 + F(theta)`` with ``F`` convex. For any subgradient
``g`` of ``F`` at the bare point ``(0, b)`` with ``g_b = 0``::

    J(w, b') >= J(0, b) + g_w . w + ||w||^2 >= J(0, b) - ||g_w||^2 / 4,

so ``J(0, b) - J* <= ||g_w||^2 / 4`` (:func:`bare_gap`).

**The subgradient.** An example off its kinks contributes its derivative at the bare
point, ``d_m x_bar_n`` (its ``s``-derivative multiplies ``w = 0``). An example on a kink
(``m = P_n`` at the bare point, with slopes ``mid_n -+ half_n`` of its term on either
side) has the term ``mid_n m + half_n ||(m - P_n, D_n w)||`` plus terms smooth there; the
subdifferential of its root part at the bare point is ``{(half_n u_0, half_n D_n u_w) :
u_0^2 + ||u_w||^2 <= 1}`` (in ``m`` and ``w``). The ``u_n`` come from IRLS-like maps
from ``near`` (:func:`bare_gap`), each the minimiser ``theta'`` of ``||w||^2`` plus the
off-kink examples' terms linearised at the bare point plus the kink examples' quadratic
majorisers ``mid_n m + half_n ((m - P_n)^2 + s_n) / (2 r_n)``, ``r_n`` their roots at
``near`` (floored at ``ROOT_FLOOR`` as IRLS's weights are) -- one weighted
least-squares solve. With ``u_n = (m'_n - P_n, D_n w') / r_n`` its normal equations read
``g = (-2 w', 0)``: the bound is ``||w'||^2``, as small as ``w'`` once ``w = 0`` is the
optimum. Where ``||u_n|| > 1`` (the root grew) ``u_n`` is scaled onto the sphere, and the
intercept's component is then made zero again by moving the kink examples' ``u_0``
inside ``+- sqrt(1 - lambda^2 ||u_w||^2)``, their ``u_w`` shrunk by a common ``lambda``
(:data:`SHRINKS`; the best bound is kept). The bound is exact but for rounding.
"""

from __future__ import annotations

import weakref

import numpy as np
import scipy.linalg as sla

from ..linalg import wls
from ..model.losses.kernels import ROOT_FLOOR
from .newton.loop import KeptFactor, add_pair, qn_direction

__all__ = ["BARE_NEWTON_ITER", "SHRINKS", "bare_gap", "bare_gap_rows", "bare_intercepts",
           "bare_newton", "bare_newton_pass", "bare_newton_rows", "bare_pass", "bare_points",
           "bare_subgradient", "bare_sums", "bare_value", "descends_from"]

#: factors ``lambda`` of the kink examples' ``u_w`` tried to make room for ``g_b = 0``
SHRINKS = (1.0, 1.0 - 1e-6, 1.0 - 1e-3, 0.99, 0.9, 0.5, 0.0)
#: Newton steps :func:`bare_newton` takes at most (each one Hessian of the bound's problem)
BARE_NEWTON_ITER = 20
#: relative ridge on the Hessian of :func:`bare_newton` (``F`` is flat along directions
#: that leave every ``A_n phi`` in the unit ball and ``l . phi`` zero), and the rounding
#: allowance of its test ``h(phi) < 0``
BARE_NEWTON_RIDGE = 1e-12
#: :func:`bare_newton` computes the bound once ``||g_w||^2 / 4`` of its gradient (``g_b``
#: not yet zero) is at most this many times the target (the steps converge
#: quadratically: a step later at the latest), and takes its steps with float64 Hessians
#: from there. Measured (digits one-vs-rest grid: hinge, q 0.2 / 0.3 / 0.5, C 0.01 /
#: 0.02 / 0.1 / 1, 120 certificates from the best bare model; 1e4 -> 10): the same 32
#: certified and the same verdicts, 383 -> 384 steps in all, 57 -> 32 bounds (an
#: uncertified one tries every shrink: 0.75 ms on digits), the grid 266-288 -> 241-245
#: ms; digits 8-vs-rest 6.9 -> 5.3 ms
BARE_NEWTON_NEAR = 10.0
#: :func:`bare_newton` keeps its Hessian's block arrays with the design's ``X`` (the
#: user's array, the same object from fit to fit of an estimator: for the next fit on
#: it) up to this many stored Hessian rows times parameters (``2 min(N, 2048) p``; digits
#: 1797 x 64: 2.3e5, about 16 MB in both precisions): fresh arrays are fresh pages, whose
#: faults cost digits about 0.4 ms an array, four per certificate (its float32 and
#: float64 steps' ``P`` and ``Q``)
BARE_WORK_MAX = 300_000
#: ``id(X)`` -> ``(weak reference to X, the block arrays of bare_newton's Hessians)``
#: (see BARE_WORK_MAX; an array is not hashable, so not a WeakKeyDictionary key)
_BARE_WORK = {}
#: backtracking of :func:`bare_newton`: sufficient decrease and the shortest step
ARMIJO, MIN_STEP = 1e-4, 1e-12
#: at most this many evaluations of the sum in :func:`_shift_into` (each step at least
#: halves the bracket or lands on the root's linear piece; 64 halvings exhaust a double)
SHIFT_MAX_ITER = 200


def bare_gap(problem, bare, near, linalg="auto", maps=1, target=0.0):
    """Upper bound on ``J(bare) - min J`` for a bare model ``bare = (0, b)``, from a point
    ``near`` close to it (IRLS's last iterate; see the module docstring): the least bound
    over at most ``maps`` maps from ``near``, each from the last (stopping once one is at
    most ``target``, or when the bound's last rate of decrease would not bring it there
    within ``maps``); ``inf`` where none is found (a loss without kinks, a non-diagonal
    noise covariance, no example on a kink, an example on two kinks at once, no feasible
    intercept). Returns ``(bound, maps used)``; each map is one weighted least-squares
    solve.

    Examples
    --------
    >>> from bayesdrop import Problem, HingeLoss, Dropout
    >>> from bayesdrop.solvers import irls
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 5))
    >>> y = np.where(rng.random(200) < 0.1, 1.0, -1.0)  # no signal: w = 0 is optimal
    >>> problem = Problem.create(X, y, HingeLoss(0.1), Dropout(0.5))
    >>> near = irls.fit(problem, tol=1e-6).theta
    >>> bare = np.append(np.zeros(5), -1.0)
    >>> bound, maps = bare_gap(problem, bare, near, maps=5, target=1e-10)
    >>> bool(bound < 1e-10), maps <= 5
    (True, True)
    """
    setup = _kink_examples(problem, bare)
    if setup is None or maps < 1:
        return np.inf, 0
    best, last = np.inf, np.inf
    step = np.asarray(near, dtype=float) - np.asarray(bare, dtype=float)
    for k in range(1, maps + 1):
        step, bound, _ = _map_bound(problem.design, *setup, step, linalg, stop=target)
        best = min(best, bound)
        if _done(best, bound, last, k, maps, target):
            break
        last = bound
    return best, k


def _done(best, bound, last, k, maps, target):
    """Whether the maps stop after the ``k``-th: the bound reached ``target``, or its
    last rate of decrease ``bound / last`` would not bring it there within ``maps``."""
    if best <= target:
        return True
    rate = bound / last if last > 0 else 0.0
    return k >= 2 and (not rate < 1.0 or best * rate ** (maps - k) > target)


def bare_subgradient(problem, bare, near, linalg="auto"):
    """The subgradient ``g`` of ``J - ||w||^2`` at the bare model (``g_b = 0`` to
    rounding) that one map from ``near`` gives, with ``||g_w||^2 / 4`` the least over
    :data:`SHRINKS` (see :func:`bare_gap`), or None where :func:`bare_gap` finds none."""
    setup = _kink_examples(problem, bare)
    if setup is None:
        return None
    step = np.asarray(near, dtype=float) - np.asarray(bare, dtype=float)
    return _map_bound(problem.design, *setup, step, linalg)[2]


def _kink_examples(problem, bare, allow_none=False):
    """``(d_m, rows, mid, half)``: every example's derivative ``d_m`` at the bare point,
    the examples on a kink there and the mid and half range of their slopes; None for a
    loss without kinks, a non-diagonal noise covariance, no example on a kink (unless
    ``allow_none``: a block of rows) or one on two kinks at once."""
    design, loss, y = problem.design, problem.loss, problem.y
    kinks = loss.kinks(y)
    if kinks is None or not design.diagonal_noise:
        return None
    positions, slopes = kinks
    b = float(bare[-1]) if design.fit_intercept else 0.0
    on = positions == b
    rows = np.flatnonzero(on.any(axis=1))
    if (rows.size == 0 and not allow_none) or np.any(on.sum(axis=1) > 1):
        return None
    j = np.argmax(on[rows], axis=1)
    left, right = slopes[rows, j], slopes[rows, j + 1]
    n = design.n_samples
    d_m = loss.terms(np.full(n, b), np.zeros(n), y)[1]  # on a kink: replaced by the map
    return d_m, rows, 0.5 * (left + right), 0.5 * (right - left)


def _map_bound(design, d_m, rows, mid, half, step, linalg, stop=0.0):
    """One map from ``bare + step`` and the bound from its point (see :func:`bare_gap`):
    ``(step', bound, g)``, the least bound over :data:`SHRINKS` -- or the first at most
    ``stop``. Everything is relative to the bare point (``m - P_n`` is the
    step's own score), so that the tiny ``w`` near it is not lost against ``b``."""
    n, D = design.n_samples, design.n_features
    r = _roots(design, rows, step)
    step = wls.solve(design, *_map_weights(d_m, rows, mid, half, r), linalg=linalg)[0]
    u0, uw2, shrink = _elements(design, rows, step, r)
    coef = np.zeros(n)  # the w-part: sum_n half_n shrink_n (v_n * w') / r_n
    coef[rows] = half * shrink / r
    z = step[:D] * design.noise_diagonal(coef)[:D]
    best, g_best = _least_bound(design, d_m, rows, mid, half, u0, uw2, z, stop)
    return step, best, g_best


def bare_newton(problem, bare, target=0.0, max_iter=None, compiled="auto"):
    """Upper bound on ``J(bare) - min J`` for a bare model ``bare = (0, b)`` by Newton's
    method on the bound's own problem -- no point near the optimum needed (the maps of
    :func:`bare_gap` creep towards ``w = 0`` as IRLS does). Returns ``(bound, Newton
    steps)``: the least bound found in at most ``max_iter`` steps (default
    :data:`BARE_NEWTON_ITER`), stopping once it is at most ``target``; ``inf``
    where :func:`bare_gap` finds none, where the design is too wide for a dense Hessian
    (:func:`bayesdrop.linalg.wls.choose_linalg` other than ``"cholesky"``; no step) or
    where the steps find a direction in which ``J`` falls from the bare model (then
    ``w = 0`` is not the optimum).

    **The problem.** Near the bare model ``J - ||w||^2`` is, to first order, the convex
    and positively homogeneous ``h(phi) = l . phi + sum_K half_n ||A_n phi||`` with ``l``
    the examples' slopes ``d_m`` off their kinks and ``mid_n`` on them (``l`` summed as
    ``Xbar^T``) and ``A_n phi = (xbar_n . phi, D_n w)`` over the kink examples ``K``.
    ``w = 0`` is the optimum exactly when ``h >= 0`` everywhere. Newton minimises its
    Huber smoothing ``F(phi) = l . phi + sum_K half_n H(||A_n phi||)``, ``H(r) = r`` for
    ``r >= 1`` and ``(r^2 + 1) / 2`` below: ``F`` is convex, once differentiable and
    piecewise twice, and its gradient at any ``phi`` is a subgradient of the bound's kind,
    ``g = l + sum_K half_n A_n^T u_n`` with ``u_n = A_n phi / max(||A_n phi||, 1)`` in the
    unit ball. Where ``h`` is bounded below ``F`` has a minimiser, at which ``g = 0``;
    the steps' ``g`` go to zero quadratically once the examples outside the unit ball
    settle, and each gives the bound of :func:`bare_gap` (``g_b`` made zero as there).
    ``F``'s terms are functions of the mean score ``m_n`` and the variance
    ``s_n = ||D_n w||^2``, so its Hessian is :func:`bayesdrop.linalg.hessian.hessian_matrix`
    of their derivatives (``r = sqrt(m^2 + s)``; outside the ball ``d_m = m / r``,
    ``d_s = 1 / (2 r)``, ``d_mm = s / r^3``, ``d_ms = -m / (2 r^3)``,
    ``d_ss = -1 / (4 r^3)``; inside ``d_m = m``, ``d_s = 1/2``, ``d_mm = 1``), without the
    penalty and with the relative ridge :data:`BARE_NEWTON_RIDGE`. Steps are Newton's from
    ``phi = 0`` (the first is the least-squares choice of every ``u_n``), with backtracking
    on ``F``. Where ``h(phi) < 0`` at a step (``F >= h``), ``J`` falls along ``phi``.

    **The kept factor.** As in Newton's own loop (:mod:`bayesdrop.solvers.newton.loop`),
    a Hessian's Cholesky factor is kept, BFGS-updated with the steps' gradient changes
    (:func:`~bayesdrop.solvers.newton.loop.qn_direction`), while its directions'
    decrements ``-g . p`` contract by the rule Newton uses on the design
    (``QN_CONTRACTION`` on large dense designs, where a Hessian costs many passes;
    ``CONTRACTION`` elsewhere); a direction that does not, or whose line search fails, is
    replaced by a new Hessian's. The bound and the test ``h < 0`` hold at any ``phi``, so
    which steps lead there changes no verdict. Digits one-vs-rest (hinge, dropout 0.2 /
    0.5, ``C`` 0.02 / 0.1; 40 certificates from the best bare models): the same verdicts,
    steps 132 -> 177, Hessians 92 -> 56 (about 0.4 ms each against 0.03 ms a pass).

    **Compiled.** On a dense :class:`~bayesdrop.model.design.Design` with its own row
    kernels the steps run compiled (:func:`._bare_compiled.bare_steps`: the same tests in
    the same order, the compiled Newton loop's products), the bound in Python: with
    ``compiled="auto"`` once compiled (``python -m bayesdrop compile``), with ``True``
    compiling them if needed, never with ``False`` (``"auto"``: within the compiled
    Newton loop's range of sizes). Digits 8-vs-rest (hinge, dropout 0.2,
    ``C = 0.1``): 10 -> 8 ms compiled, with seven Hessians (0.55 ms each, float32); with
    the kept factor 11 steps and 3 Hessians, the class's whole fit 5.0-5.3 -> 3.9-4.0 ms.

    Measured (digits one-vs-rest, hinge, dropout): digits 8-vs-rest at ``C = 0.1``,
    ``q = 0.2`` and 5-vs-rest at ``C = 0.02``, ``q = 0.5`` certified in 15 and 12 steps
    with ``g`` down to rounding; :func:`bare_gap`'s maps stall above the tolerance on the
    latter from IRLS's end (2e-6 against 1.5e-7) until IRLS has run for hundreds of maps.

    Examples
    --------
    >>> from bayesdrop import Problem, HingeLoss, Dropout
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 5))
    >>> y = np.where(rng.random(200) < 0.1, 1.0, -1.0)  # no signal: w = 0 is optimal
    >>> problem = Problem.create(X, y, HingeLoss(0.1), Dropout(0.5))
    >>> bound, steps = bare_newton(problem, np.append(np.zeros(5), -1.0), target=1e-12)
    >>> bool(bound <= 1e-12), steps <= BARE_NEWTON_ITER
    (True, True)
    """
    from ..linalg.hessian import hessian_matrix

    max_iter = BARE_NEWTON_ITER if max_iter is None else int(max_iter)
    if wls.choose_linalg(problem.design) != "cholesky":
        return np.inf, 0  # no dense p x p Hessian for a wide design (the maps solve there)
    setup = _kink_examples(problem, bare)
    if setup is None or max_iter < 1:
        return np.inf, 0
    d_m, rows, mid, half = setup
    design = problem.design
    D, p = design.n_features, design.n_params
    slope = _slopes(d_m, rows, mid)

    def parts(phi):  # (m, s, roots of the kink examples, F, h)
        m, s = design.scores(phi)
        h, F, r = _model_values(slope, rows, half, m, s)
        return m, s, r, F, h

    work = _bare_work(design)  # the Hessian's block arrays, kept from step to step
    run = _compiled_steps(problem, slope, rows, half, max_iter, target, work, compiled)
    if run is not None:
        return _run_compiled(run, parts, design, d_m, rows, mid, half, slope, max_iter,
                             target)
    phi = np.zeros(p)
    m, s, r, F, h = parts(phi)
    best, k = np.inf, 0
    contraction, memory = _kept_factor_rule(design)
    S, Yq, rho = np.empty((memory, p)), np.empty((memory, p)), np.empty(memory)
    n_pairs, kept, prev_dec, last, g_last = 0, None, np.inf, None, None
    for k in range(1, max_iter + 1):
        if h < -BARE_NEWTON_RIDGE * float(half.sum()):
            return np.inf, k  # h(phi) < 0: J falls from the bare model along phi
        g, _, u0, uw2, z = _huber_gradient(design, phi, slope, rows, half, m, s, r)
        if last is not None:  # the last step's pair, for the kept factor's BFGS update
            n_pairs = add_pair(S, Yq, rho, n_pairs, last, g - g_last, memory)
        near = 0.25 * float(g[:D] @ g[:D]) <= BARE_NEWTON_NEAR * target
        if near or k == max_iter:
            # near the end: the bound (far from it, g_w is orders of magnitude above the
            # target and the bound's shifts would cost a pass each for nothing)
            bound, _ = _least_bound(design, d_m, rows, mid, half, u0, uw2, z, target)
            best = min(best, bound)
            if best <= target:
                break
        fresh = kept is None
        while True:
            if fresh:
                # far from the end a float32 Hessian (large dense designs) gives the
                # direction
                H = hessian_matrix(design, _huber_curvature(design, phi, rows, half, m, s, r),
                                   penalty=False, single=not near, work=work)
                step, decrease, factor = _newton_step(H, g)
                if step is None:
                    return best, k
                kept, n_pairs = KeptFactor(factor), 0
            else:  # the kept factor, BFGS-updated, while its decrements contract
                step = qn_direction(kept, g, S, Yq, rho, n_pairs)
                decrease = float(g @ step)
                if not (decrease < 0.0 and -decrease <= contraction * prev_dec):
                    fresh = True
                    continue
            t = 1.0
            while True:
                m_t, s_t, r_t, F_t, h_t = parts(phi + t * step)
                if F_t <= F + ARMIJO * t * decrease or t < MIN_STEP:
                    break
                t *= 0.5
            if t >= MIN_STEP:
                break
            if fresh:
                return best, k
            fresh = True  # the kept factor's direction failed: a new Hessian
        prev_dec, last, g_last = -decrease, t * step, g
        phi = phi + last
        m, s, r, F, h = m_t, s_t, r_t, F_t, h_t
    return best, k


def _compiled_steps(problem, slope, rows, half, max_iter, target, work, compiled):
    """``run(phi, k, resume) -> (phi, k, status)``: :func:`._bare_compiled.bare_steps`
    for this problem, or None where it does not apply (not a dense :class:`Design` with
    its own row kernels, ``compiled=False``, kernels running interpreted) or, with
    ``compiled="auto"``, is not compiled yet (``python -m bayesdrop compile`` compiles
    it) or the design is beyond the compiled Newton loop's range
    (:func:`bayesdrop.solvers.newton._dense_arrays`: there the Python loop's Hessians
    use numpy's BLAS threads; Fashion-MNIST 4000 x 784, 6-vs-rest: 270 ms in Python, 450
    ms compiled on one thread)."""
    from .. import _jit
    from .._blas import dpotrf_address, gram_pair, gram_pair_single
    from ..linalg.hessian import single_applies
    from ..model.design import Design
    from .newton import _at_hand, _dense_arrays

    design = problem.design
    if compiled is False or type(design) is not Design or _jit.interpreting():
        return None
    arrays = design.row_kernel_arrays()
    dense = _dense_arrays(design, compiled)
    if arrays is None or arrays[0] != "dense" or dense is None:
        return None
    from ._bare_compiled import bare_steps, kept_state
    from .newton.compiled import hessian_workspace

    X, M, scale = dense  # M None: X * X (the Newton loop's arrays)
    n, p = design.n_samples, design.n_params
    sgram = gram_pair_single() if single_applies(design) else (0, 0)
    ws = work.get(("compiled", sgram))
    if ws is None:
        if compiled is not True and not _at_hand(
                "bare_workspace", (None, X, M), [(hessian_workspace, (n, p, sgram))]):
            return None
        ws = work[("compiled", sgram)] = hessian_workspace(n, p, sgram)
    half_n = np.zeros(n)
    half_n[rows] = half
    data = (X, M, float(scale), design.fit_intercept, slope, half_n)
    limits = (max_iter, BARE_NEWTON_NEAR * target)
    contraction, memory = _kept_factor_rule(design)
    rest = (BARE_NEWTON_RIDGE, BARE_NEWTON_RIDGE * float(half.sum()), ARMIJO, MIN_STEP,
            contraction, gram_pair(), dpotrf_address(), sgram, ws)
    qn = kept_state(p, memory)  # carried from run to run

    def run(phi, k, resume):
        return bare_steps(*data, phi, k, *limits, resume, *rest, qn)

    sample = (*data, np.zeros(p), 1, *limits, False, *rest, kept_state(p, memory))
    if compiled is not True and not _at_hand("bare", (None, X, M), [(bare_steps, sample)]):
        return None
    return run


def _run_compiled(run, parts, design, d_m, rows, mid, half, slope, max_iter, target):
    """:func:`bare_newton`'s loop with its steps compiled (``run`` of
    :func:`_compiled_steps`): the bound in Python wherever the steps return near the
    end, then the steps resumed until it is at most ``target``."""
    from ._bare_compiled import NEAR, RULED_OUT

    phi, k, resume, best = np.zeros(design.n_params), 1, False, np.inf
    for _ in range(max_iter):  # each run after the first takes at least one step
        phi, k, status = run(phi, k, resume)
        if status == RULED_OUT:
            return np.inf, k
        if status != NEAR:
            return best, k
        m, s, r, _, _ = parts(phi)
        _, _, u0, uw2, z = _huber_gradient(design, phi, slope, rows, half, m, s, r)
        bound, _ = _least_bound(design, d_m, rows, mid, half, u0, uw2, z, target)
        best = min(best, bound)
        if best <= target or k == max_iter:
            return best, k
        resume = True
    return best, k


def _slopes(d_m, rows, mid):
    """``l``: the examples' slopes ``d_m`` at the bare model, ``mid_n`` on the kink
    examples ``rows``."""
    slope = d_m.copy()
    slope[rows] = mid
    return slope


def _model_values(slope, rows, half, m, s):
    """``(h, F, r)`` at the direction whose scores are ``(m, s)``: ``h``, its Huber
    smoothing ``F`` (:func:`bare_newton`) and the kink examples' roots
    ``r = ||A_n phi||``."""
    r = np.sqrt(m[rows] ** 2 + s[rows])
    huber = np.where(r >= 1.0, r, 0.5 * (r * r + 1.0))
    return float(slope @ m + half @ r), float(slope @ m + half @ huber), r


def _bare_work(design):
    """The dict in which :func:`bare_newton`'s Hessians keep their block arrays
    (``work`` of :func:`bayesdrop.linalg.hessian.hessian_matrix`): the one kept with the
    design's ``X`` while it lives, where they are small (:data:`BARE_WORK_MAX`), else a
    new one (scratch space only: nothing in it depends on the data)."""
    from ..linalg.hessian import HESSIAN_BLOCK

    if 2 * min(design.n_samples, HESSIAN_BLOCK) * design.n_params > BARE_WORK_MAX:
        return {}
    X, key = design.X, id(design.X)
    kept = _BARE_WORK.get(key)
    if kept is not None and kept[0]() is X:
        return kept[1]
    try:
        ref = weakref.ref(X, lambda _, key=key: _BARE_WORK.pop(key, None))
    except TypeError:  # an X that takes no weak reference
        return {}
    _BARE_WORK[key] = (ref, {})
    return _BARE_WORK[key][1]


def descends_from(problem, bare, m, s):
    """Whether ``J`` falls from the bare model ``bare = (0, b)`` along the direction
    ``phi`` whose scores are ``m = Xbar phi`` and ``s_n = ||D_n phi_w||^2``: whether
    ``h(phi) = l . phi + sum_K half_n ||A_n phi||`` (:func:`bare_newton`'s first-order
    model of ``J - ||w||^2`` at the bare model, ``J``'s directional derivative there) is
    negative, beyond the rounding ``BARE_NEWTON_RIDGE sum_K half_n ||A_n phi||``.

    ``h >= 0`` everywhere exactly when ``w = 0`` (with that intercept) is the optimum, so
    a direction with ``h(phi) < 0`` proves it is not -- one pass over the scores, no
    solve. False for a loss without kinks or an example on two kinks at once (no test).

    Examples
    --------
    >>> from bayesdrop import Problem, HingeLoss, Dropout
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 3))
    >>> y = np.where(X[:, 0] > 0, 1.0, -1.0)  # signal: the optimum is not w = 0
    >>> problem = Problem.create(X, y, HingeLoss(1.0), Dropout(0.3))
    >>> bare = np.array([0.0, 0.0, 0.0, 1.0])
    >>> phi = np.array([1.0, 0.0, 0.0, 0.0])
    >>> bool(descends_from(problem, bare, *problem.design.scores(phi)))
    True
    >>> bool(descends_from(problem, bare, *problem.design.scores(-phi)))
    False
    """
    setup = _kink_examples(problem, bare, allow_none=True)
    if setup is None:
        return False
    d_m, rows, mid, half = setup
    h, _, r = _model_values(_slopes(d_m, rows, mid), rows, half, m, s)
    return h < -BARE_NEWTON_RIDGE * float(half @ r)


def _least_bound(design, d_m, rows, mid, half, u0, uw2, z, stop=0.0):
    """``(bound, g)`` for the kink examples' elements ``u_0`` and ``||u_w||^2`` (in the
    unit ball) whose ``u_w`` parts sum to ``z`` in ``g_w``: the least ``||g_w||^2 / 4``
    over :data:`SHRINKS` after ``g_b`` is made zero (:func:`_shift_into`) -- or the
    first at most ``stop``; ``(inf, None)`` where no shrink leaves room for ``g_b = 0``."""
    n, D = design.n_samples, design.n_features
    off = np.ones(n, dtype=bool)
    off[rows] = False
    target = -float(np.sum(d_m[off]))  # the kink examples' d_m must sum to this
    best, g_best = np.inf, None
    for lam in SHRINKS:
        slack = np.sqrt(np.maximum(1.0 - lam * lam * uw2, 0.0))
        lo, hi = mid - half * slack, mid + half * slack
        if not lo.sum() <= target <= hi.sum():
            continue
        d = d_m.copy()
        d[rows] = _shift_into(mid + half * np.clip(u0, -slack, slack), lo, hi, target)
        g = design.rmatvec(d)
        g[:D] += lam * z
        bound = 0.25 * float(g[:D] @ g[:D])
        if bound < best:
            best, g_best = bound, g
            if best <= stop:
                break
    return best, g_best


def _roots(design, rows, step):
    """The kink examples' roots ``r_n = sqrt((m - P_n)^2 + s_n)`` at ``bare + step``,
    floored at ``ROOT_FLOOR`` as IRLS's weights are (``m - P_n`` is the step's own
    score)."""
    m, s = design.scores(step)
    return np.maximum(np.sqrt(m[rows] ** 2 + s[rows]), ROOT_FLOOR)


def _map_weights(d_m, rows, mid, half, r):
    """``(rho, t)`` of a map: weights ``half / r`` on the kink examples (their roots'
    majorisers about ``P_n``), the other examples' terms linear (weight 0, target
    ``-d_m``)."""
    rho, t = np.zeros(d_m.shape[0]), -d_m
    rho[rows] = half / r
    t[rows] = -mid
    return rho, t


def _elements(design, rows, step, r):
    """The kink examples' elements at ``bare + step`` for roots ``r``: ``u_0``,
    ``||u_w||^2`` and the factor that scaled them onto the unit ball (1 inside it)."""
    m, s = design.scores(step)
    u0, uw2 = m[rows] / r, s[rows] / (r * r)
    norm = np.sqrt(u0 * u0 + uw2)
    shrink = np.where(norm > 1.0, 1.0 / np.maximum(norm, 1e-300), 1.0)
    return u0 * shrink, uw2 * shrink * shrink, shrink


def _shift_into(values, lo, hi, target):
    """``clip(values + tau, lo, hi)`` with ``tau`` such that the sum is ``target``
    (``lo.sum() <= target <= hi.sum()``).

    ``S(tau) = sum_n clip(values_n + tau, lo_n, hi_n)`` is non-decreasing and piecewise
    linear, of slope the number of elements strictly inside their ranges. Newton's steps
    on it, kept inside the bracket ``[a, c]`` that holds the root (bisection where a step
    would leave it), reach the root's linear piece in a few evaluations and the root in
    one more; the result's sum is ``target`` to rounding."""
    a, c = float(np.min(lo - values)), float(np.max(hi - values))
    scale = 4.0 * np.finfo(float).eps * max(float(np.sum(np.abs(lo) + np.abs(hi))), 1.0)
    tau = min(max(0.0, a), c)
    for _ in range(SHIFT_MAX_ITER):
        shifted = values + tau
        excess = float(np.clip(shifted, lo, hi).sum()) - target
        if abs(excess) <= scale:
            break
        if excess < 0.0:
            a = tau
        else:
            c = tau
        inside = np.count_nonzero((shifted > lo) & (shifted < hi))
        step = tau - excess / inside if inside else np.nan
        tau = step if a < step < c else 0.5 * (a + c)
        if not a < tau < c:  # the bracket is down to rounding
            break
    return np.clip(values + tau, lo, hi)


# --------------------------------------------------------------- row back-ends (dask)
def bare_gap_rows(rows, bare, near, maps=1, target=0.0):
    """:func:`bare_gap` through a row back-end (:mod:`bayesdrop.linalg.backend`): one
    pass per map (:func:`bare_pass` checks the last map's point and builds the next map's
    system together), plus one. Elements outside the unit ball are scaled onto it, their
    ``u_w`` kept (``lambda = 1`` only); ``g_b`` is zeroed by moving the kink examples'
    slopes a common fraction of the way to an end of their ranges (one sum per end, so
    no bisection over the rows). Returns ``(bound, passes)``; ``inf`` where
    :func:`bare_gap` finds none or the slopes cannot zero ``g_b``.

    Examples
    --------
    The in-memory bound's certificate, one pass per map (uniform features, labels without
    signal):

    >>> from bayesdrop import Problem, HingeLoss, Dropout
    >>> from bayesdrop.linalg.backend import InMemoryRows
    >>> from bayesdrop.solvers import irls
    >>> rng = np.random.default_rng(3)
    >>> problem = Problem.create(rng.random((300, 4)),
    ...                          np.where(rng.random(300) < 0.2, 1.0, -1.0),
    ...                          HingeLoss(0.3), Dropout(0.4))
    >>> near = irls.fit(problem, max_iter=30, warn=False).theta
    >>> bare = np.r_[np.zeros(4), -1.0]
    >>> rows = InMemoryRows(problem)
    >>> [bool(bound < 1e-15) for bound, _ in (bare_gap_rows(rows, bare, near, maps=10),
    ...                                       bare_gap(problem, bare, near, maps=10))]
    [True, True]
    """
    if maps < 1 or rows.loss.kinks(np.array([-1.0, 1.0]) if rows.loss.binary
                                   else np.zeros(1)) is None:
        return np.inf, 0
    b = float(bare[-1]) if rows.fit_intercept else 0.0
    D = rows.n_features
    step = np.asarray(near, dtype=float) - np.asarray(bare, dtype=float)
    before = None
    best, last, passes = np.inf, np.inf, 0
    for k in range(maps + 1):
        stats = rows.reduce(bare_pass, b, before, step)
        passes += 1
        if stats is None or stats[6] > 0 or stats[7] == 0:  # no kink examples, or two
            return np.inf, passes
        out, g, up, down, s_up, s_down, _, _, A, r = stats
        if before is not None:
            bound = _rows_bound(g, up, down, s_up, s_down, D)
            best = min(best, bound)
            if _done(best, bound, last, k, maps, target):
                break
            last = bound
        if k == maps:
            break
        A = np.array(A, dtype=float)
        A[np.diag_indices_from(A)] += 2.0 * rows.penalty_mask()
        before, step = step, np.linalg.solve(A, np.asarray(r, dtype=float))
    return best, passes


def _rows_bound(g, up, down, s_up, s_down, D, intercept=True):
    """``||g_w||^2 / 4`` of the summed subgradient ``g`` once ``g_b`` is made zero by
    moving the kink examples' slopes one common fraction of the way to an end of their
    ranges (``up = Xbar^T (hi - d)``, ``down = Xbar^T (d - lo)``, ``s_up``, ``s_down``
    their sums); ``inf`` where the ranges leave no room. ``intercept=False``: ``g`` as
    it is (no ``g_b`` to zero)."""
    g = np.array(g, dtype=float)
    if intercept:
        if g[-1] > 0 and s_down >= g[-1]:
            g = g - (g[-1] / s_down) * np.asarray(down)
        elif g[-1] <= 0 and s_up >= -g[-1]:
            g = g + (-g[-1] / max(s_up, 1e-300)) * np.asarray(up)
        else:
            return np.inf
    return 0.25 * float(g[:D] @ g[:D])


def _block_kinks(problem, b):
    """``(status, setup)`` of a block of rows about the bare intercept ``b``: ``"empty"``
    (no rows), ``"two"`` (an example on two kinks at once), ``"none"`` (a loss without
    kinks or a non-diagonal noise covariance) or ``"ok"`` with the
    :func:`_kink_examples` of the block (possibly none on a kink)."""
    design = problem.design
    if design.n_samples == 0:
        return "empty", None
    bare = np.zeros(design.n_params)
    if design.fit_intercept:
        bare[-1] = b
    kinks = problem.loss.kinks(problem.y)
    if kinks is not None and np.any((kinks[0] == b).sum(axis=1) > 1):
        return "two", None
    setup = _kink_examples(problem, bare, allow_none=True)
    return ("none", None) if setup is None else ("ok", setup)


def bare_pass(problem, block, b, before, step):
    """The rows' share of one pass of :func:`bare_gap_rows` about the bare intercept
    ``b``: for the point ``bare + step`` of a map from ``bare + before`` (when
    ``before`` is not None) the count of kink examples whose element left the unit ball
    (scaled back onto it), the subgradient's sum ``Xbar^T d + (V^T coef) * w``, the
    sums ``Xbar^T (hi - d)``, ``Xbar^T (d - lo)`` and ``sum (hi - d)``, ``sum (d - lo)``
    over the kink examples (``g_b``'s correction), the count of examples on two kinks
    and of those on one; and the next map's system from ``bare + step`` (``A`` without
    ``2 I'``, ``r``). Everything is relative to the bare point, as in :func:`bare_gap`."""
    design = problem.design
    p, D, n = design.n_params, design.n_features, design.n_samples
    zeros = (0, np.zeros(p), np.zeros(p), np.zeros(p), 0.0, 0.0, 0, 0,
             np.zeros((p, p)), np.zeros(p))
    status, setup = _block_kinks(problem, b)
    if status != "ok":
        return {"empty": zeros, "two": zeros[:6] + (1, 0) + zeros[8:], "none": None}[status]
    d_m, rows, mid, half = setup
    out, g, up, down, s_up, s_down = 0, np.zeros(p), np.zeros(p), np.zeros(p), 0.0, 0.0
    if before is not None:
        rb = _roots(design, rows, before)
        u0, uw2, shrink = _elements(design, rows, step, rb)
        out = int(np.sum(shrink < 1.0))
        slack = np.sqrt(np.maximum(1.0 - uw2, 0.0))
        d = d_m.copy()
        d[rows] = mid + half * np.clip(u0, -slack, slack)
        coef = np.zeros(n)
        coef[rows] = half * shrink / rb
        g = design.rmatvec(d)
        g[:D] += step[:D] * design.noise_diagonal(coef)[:D]
        gap_up, gap_down = np.zeros(n), np.zeros(n)
        gap_up[rows] = mid + half * slack - d[rows]
        gap_down[rows] = d[rows] - (mid - half * slack)
        up, down = design.rmatvec(gap_up), design.rmatvec(gap_down)
        s_up, s_down = float(gap_up.sum()), float(gap_down.sum())
    rho, t = _map_weights(d_m, rows, mid, half, _roots(design, rows, step))
    return (out, g, up, down, s_up, s_down, 0, int(rows.size),
            wls.normal_matrix(design, rho, penalty=False), wls.normal_rhs(design, t))


def bare_newton_rows(rows, bare, target=0.0, max_iter=None, trial_steps=(0.5, 0.25, 0.125,
                                                                       0.0625)):
    """:func:`bare_newton` through a row back-end (:mod:`bayesdrop.linalg.backend`): one
    pass per step (:func:`bare_newton_pass` returns ``F``, its gradient and Hessian at the
    full step together with ``F`` at the ``trial_steps`` of the line, as Newton's row
    passes do), one more where a damped step is taken. ``g_b`` is zeroed as in
    :func:`bare_gap_rows` (the kink examples' slopes moved one common fraction of the way
    to an end of their ranges). Returns ``(bound, passes)``; ``inf`` where
    :func:`bare_newton` gives it (no kinks, an example on two kinks, a direction in which
    ``J`` falls, no convergence in ``max_iter`` steps).

    Examples
    --------
    The in-memory certificate's steps, one pass each (labels without signal):

    >>> from bayesdrop import Problem, HingeLoss, Dropout
    >>> from bayesdrop.linalg.backend import InMemoryRows
    >>> rng = np.random.default_rng(3)
    >>> problem = Problem.create(rng.random((300, 4)),
    ...                          np.where(rng.random(300) < 0.2, 1.0, -1.0),
    ...                          HingeLoss(0.3), Dropout(0.4))
    >>> bare = np.r_[np.zeros(4), -1.0]
    >>> bound, passes = bare_newton_rows(InMemoryRows(problem), bare, target=1e-12)
    >>> bool(bound <= 1e-12), passes <= BARE_NEWTON_ITER + 1
    (True, True)
    """
    max_iter = BARE_NEWTON_ITER if max_iter is None else int(max_iter)
    if max_iter < 1 or rows.n_params > wls.MAX_CHOLESKY_PARAMS or rows.loss.kinks(
            np.array([-1.0, 1.0]) if rows.loss.binary else np.zeros(1)) is None:
        return np.inf, 0
    b = float(bare[-1]) if rows.fit_intercept else 0.0
    D, p = rows.n_features, rows.n_params
    trial_steps = np.asarray(trial_steps, dtype=float)
    phi = np.zeros(p)
    stats = rows.reduce(bare_newton_pass, b, phi, np.zeros((0, p)))
    passes, best = 1, np.inf
    for k in range(1, max_iter + 1):
        if stats is None or stats[0] > 0 or stats[1] == 0:  # no kinks, or two at once
            return np.inf, passes
        _, _, total_half, h, F, g, up, down, s_up, s_down, H, _ = stats
        if h < -BARE_NEWTON_RIDGE * total_half:
            return np.inf, passes  # h(phi) < 0: J falls from the bare model along phi
        g = np.array(g, dtype=float)
        if 0.25 * float(g[:D] @ g[:D]) <= BARE_NEWTON_NEAR * target or k == max_iter:
            best = min(best, _rows_bound(g, up, down, s_up, s_down, D, rows.fit_intercept))
            if best <= target:
                break
        step, decrease, _ = _newton_step(np.array(H, dtype=float), g)
        if step is None:
            break
        trials = phi[None, :] + trial_steps[:, None] * step[None, :]
        full = rows.reduce(bare_newton_pass, b, phi + step, trials)
        passes += 1
        if full is None:
            return np.inf, passes
        if full[4] <= F + ARMIJO * decrease:
            phi, stats = phi + step, full
            continue
        ok = np.flatnonzero(np.asarray(full[11]) <= F + ARMIJO * trial_steps * decrease)
        if ok.size == 0:
            break
        phi = phi + trial_steps[ok[0]] * step
        stats = rows.reduce(bare_newton_pass, b, phi, np.zeros((0, p)))
        passes += 1
    return best, passes


def bare_newton_pass(problem, block, b, phi, trials):
    """The rows' share of one pass of :func:`bare_newton_rows` about the bare intercept
    ``b``, at ``bare + phi``: the count of examples on two kinks and of those on one, the
    kink examples' ``sum half_n``, ``h(phi)``, ``F(phi)``, ``F``'s gradient, the sums
    ``Xbar^T (hi - d)``, ``Xbar^T (d - lo)``, ``sum (hi - d)``, ``sum (d - lo)`` over
    the kink examples (``g_b``'s correction), ``F``'s Hessian and ``F`` at each row of
    ``trials`` (see :func:`bare_newton`); None for a loss without kinks or a
    non-diagonal noise covariance."""
    from ..linalg.hessian import hessian_matrix

    design = problem.design
    p, n = design.n_params, design.n_samples
    zeros = (0, 0, 0.0, 0.0, 0.0, np.zeros(p), np.zeros(p), np.zeros(p), 0.0, 0.0,
             np.zeros((p, p)), np.zeros(trials.shape[0]))
    status, setup = _block_kinks(problem, b)
    if status != "ok":
        return {"empty": zeros, "two": (1,) + zeros[1:], "none": None}[status]
    d_m, rows, mid, half = setup
    slope = _slopes(d_m, rows, mid)
    F_trials = np.zeros(trials.shape[0])
    if trials.shape[0]:
        mt, st = design.scores_many(trials)
        F_trials = np.array([_model_values(slope, rows, half, mt[i], st[i])[1]
                             for i in range(trials.shape[0])])
    m, s = design.scores(phi)
    h, F, r = _model_values(slope, rows, half, m, s)
    g, d, _, uw2, _ = _huber_gradient(design, phi, slope, rows, half, m, s, r)
    slack = np.sqrt(np.maximum(1.0 - uw2, 0.0))
    gap_up, gap_down = np.zeros(n), np.zeros(n)
    gap_up[rows] = mid + half * slack - d[rows]
    gap_down[rows] = d[rows] - (mid - half * slack)
    return (0, int(rows.size), float(half.sum()), h, F, g, design.rmatvec(gap_up),
            design.rmatvec(gap_down), float(gap_up.sum()), float(gap_down.sum()),
            hessian_matrix(design, _huber_curvature(design, phi, rows, half, m, s, r),
                           penalty=False), F_trials)


def _huber_gradient(design, phi, slope, rows, half, m, s, r):
    """``(g, d, u_0, ||u_w||^2, z)`` of :func:`bare_newton`'s ``F`` at ``phi`` (scores
    ``m, s``; the kink examples' roots ``r``): its gradient ``g = Xbar^T d + z`` (``g_b``
    not yet zero), the examples' slopes ``d`` (``l`` plus ``half_n u_0`` on the kink
    examples), their elements ``u_n = A_n phi / max(r_n, 1)`` and the ``u_w`` parts' sum
    ``z`` in ``g_w``."""
    D = design.n_features
    big = np.maximum(r, 1.0)
    u0, uw2 = m[rows] / big, s[rows] / (big * big)
    coef = np.zeros(design.n_samples)
    coef[rows] = half / big
    z = phi[:D] * design.noise_diagonal(coef)[:D]
    d = slope.copy()
    d[rows] += half * u0
    g = design.rmatvec(d)
    g[:D] += z
    return g, d, u0, uw2, z


def _huber_curvature(design, phi, rows, half, m, s, r):
    """The :class:`~bayesdrop.linalg.hessian.Curvature` of :func:`bare_newton`'s ``F`` at
    ``phi`` (scores ``m, s``; the kink examples' roots ``r``): outside the unit ball
    ``d_s = 1 / (2 r)``, ``d_mm = s / r^3``, ``d_ms = -m / (2 r^3)``,
    ``d_ss = -1 / (4 r^3)``; inside ``d_s = 1/2``, ``d_mm = 1``; times ``half_n``
    (``d_m`` is not needed for the Hessian)."""
    from ..linalg.hessian import Curvature

    n, D = design.n_samples, design.n_features
    out = r >= 1.0
    big = np.maximum(r, 1.0)
    r3 = np.where(out, big ** 3, 1.0)
    dm, ds, dmm, dms, dss = (np.zeros(n) for _ in range(5))
    ds[rows] = 0.5 * half / big
    dmm[rows] = half * np.where(out, s[rows] / r3, 1.0)
    dms[rows] = np.where(out, -0.5 * half * m[rows] / r3, 0.0)
    dss[rows] = np.where(out, -0.25 * half / r3, 0.0)
    return Curvature(phi[:D], dm, ds, dmm, dms, dss, design.noise_diagonal(2.0 * ds)[:D])


def _newton_step(H, g):
    """``(step, g . step, L)`` of :func:`bare_newton`: ``-H^{-1} g`` with the relative
    ridge :data:`BARE_NEWTON_RIDGE` on ``H`` (in place) and the lower Cholesky factor
    ``L`` of the ridged ``H`` (in its lower triangle), or ``(None, 0, None)`` where ``H``
    has no Cholesky factor or the step does not descend."""
    H[np.diag_indices_from(H)] += BARE_NEWTON_RIDGE * max(float(np.max(np.diag(H))), 1.0)
    try:
        L = sla.cho_factor(H, lower=True, check_finite=False)[0]
    except np.linalg.LinAlgError:
        return None, 0.0, None
    step = -sla.cho_solve((L, True), g, check_finite=False)
    decrease = float(g @ step)
    return (step, decrease, L) if decrease < 0.0 else (None, 0.0, None)


def _kept_factor_rule(design):
    """``(contraction, memory)`` of :func:`bare_newton`'s kept factor: Newton's own rule
    for the design (:func:`bayesdrop.solvers.newton._reuse_rule`; ``QN_CONTRACTION`` on
    large dense designs, where a Hessian costs many passes, ``CONTRACTION`` elsewhere)
    and its ``QN_MEMORY`` BFGS pairs."""
    from .newton import QN_MEMORY, _reuse_rule

    return _reuse_rule(design)[1], max(QN_MEMORY, 1)


# -- the bare models themselves: where they are, and their J --------------------------

def bare_intercepts(b0, kinks=None):
    """The intercepts of the bare models tried: ``b0`` and each kink position of the loss
    (where the piecewise-linear ``J(0, b)`` has its minimum; at most 64 of them)."""
    candidates = [float(b0)]
    if kinks is not None:
        positions = np.unique(kinks)
        if positions.size <= 64:
            candidates += positions.tolist()
    return np.array(candidates)


def bare_points(theta, fit_intercept, kinks=None):
    """``w = 0`` with ``theta``'s intercept and with each kink position of the loss
    (:func:`bare_intercepts`); without an intercept ``w = 0`` alone."""
    bare = np.zeros_like(theta)
    if not fit_intercept:
        return [bare]
    points = []
    for b in bare_intercepts(theta[-1], kinks):
        point = bare.copy()
        point[-1] = b
        points.append(point)
    return points


def bare_sums(problem, block, candidates):
    """The rows' share of ``J(0, b) - 0`` for each intercept ``b`` of ``candidates``
    (:func:`bare_value` through a row back-end: the piecewise-linear terms at ``b``, no
    product with ``X``); zeros for a loss without kinks."""
    candidates = np.asarray(candidates, dtype=float)
    pieces = problem.loss.kinks(problem.y) if problem.design.n_samples else None
    if pieces is None:
        return np.zeros(candidates.shape[0])
    from .smoothing import piecewise_term

    return piecewise_term(candidates[:, None], *pieces).sum(axis=1)


def bare_value(problem, theta0, pieces=None, with_intercept=False):
    """``J`` of the best bare model ``(0, b)`` at the kinks of a piecewise-linear loss
    (and ``theta0``'s intercept), for Newton's early trap check
    (:data:`bayesdrop.solvers.newton.TRAP_STEPS`); None for a smooth loss (no trap: no
    kinks). ``pieces``: ``problem.loss.kinks(problem.y)`` if the caller has it; with
    ``with_intercept`` the pair ``(J, b)`` (the first of the best).

    At ``w = 0`` every score is ``b`` and every score variance 0: each term is the
    piecewise-linear loss at ``b`` (:func:`bayesdrop.solvers.smoothing.piecewise_term`),
    with no product with ``X`` (three evaluations of ``J`` took an eighth of a small
    fit's time).

    Examples
    --------
    >>> from bayesdrop import Problem, HingeLoss, Dropout
    >>> X = np.array([[1.0], [2.0], [3.0]]); y = np.array([1.0, 1.0, -1.0])
    >>> problem = Problem.create(X, y, HingeLoss(1.0), Dropout(0.2))
    >>> bare_value(problem, None)  # b = 1: only the third example pays, 2 C (1 + 1)
    4.0
    >>> bare_value(problem, None, with_intercept=True)
    (4.0, 1.0)
    """
    design, loss, y = problem
    if pieces is None:
        pieces = loss.kinks(y)
    if pieces is None:
        return None
    pos, slopes = pieces
    if design.fit_intercept:
        b0 = 0.0 if theta0 is None else np.asarray(theta0, dtype=float)[-1]
        candidates = bare_intercepts(b0, pos)
    else:
        candidates = np.zeros(1)
    from .smoothing import piecewise_term

    J = piecewise_term(candidates[:, None], pos, slopes).sum(axis=1)
    k = int(np.argmin(J))
    return (float(J[k]), float(candidates[k])) if with_intercept else float(J[k])
