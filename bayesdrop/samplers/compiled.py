"""The compiled chains: the arrays of the compiled sweeps for a problem
(:func:`compiled_setup`), the exact MH moves' Laplace proposal and intercept line, and one
chain kernel (:class:`CompiledKernel`: blocks of sweeps sized from the measured time per
sweep, see :data:`BLOCK_SECONDS`)."""

from __future__ import annotations


import numpy as np
import scipy.linalg as sla

from ..linalg import wls
from .result import ChainRecord

__all__ = ["BLOCK_SECONDS", "MH_DF", "MH_MIN_ACCEPT", "compiled_setup", "intercept_line",
           "CompiledKernel", "laplace_proposal", "next_block"]

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
    constant or absent. Both need a loss with compiled kernels and an augmentation to
    draw (:func:`_compiled_loss`) and a linear (not latent) design.
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
    return dict(kind="dense", lp=loss.kernel_params, Xb=Xb, M=M,
                vkind=vkind, scale=float(scale), D=D, fit_intercept=design.fit_intercept,
                y=np.ascontiguousarray(problem.y, dtype=np.float64), sw=sw,
                n_aug=loss.n_augmentation, pg_tables=_draw_tables(loss, sw))


def _compiled_loss(loss):
    """Whether the compiled sweeps apply to ``loss``: it has compiled kernels and at
    least one augmentation variable to draw (the squared loss has none: its Gibbs step
    is one Gaussian draw, left to the Python kernel)."""
    from ..model.losses.kernels import has_kernels

    return has_kernels(loss, "draw") and loss.n_augmentation > 0


def _draw_tables(loss, sw):
    """The loss's draw tables (:meth:`bayesdrop.model.losses.Loss.draw_tables`) for
    examples of weights ``sw``."""
    return loss.draw_tables(loss.C * sw)


def _csr_setup(problem, linalg):
    """The arrays of the compiled sparse sweep (see :func:`compiled_setup`), or None."""
    design, loss = problem.design, problem.loss
    if linalg not in ("auto", "woodbury", "cg"):
        return None
    if wls.choose_linalg(design, linalg) == "cholesky":
        return None
    if not _compiled_loss(loss):
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

    return dict(kind="csr", blocks=dual_blocks(X), dual=dual_arrays(X), lp=loss.kernel_params,
                indptr=X.indptr,
                indices=X.indices, xdata=np.ascontiguousarray(X.data, dtype=np.float64),
                mdata=np.ascontiguousarray(mdata, dtype=np.float64), vkind=vkind,
                scale=scale, D=design.n_features, fit_intercept=design.fit_intercept,
                n=n, p=design.n_params,
                y=np.ascontiguousarray(problem.y, dtype=np.float64), sw=sw,
                n_aug=loss.n_augmentation, pg_tables=_draw_tables(loss, sw))


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


class _CompiledState:
    """The mutable state of one chain of :class:`CompiledKernel`."""


