"""The compiled dense chain's exact MH moves, chosen by cost: the Laplace proposal, the
cost model of a sweep and of a proposal, and the schedule fixed at the end of tuning
(:class:`bayesdrop.samplers.compiled.CompiledKernel` runs it).

Every choice here changes the speed of a chain, never its target: each move leaves
``exp(-J)`` invariant, and the costs are a model, not a clock, so that the draws depend on
the data and the seed only.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..model.design import V_LIKE_X, V_ZERO
from .ess import ESS_PER_CHAIN_MIN

__all__ = ["MH_ALONE_MIN_ACCEPT", "MH_DF", "MH_MAX_MOVES", "MH_MIN_ACCEPT", "PROPOSAL_INFLATE",
           "SCHEDULE_MIN_SWEEPS", "SLICE_ESS_PER_SWEEP", "SLICE_EVALS", "SLICE_KINK_RTOL",
           "SLICE_MAX_ENTRIES", "SLICE_WIDTH", "laplace_proposal", "mh_moves_per_sweep",
           "move_costs", "schedule", "slice_cost", "slice_directions", "slice_pays"]

#: degrees of freedom of the t proposal of the independence MH move
MH_DF = 30.0
#: a chain whose MH move accepted less than this fraction of its tuning proposals runs its
#: kept sweeps without it (the move then costs a score pass and two ``J`` evaluations per
#: sweep for almost no moves; e.g. 0.4-0.8% on the digits hinge problem)
MH_MIN_ACCEPT = 0.02
#: most independence MH proposals per sweep the schedule chooses (:func:`mh_moves_per_sweep`)
MH_MAX_MOVES = 32
#: sweeps of the schedule's recorded tuning phase (3/10 of tuning, see
#: :class:`~bayesdrop.samplers.compiled.CompiledKernel`) below which a chain does not schedule: tuning shorter than
#: ``10 / 3`` of this keeps the Laplace proposal, one per sweep
SCHEDULE_MIN_SWEEPS = 50
#: the refreshed proposal's covariance: the recorded draws' covariance shrunk towards its
#: diagonal by ``p / (T + p)`` (``T`` draws, ``p`` parameters) and scaled by this factor
#: squared (an independence proposal should be somewhat wider than its target)
PROPOSAL_INFLATE = 1.0
#: the cost model of :func:`move_costs`: nanoseconds per multiply-add of the weighted Gram
#: product (BLAS ``dsyrk``) and of the compiled loops over ``Xbar`` (scores, right-hand
#: side), measured on a 2-core x86-64 machine; the per-example costs of the draws and
#: terms are the loss's (:attr:`bayesdrop.model.losses.Loss.draw_ns`, ``term_ns``)
_GRAM_NS = 0.1
_LOOP_NS = 0.05


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


#: the examples whose score at the mode lies within this relative slack of a kink
#: (:func:`bayesdrop.solvers.irls.kink_tolerance`) define :func:`slice_directions`
SLICE_KINK_RTOL = 1e-6
#: a slice direction's stepping-out width, in units of the prior's standard deviation
#: along it, ``1 / sqrt(2 ||v_w||^2)`` (an upper bound of the posterior's: Brascamp-Lieb)
SLICE_WIDTH = 3.0
#: most entries of ``U = Xbar V`` (n x directions, float64: 400 MB) that
#: :func:`slice_directions` builds; a larger problem samples without the slice moves
SLICE_MAX_ENTRIES = 50_000_000
#: the floor of ``||v_w||^2`` in that width (a unit direction mostly along the
#: unpenalised intercept)
_SLICE_PENALTY_FLOOR = 1e-6


def slice_directions(problem, setup, theta_hat):
    """``(V, U, widths)`` of the compiled dense sweep's slice moves
    (:func:`bayesdrop.samplers._gibbs_dense._slice_moves`), or None.

    They exist where ``J`` has no Laplace approximation because it is piecewise quadratic:
    a design without noise and a loss with kinks (hinge, epsilon-insensitive). There the
    posterior ``exp(-J)`` is shaped by the examples ``E`` whose scores sit on a kink at the
    mode ``theta_hat`` (within :data:`SLICE_KINK_RTOL` of their terms): moving ``theta``
    so that one of them leaves its kink on the costly side costs ``2 C`` per unit of
    score, on the other side only the prior -- a narrow cone, in which the augmented Gibbs
    sweep creeps (breast cancer, hinge, ``C = 100``: 5 effective draws of 4000). With
    ``A = Xbar_E`` the directions are the dual basis of its rows, the columns of the
    pseudo-inverse ``A^+`` (each moves one example's score off its kink and leaves the
    others'), and an orthonormal basis of the null space of ``A`` (moves that leave every
    kink example's score in place), each scaled to unit length; with more kink examples
    than parameters the row space's orthonormal basis replaces ``A^+``. ``U = Xbar V``;
    each width is :data:`SLICE_WIDTH` prior standard deviations along its direction (None
    where ``U`` would have more than :data:`SLICE_MAX_ENTRIES` entries).

    Any fixed directions give an exact kernel; these only make it mix. For the compiled
    sparse sweep (``setup["kind"] == "csr"``) the dual form of
    ``_dual_slice_directions`` (``theta_hat`` unused).

    Examples
    --------
    >>> from bayesdrop import Problem, HingeLoss
    >>> from bayesdrop.samplers.compiled import compiled_setup
    >>> from bayesdrop.solvers import fit_problem
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 3)); y = np.sign(X[:, 0] + 0.3 * rng.normal(size=200))
    >>> problem = Problem.create(X, y, HingeLoss(10.0), "none")
    >>> theta = fit_problem(problem).theta
    >>> setup = compiled_setup(problem)
    >>> V, U, widths = slice_directions(problem, setup, theta)
    >>> on_kink = np.isclose(y * (setup["Xb"] @ theta), 1.0)
    >>> int(on_kink.sum()), V.shape  # 4 examples on the margin: no null space
    (4, (4, 4))
    >>> Ue = U[on_kink]  # each direction moves the score of one of them alone
    >>> bool(np.allclose(Ue / np.abs(Ue).max(axis=0), np.eye(4)))
    True
    """
    from ..solvers.irls import kink_tolerance

    if (setup is None or setup["kind"] not in ("dense", "csr")
            or setup["vkind"] != V_ZERO):  # a design with noise
        return None
    kinks = problem.loss.kinks(problem.y)
    if kinks is None:
        return None
    if setup["kind"] == "csr":
        return _dual_slice_directions(setup)
    if theta_hat is None:
        return None
    pos = np.asarray(kinks[0], dtype=np.float64)
    theta_hat = np.asarray(theta_hat, dtype=np.float64)
    Xb = setup["Xb"]
    m = Xb @ theta_hat
    slack = kink_tolerance(problem.design, theta_hat, pos, rtol=SLICE_KINK_RTOL)
    on_kink = (np.abs(m[:, None] - pos) <= slack[:, None]).any(axis=1) & (setup["sw"] > 0)
    A = Xb[on_kink]
    p = Xb.shape[1]
    if A.shape[0] == 0:
        V = np.eye(p)
    else:
        _, sv, Vt = np.linalg.svd(A, full_matrices=True)
        rank = int(np.sum(sv > sv[0] * max(A.shape) * np.finfo(float).eps))
        if A.shape[0] <= p:
            tight = np.linalg.pinv(A)
        else:
            tight = Vt[:rank].T
        V = np.hstack([Vt[rank:].T, tight])
    if Xb.shape[0] * V.shape[1] > SLICE_MAX_ENTRIES:
        return None
    V = V / np.linalg.norm(V, axis=0)
    D = setup["D"]
    penalty = np.maximum(np.sum(V[:D] ** 2, axis=0), _SLICE_PENALTY_FLOOR)
    widths = SLICE_WIDTH / np.sqrt(2.0 * penalty)
    return (np.ascontiguousarray(V), np.ascontiguousarray(Xb @ V),
            np.ascontiguousarray(widths))


#: most entries of the sparse sweep's dual slice coefficients (``N x N``, float64: 64
#: MB); a wider sample (``N`` above about 2800) samples without the slice moves
SLICE_SPARSE_MAX_ENTRIES = 8_000_000
#: entries of ``Xbar Xbar^T``'s range projector below this are rounding (the exact
#: projector's entries lie in ``[-1, 1]``): the sparse slice directions' supports
_SLICE_SUPPORT_ATOL = 1e-10


def _dual_slice_directions(setup):
    """:func:`slice_directions` for the compiled sparse sweep (``N < D``), in dual form:
    ``(Ct, ones, pen2, widths, uptr, uidx, uval)`` for
    :func:`bayesdrop.samplers._gibbs_sparse.dual_slice_moves`, or None.

    With ``D > N`` a posterior's scores spread far beyond the mode's margins (the prior
    alone gives ``x_n . w`` a standard deviation ``||x_n|| / sqrt 2``), so the examples on
    a kink at the mode do not mark the slow directions; all of them do: the directions
    are the columns of ``Xbar^+ = Xbar^T K^+``, ``K = Xbar Xbar^T`` (each moves one
    example's score alone where ``K`` has full rank, else its group of linearly dependent
    rows; ``K^+`` from the eigenvalues of ``K`` above ``N p eps`` of the largest, as
    :func:`numpy.linalg.pinv`), kept as dual coefficients ``c_k`` (the rows of ``Ct``)
    scaled to unit length, ``c_k^T K c_k = 1``. The null space of ``Xbar`` -- nearly all of
    ``R^p`` -- carries the prior alone, which the Gibbs sweep draws afresh each sweep, and
    no ``D``-long direction is stored. ``ones[k] = 1 . c_k`` (0 without an intercept),
    ``pen2[k] = ||v_{k,w}||^2 = 1 - ones[k]^2``, the widths as in
    :func:`slice_directions`, and ``u_k = Xbar v_k = K c_k`` in compressed columns
    (``uptr, uidx, uval``): ``Pi e_k / ||..||`` with ``Pi = K K^+`` the range projector,
    ``e_k`` exactly where ``K`` has full rank. None where ``N^2`` exceeds
    :data:`SLICE_SPARSE_MAX_ENTRIES`."""
    X = setup["csr"]
    n = X.shape[0]
    if n * n > SLICE_SPARSE_MAX_ENTRIES:
        return None
    fi = bool(setup["fit_intercept"])
    K = (X @ X.T).toarray()
    if fi:
        K += 1.0
    lam, Q = np.linalg.eigh(K)
    keep = lam > lam[-1] * max(n, setup["p"]) * np.finfo(float).eps
    Qr = Q[:, keep]
    Kp = (Qr / lam[keep]) @ Qr.T  # K^+ (symmetric: its rows are its columns)
    norms = np.diag(Kp).copy()  # c^T K c for c = K^+ e_k: (K^+ K K^+)_kk = K^+_kk
    live = norms > 0
    Ct = Kp[live] / np.sqrt(norms[live])[:, None]
    if keep.all():  # Pi = I: each direction moves its own example's score
        uidx = np.flatnonzero(live)
        uval = 1.0 / np.sqrt(norms[live])
        uptr = np.arange(uidx.shape[0] + 1)
    else:
        Pi = (Qr @ Qr.T)[:, live] / np.sqrt(norms[live])
        Pi[np.abs(Pi) < _SLICE_SUPPORT_ATOL] = 0.0
        cols = sp.csc_matrix(Pi)
        cols.sort_indices()
        uptr, uidx, uval = cols.indptr, cols.indices, cols.data
    ones = Ct.sum(axis=1) if fi else np.zeros(Ct.shape[0])
    pen2 = 1.0 - ones * ones
    widths = SLICE_WIDTH / np.sqrt(2.0 * np.maximum(pen2, _SLICE_PENALTY_FLOOR))
    return (np.ascontiguousarray(Ct), np.ascontiguousarray(ones),
            np.ascontiguousarray(pen2), np.ascontiguousarray(widths),
            np.ascontiguousarray(uptr, dtype=np.int64),
            np.ascontiguousarray(uidx, dtype=np.int64), np.ascontiguousarray(uval))


#: effective draws per sweep that the cost model assumes of a chain with the slice moves
#: (the least of each parameter's; measured at zero noise, 2 chains x 1000 draws: 0.26 /
#: 0.38 / 0.55 / 0.80 on breast cancer's hinge at C = 10 / 100 / 1 / 0.1, 0.30 and 0.33
#: on digits' 0- and 8-vs-rest hinge at C = 1, 0.27 on a synthetic epsilon-insensitive
#: regression at C = 1000, 0.52-0.73 on diabetes' at C = 1-100: the problems near the
#: break-even point have 0.26-0.38)
SLICE_ESS_PER_SWEEP = 0.3
#: evaluations of ``J`` per line move that the cost model assumes (measured: 3.0 at
#: C = 1, 5.4 at C = 100 on breast cancer's hinge)
SLICE_EVALS = 4.0
#: nanoseconds per example of an evaluation of ``J`` on a line beyond the loss's term
#: (the shifted scores, the call of the term kernel; 2.4-3.4 ns in all for the hinge on
#: a 2-core x86-64 machine, 1.4-2.0 us per evaluation on breast cancer)
_SLICE_NS = 1.5


def slice_cost(setup, directions):
    """The modelled cost, in nanoseconds, of one round of slice moves along
    ``directions`` lines: ``k (SLICE_EVALS n (c_term + 1.5) + 2 n l)`` with the
    notation of :func:`move_costs` (a model, not a measurement, as there)."""
    n = setup["Xb"].shape[0]
    term_ns = setup["costs"][1]
    return float(directions * (SLICE_EVALS * n * (term_ns + _SLICE_NS) + 2 * n * _LOOP_NS))


def slice_pays(rho, sweep_cost, slice_cost, recorded=None, ess_per_sweep=None, kept=None,
               thin=1):
    """Whether a chain should run the slice moves: where they make more modelled
    effective draws per unit of modelled cost than the Gibbs sweep alone,
    ``SLICE_ESS_PER_SWEEP / (sweep + slice) > e / sweep``, or where over the chain's
    ``kept`` draws (``thin`` sweeps apart) the sweep alone is projected to miss the
    convergence check's floor of ``ESS_PER_CHAIN_MIN`` (100,
    :func:`bayesdrop._arviz.convergence_warning`) effective draws and the slice moves to
    reach it, ``min(kept, e kept thin) < 100 <= min(kept, SLICE_ESS_PER_SWEEP kept
    thin)`` -- draws whose diagnostics pass are worth up to ``1 + slice / sweep`` times
    the time. ``e`` is the Gibbs sweep's effective draws per sweep, the lesser of two
    estimates from its recorded sweeps, both of which overstate a slow chain's:

    * the AR(1) chain's ``(1 - rho) / (1 + rho)`` of its largest lag-1 autocorrelation
      ``rho``; ``rho`` estimated from ``recorded`` sweeps is first corrected for the
      estimator's downward bias, ``E rho_hat - rho = -(1 + 3 rho) / T`` (Kendall 1954,
      AR(1)): a chain that creeps through 60 recorded sweeps shows ``rho_hat`` of about
      0.92 whatever its true autocorrelation near 1;
    * ``ess_per_sweep``, the least effective sample size per recorded sweep over the
      parameters (Geyer's initial monotone sequence over the unsplit trace,
      :meth:`_Moments.ess_per_draw <bayesdrop.samplers.compiled._Moments.ess_per_draw>`):
      it sees a slow component behind fast ones, which a lag-1 autocorrelation does not.
      Measured at zero noise on windows of 150 sweeps of long Gibbs runs (median against
      the least ESS per sweep of 25 000 sweeps): digits' 0-vs-rest hinge at ``C = 1``
      0.056 against 0.044 (the AR(1) value 0.068), 8-vs-rest 0.091 against 0.087 (0.136),
      breast cancer's at ``C = 0.1 / 1 / 10`` 0.24 / 0.11 / 0.045 against 0.22 / 0.077 /
      0.034, diabetes' epsilon-insensitive loss at ``C = 100`` 0.087 against 0.10. The
      trace split in halves, as ``az.ess`` does it, read 1.6-3.8x low.

    Examples
    --------
    >>> slice_pays(0.5, 1.0, 8.0), slice_pays(0.99, 1.0, 8.0)
    (False, True)
    >>> slice_pays(0.92, 1.0, 8.0), slice_pays(0.92, 1.0, 8.0, recorded=60)
    (False, True)
    >>> slice_pays(0.8, 1.0, 2.0), slice_pays(0.8, 1.0, 2.0, ess_per_sweep=0.02)
    (False, True)
    >>> slice_pays(0.8, 1.0, 4.0, kept=1000), slice_pays(0.8, 1.0, 4.0, kept=500)
    (False, True)
    >>> slice_pays(0.8, 1.0, 4.0, kept=90, thin=20)  # 90 draws cannot reach 100
    False
    """
    rho = float(rho)
    if recorded is not None:
        rho += (1.0 + 3.0 * rho) / max(int(recorded), 1)
    rho = min(max(rho, 0.0), 1.0)
    e = _ar1_draws(rho)
    if ess_per_sweep is not None and np.isfinite(ess_per_sweep):
        e = min(e, float(ess_per_sweep))
    if kept is not None:
        alone = min(kept, e * kept * thin)
        with_slice = min(kept, SLICE_ESS_PER_SWEEP * kept * thin)
        if alone < ESS_PER_CHAIN_MIN <= with_slice:
            return True
    return SLICE_ESS_PER_SWEEP * sweep_cost > e * (sweep_cost + slice_cost)


def move_costs(setup):
    """``(sweep, mh)``: the modelled cost, in nanoseconds, of one Gibbs sweep of the
    compiled dense chain (with its intercept line move) and of one independence MH
    proposal, for the schedule (:func:`mh_moves_per_sweep`).

    With ``n`` examples, ``p`` parameters, ``D`` features (``D`` more multiply-adds per
    example for per-entry noise variances), the loss's per-example costs ``c_draw`` and
    ``c_term`` and the unit costs of a multiply-add ``g`` (Gram) and ``l`` (loops):

    ``sweep = n (c_draw + 2 c_term + g p (p + 1) / 2 + l (3 p + 2 D_v)) + g p^3 / 6``,
    ``mh = n (c_term + l (p + D_v)) + l p^2``, ``D_v = D`` or 0.

    A model, not a measurement, so that the schedule -- and the draws -- depend only on
    the data and the seed; it moves the choice only where the efficiency is flat.

    Examples
    --------
    >>> from bayesdrop import Problem, LogisticLoss
    >>> from bayesdrop.samplers.compiled import compiled_setup
    >>> X = np.random.default_rng(0).normal(size=(500, 30)); y = np.sign(X[:, 0])
    >>> sweep, mh = move_costs(compiled_setup(Problem.create(X, y, LogisticLoss(), "none")))
    >>> bool(10 < sweep / mh < 30)
    True
    """
    n, p = setup["Xb"].shape
    Dv = setup["D"] if setup["vkind"] == V_LIKE_X else 0
    draw_ns, term_ns = setup["costs"]
    sweep = n * (draw_ns + 2.0 * term_ns + _GRAM_NS * p * (p + 1) / 2.0
                 + _LOOP_NS * (3 * p + 2 * Dv)) + _GRAM_NS * p ** 3 / 6.0
    mh = n * (term_ns + _LOOP_NS * (p + Dv)) + _LOOP_NS * p * p
    return float(sweep), float(mh)


def mh_moves_per_sweep(accept, rho, sweep_cost, mh_cost, max_moves=None):
    """The number ``k`` of independence MH proposals per Gibbs sweep that maximises the
    modelled effective draws per unit cost (the schedule fixed at the end of tuning).

    ``accept`` is the proposal's acceptance rate and ``rho`` the largest lag-1
    autocorrelation over the parameters of the Gibbs sweep alone, both measured in
    tuning. Each proposal replaces the state by a nearly independent one with
    probability ``accept``, so ``k`` proposals give the lag-1 autocorrelation
    ``rho_k = rho (1 - accept)^k``; an AR(1) chain of lag-1 autocorrelation ``rho_k``
    has ``(1 - rho_k) / (1 + rho_k)`` effective draws per draw, at the cost
    ``sweep_cost + k mh_cost`` (:func:`move_costs`). ``k`` is searched in
    ``0 .. max_moves`` (default :data:`MH_MAX_MOVES`); 0 when the move accepted less
    than :data:`MH_MIN_ACCEPT`. Every ``k`` leaves ``exp(-J)`` invariant: the choice
    changes the speed, never the target.

    Examples
    --------
    A slowly mixing Gibbs sweep and a cheap, often accepted proposal: several proposals;
    a sweep already nearly independent: none; a proposal hardly ever accepted: none.

    >>> mh_moves_per_sweep(0.36, 0.7, 25.0, 1.0)
    7
    >>> mh_moves_per_sweep(0.45, 0.01, 25.0, 1.0), mh_moves_per_sweep(0.01, 0.9, 25.0, 1.0)
    (0, 0)
    """
    if not accept >= MH_MIN_ACCEPT:
        return 0
    max_moves = MH_MAX_MOVES if max_moves is None else max_moves
    return int(np.argmax(_with_sweep(accept, rho, sweep_cost, mh_cost, max_moves)))


def _ar1_draws(r):
    """Effective draws per draw of an AR(1) chain of lag-1 autocorrelation ``r``."""
    return (1.0 - r) / (1.0 + r)


def _with_sweep(accept, rho, sweep_cost, mh_cost, max_moves):
    """The modelled effective draws per unit cost of a sweep followed by ``k`` proposals,
    for ``k`` from 0 to ``max_moves`` (index ``k``; the model of
    :func:`mh_moves_per_sweep`)."""
    rho = float(np.clip(rho, 0.0, 0.999)) if np.isfinite(rho) else 0.999
    k = np.arange(0, max_moves + 1)
    return _ar1_draws(rho * (1.0 - accept) ** k) / (sweep_cost + k * mh_cost)


#: the least acceptance rate at which the schedule may drop the Gibbs sweep and run the
#: independence moves alone: an independence sampler is only as good as its proposal's
#: fit in the tails. Measured (4 chains, 1000 + 2000): the synthetic 10^4 x 50 logistic
#: problem accepts 0.63 and alone gives ESS 5370/5041 in 10.7 s against 6968/7331 in
#: 26.6 s with the sweep; the breast-cancer problems accept 0.29-0.48 and alone their
#: tail ESS fell 4-15x (logistic q = 0: 404 against 6033). Below it the sweep stays.
MH_ALONE_MIN_ACCEPT = 0.6


def schedule(accept, rho, sweep_cost, mh_cost, max_moves=None):
    """``(gibbs, k)``: whether iterations keep the Gibbs sweep, and how many independence
    MH proposals each makes -- the most modelled effective draws per unit cost.

    With the sweep, :func:`mh_moves_per_sweep`. Without it (only when ``accept >=``
    :data:`MH_ALONE_MIN_ACCEPT`) an iteration is ``k >= 1`` independence moves, each
    keeping the state with probability ``1 - accept``: lag-1 autocorrelation
    ``(1 - accept)^k`` at the cost ``(k + 1) mh_cost`` (the kept iteration's augmentation
    mean and ``lp`` cost about one more evaluation of ``J``) -- near-independent draws for
    the price of a few evaluations of ``J`` where the posterior is close to the proposal (large
    ``N``, smooth losses), instead of an ``O(N D^2)`` sweep.

    Examples
    --------
    >>> schedule(0.63, 0.05, 17.0, 1.0)  # a proposal close to the posterior, a costly sweep
    (False, 2)
    >>> schedule(0.45, 0.05, 17.0, 1.0)  # accepted less often: the sweep stays
    (True, 0)
    >>> schedule(0.18, 0.29, 14.0, 1.0)  # a proposal accepted less often: keep the sweep
    (True, 4)
    """
    max_moves = MH_MAX_MOVES if max_moves is None else max_moves
    k = mh_moves_per_sweep(accept, rho, sweep_cost, mh_cost, max_moves)
    value = _with_sweep(accept, rho, sweep_cost, mh_cost, max_moves)[k]
    if accept >= MH_ALONE_MIN_ACCEPT:
        j = np.arange(1, max_moves + 1)
        alone = _ar1_draws((1.0 - accept) ** j) / ((j + 1) * mh_cost)
        if alone.max() > value:
            return False, int(j[np.argmax(alone)])
    return True, k
