"""The compiled dense chain's exact MH moves, chosen by cost: the Laplace proposal, the
cost model of a sweep and of a proposal, and the schedule fixed at the end of tuning
(:class:`bayesdrop.samplers.compiled.CompiledKernel` runs it).

Every choice here changes the speed of a chain, never its target: each move leaves
``exp(-J)`` invariant, and the costs are a model, not a clock, so that the draws depend on
the data and the seed only.
"""

from __future__ import annotations

import numpy as np

from ..model.design import V_LIKE_X

__all__ = ["MH_ALONE_MIN_ACCEPT", "MH_DF", "MH_MAX_MOVES", "MH_MIN_ACCEPT", "PROPOSAL_INFLATE",
           "SCHEDULE_MIN_SWEEPS", "laplace_proposal", "mh_moves_per_sweep", "move_costs",
           "schedule"]

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