class CompiledKernel:
    """The chain kernel (:mod:`bayesdrop.samplers.chain`) of the compiled sweeps
    (:func:`bayesdrop.samplers._gibbs_dense.run_sweeps`,
    :func:`bayesdrop.samplers._gibbs_sparse.run_sweeps_csr`) on the arrays of
    :func:`compiled_setup`: blocks of sweeps sized to :data:`BLOCK_SECONDS` (the first
    from the work per sweep), the MH move dropped after tuning if it accepted less than
    :data:`MH_MIN_ACCEPT` of its proposals there (``mh_on``: whether this chain runs it)."""

    def __init__(self, setup, *, overrelax, store_augmentation, store_log_likelihood=False,
                 mh_on=True, **_):
        self.setup = setup
        self.overrelax = overrelax
        self.store_augmentation = store_augmentation
        self.store_log_likelihood = store_log_likelihood
        self.mh_on = mh_on
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
        st.theta_out = np.empty((draws, p))
        st.lp_out = np.empty(draws)
        st.aug_sum = np.zeros((setup["n_aug"], n))
        st.aug_out = np.empty((draws if self.store_augmentation else 0, setup["n_aug"], n))
        st.terms_out = np.empty((draws if self.store_log_likelihood else 0, n))
        proposal = setup.get("proposal")
        st.mh = proposal is not None and self.mh_on
        # without the MH move its arrays are not read: 1 x 1 placeholders (never a p x p
        # identity: p may be 10^5 on a wide sparse design)
        st.mu, st.Lq = proposal if proposal is not None else (np.zeros(1), np.zeros((1, 1)))
        st.mh_stats = np.zeros(2)
        st.line_stats = np.zeros(2)
        line = setup.get("line")
        st.line = line if line is not None else (np.zeros(p + 2), np.zeros(n), np.zeros(n))
        return st

    def first_block(self):
        # about _BLOCK_WORK entries of work (a sparse sweep makes some 100 passes over
        # the stored entries in its dual CG)
        work = 100 * self.setup["xdata"].shape[0] if self.csr else np.prod(
            self.setup["Xb"].shape)
        return int(np.clip(_BLOCK_WORK // max(work, 1), 1, 10))

    def next_block(self, n, seconds):
        return next_block(n, seconds)

    def run(self, st, rng, n_sweeps, first_sweep, tune, thin, kept):
        from .._blas import dpotrf_address, dsyrk_address
        from ._gibbs_dense import run_sweeps
        from ._gibbs_sparse import DUAL_TOL, run_sweeps_csr

        setup = self.setup
        if self.csr:
            new = run_sweeps_csr(setup["lp"], *st.csr_args, setup["dual"], setup["y"],
                                 setup["sw"], st.theta, st.m, st.s, n_sweeps, first_sweep,
                                 tune, thin, self.overrelax, rng, st.theta_out, st.lp_out,
                                 st.aug_sum, st.aug_out, kept, DUAL_TOL, st.cg_stats,
                                 setup["pg_tables"], st.terms_out, setup["blocks"],
                                 st.dual_work)
            if st.cg_stats[2]:
                raise FloatingPointError(
                    "the dual conjugate-gradient solve of the sparse Gibbs sweep did "
                    "not converge")
            return new
        line_v, line_u, line_c = st.line
        return run_sweeps(setup["lp"], setup["Xb"], setup["M"], setup["vkind"],
                          setup["scale"], setup["D"], setup["y"], setup["sw"], st.theta,
                          st.m, st.s, n_sweeps, first_sweep, tune, thin, self.overrelax, rng,
                          st.theta_out, st.lp_out, st.aug_sum, st.aug_out, kept, st.mh,
                          st.mu, st.Lq, MH_DF, st.mh_stats, setup["pg_tables"],
                          st.terms_out, setup.get("line") is not None, line_v, line_u,
                          line_c, st.line_stats, dsyrk_address(), dpotrf_address())

    def end_tuning(self, st):
        # the kernel of the kept sweeps is fixed here, from the tuning sweeps only
        if st.mh and st.mh_stats[0] < MH_MIN_ACCEPT * st.mh_stats[1]:
            st.mh = False

    def record(self, st, kept, tune_time, draw_time, interrupted, rng):
        if not np.all(np.isfinite(st.lp_out[:kept])):
            raise FloatingPointError("the compiled Gibbs sweep produced a non-finite draw")
        has_proposal = self.setup.get("proposal") is not None
        return ChainRecord(st.theta_out[:kept], st.lp_out[:kept], st.aug_sum / max(kept, 1),
                           st.aug_out[:kept] if self.store_augmentation else None, kept,
                           tune_time, draw_time, interrupted, st.mh_stats, st.theta.copy(),
                           rng.bit_generator.state,
                           st.terms_out[:kept] if self.store_log_likelihood else None,
                           st.mh if has_proposal else None,
                           st.line_stats if self.setup.get("line") is not None else None)
