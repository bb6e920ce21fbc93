"""The generic MCMC driver: chains, burn-in, thinning, progress and interrupts.

:func:`sample` is the one driver of every kernel of the Gibbs sweep (MATH.md sections
3-4); three runners advance the chains:

* the compiled sweeps of :mod:`bayesdrop.samplers._gibbs_dense` (dense designs with the
  hinge, logistic or epsilon-insensitive loss and a Cholesky back-end) and
  :mod:`bayesdrop.samplers._gibbs_sparse` (CSR designs with many features): the chains
  run in **threads** (the compiled loop releases the GIL), block by block so that
  progress, Ctrl-C and ``stop`` are handled between blocks;
* the Python kernel of :mod:`bayesdrop.samplers.gibbs` (``init``, ``step``,
  ``log_density``) for everything else (latent designs, the other back-ends): the chains
  run in parallel **processes**;
* a row back-end (:mod:`bayesdrop.samplers.rows`, e.g. a dask array): every chain in each
  pass over the rows.

Every chain draws from its own child of one :class:`numpy.random.SeedSequence`, so the
draws do not depend on whether the chains run in parallel or in sequence.
"""

from __future__ import annotations

import functools
import multiprocessing as mp
import os
import signal
import threading
import time
import warnings
from concurrent.futures import (
    FIRST_COMPLETED,
    ProcessPoolExecutor,
    ThreadPoolExecutor,
    wait,
)
from typing import NamedTuple

import numpy as np
import scipy.linalg as sla

from .._progress import ProgressBar
from .._validation import check_scalar, seed_sequence
from ..linalg import wls
from . import gibbs
from .gibbs import OVERRELAX

__all__ = ["SamplerResult", "sample"]


class LastState(NamedTuple):
    """Where every chain stopped: pass it as ``init`` to :func:`sample` to continue.

    Attributes
    ----------
    theta : ndarray of shape (chains, n_params)
        Each chain's current ``theta`` (its last sweep's, kept or not).
    rng_states : tuple of dict
        Each chain's ``numpy.random.Generator`` bit-generator state after its last sweep.
    entropies : tuple of int or None
        Row back-ends only: the chains' seeds of the chunk draws
        (:func:`bayesdrop.linalg.backend.block_rng`).
    sweep : int or None
        Row back-ends only: sweeps done; the next one draws with ``spawn_key=(sweep, b)``.
    mh : tuple of bool or None
        Compiled dense chains: whether each chain's independence MH move is still on
        (it is switched off after tuning when it accepted less than
        :data:`MH_MIN_ACCEPT` there); a continued run keeps that choice.
    """

    theta: np.ndarray
    rng_states: tuple
    entropies: tuple | None = None
    sweep: int | None = None
    mh: tuple | None = None


def generators_from_states(states):
    """``numpy.random.Generator`` objects resumed from saved bit-generator states.

    Examples
    --------
    >>> g = np.random.default_rng(1); state = g.bit_generator.state; a = g.random()
    >>> generators_from_states([state])[0].random() == a
    True
    """
    gens = []
    for state in states:
        gen = np.random.default_rng()
        gen.bit_generator.state = state
        gens.append(gen)
    return gens


class SamplerResult(NamedTuple):
    """Output of :func:`sample` for one problem.

    Attributes
    ----------
    theta : ndarray of shape (chains, draws, n_params)
    lp : ndarray of shape (chains, draws)
        ``-J(theta)`` of each kept draw.
    augmentation_mean : ndarray of shape (chains, n_augmentation, n_samples)
        Running mean of the augmentation variables over the kept sweeps (``u`` for the
        hinge, ``(u, u')`` for epsilon-insensitive, ``lambda`` for the logistic loss).
    augmentation : ndarray of shape (chains, draws, n_augmentation, n_samples) or None
        Full traces, only with ``store_augmentation=True``.
    theta_init : ndarray of shape (chains, n_params)
    tune_time, draw_time : ndarray of shape (chains,)
        Wall-clock seconds of burn-in and of the kept part of each chain.
    tune, thin : int
    interrupted : bool
        Whether sampling was stopped by ``KeyboardInterrupt`` (the draws are those
        collected until then, the same number for every chain).
    wall_time : float
        Wall-clock seconds of the whole call (all chains, parallel or not).
    mh_accept : ndarray of shape (chains,)
        Acceptance rate of the independence MH move per chain (NaN without it).
    intercept_accept : ndarray of shape (chains,)
        Acceptance rate of the intercept's MH move of the compiled dense sweep per chain
        (NaN without it; see :func:`sample`).
    last_state : LastState
        Where the chains stopped (``sample(..., init=result.last_state, tune=0)`` goes
        on from there, as NumPyro's ``MCMC.last_state``).
    log_likelihood : ndarray of shape (chains, draws, n_samples) or None
        Pointwise log pseudo-likelihood of each draw (``store_log_likelihood=True`` with
        the compiled sweeps), equal to
        :func:`bayesdrop.posterior.pointwise_log_likelihood` of the draws.
    """

    theta: np.ndarray
    lp: np.ndarray
    augmentation_mean: np.ndarray
    augmentation: np.ndarray | None
    theta_init: np.ndarray
    tune_time: np.ndarray
    draw_time: np.ndarray
    tune: int
    thin: int
    interrupted: bool
    wall_time: float = float("nan")
    mh_accept: np.ndarray = None
    last_state: LastState = None
    log_likelihood: np.ndarray | None = None
    intercept_accept: np.ndarray = None


