"""The compiled chains: the arrays of the compiled sweeps for a problem
(:func:`compiled_setup`), the intercept's line move, and one chain kernel
(:class:`CompiledKernel`: blocks of sweeps sized from the measured time per sweep to about
0.1 s, ``bayesdrop._blocks.BLOCK_SECONDS``; its MH moves' proposal and schedule are
:mod:`bayesdrop.samplers.schedule`'s)."""

from __future__ import annotations

from contextlib import nullcontext
from typing import NamedTuple

import numpy as np
import scipy.linalg as sla

from .._blocks import next_block
from .._threads import numba_threads, one_blas_thread
from ..linalg import wls
from ..model.design import V_CONSTANT, V_LIKE_X
from ..model.objective import penalised, terms_many
from .ess import ess_chain
from .result import ChainRecord
from .schedule import (
    MH_DF,
    MH_MIN_ACCEPT,
    PROPOSAL_INFLATE,
    SCHEDULE_MIN_SWEEPS,
    move_costs,
    schedule,
    slice_cost,
    slice_pays,
)

__all__ = ["CompiledKernel", "Moves", "compiled_setup", "intercept_line", "kept_log_target"]

#: work (examples x parameters) of the first block of compiled sweeps (about 10-50 ms on
#: one core); later blocks are sized from the measured time per sweep
_BLOCK_WORK = 4_000_000
#: most sweeps per compiled block
_BLOCK_MAX = 1000


def compiled_setup(problem, linalg="auto"):
    """The arrays of the compiled sweep for ``problem``, or None when it does not apply.

    Dense designs (:mod:`._gibbs_dense`, ``kind="dense"``): a Cholesky back-end (at most
    :data:`bayesdrop.linalg.wls.MAX_CHOLESKY_PARAMS` parameters). Sparse designs
    (:mod:`._gibbs_sparse`, ``kind="csr"``): more parameters than that, fewer examples
    than features (the sweep solves the ``N x N`` dual system), noise variances stored
    like ``X``, constant or absent, and ``linalg`` ``"auto"`` or ``"woodbury"`` (the
    dual system's solution; ``"cg"`` is the primal system's). Both need a loss with
    compiled kernels and an augmentation to draw (:func:`_compiled_loss`) and a linear
    (not latent) design.

    Why not the dual system where ``N >= D``: its matrix
    ``S = diag(1/rho) + X K X^T`` has rank-``D`` part ``X K X^T``, so with little noise
    the Jacobi-scaled ``S`` has ``N - D`` eigenvalues near ``1 / (1 + rho x K x^T)``,
    which shrink as ``1/C`` (the weights ``rho`` grow with ``C``): its conjugate-gradient
    iterations grew as ``sqrt(C)`` (6000 x 2500 CSR without noise: 6 ms per sweep at
    ``C = 0.01``, 270 ms at ``C = 10^4``). The primal system ``A = 2 I' + Xbar^T
    diag(rho) Xbar + diag(V^T rho)`` of the Python kernel's CG back-end has full rank
    there and stays conditioned as ``C`` grows (4 and 12 ms per sweep). Where
    ``N < D`` it is the other way round.
    """
    from ..model.design import Design

    design, loss = problem.design, problem.loss
    if type(design) is not Design:
        return None
    if design.sparse:
        return _csr_setup(problem, linalg)
    if linalg not in ("auto", "cholesky") or wls.choose_linalg(design, linalg) != "cholesky":
        return None
    if not _compiled_loss(loss):
        return None
    return dict(kind="dense", **design.sweep_arrays(), **_model_arrays(problem),
                costs=(float(loss.draw_ns), float(loss.term_ns)))


def _compiled_loss(loss):
    """Whether the compiled sweeps apply to ``loss``: it has compiled kernels and at
    least one augmentation variable to draw (the squared loss has none: its Gibbs step
    is one Gaussian draw, left to the Python kernel)."""
    from ..model.losses.kernels import has_kernels

    return has_kernels(loss, "draw") and loss.n_augmentation > 0


