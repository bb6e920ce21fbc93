"""Newton's fresh directions refined from a kept factor on large dense designs
(``newton.REFINE_*``, ``steps.direction_refined``, ``steps.inverse_factor``,
``hessian.single_operator``): the float32 Hessian products are the float64 ones to
float32 rounding, the refined direction solves the current Newton system, and a fit
with refinement reaches the optimum of one that factors every fresh Hessian -- with
fewer factors; a refined step whose line search fails, or that took many products, is
followed by a new factor."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_classification

from bayesdrop import Dropout, NoNoise, Problem
from bayesdrop.linalg import hessian
from bayesdrop.solvers import newton
from bayesdrop.solvers.newton import steps

from .test_newton_single import _problem as single_problem

N, D = 1000, 520  # N D > 2e5 and D > 256: the Python loop; D >= REFINE_MIN_FEATURES


def _problem(loss="logistic", C=1.0, noise=None, intercept=True, weights=None, n=N, d=D,
             sparse=False):
    """:func:`tests.test_newton_single._problem`'s data at this file's size."""
    X = sp.csr_matrix(make_classification(n, d, n_informative=10, random_state=0)[0]) \
        if sparse else None
    return single_problem(loss, C, noise, intercept, weights, X=X, n=n, d=d)


@pytest.fixture
def events(monkeypatch):
    """The fresh directions of the fits, in order: ``("factor", float32 used)`` or
    ``("refined", products)`` (a refined direction that was not kept: ``products`` < 0)."""
    log = []
    factor_cholesky = steps.factor_cholesky
    direction_refined = steps.direction_refined

    def spy_factor(design, curv, opts, single=False, work=None):
        factor, used = factor_cholesky(design, curv, opts, single, work)
        log.append(("factor", used))
        return factor, used

    def spy_refined(*args):
        p, k = direction_refined(*args)
        log.append(("refined", k if p is not None else -k))
        return p, k

    monkeypatch.setattr(steps, "factor_cholesky", spy_factor)
    monkeypatch.setattr(steps, "direction_refined", spy_refined)
    return log


def test_refinement_applies_to_large_dense_noisy_designs_with_many_features():
    opts = newton._factor_options()
    assert steps.refine_applies(_problem().design, opts)
    assert not steps.refine_applies(_problem(d=500).design, opts)  # fewer than 512 features
    assert not steps.refine_applies(_problem(n=60).design, opts)  # 3e4 entries
    assert not steps.refine_applies(_problem(noise=NoNoise()).design, opts)
    assert not steps.refine_applies(_problem(sparse=True).design, opts)
    assert not steps.refine_applies(_problem().design, opts._replace(refine_maxiter=0))


@pytest.mark.parametrize("loss,noise", [
    ("logistic", Dropout(0.3)), ("hinge", Dropout(0.3)), ("epsilon", Dropout(0.3)),
    ("logistic", NoNoise())])  # (M is X; zero noise: the hinge's curvature is zero)
@pytest.mark.parametrize("intercept", [True, False])
def test_single_operator_is_the_hessian_to_float32_rounding(loss, intercept, noise):
    """Within ``4 (N + D + 2) 2^-24`` times the same products of the absolute values (the
    float32 bound of every summation order, Higham 2002, section 3.1) -- and not equal to
    the float64 products (float32 arithmetic is used)."""
    problem = _problem(loss, noise=noise, intercept=intercept)
    rng = np.random.default_rng(4)
    curv = hessian.curvature(problem, 0.1 * rng.normal(size=problem.design.n_params))[2]
    X = problem.design.X
    absolute = Problem.create(np.abs(X), problem.y, problem.loss, noise, intercept).design
    acurv = curv._replace(**{k: np.abs(getattr(curv, k))
                             for k in ("w", "d_mm", "d_ms", "d_ss", "noise_diag")})
    for _ in range(3):
        z = rng.normal(size=problem.design.n_params)
        exact = hessian.hessian_operator(problem.design, curv)(z)
        err = np.abs(hessian.single_operator(problem.design, curv)(z) - exact)
        bound = 4 * (N + D + 2) * 2.0**-24 * hessian.hessian_operator(absolute, acurv)(np.abs(z))
        assert np.all(err <= bound)
        assert np.max(err) > 0.0


def test_single_operator_with_a_stored_M_is_the_hessian_to_float32_rounding():
    """As above for a variance stored apart from ``X`` (Poisson noise, ``M = X`` on
    non-negative data; dropout forms ``X * X`` in the pass instead): the kernel reads
    the float32 ``M`` it is given, within the same bound and not the float64 products."""
    from bayesdrop import LogisticLoss, Poisson

    rng = np.random.default_rng(6)
    X = np.abs(make_classification(N, D, n_informative=10, random_state=1)[0])
    y = np.where(X[:, 0] > np.median(X[:, 0]), 1.0, -1.0)
    problem = Problem.create(X, y, LogisticLoss(1.0), Poisson(0.5))
    assert problem.design.dense_kernel_arrays()[1] is not None
    curv = hessian.curvature(problem, 0.1 * rng.normal(size=D + 1))[2]
    acurv = curv._replace(**{k: np.abs(getattr(curv, k))
                             for k in ("w", "d_mm", "d_ms", "d_ss", "noise_diag")})
    z = rng.normal(size=D + 1)
    exact = hessian.hessian_operator(problem.design, curv)(z)
    err = np.abs(hessian.single_operator(problem.design, curv)(z) - exact)
    bound = 4 * (N + D + 2) * 2.0**-24 * hessian.hessian_operator(problem.design,
                                                                  acurv)(np.abs(z))
    assert np.all(err <= bound) and np.max(err) > 0.0


def test_refined_direction_solves_the_current_newton_system():
    """Preconditioned by the factor of the Hessian at a nearby point, CG on the current
    Hessian's float32 products reaches the relative residual asked for (measured against
    the float64 Hessian: up to the products' rounding), with the exact factor in one or
    two products, and gives up (None) when ``maxiter`` is too small."""
    problem = _problem("hinge")
    rng = np.random.default_rng(5)
    theta1 = 0.05 * rng.normal(size=problem.design.n_params)
    theta2 = theta1 + 0.01 * rng.normal(size=theta1.size)
    H1 = hessian.hessian_matrix(problem.design, hessian.curvature(problem, theta1)[2])
    _, g, curv2 = hessian.curvature(problem, theta2)
    H2 = hessian.hessian_matrix(problem.design, curv2)
    hvp = hessian.single_operator(problem.design, curv2)
    old = steps.inverse_factor(steps.cho_factor(H1, 1e-10))
    p, k = steps.direction_refined(hvp, old, g, 1e-6, 100)
    assert p is not None and 2 <= k <= 100
    assert np.linalg.norm(H2 @ p + g) <= 2e-6 * np.linalg.norm(g)
    # the decrement: |g^T (p - p*)| <= |g| |H^-1| |H p + g| <= 2e-6 cond(H) g^T H^-1 g
    assert -(g @ p) == pytest.approx(g @ np.linalg.solve(H2, g), rel=2e-6 * np.linalg.cond(H2))
    exact = steps.inverse_factor(steps.cho_factor(H2, 1e-10))
    _, k_exact = steps.direction_refined(hvp, exact, g, 1e-4, 100)
    assert k_exact <= 2
    assert steps.direction_refined(hvp, old, g, 1e-6, k - 1)[0] is None


@pytest.mark.parametrize("loss,intercept,weighted", [
    ("logistic", True, False), ("hinge", True, False), ("epsilon", True, False),
    ("hinge", False, True)])
def test_refined_fits_reach_the_optimum_with_fewer_factors(loss, intercept, weighted, events,
                                                           monkeypatch):
    """From a far start (where a fit takes several fresh directions)."""
    w = np.random.default_rng(6).uniform(0.0, 3.0, N) if weighted else None
    problem = _problem(loss, C=10.0, intercept=intercept, weights=w)
    theta0 = 0.3 * np.random.default_rng(0).normal(size=problem.design.n_params)
    refined = newton.fit(problem, theta0, compiled=False)
    n_refined = sum(kind == "refined" and k > 0 for kind, k in events)
    n_factors = sum(kind == "factor" for kind, _ in events)
    monkeypatch.setattr(newton, "REFINE_MAXITER", 0)
    events.clear()
    plain = newton.fit(problem, theta0, compiled=False)
    assert not any(kind == "refined" for kind, _ in events)
    assert n_refined > 0 and n_factors < sum(kind == "factor" for kind, _ in events)
    tight = newton.fit(problem, compiled=False, tol=1e-14, warn=False)
    J = tight.objective[-1]
    assert refined.converged and plain.converged
    # the stopping rule's bound: a last step with a kept factor has lambda^2 / 2 <=
    # CHORD_STOP tol |J|, and directions contracting by rho <= QN_CONTRACTION = 1/2 leave
    # at most rho / (1 - rho) <= 1 times that above J*
    bound = newton.CHORD_STOP * 1e-8 * abs(J)
    assert newton.QN_CONTRACTION <= 0.5
    assert refined.objective[-1] - J <= bound
    assert plain.objective[-1] - J <= bound


def test_a_refined_step_whose_line_search_fails_gets_a_float32_factor(events, monkeypatch):
    """The first refined direction is spoiled (1e15 times too long: no step length above
    ``MIN_STEP`` lowers ``J``); the same step is then taken with a new factor -- still
    from the float32 products, which were not at fault -- and the fit converges."""
    problem = _problem("logistic", C=10.0)
    direction_refined = steps.direction_refined
    spoiled = []

    def spoil(*args):
        p, k = direction_refined(*args)
        if p is not None and not spoiled:
            spoiled.append(len(events))
            return 1e15 * p, k
        return p, k

    monkeypatch.setattr(steps, "direction_refined", spoil)
    theta0 = 0.3 * np.random.default_rng(0).normal(size=problem.design.n_params)
    result = newton.fit(problem, theta0, compiled=False)
    assert spoiled and result.converged
    after = events[spoiled[0]:]
    assert after[0][0] == "factor" and all(used for kind, used in after if kind == "factor")
    tight = newton.fit(problem, compiled=False, tol=1e-14, warn=False)
    assert result.objective[-1] - tight.objective[-1] <= 1e-13 * abs(tight.objective[-1])


def test_a_refined_direction_of_many_products_is_followed_by_a_new_factor(events,
                                                                          monkeypatch):
    """With ``REFINE_REFRESH = 0`` every kept refined direction is followed by a new factor
    at the next fresh direction; with the default some follow each other."""
    problem = _problem("hinge", C=10.0)
    theta0 = 0.3 * np.random.default_rng(0).normal(size=problem.design.n_params)
    newton.fit(problem, theta0, compiled=False)
    kinds = [kind for kind, k in events if kind == "factor" or k > 0]
    assert ("refined", "refined") in set(pairwise(kinds))
    monkeypatch.setattr(newton, "REFINE_REFRESH", 0)
    events.clear()
    newton.fit(problem, theta0, compiled=False)
    kinds = [kind for kind, k in events if kind == "factor" or k > 0]
    assert "refined" in kinds and ("refined", "refined") not in set(pairwise(kinds))