# ------------------------------------------------------------------------------ one chain
class _Chain(NamedTuple):
    theta: np.ndarray
    lp: np.ndarray
    aug_mean: np.ndarray
    aug: np.ndarray | None
    n_kept: int
    tune_time: float
    draw_time: float
    interrupted: bool
    mh_stats: np.ndarray = None
    theta_last: np.ndarray = None
    rng_state: dict = None
    terms: np.ndarray | None = None
    mh_on: bool | None = None
    intercept_stats: np.ndarray = None


def _run_chain(problem, theta0, seed, *, tune, draws, thin, linalg, cg_tol, overrelax,
               store_augmentation, store_log_likelihood=False, report=None, stop=None,
               mh_on=None):
    """Run one chain; ``report(n_sweeps_done)`` is called after every sweep and
    ``stop()`` polled before every sweep. (The Python kernel does not keep the pointwise
    terms: ``store_log_likelihood`` is for the compiled sweeps; callers compute them
    afterwards, :func:`bayesdrop.posterior.pointwise_log_likelihood`.)"""
    rng = np.random.default_rng(seed)
    n_aug, n = problem.loss.n_augmentation, problem.design.n_samples
    p = problem.design.n_params
    theta_out = np.empty((draws, p))
    lp_out = np.empty(draws)
    aug_sum = np.zeros((n_aug, n))
    aug_out = np.empty((draws, n_aug, n)) if store_augmentation else None
    state = gibbs.init(problem, theta0)
    kept = 0
    sweep = 0
    interrupted = False
    t0 = time.perf_counter()
    t_tune = None
    try:
        for sweep in range(tune + draws * thin):
            if stop is not None and stop():
                interrupted = True
                break
            if sweep == tune:
                t_tune = time.perf_counter()
            state, info = gibbs.step(rng, problem, state, linalg=linalg, cg_tol=cg_tol,
                               overrelax=overrelax)
            if sweep >= tune and (sweep - tune + 1) % thin == 0:
                theta_out[kept] = state.theta
                lp_out[kept] = gibbs.log_density(problem, state)
                for j, a in enumerate(info.augmentation):
                    aug_sum[j] += a
                    if aug_out is not None:
                        aug_out[kept, j] = a
                kept += 1
            if report is not None:
                report(sweep + 1)
    except KeyboardInterrupt:
        interrupted = True
    t_end = time.perf_counter()
    if t_tune is None:
        t_tune = t_end
    aug_mean = aug_sum / max(kept, 1)
    return _Chain(theta_out[:kept], lp_out[:kept], aug_mean,
                  None if aug_out is None else aug_out[:kept], kept,
                  t_tune - t0, t_end - t_tune, interrupted, None, state.theta.copy(),
                  rng.bit_generator.state)


# ----------------------------------------------------------------- parallel machinery
_WORKER = {}


def _worker_init(problem, kwargs, counts, stop_event):
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C
    _WORKER.update(problem=problem, kwargs=kwargs, counts=counts, stop=stop_event,
                   parent=os.getppid())
    try:  # one BLAS thread per chain process: the chains are the parallelism
        from threadpoolctl import threadpool_limits

        _WORKER["limits"] = threadpool_limits(1)
    except Exception:  # pragma: no cover - threadpoolctl ships with scikit-learn
        pass


def _worker_chain(index, theta0, seed):
    counts = _WORKER["counts"]

    def report(k):
        counts[index] = k

    stop_event, parent = _WORKER["stop"], _WORKER["parent"]

    def stop():
        # the parent asked (Ctrl-C), or it is gone (SIGTERM / SIGKILL): an orphaned chain
        # stops at its next sweep instead of running on
        return stop_event.is_set() or os.getppid() != parent

    result = _run_chain(_WORKER["problem"], theta0, seed, report=report, stop=stop,
                        **_WORKER["kwargs"])
    if os.getppid() != parent:  # orphaned: nobody will read the result
        os._exit(0)
    return result


def _mp_context():
    methods = mp.get_all_start_methods()
    return mp.get_context("fork" if "fork" in methods else methods[0])


def _run_parallel(problem, inits, seeds, kwargs, cores, bar):
    ctx = _mp_context()
    chains = len(seeds)
    counts = ctx.Array("q", chains, lock=False)
    stop_event = ctx.Event()
    with ProcessPoolExecutor(max_workers=cores, mp_context=ctx, initializer=_worker_init,
                             initargs=(problem, kwargs, counts, stop_event)) as pool:
        futures = [pool.submit(_worker_chain, c, inits[c], seeds[c]) for c in range(chains)]
        return _collect(futures, counts, bar, stop_event, 0.05)


def _collect(futures, counts, bar, stop_event, interval):
    """Wait for the chains' futures, reporting ``sum(counts)`` to the progress bar; Ctrl-C
    sets ``stop_event`` (the chains stop at their next check) and waiting goes on."""
    results = [None] * len(futures)
    pending = set(range(len(futures)))
    while pending:
        try:
            for c in list(pending):
                if futures[c].done():
                    results[c] = futures[c].result()
                    pending.discard(c)
            bar.update(sum(counts[:]))
            if pending:  # wakes as soon as a chain finishes, else after ``interval``
                wait([futures[c] for c in pending], timeout=interval,
                     return_when=FIRST_COMPLETED)
        except KeyboardInterrupt:
            stop_event.set()
    return results


