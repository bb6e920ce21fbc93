"""Newton-CG compiled, for CSR designs: the step evaluator :class:`CsrSteps` whose
operations numba compiles into :func:`bayesdrop.solvers.newton.loop.newton_loop` -- the
loop the Python evaluators run, here with no Python between the steps (on newsgroups,
1427 x 22178, about 0.4 ms of Python per step around 2-3 ms of products).

The same steps as :class:`bayesdrop.solvers.newton.steps.DesignSteps` with
``linalg="cg"``, from the compiled row passes of :mod:`bayesdrop.linalg.kernels` and the
loss's compiled kernels (:mod:`bayesdrop.model.losses.kernels`): the gradient's pass
(on a wide design also writing the Hessian's entries,
:func:`~bayesdrop.linalg.kernels.csr_gradient_pass`), the preconditioner of
:func:`~bayesdrop.solvers.newton.steps.cg_preconditioner`, CG by
:func:`~bayesdrop.linalg.kernels.csr_pcg`, and along a line the scores
``m + t Xbar p`` and ``s = V (w + t p_w)^2`` -- the first trial's two products in one pass.
The gradient's pass, the line's passes and CG's products run in the row chunks of
:func:`~bayesdrop.linalg.kernels.row_chunks`, on numba's threads where allowed: the same
sums for any number of threads (the line's rows are independent; the gradient's and the
products' chunks are added in chunk order).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ... import _jit
from ...linalg.kernels import csr_gradient_pass, csr_hessian_entries, csr_pcg
from ...model.losses.kernels import objective_from_scores, ridge, term_and_value
from . import loop
from .compiled import EVALUATORS, newton_loop_compiled

__all__ = ["CsrSteps", "csr_steps", "newton_csr"]


class CsrSteps(NamedTuple):
    """The state of the compiled CSR evaluator: the data (``lp`` the loss's parameter
    tuple; ``X`` and ``M`` of one sparsity pattern as ``indptr``, ``indices``, ``xdata``,
    ``mdata``, ``V = scale * M``; ``fi`` fit intercept, labels ``y``, sample weights
    ``sw``), the current point ``theta`` and its scores (``m, s``), the line's
    ``xs = Xbar p``, a trial point ``cand`` and the trial points' scores (``m_c, s_c``;
    a doubling's ``m_e, s_e``; ``J_trial`` their ``J``), the per-example derivatives
    (``d_*``; ``order[0]``: 1 first only, 2 also second), the noise diagonal
    ``nd = 2 V^T d_s``, the Hessian's entries ``xg`` (``X`` and ``G = 2 V diag(w)``
    interleaved), whether the design is wide (:func:`~.steps.cg_wide`: the gradient's
    pass writes ``xg``, and CG is preconditioned without ``H``'s diagonal), ``ridge``
    as ``RIDGE``, CG's iteration limit, and the products' row chunks and whether they
    run on numba's threads (:func:`bayesdrop.linalg.kernels.csr_hvp`; a bool here, never
    None: one machine code for both, compiled by ``python -m bayesdrop compile``)."""

    lp: tuple
    theta: np.ndarray
    cand: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    xdata: np.ndarray
    mdata: np.ndarray
    scale: float
    fi: bool
    y: np.ndarray
    sw: np.ndarray
    m: np.ndarray
    s: np.ndarray
    xs: np.ndarray
    m_c: np.ndarray
    s_c: np.ndarray
    m_e: np.ndarray
    s_e: np.ndarray
    J_trial: np.ndarray
    d_m: np.ndarray
    d_s: np.ndarray
    d_mm: np.ndarray
    d_ms: np.ndarray
    d_ss: np.ndarray
    order: np.ndarray
    nd: np.ndarray
    xg: np.ndarray
    wide: bool
    ridge: float
    cg_maxiter: int
    chunks: np.ndarray
    threads: bool
    exact: bool


@_jit.njit(cache=True, nogil=True)
def csr_steps(lp, indptr, indices, xdata, mdata, scale, fi, D, y, sw, m, s, ridge,
              cg_maxiter, chunks, threads):
    """A :class:`CsrSteps` with its workspace for ``D`` features, at the scores
    ``(m, s)`` of the start."""
    n = indptr.shape[0] - 1
    p = D + (1 if fi else 0)
    return CsrSteps(lp, np.zeros(p), np.empty(p), indptr, indices, xdata, mdata, scale, fi,
                    y, sw, m.copy(), s.copy(), np.empty(n), np.empty(n), np.empty(n),
                    np.empty(n), np.empty(n), np.zeros(2), np.empty(n), np.empty(n),
                    np.empty(n), np.empty(n), np.empty(n), np.zeros(1, dtype=np.int64),
                    np.empty(D), np.empty(2 * xdata.shape[0]), 2 * n <= D, ridge,
                    cg_maxiter, chunks, threads, False)


@_jit.njit(cache=True, nogil=True, inline="always")
def _line_rows(indptr, indices, xdata, mdata, scale, cand, step, sb, m, t, xs, m_c, s_c,
               new_line, lo, hi):
    """Rows ``lo .. hi - 1`` of :func:`_line` (each row writes only its own entries)."""
    for i in range(lo, hi):
        si = 0.0
        if new_line:
            xi = 0.0
            for k in range(indptr[i], indptr[i + 1]):
                j = indices[k]
                xi += xdata[k] * step[j]
                cj = cand[j]
                si += mdata[k] * (cj * cj)
            xs[i] = xi + sb
        else:
            for k in range(indptr[i], indptr[i + 1]):
                cj = cand[indices[k]]
                si += mdata[k] * (cj * cj)
        m_c[i] = m[i] + t * xs[i]
        s_c[i] = si * scale


@_jit.njit(cache=True, nogil=True, parallel=True)
def _line_chunks_threads(indptr, indices, xdata, mdata, scale, cand, step, sb, m, t, xs, m_c,
                         s_c, new_line, chunks):
    """:func:`_line_rows` over the row chunks on numba's threads (the same values: no row
    depends on another)."""
    for c in _jit.prange(chunks.shape[0] - 1):
        _line_rows(indptr, indices, xdata, mdata, scale, cand, step, sb, m, t, xs, m_c, s_c,
                   new_line, chunks[c], chunks[c + 1])


@_jit.njit(cache=True, nogil=True)
def _line(ev, theta, step, t, m_c, s_c, new_line):
    """The scores of ``theta + t step``: ``m_c = m + t xs`` and ``s_c = V cand_w^2``,
    where ``xs = Xbar step`` is computed in the same pass on a ``new_line``; the rows in
    their chunks on numba's threads where ``ev.threads``."""
    cand = ev.cand
    for a in range(cand.shape[0]):
        cand[a] = theta[a] + t * step[a]
    sb = step[step.shape[0] - 1] if ev.fi else 0.0
    chunks = ev.chunks
    if ev.threads and chunks.shape[0] > 2:
        _line_chunks_threads(ev.indptr, ev.indices, ev.xdata, ev.mdata, ev.scale, cand, step,
                             sb, ev.m, t, ev.xs, m_c, s_c, new_line, chunks)
    else:
        _line_rows(ev.indptr, ev.indices, ev.xdata, ev.mdata, ev.scale, cand, step, sb,
                   ev.m, t, ev.xs, m_c, s_c, new_line, 0, ev.indptr.shape[0] - 1)
    D = ev.nd.shape[0]
    none = m_c[:0]
    return objective_from_scores(ev.lp, ev.y, ev.sw, m_c, s_c, ridge(cand, D), none, none,
                                 none, none, 0.0)