def _model_arrays(problem):
    """What the dense and sparse sweeps both take besides the design's arrays: the loss's
    kernel parameters, its draw tables (:meth:`bayesdrop.model.losses.Loss.draw_tables`)
    for the examples' weights, the targets and the intercept flag."""
    design, loss = problem.design, problem.loss
    sw = (np.ones(design.n_samples) if loss.weights is None
          else np.ascontiguousarray(loss.weights))
    return dict(lp=loss.kernel_params, D=design.n_features,
                fit_intercept=design.fit_intercept,
                y=np.ascontiguousarray(problem.y, dtype=np.float64), sw=sw,
                n_aug=loss.n_augmentation, pg_tables=loss.draw_tables(loss.C * sw))


def _csr_setup(problem, linalg):
    """The arrays of the compiled sparse sweep (see :func:`compiled_setup`), or None."""
    design, loss = problem.design, problem.loss
    if linalg not in ("auto", "woodbury") or design.n_samples >= design.n_features:
        return None  # the primal system (see compiled_setup)
    if wls.choose_linalg(design, linalg) == "cholesky":
        return None
    if not _compiled_loss(loss):
        return None
    arrays = design.sweep_arrays()
    if arrays is None:
        return None
    from ..linalg.kernels import row_chunks
    from ._gibbs_sparse import dual_arrays, dual_blocks

    X = arrays.pop("csr")
    return dict(kind="csr", csr=X, blocks=dual_blocks(X), dual=dual_arrays(X),
                chunks=row_chunks(X.indptr), **arrays,
                **_model_arrays(problem), n=design.n_samples, p=design.n_params,
                problem=problem)


#: draws x examples whose scores :func:`kept_log_target` holds at once
_LP_BLOCK = 1 << 20