# -------------------------------------------------------------------- compiled chains
#: work (examples x parameters) of the first block of compiled sweeps (about 10-50 ms on
#: one core); later blocks are sized from the measured time per sweep
_BLOCK_WORK = 4_000_000
#: wall-clock seconds a block of compiled sweeps aims at: progress reports, Ctrl-C and
#: ``stop`` are handled between blocks, so an interrupt acts within about this long
#: (or one sweep, if a single sweep takes longer), whatever the data and hyper-parameters
BLOCK_SECONDS = 0.1
#: most sweeps per compiled block
_BLOCK_MAX = 1000


def next_block(block, elapsed):
    """Sweeps in the next compiled block, from the last block's ``block`` sweeps and
    ``elapsed`` seconds: aim at :data:`BLOCK_SECONDS` a block, at most double the last
    block, at least one sweep.

    Examples
    --------
    >>> next_block(100, 1.0), next_block(10, 0.001), next_block(1, 30.0)
    (10, 20, 1)
    """
    per_sweep = elapsed / max(block, 1)
    if per_sweep <= 0.0:
        return min(2 * block, _BLOCK_MAX)
    return int(max(1, min(_BLOCK_MAX, 2 * block, BLOCK_SECONDS / per_sweep)))


def compiled_setup(problem, linalg="auto"):
    """The arrays of the compiled sweep for ``problem``, or None when it does not apply.

    Dense designs (:mod:`._gibbs_dense`, ``kind="dense"``): a Cholesky back-end (at most
    :data:`bayesdrop.linalg.wls.MAX_CHOLESKY_PARAMS` parameters). Sparse designs
    (:mod:`._gibbs_sparse`, ``kind="csr"``): more parameters than that (where the Python
    kernel would use the Woodbury or CG back-end) and noise variances stored like ``X``,
    constant or absent. Both need a built-in loss (hinge, logistic, epsilon-insensitive)
    and a linear (not latent) design.
    """
    from ..model.design import Design

    design, loss = problem.design, problem.loss
    if type(design) is not Design:
        return None
    if design.sparse:
        return _csr_setup(problem, linalg)
    if linalg not in ("auto", "cholesky") or wls.choose_linalg(design, linalg) != "cholesky":
        return None
    code = _loss_code(loss)
    if code is None:
        return None
    code, p0, p1 = code
    n, D, p = design.n_samples, design.n_features, design.n_params
    Xb = np.empty((n, p))
    Xb[:, :D] = design.X
    if design.fit_intercept:
        Xb[:, D] = 1.0
    V = design.variance
    M = np.zeros((1, 1))
    if V.is_zero:
        vkind, scale = 0, 0.0
    elif V.is_constant:
        vkind, scale = 2, V.scale
    else:
        vkind, scale = 1, V.scale
        M = np.ascontiguousarray(V.matrix.toarray() if hasattr(V.matrix, "toarray")
                                 else V.matrix, dtype=np.float64)
    sw = np.ones(n) if loss.weights is None else np.ascontiguousarray(loss.weights)
    return dict(kind="dense", code=code, p0=float(p0), p1=float(p1), Xb=Xb, M=M,
                vkind=vkind, scale=float(scale), D=D, fit_intercept=design.fit_intercept,
                y=np.ascontiguousarray(problem.y, dtype=np.float64), sw=sw,
                n_aug=loss.n_augmentation, pg_tables=_pg_tables(code, p0, sw))


def _loss_code(loss):
    """``(code, p0, p1)`` of a built-in loss for the compiled sweeps (the codes of
    :func:`bayesdrop.solvers._newton_dense.loss_code`), or None (the squared loss has no
    augmentation to sample)."""
    from ..solvers._newton_dense import loss_code

    code = loss_code(loss)
    if code is None or code[0] == 3:
        return None
    return code[0], float(code[1]), float(code[2])


def _pg_tables(code, p0, sw):
    """The fractional Polya-Gamma tables of the logistic loss (shapes ``h_n = p0 sw_n``);
    empty ones for the other losses."""
    from .pg_inversion import PGTables

    h = p0 * sw if code == 1 else np.ones_like(sw)
    return PGTables.for_shapes(h).arrays()


def _csr_setup(problem, linalg):
    """The arrays of the compiled sparse sweep (see :func:`compiled_setup`), or None."""
    design, loss = problem.design, problem.loss
    if linalg not in ("auto", "woodbury", "cg"):
        return None
    if wls.choose_linalg(design, linalg) == "cholesky":
        return None
    code = _loss_code(loss)
    if code is None:
        return None
    X, V = design.X, design.variance
    arrays = design.row_kernel_arrays()
    if V.is_zero:
        vkind, scale, mdata = 0, 0.0, X.data
    elif V.is_constant:
        vkind, scale, mdata = 2, float(V.scale), X.data
    elif arrays is not None and arrays[0] == "csr":
        vkind, scale, mdata = 1, float(arrays[2]), arrays[1][3]
    else:
        return None
    n = design.n_samples
    sw = np.ones(n) if loss.weights is None else np.ascontiguousarray(loss.weights)
    from ._gibbs_sparse import dual_arrays, dual_blocks

    return dict(kind="csr", blocks=dual_blocks(X), dual=dual_arrays(X), code=code[0],
                p0=code[1], p1=code[2], indptr=X.indptr,
                indices=X.indices, xdata=np.ascontiguousarray(X.data, dtype=np.float64),
                mdata=np.ascontiguousarray(mdata, dtype=np.float64), vkind=vkind,
                scale=scale, D=design.n_features, fit_intercept=design.fit_intercept,
                n=n, p=design.n_params,
                y=np.ascontiguousarray(problem.y, dtype=np.float64), sw=sw,
                n_aug=loss.n_augmentation, pg_tables=_pg_tables(code[0], code[1], sw))