@_jit.njit(cache=True, nogil=True)
def _derivatives(ev, order):
    """Every example's (weighted) derivatives in ``(m, s)`` at the current scores, the
    second ones (``d_mm`` floored at 0, as :func:`bayesdrop.linalg.hessian.curvature`) with
    ``order=2``; returns ``sum_n`` of the weighted terms."""
    value = 0.0
    for i in range(ev.m.shape[0]):
        out = term_and_value(ev.lp, ev.m[i], ev.s[i], ev.y[i], order)
        w = ev.sw[i]
        value += w * out[0]
        ev.d_m[i] = w * out[1]
        ev.d_s[i] = w * out[2]
        if order == 2:
            ev.d_mm[i] = max(w * out[3], 0.0)
            ev.d_ms[i] = w * out[4]
            ev.d_ss[i] = w * out[5]
    ev.order[0] = order
    return value


@_jit.njit(cache=True, nogil=True)
def _gradient(ev, entries):
    """The gradient ``Xbar^T d_m + 2 w + nd w`` and ``nd = 2 V^T d_s`` in one pass (with
    ``entries`` also writing the Hessian's entries ``xg``, as
    :func:`bayesdrop.linalg.hessian.curvature` with ``entries=True``)."""
    theta = ev.theta
    D = ev.nd.shape[0]
    g = np.empty(theta.shape[0])
    w = theta[:D]
    csr_gradient_pass(ev.indptr, ev.indices, ev.xdata, ev.mdata, ev.scale, w, ev.d_m, ev.d_s,
                      g, ev.nd, ev.xg, entries, ev.chunks, ev.threads)
    if ev.fi:
        g[D] = np.sum(ev.d_m)
    for d in range(D):
        nd = 2.0 * (ev.nd[d] * ev.scale)
        ev.nd[d] = nd
        g[d] += 2.0 * w[d] + nd * w[d]
    return g


