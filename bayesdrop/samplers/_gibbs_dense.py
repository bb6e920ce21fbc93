"""The whole Gibbs sweep compiled, for dense designs (numba, ``nogil``; Gram products and
Cholesky through BLAS / LAPACK).

The same two conditional draws as :mod:`bayesdrop.samplers.gibbs` (MATH.md sections 3-4)
with no Python between them:

1. per example, the augmentation given the scores ``(m_n, s_n)`` and its system weights
   ``(rho, t)``: the loss's ``draw`` kernel (:mod:`bayesdrop.model.losses.kernels`;
   inverse Gaussian for the hinge and epsilon-insensitive losses, Polya-Gamma by
   :mod:`bayesdrop.model.pg_compiled` for the logistic one);
2. ``A = 2 I' + Xbar^T diag(rho) Xbar + diag(V^T rho)``
   (BLAS ``dsyrk`` on ``sqrt(rho) Xbar`` in row blocks, half the work of a ``gemm``),
   ``r = Xbar^T t``, ``A = L L^T`` (LAPACK) and the over-relaxed
   Gaussian draw ``theta' = alpha theta + L^{-T}((1 - alpha) L^{-1} r + sqrt(1 - alpha^2) z)``;
3. the new scores and, for kept sweeps, ``lp = -J(theta')``.

:func:`run_sweeps` advances one chain by a block of sweeps from its state arrays; the
driver (:mod:`bayesdrop.samplers.driver`) calls it block by block from one thread per
chain (the GIL is released inside), reporting progress and polling for interrupts between
blocks. Draws depend only on the chain's :class:`numpy.random.Generator`, so parallel and
sequential chains give the same draws.

``lp`` is the loss's parameter tuple (:attr:`bayesdrop.model.losses.Loss.kernel_params`;
the sweep is compiled for that loss alone); each example's ``C`` is multiplied by its
sample weight ``sw[n]``. Variance kinds: 0 none, 1 ``V = scale * M``,
2 ``V = scale`` everywhere.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _jit
from .._blas import cholesky_lower, mirror_upper, syrk_rows, syrk_work
from ..model.design import V_CONSTANT, V_LIKE_X
from ..model.losses.kernels import draws_loop, means_loop, objective_from_scores, ridge

__all__ = ["run_sweeps"]

#: rows per block of the weighted Gram product (the weighted block, rows x parameters,
#: stays in the L2 cache)
_GRAM_ROWS = 512

@_jit.njit(cache=True, nogil=True, fastmath={"reassoc", "contract"})
def _scores(Xb, M, vkind, scale, D, theta, m, s):
    """``m = Xbar theta`` and ``s = V (w * w)``, row by row (each row's sums reassociated,
    as BLAS ``gemv``'s: ``fastmath`` with only ``reassoc`` and ``contract``; numba's
    matrix products cost seconds of a first posterior's compilation)."""
    n, p = Xb.shape
    w2 = 0.0
    for d in range(D):
        w2 += theta[d] * theta[d]
    for i in range(n):
        mi = 0.0
        for j in range(p):
            mi += Xb[i, j] * theta[j]
        m[i] = mi
        if vkind == V_LIKE_X:
            si = 0.0
            for d in range(D):
                si += M[i, d] * (theta[d] * theta[d])
            s[i] = scale * si
        elif vkind == V_CONSTANT:
            s[i] = scale * w2
        else:
            s[i] = 0.0


@_jit.njit(cache=True, nogil=True, inline="always")
def _store_augmentation(row, a1, a2, aug_sum, aug_out):
    """Add a kept sweep's augmentation to the running sums (and to row ``row`` of the
    traces, if they are kept)."""
    n_aug = aug_sum.shape[0]
    for i in range(a1.shape[0]):
        aug_sum[0, i] += a1[i]
        if n_aug == 2:
            aug_sum[1, i] += a2[i]
    if aug_out.shape[0] > 0:
        for i in range(a1.shape[0]):
            aug_out[row, 0, i] = a1[i]
            if n_aug == 2:
                aug_out[row, 1, i] = a2[i]


@_jit.njit(cache=True, nogil=True)
def _log_target(lp, D, y, sw, theta, m, s, terms):
    """``-J(theta)`` from the scores (:func:`bayesdrop.model.losses.kernels.objective_from_scores`);
    each example's (weighted) term of ``J`` is also written to ``terms`` unless it is
    empty."""
    none = m[:0]
    return -objective_from_scores(lp, y, sw, m, s, ridge(theta, D), terms, none, none, none,
                                  0.0)


@_jit.njit(cache=True, nogil=True)
def _log_proposal(theta, mu, Lq, nu, work):
    """Log density (up to a constant) of the multivariate t proposal with centre ``mu``,
    precision ``Lq Lq^T`` and ``nu`` degrees of freedom."""
    p = theta.shape[0]
    for a in range(p):
        work[a] = theta[a] - mu[a]
    q = 0.0
    for a in range(p):
        acc = 0.0
        for b in range(a, p):
            acc += Lq[b, a] * work[b]
        q += acc * acc
    return -0.5 * (nu + p) * math.log1p(q / nu)


@_jit.njit(cache=True, nogil=True)
def _line_value(lp, y, sw, m, s, u, a, c, pen, delta, terms):
    """``J(theta + delta v)`` from the scores ``m_n + delta u_n`` and
    ``s_n + 2 delta a_n + delta^2 c_n`` and the penalty terms
    ``pen = (||w||^2, w . v_w, ||v_w||^2)``
    (:func:`bayesdrop.model.losses.kernels.objective_from_scores`); each example's term
    also to ``terms`` unless it is empty."""
    penalty = pen[0] + 2.0 * delta * pen[1] + delta * delta * pen[2]
    return objective_from_scores(lp, y, sw, m, s, penalty, terms, u, a, c, delta)


@_jit.njit(cache=True, nogil=True)
def _line_move(lp, M, vkind, scale, D, y, sw, theta, m, s, line, u, c, a, rng,
               stats, cur_terms, prop_terms):
    """A Metropolis-Hastings move of ``theta`` on ``exp(-J)`` along the fixed direction
    ``v = line[:-2]`` with ``v_b = 1``: the intercept's regression line under the Laplace
    approximation (:func:`bayesdrop.samplers.driver.intercept_line`). The proposal
    ``theta* = theta + (b* - b) v`` draws ``b* ~ N(b_hat, sd^2)`` (``line[-2:]``: the
    intercept's Laplace marginal) independently of ``b``; accepted with probability
    ``min(1, exp(J(theta) - J(theta*)) phi((b - b_hat)/sd) / phi((b* - b_hat)/sd))`` (a
    translation along a line: the reverse move has the same Jacobian). Exact for any
    ``J``. ``u = Xbar v`` and ``c_n = V_n . v_w^2`` are fixed; ``a_n = V_n . (w v_w)`` is
    filled here. ``J`` along the line uses the scores ``m + delta u``,
    ``s + 2 delta a + delta^2 c``; an accepted move changes ``theta`` only, and the caller
    recomputes ``(m, s)`` from it, so that the chain's state between sweeps is ``theta``
    alone (a run continued from ``theta`` computes the same scores, to the bit).
    Returns ``J`` at the resulting state and whether the move was accepted; the
    per-example terms of the current state go to ``cur_terms``, those of the proposal to
    ``prop_terms`` (unless empty: the caller swaps them on acceptance). ``stats`` counts
    ``(accepted, proposed)``."""
    n = m.shape[0]
    p = theta.shape[0]
    b_hat, sd = line[p], line[p + 1]
    pen = np.zeros(3)
    for d in range(D):
        pen[0] += theta[d] * theta[d]
        pen[1] += theta[d] * line[d]
        pen[2] += line[d] * line[d]
    if vkind == V_LIKE_X:
        for i in range(n):
            acc = 0.0
            for d in range(D):
                acc += M[i, d] * theta[d] * line[d]
            a[i] = scale * acc
    else:
        a[:] = scale * pen[1] if vkind == V_CONSTANT else 0.0
    b = theta[p - 1]
    b_new = b_hat + sd * rng.standard_normal()
    delta = b_new - b
    f0 = _line_value(lp, y, sw, m, s, u, a, c, pen, 0.0, cur_terms)
    f1 = _line_value(lp, y, sw, m, s, u, a, c, pen, delta, prop_terms)
    stats[1] += 1.0
    zb, zn = (b - b_hat) / sd, (b_new - b_hat) / sd
    if not math.log(rng.random()) < (f0 - f1) + 0.5 * (zn * zn - zb * zb):
        return f0, False
    stats[0] += 1.0
    for j in range(p):
        theta[j] += delta * line[j]
    return f1, True


#: most steps of a slice move's stepping out (Neal 2003's ``m``), split at random between
#: the two ends of the interval: the cost of a line is bounded whatever its width
SLICE_STEPS = 32
#: most shrinkage steps of a slice move: an interval shrunk this often (2^-200 of its
#: width at the least) has met a slice narrower than the rounding of ``J`` -- the line
#: move then stays where it is
SLICE_SHRINKS = 200


@_jit.njit(cache=True, nogil=True)
def slice_line(lp, y, sw, m, s, u, zeros, pen, width, rng, stats):
    """One slice move of ``exp(-J)`` on the line ``theta + delta v`` (Neal 2003, section
    4: stepping out by ``width``, at most :data:`SLICE_STEPS` steps, then shrinkage), for
    a design without noise (``s = 0``): the scores on the line are ``m + delta u``
    (``u = Xbar v``) and the penalty ``pen[0] + 2 delta pen[1] + delta^2 pen[2]`` with
    ``pen = (||w||^2, w . v_w, ||v_w||^2)``. Returns the drawn ``delta``.

    The move draws ``delta`` from ``exp(-J(theta + delta v))`` restricted to a slice
    ``{delta : J(theta + delta v) < J(theta) + e}``, ``e ~ Exp(1)``: it leaves the
    conditional law of ``theta`` on the line -- hence ``exp(-J)`` -- invariant, for any
    fixed direction and width (Neal's stepping out and shrinkage are reversible).
    ``stats`` counts ``(evaluations of J, line moves)``."""
    none = m[:0]
    level = _line_value(lp, y, sw, m, s, u, zeros, zeros, pen, 0.0, none) - math.log1p(
        -rng.random())
    left = -width * rng.random()
    right = left + width
    steps_left = int(SLICE_STEPS * rng.random())  # floor: the product is >= 0
    steps_right = SLICE_STEPS - 1 - steps_left
    evals = 0
    while steps_left > 0 and _line_value(lp, y, sw, m, s, u, zeros, zeros, pen, left,
                                         none) < level:
        left -= width
        steps_left -= 1
        evals += 1
    while steps_right > 0 and _line_value(lp, y, sw, m, s, u, zeros, zeros, pen, right,
                                          none) < level:
        right += width
        steps_right -= 1
        evals += 1
    delta = 0.0
    for _ in range(SLICE_SHRINKS):
        trial = left + (right - left) * rng.random()
        evals += 1
        if _line_value(lp, y, sw, m, s, u, zeros, zeros, pen, trial, none) < level:
            delta = trial
            break
        if trial < 0.0:
            left = trial
        else:
            right = trial
    stats[0] += evals
    stats[1] += 1.0
    return delta


@_jit.njit(cache=True, nogil=True)
def _slice_moves(lp, D, y, sw, theta, m, s, V, U, widths, rng, stats, u, zeros):
    """:func:`slice_line` along each column ``v`` of ``V`` in turn (``U = Xbar V``;
    ``widths[k]`` the ``k``-th stepping-out width), for a design without noise. The
    directions and widths are fixed for the chain (:func:`slice_directions`). ``theta``
    and ``m`` are updated in place (``m`` incrementally: the caller recomputes the scores
    from ``theta`` afterwards); ``stats`` counts ``(evaluations of J, line moves)``."""
    n = m.shape[0]
    pen = np.zeros(3)
    for k in range(V.shape[1]):
        for i in range(n):
            u[i] = U[i, k]
        pen[0] = 0.0
        pen[1] = 0.0
        pen[2] = 0.0
        for d in range(D):
            pen[0] += theta[d] * theta[d]
            pen[1] += theta[d] * V[d, k]
            pen[2] += V[d, k] * V[d, k]
        delta = slice_line(lp, y, sw, m, s, u, zeros, pen, widths[k], rng, stats)
        for a in range(theta.shape[0]):
            theta[a] += delta * V[a, k]
        for i in range(n):
            m[i] += delta * u[i]


@_jit.njit(cache=True, nogil=True)
def _independence_proposal(lp, Xb, M, vkind, scale, D, y, sw, mu, Lq, nu, rng, v, z, prop,
                           m2, s2, prop_terms):
    """Draw ``prop`` from the multivariate t proposal of the independence MH move (centre
    ``mu``, precision ``Lq Lq^T``, ``nu`` degrees of freedom: ``mu + Lq^{-T} v / g``,
    ``v ~ N(0, I)``, ``g^2 ~ chi^2_nu / nu``); its scores go to ``(m2, s2)``, its terms
    of ``J`` to ``prop_terms`` (unless empty). Returns ``-J(prop)``."""
    p = prop.shape[0]
    for a in range(p):
        v[a] = rng.standard_normal()
    g = math.sqrt(2.0 * rng.standard_gamma(0.5 * nu) / nu)
    for a in range(p - 1, -1, -1):  # Lq^T dz = v
        acc = v[a]
        for b in range(a + 1, p):
            acc -= Lq[b, a] * z[b]
        z[a] = acc / Lq[a, a]
    for a in range(p):
        prop[a] = mu[a] + z[a] / g
    _scores(Xb, M, vkind, scale, D, prop, m2, s2)
    return _log_target(lp, D, y, sw, prop, m2, s2, prop_terms)


@_jit.njit(cache=True, nogil=True)
def run_sweeps(lp, Xb, M, vkind, scale, D, y, sw, theta, m, s, n_sweeps,
               first_sweep, tune, thin, overrelax, rng, theta_out, lp_out, aug_sum, aug_out,
               first_kept, mh, gibbs, mu, Lq, nu, mh_stats, pgt, terms_out, line, line_v,
               line_u, line_c, line_stats, slice_V, slice_U, slice_w, slice_stats, syrk,
               potrf):
    """Advance one chain by ``n_sweeps`` sweeps (in place); returns the number kept.

    ``pgt`` are the loss's draw tables
    (:meth:`bayesdrop.model.losses.Loss.draw_tables`). If ``terms_out`` has rows, a kept
    sweep also writes each example's term of ``J`` (minus its pointwise log
    pseudo-likelihood) to its row.

    ``theta``, ``m``, ``s`` are the chain's state (updated). Sweep ``k`` (counted from
    ``first_sweep``) is kept when ``k >= tune`` and ``(k - tune + 1) % thin == 0``: its
    ``theta`` and ``lp = -J`` go to row ``first_kept + j`` of ``theta_out`` / ``lp_out``,
    its augmentation is added to ``aug_sum`` (and stored in ``aug_out`` if that has rows).

    Every sweep ends with ``mh`` (an integer >= 0) independence Metropolis-Hastings moves
    on ``theta`` targeting ``exp(-J)`` (:func:`_independence_proposal`): the proposal is a
    multivariate t with ``nu`` degrees of freedom, centre ``mu`` (the mode) and precision
    ``Lq Lq^T`` (the Laplace approximation); each accepted with probability
    ``min(1, exp(-J(theta*)) q(theta) / (exp(-J(theta)) q(theta*)))``. The Gibbs half
    leaves the joint law of ``(theta, augmentation)`` invariant and the MH half the marginal
    ``exp(-J)`` (each MH move on its own); the augmentation is drawn afresh from ``theta``
    at the next sweep, so the composition samples ``exp(-J)`` exactly. ``mh_stats``
    counts ``(accepted, proposed)``.

    ``syrk``, ``potrf``: the addresses of BLAS ``dsyrk`` and LAPACK ``dpotrf``
    (:func:`bayesdrop._blas.dsyrk_address`, :func:`bayesdrop._blas.dpotrf_address`).

    Without ``gibbs`` an iteration is the ``mh`` independence moves alone (no
    augmentation draw, no Gaussian step, no line move: a pure independence sampler, exact
    on its own; ``mh >= 1``); a kept iteration then adds the augmentation's conditional
    mean given ``theta`` to ``aug_sum`` (a draw of it if ``aug_out`` has rows).

    With ``line``, the Gaussian step is followed (before the MH move) by
    :func:`_line_move` along ``line_v[:-2]`` (``line_u = Xbar v``, ``line_c = V
    v_w^2``), which ``line_stats`` counts.

    Where ``slice_V`` has columns (a design without noise), :func:`_slice_moves` follows
    the line move: slice sampling of ``exp(-J)`` along each column (``slice_U = Xbar
    slice_V``, widths ``slice_w``; ``slice_stats`` counts evaluations of ``J`` and line
    moves), then the scores are recomputed from ``theta``.
    """
    n = Xb.shape[0]
    p = Xb.shape[1]
    store_terms = terms_out.shape[0] > 0
    # the MH move's per-example terms of the current state and of the proposal (only
    # kept when the kept sweeps store them)
    cur_terms = np.empty(n if store_terms else 0)
    prop_terms = np.empty(n if store_terms else 0)
    rho = np.empty(n)
    t = np.empty(n)
    a1 = np.empty(n)
    a2 = np.empty(n)
    W = np.empty((min(n, _GRAM_ROWS), p))
    z = np.empty(p)
    v = np.empty(p)
    prop = np.empty(p)
    work = np.empty(p)
    m2 = np.empty(n)
    s2 = np.empty(n)
    line_a = np.empty(n)
    slice_u = np.empty(n)
    slice_zeros = np.zeros(n)
    rhs = np.empty(p)
    nd = np.empty(D)
    syrk_args = syrk_work()
    beta = math.sqrt(1.0 - overrelax * overrelax)
    kept = 0
    carry, lt_carry = False, 0.0
    for k in range(n_sweeps):
        sweep = first_sweep + k
        if gibbs:
            # 1. augmentation and system weights
            draws_loop(lp, m, s, y, sw, rng, pgt, a1, a2, rho, t)
            # 2. A = 2 I' + Xbar^T diag(rho) Xbar + diag(V^T rho), r = Xbar^T t; the Gram
            # product in row blocks so that the weighted block stays in cache
            A = np.zeros((p, p))
            for lo in range(0, n, _GRAM_ROWS):
                hi = min(n, lo + _GRAM_ROWS)
                for i in range(lo, hi):
                    ri = math.sqrt(rho[i])
                    for j in range(p):
                        W[i - lo, j] = Xb[i, j] * ri
                syrk_rows(syrk, W, hi - lo, A, syrk_args)  # sum of (sqrt(rho) x)(sqrt(rho) x)^T
            mirror_upper(A)
            # r = Xbar^T t and the noise diagonal V^T rho, one pass over the rows
            for a in range(p):
                rhs[a] = 0.0
            for d in range(D):
                nd[d] = 0.0
            rho_sum = 0.0
            for i in range(n):
                ti = t[i]
                for a in range(p):
                    rhs[a] += Xb[i, a] * ti
                if vkind == V_LIKE_X:
                    ri = rho[i]
                    for d in range(D):
                        nd[d] += M[i, d] * ri
                rho_sum += rho[i]
            for d in range(D):
                extra = (nd[d] if vkind == V_LIKE_X
                         else (rho_sum if vkind == V_CONSTANT else 0.0))
                A[d, d] += 2.0 + scale * extra
            cholesky_lower(potrf, A)  # A positive definite; its lower triangle becomes L
            L = A
            # theta' = alpha theta + L^{-T} ((1 - alpha) L^{-1} r + sqrt(1 - alpha^2) z)
            for a in range(p):
                acc = rhs[a]
                for b in range(a):
                    acc -= L[a, b] * v[b]
                v[a] = acc / L[a, a]
            for a in range(p):
                v[a] = (1.0 - overrelax) * v[a] + beta * rng.standard_normal()
            for a in range(p - 1, -1, -1):
                acc = v[a]
                for b in range(a + 1, p):
                    acc -= L[b, a] * z[b]
                z[a] = acc / L[a, a]
            for a in range(p):
                theta[a] = overrelax * theta[a] + z[a]
            # 3. new scores; the independence MH move; kept sweeps store theta, lp, augmentation
            _scores(Xb, M, vkind, scale, D, theta, m, s)
        # J of the current state (and its terms), when a move has it (without the Gibbs
        # step the state is the last iteration's, and so is its J)
        known = carry and not gibbs
        lt = lt_carry
        if line and gibbs:
            J_line, moved = _line_move(lp, M, vkind, scale, D, y, sw, theta, m, s,
                                       line_v, line_u, line_c, line_a, rng, line_stats,
                                       cur_terms, prop_terms)
            if moved:
                cur_terms, prop_terms = prop_terms, cur_terms
                _scores(Xb, M, vkind, scale, D, theta, m, s)
            lt = -J_line
            known = True
        if slice_V.shape[1] > 0 and gibbs:
            _slice_moves(lp, D, y, sw, theta, m, s, slice_V, slice_U, slice_w, rng,
                         slice_stats, slice_u, slice_zeros)
            _scores(Xb, M, vkind, scale, D, theta, m, s)
            known = False
        for _ in range(mh):
            if not known:
                lt = _log_target(lp, D, y, sw, theta, m, s, cur_terms)
                known = True
            lt_prop = _independence_proposal(lp, Xb, M, vkind, scale, D, y, sw, mu, Lq, nu,
                                             rng, v, z, prop, m2, s2, prop_terms)
            log_ratio = (lt_prop - _log_proposal(prop, mu, Lq, nu, work)) - (
                lt - _log_proposal(theta, mu, Lq, nu, work))
            mh_stats[1] += 1.0
            if math.log(rng.random()) < log_ratio:
                mh_stats[0] += 1.0
                for a in range(p):
                    theta[a] = prop[a]
                for i in range(n):
                    m[i] = m2[i]
                    s[i] = s2[i]
                cur_terms, prop_terms = prop_terms, cur_terms
                lt = lt_prop
        carry, lt_carry = known, lt
        if sweep >= tune and (sweep - tune + 1) % thin == 0:
            row = first_kept + kept
            if not gibbs:  # the augmentation given theta: drawn if its traces are kept,
                # else its conditional mean (the running mean stays unbiased)
                if aug_out.shape[0] > 0:
                    draws_loop(lp, m, s, y, sw, rng, pgt, a1, a2, rho, t)
                else:
                    means_loop(lp, m, s, y, sw, a1, a2, rho, t)
            for a in range(p):
                theta_out[row, a] = theta[a]
            if known:
                lp_out[row] = lt
                if store_terms:
                    for i in range(n):
                        terms_out[row, i] = cur_terms[i]
            else:
                lp_out[row] = _log_target(lp, D, y, sw, theta, m, s,
                                          terms_out[row] if store_terms else cur_terms)
            _store_augmentation(row, a1, a2, aug_sum, aug_out)
            kept += 1
    return kept