def intercept_line(setup, laplace):
    """``(line, Xbar v, V v_w^2)`` of the compiled dense sweep's line move
    (:func:`bayesdrop.samplers._gibbs_dense._line_move`), ``line = (v, b_hat, sd)``, or
    None where it does not apply.

    Under the Laplace approximation ``N(theta_hat, H^{-1})`` the intercept ``b`` has
    the marginal ``N(b_hat, sd^2)``, ``sd^2 = (H^{-1})_bb``, and the other parameters
    follow it along its regression line ``E[theta | b] = theta_hat + v (b - b_hat)``,
    ``v = H^{-1} e_b / sd^2``. The move proposes a fresh intercept from that marginal and
    shifts the weights along ``v`` with it, so the intercept changes by its marginal
    spread rather than by its much narrower conditional one given the weights (on breast
    cancer the Gibbs step's slowest parameter). None without an intercept or a Laplace
    approximation (``laplace``: :func:`laplace_proposal`, which exists only where ``J``
    is twice differentiable: not for the hinge and epsilon-insensitive losses at zero
    noise, whose ``J`` is piecewise linear in ``b``).

    Examples
    --------
    >>> from bayesdrop import Problem, LogisticLoss
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(50, 2)) + 3.0; y = np.sign(X[:, 0] - 3.0 + rng.normal(size=50))
    >>> problem = Problem.create(X, y, LogisticLoss(1.0), "none")
    >>> setup = compiled_setup(problem)
    >>> laplace = laplace_proposal(problem, np.zeros(3))
    >>> line, u, c = intercept_line(setup, laplace)
    >>> H = laplace[1] @ laplace[1].T
    >>> bool(np.isclose(line[4] ** 2, np.linalg.inv(H)[2, 2])), float(line[2])
    (True, 1.0)
    >>> bool(np.allclose(H @ line[:3], [0.0, 0.0, 1.0 / line[4] ** 2]))
    True
    """
    if laplace is None or not setup["fit_intercept"]:
        return None
    mu, Lq = laplace
    Xb = setup["Xb"]
    p, D = Xb.shape[1], setup["D"]
    e = np.zeros(p)
    e[p - 1] = 1.0
    col = sla.cho_solve((Lq, True), e, check_finite=False)
    if not (np.isfinite(col).all() and col[p - 1] > 0.0):
        return None
    v = col / col[p - 1]
    vw2 = v[:D] ** 2
    if setup["vkind"] == 1:
        c = setup["scale"] * (setup["M"] @ vw2)
    else:
        c = np.full(Xb.shape[0], setup["scale"] * vw2.sum() if setup["vkind"] == 2 else 0.0)
    line = np.concatenate([v, [mu[p - 1], np.sqrt(col[p - 1])]])
    return line, np.ascontiguousarray(Xb @ v), np.ascontiguousarray(c)


#: degrees of freedom of the t proposal of the independence MH move
MH_DF = 30.0
#: a chain whose MH move accepted less than this fraction of its tuning proposals runs its
#: kept sweeps without it (the move then costs a score pass and two ``J`` evaluations per
#: sweep for almost no moves; e.g. 0.4-0.8% on the digits hinge problem)
MH_MIN_ACCEPT = 0.02


def laplace_proposal(problem, theta_hat):
    """``(mu, Lq)`` of the independence MH move: the mode and the Cholesky factor of the
    Hessian of ``J`` there (the Laplace approximation of ``exp(-J)``), or None when ``J``
    is not twice differentiable at the mode (the hinge and epsilon-insensitive losses at
    zero noise) or the Hessian is not positive definite."""
    from ..linalg.hessian import curvature, hessian_matrix
    from ..solvers import newton

    if theta_hat is None or not newton.applicable(problem):
        return None
    theta_hat = np.asarray(theta_hat, dtype=np.float64)
    H = hessian_matrix(problem.design, curvature(problem, theta_hat)[2])
    try:
        Lq = np.linalg.cholesky(0.5 * (H + H.T))
    except np.linalg.LinAlgError:
        return None
    return theta_hat.copy(), np.ascontiguousarray(Lq)