EVALUATORS.append(CsrSteps)  # take_doubled and retry_exact: the dense evaluator's


def _is_csr(ev):
    from numba import types

    return isinstance(ev, types.BaseNamedTuple) and ev.instance_class is CsrSteps


@_jit.overload(loop.start)
def _start(ev, theta):
    if not _is_csr(ev):
        return None

    def impl(ev, theta):  # the scores at theta came with ev (csr_steps)
        loop.put(ev.theta, theta)
        value = _derivatives(ev, np.int64(2))
        g = _gradient(ev, ev.wide)
        return ridge(theta, ev.nd.shape[0]) + value, g
    return impl


@_jit.overload(loop.newton_direction)
def _newton_direction(ev, g, rtol):
    if not _is_csr(ev):
        return None

    def impl(ev, g, rtol):
        D = ev.nd.shape[0]
        w = ev.theta[:D]
        if ev.order[0] < 2:  # second derivatives here; nd is the gradient's (same d_s)
            _derivatives(ev, np.int64(2))
            if ev.wide:
                csr_hessian_entries(ev.indptr, ev.indices, ev.xdata, ev.mdata, ev.scale,
                                    ev.fi, w, ev.d_mm, ev.d_ms, ev.d_ss, ev.nd, ev.xg,
                                    ev.xg[:0])
        n_p = g.shape[0]
        # the preconditioner of steps.cg_preconditioner
        diag = np.empty(n_p)
        if ev.wide:
            for d in range(D):
                diag[d] = 2.0 + ev.nd[d]
        else:  # H's diagonal, with the entries for the products
            csr_hessian_entries(ev.indptr, ev.indices, ev.xdata, ev.mdata, ev.scale, ev.fi,
                                w, ev.d_mm, ev.d_ms, ev.d_ss, ev.nd, ev.xg, diag)
        if ev.fi:
            diag[D] = np.mean(ev.d_mm)
        floor = ev.ridge * max(np.max(diag), 1.0)
        for a in range(n_p):
            diag[a] = 1.0 / max(diag[a], floor)
        base = np.empty(D)
        for d in range(D):
            base[d] = 2.0 + ev.nd[d]
        return csr_pcg(ev.indptr, ev.indices, ev.xg, ev.fi, ev.d_mm, ev.d_ms, ev.d_ss, base,
                       diag, g, rtol, ev.cg_maxiter, ev.chunks, ev.threads)[0]
    return impl


@_jit.overload(loop.chord_solve)
def _chord_solve(ev, q):
    if not _is_csr(ev):
        return None

    def impl(ev, q):  # pragma: no cover - CG keeps no factor (exact is False)
        return q.copy()
    return impl


@_jit.overload(loop.trial)
def _trial(ev, theta, step, t, slot, derivs):
    if not _is_csr(ev):
        return None

    def impl(ev, theta, step, t, slot, derivs):
        if slot == 0:
            J = _line(ev, theta, step, t, ev.m_c, ev.s_c, t == 1.0)
        else:
            J = _line(ev, theta, step, t, ev.m_e, ev.s_e, False)
        ev.J_trial[slot] = J
        return J
    return impl


@_jit.overload(loop.accept)
def _accept(ev, theta, second):
    if not _is_csr(ev):
        return None

    def impl(ev, theta, second):
        loop.put(ev.theta, theta)
        loop.put(ev.m, ev.m_c)
        loop.put(ev.s, ev.s_c)
        order = np.int64(2) if second else np.int64(1)
        _derivatives(ev, order)
        return ev.J_trial[0], _gradient(ev, second and ev.wide)
    return impl


@_jit.njit(cache=True, nogil=True)
def newton_csr(lp, indptr, indices, xdata, mdata, scale, fi, D, y, sw, theta0, m, s, opts,
               ridge, cg_maxiter, chunks, threads):
    """:func:`~bayesdrop.solvers.newton.compiled.newton_loop_compiled` from ``theta0``
    (whose scores are ``(m, s)``) on the :class:`CsrSteps` of these arrays."""
    ev = csr_steps(lp, indptr, indices, xdata, mdata, scale, fi, D, y, sw, m, s, ridge,
                   cg_maxiter, chunks, threads)
    return newton_loop_compiled(ev, theta0, opts, True)