def kept_log_target(problem, thetas, terms_out=None):
    """``lp_k = -J(theta_k)`` of the draws ``thetas`` (one per row), and each draw's
    (weighted) per-example terms of ``J`` in row ``k`` of ``terms_out`` if given.

    ``J(theta) = ||w||^2 + sum_n term(m_n, s_n, y_n)``, the terms of a block of at most
    :data:`_LP_BLOCK` draws x examples at a time by
    :func:`bayesdrop.model.objective.terms_many` (one product with the design; the
    kernels a fit has compiled).
    The compiled sparse sweep's kept draws get their ``lp`` here, after the chain.

    Examples
    --------
    >>> from bayesdrop import Problem, LogisticLoss, Dropout
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(30, 3)); y = np.sign(X[:, 0] + rng.normal(size=30))
    >>> problem = Problem.create(X, y, LogisticLoss(1.0), Dropout(0.3))
    >>> thetas = rng.normal(size=(4, 4))
    >>> lp = kept_log_target(problem, thetas)
    >>> bool(np.allclose(lp, [-problem.objective(t) for t in thetas], rtol=1e-13))
    True
    """
    design, loss, y = problem.design, problem.loss, problem.y
    D = design.n_features
    thetas = np.asarray(thetas, dtype=np.float64)
    lp = np.empty(thetas.shape[0])
    step = max(1, _LP_BLOCK // max(design.n_samples, 1))
    for a in range(0, thetas.shape[0], step):
        block = thetas[a:a + step]
        terms = terms_many(design, loss, y, block)
        if terms_out is not None:
            terms_out[a:a + step] = terms
        for j in range(block.shape[0]):
            lp[a + j] = -penalised(block[j, :D], terms[j])
    return lp


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
    >>> from bayesdrop.samplers.schedule import laplace_proposal
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
    if setup["vkind"] == V_LIKE_X:
        c = setup["scale"] * (setup["M"] @ vw2)
    else:
        c = np.full(Xb.shape[0], setup["scale"] * vw2.sum()
                    if setup["vkind"] == V_CONSTANT else 0.0)
    line = np.concatenate([v, [mu[p - 1], np.sqrt(col[p - 1])]])
    return line, np.ascontiguousarray(Xb @ v), np.ascontiguousarray(c)


class Moves(NamedTuple):
    """The exact MH moves of a compiled dense chain's kept sweeps, as tuning fixed them
    (:class:`CompiledKernel`); ``LastState.moves`` carries them to a continued run.

    Attributes
    ----------
    mh : int
        Independence MH proposals per sweep.
    proposal : tuple (mu, Lq) or None
        The proposal's centre and the Cholesky factor of its precision.
    line : tuple or None
        The intercept's line move (:func:`intercept_line`), or None.
    gibbs : bool
        Whether each iteration starts with the Gibbs sweep (and the line move); False:
        the ``mh`` independence moves alone (:func:`schedule`).
    slice : tuple or None
        ``(V, U, widths)`` of the slice moves that follow the Gibbs sweep
        (:func:`~bayesdrop.samplers.schedule.slice_directions`), or None.
    """

    mh: int
    proposal: tuple | None
    line: tuple | None
    gibbs: bool = True
    slice: tuple | None = None


class _CompiledState:
    """The mutable state of one chain of :class:`CompiledKernel`."""


class CompiledKernel:
    """The chain kernel (:mod:`bayesdrop.samplers.chain`) of the compiled sweeps
    (:func:`bayesdrop.samplers._gibbs_dense.run_sweeps`,
    :func:`bayesdrop.samplers._gibbs_sparse.run_sweeps_csr`) on the arrays of
    :func:`compiled_setup`: blocks of sweeps sized to ``bayesdrop._blocks.BLOCK_SECONDS``
    (the first from the work per sweep).

    The dense sweep's exact MH moves (independence proposals, the intercept's line) are
    fixed for the kept sweeps in one of four ways:

    * ``moves`` (a :class:`Moves`, from ``LastState``): those, for every sweep;
    * ``mh_moves=k``: ``k`` Laplace proposals per sweep (``setup["proposal"]``);
    * a setup with ``schedule`` (``mh="auto"``) and ``mh_moves=None``: scheduled in
      tuning. Its first half runs the Laplace proposal (if any) once per sweep; the
      next 3/10 are recorded (mean, covariance, lag-1 autocorrelation of every
      parameter, the acceptance rate); the proposal is then *refreshed* to a
      multivariate t with the recorded mean and covariance (shrunk and widened, see
      :data:`PROPOSAL_INFLATE`; the intercept's line from the same moments), which the
      last 1/5 runs once per sweep; the better accepted of the two proposals is kept,
      and its number per sweep set by :func:`mh_moves_per_sweep` from its acceptance
      rate, the Gibbs sweep's lag-1 autocorrelation (the recorded one, with the
      recorded proposal's share removed) and :func:`move_costs`. Tuning too short for
      :data:`SCHEDULE_MIN_SWEEPS` recorded sweeps keeps the Laplace proposal once per
      sweep (none if it accepted less than :data:`MH_MIN_ACCEPT`);
    * otherwise none, with the Laplace line move if the setup has one.

    The slice moves of a design without noise (``setup["slice"]``,
    :func:`~bayesdrop.samplers.schedule.slice_directions`) follow every Gibbs sweep
    where ``moves`` carry them or ``mh_moves`` is given; under a schedule the burn-in and
    recorded sweeps run without them, and :func:`~bayesdrop.samplers.schedule.slice_pays`
    decides from the recorded sweeps (their lag-1 autocorrelation and effective sample
    size) and the number of kept sweeps whether the rest of tuning and the kept sweeps
    run them (a tuning too short to schedule, or none, runs them).

    Every choice is made from the tuning sweeps only, so the kept sweeps come from one
    fixed exact kernel."""

    def __init__(self, setup, *, overrelax, store_augmentation, store_log_likelihood=False,
                 mh_moves=None, moves=None, **_):
        self.setup = setup
        self.overrelax = overrelax
        self.store_augmentation = store_augmentation
        self.store_log_likelihood = store_log_likelihood
        self.mh_moves = mh_moves
        self.moves = moves
        self.csr = setup["kind"] == "csr"

    def init(self, theta0, rng, draws):
        from ._gibbs_dense import _scores
        from ._gibbs_sparse import dual_work, scores_csr

        setup, st = self.setup, _CompiledState()
        st.theta = np.array(theta0, dtype=np.float64)
        if self.csr:
            n, p = setup["n"], setup["p"]
            st.csr_args = (setup["indptr"], setup["indices"], setup["xdata"], setup["mdata"],
                           setup["vkind"], setup["scale"], setup["D"],
                           setup["fit_intercept"])
            st.m, st.s = np.empty(n), np.empty(n)
            scores_csr(*st.csr_args, st.theta, st.m, st.s)
            st.cg_stats = np.zeros(3)
            st.dual_work = dual_work(setup["D"], setup["blocks"])
        else:
            n, p = setup["Xb"].shape
            st.m, st.s = np.empty(n), np.empty(n)
            _scores(setup["Xb"], setup["M"], setup["vkind"], setup["scale"], setup["D"],
                    st.theta, st.m, st.s)
        st.n, st.p = n, p
        st.draws = draws
        st.theta_out = np.empty((draws, p))
        st.lp_out = np.empty(draws)
        st.aug_sum = np.zeros((setup["n_aug"], n))
        st.aug_out = np.empty((draws if self.store_augmentation else 0, setup["n_aug"], n))
        st.terms_out = np.empty((draws if self.store_log_likelihood else 0, n))
        st.mh_stats = np.zeros(2)
        st.line_stats = np.zeros(2)
        st.slice_stats = np.zeros(2)
        laplace = setup.get("proposal")
        st.schedule = (not self.csr and self.moves is None and self.mh_moves is None
                       and setup.get("schedule", False))
        if self.moves is not None:
            moves = self.moves
        elif self.mh_moves is not None:
            moves = Moves(int(self.mh_moves) if laplace is not None else 0, laplace,
                          setup.get("line"), slice=setup.get("slice"))
        else:  # a schedule decides on the slice moves from its recorded Gibbs sweeps
            moves = Moves(1 if laplace is not None else 0, laplace, setup.get("line"),
                          slice=None if st.schedule else setup.get("slice"))
        self._use(st, moves)
        st.lag = (_Moments(p, keep_trace=setup.get("slice") is not None) if st.schedule
                  else None)
        st.phase_stats = {}
        return st

    def _use(self, st, moves):
        """Make ``moves`` the chain's MH moves (placeholders for absent ones: 1 x 1 and
        length-``p + 2`` arrays that are not read -- never a ``p x p`` identity, ``p``
        may be 10^5 on a wide sparse design)."""
        st.moves = moves
        st.mh = moves.mh if moves.proposal is not None else 0
        st.gibbs = bool(moves.gibbs) or st.mh == 0
        st.mu, st.Lq = (moves.proposal if moves.proposal is not None
                        else (np.zeros(1), np.zeros((1, 1))))
        st.line_on = moves.line is not None
        st.line = moves.line if st.line_on else (np.zeros(st.p + 2), np.zeros(st.n),
                                                 np.zeros(st.n))
        if moves.slice is not None:
            st.slice = moves.slice
        elif self.csr:  # dual_slice_moves' (Ct, ones, pen2, widths, uptr, uidx, uval)
            st.slice = (np.zeros((0, 0)), np.zeros(0), np.zeros(0), np.zeros(0),
                        np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0))
        else:
            st.slice = (np.zeros((st.p, 0)), np.zeros((st.n, 0)), np.zeros(0))

    def first_block(self):
        # about _BLOCK_WORK entries of work (a sparse sweep makes some 100 passes over
        # the stored entries in its dual CG)
        work = 100 * self.setup["xdata"].shape[0] if self.csr else np.prod(
            self.setup["Xb"].shape)
        return int(np.clip(_BLOCK_WORK // max(work, 1), 1, 10))

    def next_block(self, n, seconds):
        return next_block(n, seconds, _BLOCK_MAX)

    @staticmethod
    def _phases(tune):
        """``(b, c)``: tuning sweeps ``[b, c)`` are recorded and ``[c, tune)`` run the
        refreshed proposal; ``(tune, tune)`` when tuning is too short to schedule."""
        b = tune // 2
        c = b + 3 * (tune - b) // 5
        return (b, c) if c - b >= SCHEDULE_MIN_SWEEPS else (tune, tune)

    def run(self, st, rng, n_sweeps, first_sweep, tune, thin, kept):
        st.thin = thin  # the kept draws' spacing, for the slice decision
        if st.schedule and tune == 0 and first_sweep == 0 and st.moves.slice is None:
            # no tuning to decide on the slice moves: they run where they exist (as
            # after a tuning too short to schedule, end_tuning)
            self._use(st, st.moves._replace(slice=self.setup.get("slice")))
        if not st.schedule or first_sweep >= tune:
            return self._sweeps(st, rng, n_sweeps, first_sweep, tune, thin, kept)
        # a tuning block (the chain loop never lets one cross into the kept sweeps), cut
        # at the schedule's phases: the recorded sweeps go to a trace instead of the
        # kept rows (the same sweeps and draws)
        b, c = self._phases(tune)
        stop = first_sweep + n_sweeps
        for lo, hi, phase in ((0, b, "burn"), (b, c, "record"), (c, tune, "refreshed")):
            a0, a1 = max(first_sweep, lo), min(stop, hi)
            if a1 <= a0:
                continue
            if phase not in st.phase_stats:  # entering the phase
                if phase == "refreshed":
                    with one_blas_thread():
                        self._refresh(st)
                st.phase_stats[phase] = st.mh_stats.copy()
            if phase == "record":
                trace = np.empty((a1 - a0, st.p))
                self._sweeps(st, rng, a1 - a0, 0, 0, 1, 0, theta_out=trace)
                with one_blas_thread():  # the same sums whatever the thread count
                    st.lag.add(trace)
            else:
                self._sweeps(st, rng, a1 - a0, a0, tune, thin, kept)
        return 0

    @staticmethod
    def _gibbs_rho(st, accept_recorded, mh):
        """The Gibbs sweep's own largest lag-1 autocorrelation: the recorded one without
        the share of the recorded proposal, ``mh`` per sweep (each accepted one renews
        the state)."""
        if accept_recorded >= 1.0:
            return 0.999
        return st.lag.max_rho() / (1.0 - accept_recorded) ** mh

    def _refresh(self, st):
        """Decide on the slice moves (:func:`~bayesdrop.samplers.schedule.slice_pays`
        from the recorded Gibbs sweeps' autocorrelation and effective sample size, the
        kept sweeps' number and the cost model) and switch to
        the proposal refreshed from the recorded draws (mean, covariance shrunk towards
        its diagonal by ``p / (T + p)`` and scaled by ``PROPOSAL_INFLATE^2``) and its
        intercept line; keep the current proposal if that covariance is not positive
        definite."""
        chosen = self.setup.get("slice")
        if chosen is not None:
            stats = st.mh_stats - st.phase_stats["record"]
            rho = self._gibbs_rho(st, stats[0] / stats[1] if stats[1] else 0.0,
                                  st.moves.mh)
            sweep, _ = move_costs(self.setup)
            if not slice_pays(rho, sweep, slice_cost(self.setup, chosen[0].shape[1]),
                              recorded=st.lag.count,
                              ess_per_sweep=st.lag.ess_per_draw(), kept=st.draws,
                              thin=st.thin):
                chosen = None
        self._use(st, st.moves._replace(slice=chosen))
        st.recorded, st.refreshed = st.moves, None
        mu, cov = st.lag.mean_cov()
        T, p = st.lag.count, st.p
        shrink = p / (T + p)
        diag = np.diag(cov).copy()
        cov *= (1.0 - shrink)
        cov[np.diag_indices(p)] += shrink * diag
        cov *= PROPOSAL_INFLATE ** 2
        try:
            precision = sla.cho_solve((np.linalg.cholesky(cov), True), np.eye(p))
            Lq = np.linalg.cholesky(0.5 * (precision + precision.T))
        except np.linalg.LinAlgError:
            return
        if not np.all(np.isfinite(Lq)):
            return
        proposal = (mu, np.ascontiguousarray(Lq))
        self._use(st, Moves(1, proposal, intercept_line(self.setup, proposal),
                            slice=chosen))
        st.refreshed = st.moves

    def _sweeps(self, st, rng, n_sweeps, first_sweep, tune, thin, kept, theta_out=None):
        """``n_sweeps`` compiled sweeps; with ``theta_out`` (tuning's trace) every sweep's
        ``theta`` goes there and nothing is kept."""
        from .._blas import dpotrf_address, dsyrk_address
        from ._gibbs_dense import run_sweeps
        from ..linalg.kernels import threads_arg
        from ._gibbs_sparse import DUAL_TOL, run_sweeps_csr

        setup = self.setup
        if self.csr:
            # the dual products' row chunks on numba's threads where a single chain runs
            # in this process's main thread (chains in threads are the parallelism), with
            # numpy's BLAS on one thread meanwhile (see newton.fit); the same draws
            threads = threads_arg(setup["chunks"], numba_threads())
            with one_blas_thread() if threads else nullcontext():
                new = run_sweeps_csr(setup["lp"], *st.csr_args, setup["dual"], setup["y"],
                                     setup["sw"], st.theta, st.m, st.s, n_sweeps,
                                     first_sweep, tune, thin, self.overrelax, rng,
                                     st.theta_out, st.aug_sum, st.aug_out, kept, DUAL_TOL,
                                     st.cg_stats, setup["pg_tables"], setup["blocks"],
                                     st.dual_work, (setup["chunks"], threads),
                                     *st.slice, st.slice_stats)
            if st.cg_stats[2]:
                raise FloatingPointError(
                    "the dual conjugate-gradient solve of the sparse Gibbs sweep did "
                    "not converge")
            return new
        if theta_out is None:
            outs = (st.theta_out, st.lp_out, st.aug_sum, st.aug_out)
            terms_out = st.terms_out
        else:
            n = st.n
            outs = (theta_out, np.empty(n_sweeps), np.zeros_like(st.aug_sum),
                    np.empty((0,) + st.aug_out.shape[1:]))
            terms_out = np.empty((0, n))
        line_v, line_u, line_c = st.line
        return run_sweeps(setup["lp"], setup["Xb"], setup["M"], setup["vkind"],
                          setup["scale"], setup["D"], setup["y"], setup["sw"], st.theta,
                          st.m, st.s, n_sweeps, first_sweep, tune, thin, self.overrelax, rng,
                          *outs, kept, st.mh, st.gibbs, st.mu, st.Lq, MH_DF, st.mh_stats,
                          setup["pg_tables"], terms_out, st.line_on and st.gibbs, line_v,
                          line_u, line_c, st.line_stats, *st.slice, st.slice_stats,
                          dsyrk_address(), dpotrf_address())

    def end_tuning(self, st):
        # the kernel of the kept sweeps is fixed here, from the tuning sweeps only
        if not st.schedule:
            return
        st.schedule = False

        def rate(stats):
            return stats[0] / stats[1] if stats[1] else 0.0

        if "refreshed" not in st.phase_stats:  # too short to schedule: Laplace, 1 or 0;
            # the slice moves where they exist (nothing recorded to decide on)
            k = 1 if st.mh and rate(st.mh_stats) >= MH_MIN_ACCEPT else 0
            self._use(st, st.moves._replace(mh=k, slice=self.setup.get("slice")))
            return
        accept_recorded = rate(st.phase_stats["refreshed"] - st.phase_stats["record"])
        rho = self._gibbs_rho(st, accept_recorded, st.recorded.mh)
        moves, accept = st.recorded, accept_recorded if st.recorded.mh else 0.0
        if st.refreshed is not None:
            accept_refreshed = rate(st.mh_stats - st.phase_stats["refreshed"])
            if accept_refreshed >= accept:
                moves, accept = st.refreshed, accept_refreshed
        gibbs, k = (True, 0) if moves.proposal is None else schedule(
            accept, rho, *move_costs(self.setup))
        self._use(st, moves._replace(mh=k, gibbs=gibbs))

    def record(self, st, kept, tune_time, draw_time, interrupted, rng):
        if self.csr:  # the sparse sweep keeps theta only (see run_sweeps_csr)
            st.lp_out[:kept] = kept_log_target(
                self.setup["problem"], st.theta_out[:kept],
                st.terms_out[:kept] if self.store_log_likelihood else None)
        if not np.all(np.isfinite(st.lp_out[:kept])):
            raise FloatingPointError("the compiled Gibbs sweep produced a non-finite draw")
        return ChainRecord(st.theta_out[:kept], st.lp_out[:kept], st.aug_sum / max(kept, 1),
                           st.aug_out[:kept] if self.store_augmentation else None, kept,
                           tune_time, draw_time, interrupted, st.mh_stats, st.theta.copy(),
                           rng.bit_generator.state,
                           st.terms_out[:kept] if self.store_log_likelihood else None,
                           st.moves,
                           st.line_stats if st.line_on else None)


class _Moments:
    """Running sums of a chain's trace (shifted by its first draw, for accuracy): each
    parameter's lag-1 autocorrelation
    ``sum_t (x_t - xbar)(x_{t+1} - xbar) / sum_t (x_t - xbar)^2``, the mean and the
    covariance. The draws arrive in blocks sized by the clock; they are summed in
    chunks of :attr:`CHUNK` draws counted from the first, so that the sums -- and the
    proposal built from them -- do not depend on the blocks."""

    CHUNK = 128

    def __init__(self, p, keep_trace=False):
        self.count = 0
        self.shift = self.last = None
        self.s1, self.s2, self.s12 = np.zeros(p), np.zeros(p), np.zeros(p)
        self.sxx = np.zeros((p, p))
        self.buffer = np.empty((self.CHUNK, p))
        self.filled = 0
        self.trace = [] if keep_trace else None

    def add(self, trace):
        if self.trace is not None:
            self.trace.append(np.array(trace, dtype=np.float64))
        for row in trace:
            self.buffer[self.filled] = row
            self.filled += 1
            if self.filled == self.CHUNK:
                self._fold()

    def _fold(self):
        x = self.buffer[: self.filled]
        self.filled = 0
        if x.shape[0] == 0:
            return
        if self.shift is None:
            self.shift = x[0].copy()
        x = x - self.shift
        if self.last is not None:
            self.s12 += self.last * x[0]
        self.s12 += np.einsum("ij,ij->j", x[1:], x[:-1])
        self.s1 += x.sum(axis=0)
        self.s2 += np.einsum("ij,ij->j", x, x)
        self.sxx += x.T @ x
        self.last = x[-1].copy()
        self.count += x.shape[0]

    def max_rho(self):
        """The largest lag-1 autocorrelation over the parameters (1 for a parameter that
        never moved)."""
        self._fold()
        T = self.count
        mean = self.s1 / T
        # sum_{t<T} (x_t - m)(x_{t+1} - m): the first draw is 0 after the shift
        num = self.s12 - mean * (2.0 * self.s1 - self.last) + (T - 1) * mean * mean
        den = self.s2 - T * mean * mean
        rho = np.where(den > 0.0, num / np.where(den > 0.0, den, 1.0), 1.0)
        return float(rho.max())

    def ess_per_draw(self):
        """The least effective sample size per draw over the parameters of the trace
        (``keep_trace=True``; None otherwise): Geyer's initial monotone sequence over
        the unsplit trace (:func:`bayesdrop.samplers.ess.ess_chain`); a parameter that
        never moved counts as stuck, 0."""
        if not self.trace:
            return None
        x = np.concatenate(self.trace)
        T = x.shape[0]
        if T < 4:
            return None
        moved = np.ptp(x, axis=0) > 0.0
        if not moved.all():
            return 0.0
        return float(np.min(ess_chain(x))) / T

    def mean_cov(self):
        """The mean and the (unbiased) covariance of the draws."""
        self._fold()
        T = self.count
        m = self.s1 / T
        cov = (self.sxx - T * np.outer(m, m)) / max(T - 1, 1)
        return self.shift + m, 0.5 * (cov + cov.T)