def _run_chain_compiled(setup, theta0, seed, *, tune, draws, thin, overrelax,
                        store_augmentation, store_log_likelihood=False, report=None,
                        stop=None, mh_on=True, **_):
    """One chain of compiled sweeps, block by block (see :func:`_run_chain`)."""
    from ..linalg._blas import dsyrk_address
    from ._gibbs_dense import _scores, run_sweeps
    from ._gibbs_sparse import DUAL_TOL, dual_work, run_sweeps_csr, scores_csr

    rng = np.random.default_rng(seed)
    n_aug = setup["n_aug"]
    csr = setup["kind"] == "csr"
    theta = np.array(theta0, dtype=np.float64)
    if csr:
        n, p = setup["n"], setup["p"]
        csr_args = (setup["indptr"], setup["indices"], setup["xdata"], setup["mdata"],
                    setup["vkind"], setup["scale"], setup["D"], setup["fit_intercept"])
        m, s = np.empty(n), np.empty(n)
        scores_csr(*csr_args, theta, m, s)
        cg_stats = np.zeros(3)
        dual_work_arrays = dual_work(setup["D"], setup["blocks"])
    else:
        Xb = setup["Xb"]
        n, p = Xb.shape
        m, s = np.empty(n), np.empty(n)
        _scores(Xb, setup["M"], setup["vkind"], setup["scale"], setup["D"], theta, m, s)
    theta_out = np.empty((draws, p))
    lp_out = np.empty(draws)
    aug_sum = np.zeros((n_aug, n))
    aug_out = np.empty((draws if store_augmentation else 0, n_aug, n))
    terms_out = np.empty((draws if store_log_likelihood else 0, n))
    # sweeps per compiled call: about _BLOCK_WORK entries of work (a sparse sweep makes
    # some 100 passes over the stored entries in its dual CG)
    work = 100 * setup["xdata"].shape[0] if csr else n * p
    block = int(np.clip(_BLOCK_WORK // max(work, 1), 1, 10))
    pgt = setup["pg_tables"]
    proposal = setup.get("proposal")
    mh = proposal is not None and mh_on
    # without the MH move its arrays are not read: 1 x 1 placeholders (never a p x p
    # identity: p may be 10^5 on a wide sparse design)
    mu, Lq = proposal if proposal is not None else (np.zeros(1), np.zeros((1, 1)))
    mh_stats = np.zeros(2)
    line_move = setup.get("line")
    line_stats = np.zeros(2)
    line_v, line_u, line_c = (line_move if line_move is not None
                              else (np.zeros(p + 2), np.zeros(n), np.zeros(n)))
    total = tune + draws * thin
    done = kept = 0
    interrupted = False
    t0 = time.perf_counter()
    t_tune = t0 if tune == 0 else None
    try:
        while done < total:
            if stop is not None and stop():
                interrupted = True
                break
            nb = min(block, (tune - done) if done < tune else (total - done))
            t_block = time.perf_counter()
            if csr:
                kept += run_sweeps_csr(setup["code"], setup["p0"], setup["p1"], *csr_args,
                                       setup["dual"],
                                       setup["y"], setup["sw"], theta, m, s, nb, done, tune,
                                       thin, overrelax, rng, theta_out, lp_out, aug_sum,
                                       aug_out, kept, DUAL_TOL, cg_stats, pgt, terms_out,
                                       setup["blocks"], dual_work_arrays)
                if cg_stats[2]:
                    raise FloatingPointError(
                        "the dual conjugate-gradient solve of the sparse Gibbs sweep did "
                        "not converge")
            else:
                kept += run_sweeps(setup["code"], setup["p0"], setup["p1"], Xb, setup["M"],
                                   setup["vkind"], setup["scale"], setup["D"], setup["y"],
                                   setup["sw"], theta, m, s, nb, done, tune, thin, overrelax,
                                   rng, theta_out, lp_out, aug_sum, aug_out, kept, mh, mu, Lq,
                                   MH_DF, mh_stats, pgt, terms_out, line_move is not None,
                                   line_v, line_u, line_c, line_stats, dsyrk_address())
            done += nb
            block = next_block(nb, time.perf_counter() - t_block)
            if t_tune is None and done >= tune:
                t_tune = time.perf_counter()
                # the kernel of the kept sweeps is fixed here, from the tuning sweeps only
                if mh and mh_stats[0] < MH_MIN_ACCEPT * mh_stats[1]:
                    mh = False
            if report is not None:
                report(done)
    except KeyboardInterrupt:
        interrupted = True
    t_end = time.perf_counter()
    if t_tune is None:
        t_tune = t_end
    if not np.all(np.isfinite(lp_out[:kept])):
        raise FloatingPointError("the compiled Gibbs sweep produced a non-finite draw")
    return _Chain(theta_out[:kept], lp_out[:kept], aug_sum / max(kept, 1),
                  aug_out[:kept] if store_augmentation else None, kept, t_tune - t0,
                  t_end - t_tune, interrupted, mh_stats, theta.copy(),
                  rng.bit_generator.state,
                  terms_out[:kept] if store_log_likelihood else None,
                  mh if proposal is not None else None,
                  line_stats if line_move is not None else None)


def _run_threads(setup, inits, seeds, kwargs, cores, bar, mh_flags):
    """Compiled chains in ``cores`` threads (one BLAS thread each)."""
    chains = len(seeds)
    counts = [0] * chains
    stop_event = threading.Event()

    def one(c):
        def report(k):
            counts[c] = k

        return _run_chain_compiled(setup, inits[c], seeds[c], report=report,
                                   stop=stop_event.is_set, mh_on=mh_flags[c], **kwargs)

    try:
        from threadpoolctl import threadpool_limits

        limits = threadpool_limits(1)  # the chains are the parallelism
    except Exception:  # pragma: no cover - threadpoolctl ships with scikit-learn
        limits = None
    try:
        with ThreadPoolExecutor(max_workers=cores) as pool:
            futures = [pool.submit(one, c) for c in range(chains)]
            return _collect(futures, counts, bar, stop_event, 0.02)
    finally:
        if limits is not None:
            limits.restore_original_limits()


# ------------------------------------------------------------------------------ driver
def start_points(init, theta_hat, chains, p, perturbation):
    """The chains' starting points (shape (chains, p)) for ``init`` (the rules of
    :func:`sample`, shared by the in-memory and the row back-end runners).

    ``"irls"``: ``theta_hat`` for every chain; ``"overdispersed"``:
    ``theta_hat + 3 perturbation(c)`` for chain ``c`` (``perturbation(c)`` draws
    ``eta ~ N(0, A^{-1})`` of the IRLS system at ``theta_hat``); an array of shape
    ``(p,)`` or ``(chains, p)``: those points.
    """
    if isinstance(init, str):
        if init not in ("irls", "overdispersed"):
            raise ValueError(f"init must be 'irls', 'overdispersed' or an array, got {init!r}")
        if theta_hat is None:
            raise ValueError(f"init={init!r} needs the IRLS estimate (the mode) theta_hat")
        theta_hat = np.asarray(theta_hat, dtype=float)
        if init == "irls":
            return np.tile(theta_hat, (chains, 1))
        return np.array([theta_hat + 3.0 * perturbation(c) for c in range(chains)])
    arr = np.asarray(init, dtype=float)
    if arr.shape == (p,):
        return np.tile(arr, (chains, 1))
    if arr.shape == (chains, p):
        return arr.copy()
    raise ValueError(f"init array must have shape ({p},) or ({chains}, {p}), got {arr.shape}")


def _initial_points(problem, init, theta_hat, chains, rng, linalg):
    """:func:`start_points` for a problem: the perturbations from the Gaussian of the IRLS
    system at ``theta_hat``, drawn with ``rng`` chain after chain."""
    weights = []

    def perturbation(c):
        if not weights:
            weights.append(problem.irls_weights(np.asarray(theta_hat, dtype=float))[0])
        zero = np.zeros(problem.design.n_samples)
        return wls.sample(problem.design, weights[0], zero, rng, linalg=linalg)[0]

    return start_points(init, theta_hat, chains, problem.design.n_params, perturbation)


def sample(problem, *, draws=1000, tune=500, chains=4, thin=1, init="irls",
           theta_hat=None, random_state=None, progressbar=True, cores=None,
           store_augmentation=False, store_log_likelihood=False, linalg="auto",
           cg_tol=1e-12, overrelax=OVERRELAX,
           compiled="auto", mh="auto"):
    """Run Gibbs chains on ``exp(-J(theta))`` for one problem -- the one driver of every
    kernel.

    Three runners share it (validation, seeds, starting points, burn-in, thinning,
    progress, Ctrl-C, ``last_state``, the result):

    * in-memory problems with a dense or CSR design: the compiled sweeps, one chain per
      thread;
    * other in-memory problems: the Python kernel (:mod:`bayesdrop.samplers.gibbs`), one
      chain per process;
    * a row back-end (:class:`bayesdrop.linalg.backend.RowBackend`, e.g. data on a dask
      cluster): :func:`bayesdrop.samplers.rows.run_chains`, every chain in each pass over
      the rows (their parallelism is the cluster's; ``cores``, ``compiled``, ``mh``,
      ``linalg`` do not apply, and the augmentation stays with its rows).

    Parameters
    ----------
    problem : Problem or RowBackend
    draws : int >= 1
        Kept draws per chain (after thinning).
    tune : int >= 0
        Burn-in sweeps per chain, discarded.
    chains : int >= 1
    thin : int >= 1
        Keep every ``thin``-th sweep; a chain runs ``tune + draws * thin`` sweeps.
    init : {"irls", "overdispersed"}, array of shape (n_params,) or (chains, n_params), \
or LastState
        ``"irls"`` starts every chain at ``theta_hat``; ``"overdispersed"`` at
        ``theta_hat + 3 eta`` with ``eta ~ N(0, A^{-1})`` of the IRLS system. A
        :class:`LastState` (``result.last_state`` of an earlier call) continues those
        chains: each starts from its ``theta`` with its random generator as it was left
        (``random_state`` is then not used; pass ``tune=0`` and the same ``theta_hat``,
        which the MH move's proposal is built from). A run continued this way gives the
        same draws as one longer run.
    theta_hat : ndarray of shape (n_params,), optional
        The mode of ``exp(-J)``, i.e. ``argmin J`` whichever solver found it (needed by
        the two named ``init`` options).
    random_state : None, int, SeedSequence or numpy.random.Generator
        Chain ``c`` uses child ``c`` of one SeedSequence (see :func:`bayesdrop._validation.seed_sequence`).
    progressbar : bool
        Shown on stderr unless False or the ``CI`` environment variable is set.
    cores : int, optional
        Processes running chains at once; default ``min(chains, os.cpu_count())``.
        ``cores=1`` runs the chains in sequence in this process (same draws).
    store_augmentation : bool
        Keep full traces of the augmentation variables (memory ``chains * draws * N``).
    store_log_likelihood : bool
        With the compiled sweeps, keep every kept draw's pointwise log pseudo-likelihood
        ``-term_n(theta)`` (``SamplerResult.log_likelihood``, memory
        ``chains * draws * N``), computed in the sweep from the scores it has anyway;
        the Python kernel leaves it None.
    linalg : {"auto", "cholesky", "woodbury", "cg"}
    cg_tol : float
    overrelax : float in (-1, 1), default=-0.5
        Over-relaxation of the Gaussian step (see :func:`step`); 0 for plain Gibbs.
    mh : {"auto", False}, default="auto"
        With the compiled sweep, end every sweep with an independence Metropolis-Hastings
        move from a multivariate t (30 degrees of freedom) fitted to the Laplace
        approximation at ``theta_hat`` (:func:`laplace_proposal`) -- exact (the chain still
        targets ``exp(-J)``), and nearly independent draws when the posterior is close to
        Gaussian. ``"auto"``: wherever ``J`` is twice differentiable at the mode. A chain
        whose move accepted less than :data:`MH_MIN_ACCEPT` (2%) of its tuning proposals
        runs its kept sweeps without it (the kept draws still come from one fixed exact
        kernel; ``last_state`` carries the choice). The acceptance rate of each chain is
        ``SamplerResult.mh_accept`` (over all its proposals). With an intercept, the
        same Laplace approximation also gives the compiled sweep's intercept move
        (:func:`intercept_line`: a fresh intercept from its Laplace marginal, the weights
        shifted along its regression line; exact MH, whatever ``mh``), whose acceptance
        rate is ``SamplerResult.intercept_accept``.
    compiled : {"auto", False}, default="auto"
        ``"auto"``: the compiled sweep (chains in threads) wherever it applies (dense
        design, hinge / logistic / epsilon-insensitive loss, Cholesky back-end; see
        :func:`compiled_setup`), the Python kernel (chains in processes) elsewhere.
        ``False``: always the Python kernel. Both sample the same distribution (the
        compiled Polya-Gamma draws use their own exact sampler, so the individual draws
        differ).

    Returns
    -------
    SamplerResult

    Notes
    -----
    **Interrupts.** Ctrl-C (``KeyboardInterrupt``) stops every chain at its next sweep
    (the compiled chains run in blocks of about :data:`BLOCK_SECONDS` of sweeps, sized
    from the measured time per sweep, so it acts within a fraction of a second whatever
    the data and hyper-parameters, unless a single sweep takes longer).
    If draws had been kept, they are returned -- the same number for every chain, with
    ``interrupted=True`` and a ``RuntimeWarning`` -- so a long run can be cut short and
    analysed; during tuning (no draw kept yet) the ``KeyboardInterrupt`` propagates and
    nothing is returned. Chain processes also stop when the parent process ends (SIGTERM,
    SIGKILL): none is left running.

    Examples
    --------
    >>> from bayesdrop import Problem, HingeLoss, LogisticLoss, Dropout
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 3)); y = np.sign(X[:, 0] + 0.5 * rng.normal(size=60))
    >>> from bayesdrop.samplers import sample
    >>> from bayesdrop.solvers import irls
    >>> problem = Problem.create(X, y, LogisticLoss(1.0), Dropout(0.3))
    >>> theta_hat = irls.fit(problem).theta
    >>> res = sample(problem, draws=50, tune=20, chains=2, theta_hat=theta_hat,
    ...                    random_state=0, progressbar=False, cores=1)
    >>> res.theta.shape, res.lp.shape, bool(res.lp.max() <= -problem.objective(theta_hat))
    ((2, 50, 4), (2, 50), True)
    """
    draws = check_scalar(draws, "draws", min_val=1, integer=True)
    tune = check_scalar(tune, "tune", min_val=0, integer=True)
    chains = check_scalar(chains, "chains", min_val=1, integer=True)
    thin = check_scalar(thin, "thin", min_val=1, integer=True)
    if cores is None:
        cores = min(chains, os.cpu_count() or 1)
    cores = check_scalar(cores, "cores", min_val=1, integer=True)
    if linalg not in wls.LINALG:
        raise ValueError(f"linalg must be one of {wls.LINALG}, got {linalg!r}")
    overrelax = check_scalar(overrelax, "overrelax", min_val=-1.0, max_val=1.0,
                             include_min=False, include_max=False)
    from ..linalg.backend import RowBackend

    rows = problem if isinstance(problem, RowBackend) else None
    if problem.loss.n_augmentation == 0:
        raise ValueError(
            f"the {problem.loss.name} loss has no augmentation: its posterior is Gaussian "
            "and needs no Gibbs sampler"
        )
    if rows is not None:
        if store_augmentation:
            raise ValueError("store_augmentation is not available on a row back-end: the "
                             "augmentation variables stay where their rows are")
        from . import rows as rows_kernel

        inits, rngs, entropies, first_sweep = rows_kernel.chain_setup(
            rows, init, theta_hat, chains, random_state)
        wall_start = time.perf_counter()
        with ProgressBar(chains * (tune + draws * thin), enabled=progressbar,
                         description=f"Gibbs (rows), {chains} chain(s)") as bar:
            results, last_state = rows_kernel.run_chains(
                rows, inits, rngs, entropies, first_sweep, tune=tune, draws=draws, thin=thin,
                overrelax=overrelax, report=lambda k: bar.update(chains * k))
        return _assemble(results, inits, chains, tune, thin, wall_start, False, last_state)
    if isinstance(init, LastState):  # continue: each chain from its theta and generator
        if init.entropies is not None:
            raise ValueError("init is the LastState of a row back-end, not of an in-memory "
                             "problem")
        if len(init.rng_states) != chains or np.shape(init.theta)[0] != chains:
            raise ValueError(f"init (a LastState) holds {len(init.rng_states)} chains, but "
                             f"chains={chains}")
        chain_seeds = generators_from_states(init.rng_states)
        inits = np.array(init.theta, dtype=float)
        mh_flags = init.mh if init.mh is not None else (True,) * chains
    else:
        mh_flags = (True,) * chains
        ss = seed_sequence(random_state)
        init_seed, *chain_seeds = ss.spawn(chains + 1)
        inits = _initial_points(problem, init, theta_hat, chains,
                                np.random.default_rng(init_seed), linalg)
    kwargs = dict(tune=tune, draws=draws, thin=thin, linalg=linalg, cg_tol=cg_tol,
                  overrelax=overrelax, store_augmentation=store_augmentation,
                  store_log_likelihood=store_log_likelihood)
    for theta0 in inits:  # shape and finiteness, with the kernel's messages
        gibbs.init(problem, theta0)
    if compiled not in ("auto", False):
        raise ValueError(f"compiled must be 'auto' or False, got {compiled!r}")
    if mh not in ("auto", False):
        raise ValueError(f"mh must be 'auto' or False, got {mh!r}")
    setup = compiled_setup(problem, linalg) if compiled == "auto" else None
    if setup is not None and setup["kind"] == "dense":
        laplace = laplace_proposal(problem, theta_hat)
        if mh == "auto":
            setup["proposal"] = laplace
        setup["line"] = intercept_line(setup, laplace)
    total = chains * (tune + draws * thin)
    wall_start = time.perf_counter()
    with ProgressBar(total, enabled=progressbar,
                     description=f"Gibbs {problem.loss.name}, {chains} chain(s)") as bar:
        if cores > 1 and chains > 1:
            if setup is not None:
                results = _run_threads(setup, inits, chain_seeds, kwargs, min(cores, chains),
                                       bar, mh_flags)
            else:
                results = _run_parallel(problem, inits, chain_seeds, kwargs,
                                        min(cores, chains), bar)
        else:  # in sequence, in this process; one kernel or the other
            run = (functools.partial(_run_chain_compiled, setup) if setup is not None
                   else functools.partial(_run_chain, problem))
            results = []
            for c in range(chains):
                def report(k, _base=c * (tune + draws * thin)):
                    bar.update(_base + k)

                results.append(run(inits[c], chain_seeds[c], report=report,
                                   mh_on=mh_flags[c], **kwargs))
                if results[-1].interrupted:
                    break
    return _assemble(results, inits, chains, tune, thin, wall_start, store_augmentation)


def _assemble(results, inits, chains, tune, thin, wall_start, store_augmentation,
              last_state=None):
    """The :class:`SamplerResult` of the chains' records (both runners): the same number
    of draws from every chain; an interrupt keeps them with a warning, or propagates when
    none was kept."""
    interrupted = any(r.interrupted for r in results) or len(results) < chains
    kept = min(r.n_kept for r in results)
    if interrupted:
        if kept == 0:  # stopped during tuning: nothing to return, the interrupt goes on
            raise KeyboardInterrupt("sampling interrupted before any draw was kept")
        warnings.warn(
            f"sampling interrupted: returning the {kept} draw(s) per chain collected so far "
            f"from {len(results)} chain(s)", RuntimeWarning, stacklevel=3,
        )
    aug_traces = None
    if store_augmentation:
        aug_traces = np.stack([r.aug[:kept] for r in results])
    return SamplerResult(
        theta=np.stack([r.theta[:kept] for r in results]),
        lp=np.stack([r.lp[:kept] for r in results]),
        augmentation_mean=(None if any(r.aug_mean is None for r in results)
                           else np.stack([r.aug_mean for r in results])),
        augmentation=aug_traces,
        theta_init=inits[: len(results)],
        tune_time=np.array([r.tune_time for r in results]),
        draw_time=np.array([r.draw_time for r in results]),
        tune=tune,
        thin=thin,
        interrupted=interrupted,
        wall_time=time.perf_counter() - wall_start,
        mh_accept=np.array([r.mh_stats[0] / r.mh_stats[1]
                            if r.mh_stats is not None and r.mh_stats[1] else np.nan
                            for r in results]),
        last_state=(last_state if last_state is not None else
                    LastState(np.stack([r.theta_last for r in results]),
                              tuple(r.rng_state for r in results),
                              mh=(tuple(bool(r.mh_on) for r in results)
                                  if all(r.mh_on is not None for r in results) else None))),
        log_likelihood=(-np.stack([r.terms[:kept] for r in results])
                        if all(r.terms is not None for r in results) else None),
        intercept_accept=np.array([
            r.intercept_stats[0] / r.intercept_stats[1]
            if r.intercept_stats is not None and r.intercept_stats[1] else np.nan
            for r in results]),
    )
