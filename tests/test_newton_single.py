"""Newton's float32 Hessian products on large dense designs (``newton.SINGLE_MAX_COND``,
``hessian.hessian_matrix(single=True)``, ``Design.gram(single=True)``): the products are
close to float64 at float32's rounding level, the optimum is the all-float64 one to the
last digits, and an ill-conditioned ``H`` or a failed line search falls back to float64."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_classification

from bayesdrop import Dropout, EpsilonInsensitiveLoss, HingeLoss, LogisticLoss, NoNoise, Problem
from bayesdrop.linalg import hessian
from bayesdrop.solvers import newton

N, D = 10_000, 30  # N D = 3e5 >= HESSIAN_BLOCKED_MIN


def _problem(loss="logistic", C=1.0, noise=None, intercept=True, weights=None, X=None,
             n=N, d=D):
    X0, y = make_classification(n, d, n_informative=10, random_state=0)
    X = X0 if X is None else X
    noise = Dropout(0.3) if noise is None else noise
    if loss == "epsilon":
        target = X0 @ np.random.default_rng(2).normal(size=d)
        target += 0.1 * np.random.default_rng(3).normal(size=n)
        return Problem.create(X, target, EpsilonInsensitiveLoss(C, 0.1), noise, intercept,
                              weights)
    L = HingeLoss(C) if loss == "hinge" else LogisticLoss(C)
    return Problem.create(X, 2.0 * y - 1.0, L, noise, intercept, weights)


@pytest.fixture
def factors(monkeypatch):
    """Record, for every Cholesky factor Newton computes, (float32 allowed, used)."""
    log = []
    original = newton.steps.factor_cholesky

    def spy(design, curv, opts, single=False, work=None):
        factor, used = original(design, curv, opts, single, work)
        log.append((single, used))
        return factor, used

    monkeypatch.setattr(newton.steps, "factor_cholesky", spy)
    return log


def test_single_applies_only_to_large_dense_noisy_designs():
    assert hessian.single_applies(_problem().design)
    assert not hessian.single_applies(_problem(noise=NoNoise()).design)  # no noise
    assert not hessian.single_applies(_problem(n=1000).design)  # 3e4 entries
    X, _ = make_classification(N, D, n_informative=10, random_state=0)
    assert not hessian.single_applies(_problem(X=sp.csr_matrix(X)).design)  # sparse


@pytest.mark.parametrize("loss", ["logistic", "hinge", "epsilon"])
def test_single_hessian_is_float64_hessian_to_float32_rounding(loss):
    problem = _problem(loss)
    theta = 0.1 * np.random.default_rng(4).normal(size=problem.design.n_params)
    _, _, curv = hessian.curvature(problem, theta)
    H = hessian.hessian_matrix(problem.design, curv)
    H32 = hessian.hessian_matrix(problem.design, curv, single=True)
    assert H32.dtype == np.float64 and np.array_equal(H32, H32.T)
    err = np.linalg.norm(H32 - H) / np.linalg.norm(H)
    # float32 rows (eps 6e-8) summed over 2048-row blocks into float64
    assert 1e-10 < err < 1e-6


@pytest.mark.parametrize("single", [True, False])
def test_hessian_block_arrays_kept_in_work_give_the_same_hessian(single):
    """A Newton fit keeps the blocked product's arrays between its Hessians (``work``):
    the second Hessian, from arrays the first one filled, is bit for bit the one from
    fresh arrays (their padding columns stay zero), and the arrays are the same objects."""
    problem = _problem("hinge")
    rng = np.random.default_rng(6)
    work = {}
    curvs = [hessian.curvature(problem, 0.1 * rng.normal(size=problem.design.n_params))[2]
             for _ in range(2)]
    hessian.hessian_matrix(problem.design, curvs[0], single=single, work=work)
    (arrays,) = work.values()
    H = hessian.hessian_matrix(problem.design, curvs[1], single=single, work=work)
    (again,) = work.values()
    assert all(a is b for a, b in zip(arrays, again))
    np.testing.assert_array_equal(H, hessian.hessian_matrix(problem.design, curvs[1],
                                                            single=single))


def test_single_gram_is_float64_gram_to_float32_rounding():
    design = _problem().design
    rho = np.random.default_rng(5).uniform(0.1, 2.0, size=N)
    G, G32 = design.gram(rho), design.gram(rho, single=True)
    err = np.linalg.norm(G32 - G) / np.linalg.norm(G)
    assert 1e-10 < err < 1e-6
    np.testing.assert_array_equal(G32[-1], G[-1])  # intercept row: float64 sums


@pytest.mark.parametrize("loss,intercept,weighted", [
    ("logistic", True, False), ("hinge", True, False), ("epsilon", True, False),
    ("hinge", False, False), ("logistic", False, True), ("epsilon", True, True)])
def test_float32_products_reach_the_float64_optimum(loss, intercept, weighted, factors,
                                                    monkeypatch):
    w = np.random.default_rng(6).uniform(0.0, 3.0, N) if weighted else None
    problem = _problem(loss, intercept=intercept, weights=w)
    fast = newton.fit(problem, compiled=False)
    assert factors and all(used for _, used in factors)  # every factor from float32
    monkeypatch.setattr(newton, "SINGLE_MAX_COND", 0.0)
    factors.clear()
    exact = newton.fit(problem, compiled=False)
    assert factors and not any(used for _, used in factors)
    tight = newton.fit(problem, compiled=False, tol=1e-14, warn=False)
    assert fast.converged and exact.converged
    J = tight.objective[-1]
    assert fast.objective[-1] == pytest.approx(exact.objective[-1], rel=1e-13)
    assert fast.objective[-1] - J <= 1e-13 * abs(J)
    assert fast.n_iter <= exact.n_iter + 1


def test_ill_conditioned_hessian_is_factored_in_float64(factors, monkeypatch):
    """Two columns 1e-4 apart with almost no noise: ``cond(H)`` far above 1e4, so the
    first float32 factor is rejected and recomputed in float64 -- and, the float64
    factor's condition estimate being as high, the later factors skip float32 -- and the
    fit ends at the tight optimum. (Kept factors' directions must contract by
    ``CONTRACTION`` here, not by the laxer ``QN_CONTRACTION``, so that the fit takes more
    than one factor.)"""
    X, _ = make_classification(N, D, n_informative=10, random_state=0)
    X[:, 1] = X[:, 0] + 1e-4 * np.random.default_rng(1).normal(size=N)
    problem = _problem("logistic", C=100.0, noise=Dropout(1e-5), X=X)
    monkeypatch.setattr(newton, "QN_CONTRACTION", newton.CONTRACTION)
    result = newton.fit(problem, compiled=False)
    assert result.converged
    assert len(factors) >= 2 and factors[0] == (True, False)
    assert all(not single and not used for single, used in factors[1:])
    tight = newton.fit(problem, compiled=False, tol=1e-14, warn=False)
    J = tight.objective[-1]
    assert result.objective[-1] - J <= 1e-12 * abs(J)
    # without the guard the same fit uses the float32 factors
    monkeypatch.setattr(newton, "SINGLE_MAX_COND", np.inf)
    factors.clear()
    newton.fit(problem, compiled=False)
    assert factors and all(used for _, used in factors)


def test_float32_factors_resume_once_the_hessian_is_conditioned_again(factors,
                                                                      monkeypatch):
    """The float32 products are skipped only while the last float64 factor's condition
    estimate is above ``SINGLE_MAX_COND``: with the first three estimates reported
    infinite (the first factor's float32 guard and its float64 estimate, the second
    factor's float64 estimate) and the true ones afterwards, the first factor is tried in
    float32 and rejected, the second and third are not tried, and the fourth is tried and
    kept."""
    problem = _problem("logistic", C=10.0)
    calls = []
    original = newton.steps.diagonal_condition

    def condition(L):
        calls.append(L.dtype)
        return np.inf if len(calls) <= 3 else original(L)

    monkeypatch.setattr(newton.steps, "diagonal_condition", condition)
    monkeypatch.setattr(newton, "QN_MEMORY", 0)  # a new factor every step
    monkeypatch.setattr(newton, "REUSE_DECREMENT", 0.0)
    result = newton.fit(problem, compiled=False)
    assert result.converged and len(factors) >= 4
    # estimates: factor 1's guard (inf: rejected) and float64 one (inf: skip), factor 2's
    # float64 one (inf: skip), factor 3's float64 one (true: low), factor 4's guard
    assert factors[0] == (True, False) and factors[1] == (False, False)
    assert factors[2] == (False, False) and factors[3] == (True, True)


@pytest.mark.parametrize("loss", ["logistic", "hinge"])
def test_failed_line_search_with_a_float32_factor_retries_in_float64(loss, factors,
                                                                     monkeypatch):
    """A line search that cannot shorten the step (``MIN_STEP`` 0.9) from a far start:
    the float32 step fails, the same step is retried with a float64 factor, and float32
    is not tried again."""
    problem = _problem(loss, C=10.0)
    monkeypatch.setattr(newton, "MIN_STEP", 0.9)
    theta0 = np.full(problem.design.n_params, 3.0)
    newton.fit(problem, theta0, compiled=False, warn=False)
    assert factors[0] == (True, True)
    assert factors[1:] and all(not single for single, _ in factors[1:])


def test_irls_start_of_a_large_dense_design_is_the_lowest_J_along_its_ray(monkeypatch):
    """On a large dense design the hinge's IRLS start (one IRLS map from zero) is scaled
    to the lowest ``J`` along its ray (``newton.ray_scale``): its ``alpha`` is within the
    search's bracket (``RAY_LOG_TOL`` in ``log alpha``) of the minimiser on a fine grid,
    so by convexity its ``J`` is at most ``J`` at that bracket's ends; the unscaled map
    (``RAY_LOG_RANGE = 0``: ``alpha = 1``) is well above it; and ``solver="auto"``
    reaches the same ``J`` from either start. Positive, image-like features with dropout
    0.5 and a 10 % class, where the map's scale is off by about a fifth."""
    from bayesdrop.solvers import fit_problem

    rng = np.random.default_rng(5)
    X = rng.uniform(size=(2000, 120)) * (rng.uniform(size=(2000, 120)) < 0.5)
    score = X @ rng.normal(size=120)
    y = np.where(score > np.quantile(score, 0.9), 1.0, -1.0)
    problem = Problem.create(X, y, HingeLoss(1.0), Dropout(0.5))
    assert hessian.single_applies(problem.design)
    scaled = newton._irls_start(problem, "cholesky", 250)[0]
    monkeypatch.setattr(newton, "RAY_LOG_RANGE", 0.0)
    unscaled = newton._irls_start(problem, "cholesky", 250)[0]
    from_unscaled = fit_problem(problem, unscaled)
    monkeypatch.undo()
    alpha = scaled[0] / unscaled[0]
    np.testing.assert_allclose(scaled, alpha * unscaled, rtol=1e-12)
    log_grid = np.linspace(-newton.RAY_LOG_RANGE, newton.RAY_LOG_RANGE, 1601)
    J_grid = [problem.objective(np.exp(g) * unscaled) for g in log_grid]
    best = log_grid[int(np.argmin(J_grid))]
    assert abs(np.log(alpha) - best) <= newton.RAY_LOG_TOL + 0.005  # + the grid's step
    J = problem.objective(scaled)
    edge = max(problem.objective(np.exp(best + s * newton.RAY_LOG_TOL) * unscaled)
               for s in (-1.0, 1.0))
    assert J <= edge
    assert problem.objective(unscaled) - J > 0.01 * abs(J)  # the scale was off
    res = fit_problem(problem, scaled)
    assert res.objective[-1] == pytest.approx(from_unscaled.objective[-1], rel=1e-9)


# designs of Newton's Python loop (more than newton.MAX_COMPILED_ROWS rows), below and
# above hessian.HESSIAN_BLOCKED_MIN entries: a float64 / a float32 start
@pytest.mark.parametrize("n, d", [(2100, 15), (3000, 100)])
def test_one_vs_rest_problems_share_the_irls_start_factor(monkeypatch, n, d):
    """The hinge's IRLS start at ``w = 0`` has label-free weights (``rho_n = C``), so the
    one-vs-rest problems on one design factor its system once
    (``newton._start_factor``), and each class's fit is the one it gets on a design of
    its own, to the last digit."""
    from bayesdrop import DropoutSVC
    from bayesdrop.linalg import wls

    rng = np.random.default_rng(0)
    X = rng.uniform(size=(n, d)) * (rng.uniform(size=(n, d)) < 0.5)
    y = np.argmax(X @ rng.normal(size=(d, 3)), axis=1)
    starts = []
    real = wls.normal_matrix

    def counting(design, rho, *args, **kwargs):
        if np.all(rho == 0.5):  # the start's weights: C at w = 0 (IRLS's vary)
            starts.append(design)
        return real(design, rho, *args, **kwargs)

    monkeypatch.setattr(wls, "normal_matrix", counting)
    clf = DropoutSVC(C=0.5, noise_level=0.3).fit(X, y)
    assert len(starts) == 1  # one start factor for the three classes
    for k in range(3):
        alone = DropoutSVC(C=0.5, noise_level=0.3).fit(X, y == k)
        np.testing.assert_array_equal(clf.coef_[k], alone.coef_[0])
        assert clf.intercept_[k] == alone.intercept_[0]


@pytest.mark.parametrize("loss", ["logistic", "hinge", "epsilon"])
def test_compiled_loop_float32_products_reach_the_float64_optimum(loss, monkeypatch):
    """The compiled dense loop (``compiled=True``; 2000 x 30 = 6e4 entries, within its
    range and at least ``HESSIAN_BLOCKED_MIN``) with float32 Hessian products: the
    optimum of its float64 run to the last digits, in at most one more step; with the
    guard at 0 every float32 factor is rejected and the run is the float64-only run bit
    for bit (the rejected factor recomputed in float64, the later ones not tried); the
    Python loop's float32 run takes the same steps."""
    import bayesdrop._blas as blas

    problem = _problem(loss, n=2000)
    assert hessian.single_applies(problem.design)
    fast = newton.fit(problem, compiled=True)
    monkeypatch.setattr(blas, "gram_pair_single", lambda: (0, 0))  # no float32 products
    exact = newton.fit(problem, compiled=True)
    monkeypatch.undo()
    assert not np.array_equal(fast.theta, exact.theta)  # the float32 products were used
    monkeypatch.setattr(newton, "SINGLE_MAX_COND", 0.0)
    guarded = newton.fit(problem, compiled=True)
    np.testing.assert_array_equal(guarded.theta, exact.theta)
    assert guarded.n_iter == exact.n_iter and guarded.n_solves == exact.n_solves
    monkeypatch.undo()
    tight = newton.fit(problem, compiled=True, tol=1e-14, warn=False)
    J = tight.objective[-1]
    assert fast.converged and exact.converged
    assert fast.objective[-1] == pytest.approx(exact.objective[-1], rel=1e-13)
    assert fast.objective[-1] - J <= 1e-13 * abs(J)
    assert fast.n_iter <= exact.n_iter + 1
    python = newton.fit(problem, compiled=False)
    assert python.n_iter == fast.n_iter
    assert python.objective[-1] == pytest.approx(fast.objective[-1], rel=1e-13)


def test_compiled_loop_retries_a_failed_float32_step_in_float64(monkeypatch):
    """A line search that cannot shorten the step (``MIN_STEP`` 0.9) from a far start in
    the compiled loop: the float32 step fails and is retried with a float64 factor (the
    loop's ``retry_exact``), as in the Python loop -- the same steps, factors and ``J``;
    without the retry the compiled run would stop after one factor."""
    problem = _problem("logistic", C=10.0, n=2000)
    monkeypatch.setattr(newton, "MIN_STEP", 0.9)
    theta0 = np.full(problem.design.n_params, 3.0)
    python = newton.fit(problem, theta0, compiled=False, warn=False)
    compiled = newton.fit(problem, theta0, compiled=True, warn=False)
    assert compiled.n_iter == python.n_iter
    assert compiled.n_solves == python.n_solves >= 2
    assert compiled.objective[-1] == pytest.approx(python.objective[-1], rel=1e-12)
