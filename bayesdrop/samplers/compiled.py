"""The compiled chains: the arrays of the compiled sweeps for a problem
(:func:`compiled_setup`), the exact MH moves' Laplace proposal and intercept line, and one
chain run block by block (:func:`run_chain_compiled`; blocks sized from the measured time
per sweep, see :data:`BLOCK_SECONDS`)."""

from __future__ import annotations

import time

import numpy as np
import scipy.linalg as sla

from ..linalg import wls
from .result import ChainRecord

__all__ = ["BLOCK_SECONDS", "MH_DF", "MH_MIN_ACCEPT", "compiled_setup", "intercept_line",
           "laplace_proposal", "next_block", "run_chain_compiled"]

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


def run_chain_compiled(setup, theta0, seed, *, tune, draws, thin, overrelax,
                        store_augmentation, store_log_likelihood=False, report=None,
                        stop=None, mh_on=True, **_):
    """One chain of compiled sweeps, block by block (see :func:`bayesdrop.samplers.runners.run_chain`)."""
    from .._blas import dpotrf_address, dsyrk_address
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
                kept += run_sweeps_csr(setup["lp"], *csr_args,
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
                kept += run_sweeps(setup["lp"], Xb, setup["M"],
                                   setup["vkind"], setup["scale"], setup["D"], setup["y"],
                                   setup["sw"], theta, m, s, nb, done, tune, thin, overrelax,
                                   rng, theta_out, lp_out, aug_sum, aug_out, kept, mh, mu, Lq,
                                   MH_DF, mh_stats, pgt, terms_out, line_move is not None,
                                   line_v, line_u, line_c, line_stats, dsyrk_address(),
                                   dpotrf_address())
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
    return ChainRecord(theta_out[:kept], lp_out[:kept], aug_sum / max(kept, 1),
                  aug_out[:kept] if store_augmentation else None, kept, t_tune - t0,
                  t_end - t_tune, interrupted, mh_stats, theta.copy(),
                  rng.bit_generator.state,
                  terms_out[:kept] if store_log_likelihood else None,
                  mh if proposal is not None else None,
                  line_stats if line_move is not None else None)
