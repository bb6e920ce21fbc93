"""Newton's Hessian as signed squares (``kernels.dense_hessian_split``) and the steps that
reuse a Cholesky factor (``newton.REUSE_DECREMENT``): exact to rounding against
independent references (1000-digit decimal eigenvalues, the generic three-product Hessian,
classical Newton at a tight tolerance)."""

from __future__ import annotations

from decimal import Decimal, getcontext

import numpy as np
import pytest
from sklearn.datasets import make_classification

from bayesdrop import Dropout, HingeLoss, LogisticLoss, Problem
from bayesdrop.linalg import hessian, kernels
from bayesdrop.solvers import fit_problem, newton


def _eigen_decimal(a, b, c):
    """Eigenvalues of ``[[a, b], [b, c]]`` (larger first) to 1000 digits (enough for
    entries 600 orders of magnitude apart)."""
    getcontext().prec = 1000
    a, b, c = Decimal(a), Decimal(b), Decimal(c)
    mean, half = (a + c) / 2, (a - c) / 2
    rad = (half * half + b * b).sqrt()
    return float(mean + rad), float(mean - rad)


CURVATURES = [
    (1.0, 0.3, -0.2),
    (2.0, 0.0, 5.0),            # diagonal, c larger
    (-1.0, 0.0, -3.0),          # negative definite, diagonal
    (1.0, 1.0, 1.0),            # singular
    (4.0, -1.0, 4.0),           # equal diagonal
    (3.018e6, 3.0098e17, -8.273e25),  # from a hinge fit: eigenvalues 26 orders apart
    (1e-300, 1e-160, -1e-20),
    (1e200, 1e250, -1e280),     # squares would overflow
]


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_split_hessian_at_zero_weights_equals_the_gram_product(fit_intercept, monkeypatch):
    """At ``w = 0`` (every ``gbar_n`` zero) the split kernel writes the rows
    ``sqrt(|d_mm|) xbar_n`` without reading ``M``; with curvatures of both signs and
    zeros (``P`` and ``Q`` rows, skipped rows), float64 and float32 products, it equals
    ``Xbar^T diag(d_mm) Xbar`` to rounding."""
    X, y = make_classification(300, 6, n_informative=3, random_state=4)
    problem = Problem.create(X, 2.0 * y - 1.0, LogisticLoss(1.0), Dropout(0.3),
                             fit_intercept)
    design = problem.design
    theta = np.zeros(design.n_params)
    _, _, curv = hessian.curvature(problem, theta)
    d_mm = np.random.default_rng(2).normal(size=300)
    d_mm[::7] = 0.0
    curv = curv._replace(d_mm=d_mm)
    Xbar = np.hstack([X, np.ones((300, 1))]) if fit_intercept else X
    ref = Xbar.T @ (d_mm[:, None] * Xbar) + 2.0 * np.diag(design.penalty_mask())
    ref[np.arange(6), np.arange(6)] += curv.noise_diag
    monkeypatch.setattr(hessian, "HESSIAN_BLOCKED_MIN", 0)
    monkeypatch.setattr(hessian, "HESSIAN_BLOCK", 64)
    for single, rtol in ((False, 1e-13), (True, 1e-6)):
        H = hessian.hessian_matrix(design, curv, single=single)
        np.testing.assert_allclose(H, ref, rtol=0, atol=rtol * np.max(np.abs(ref)))


@pytest.mark.parametrize("abc", CURVATURES)
def test_eigen2_matches_exact_eigenvalues_and_reconstructs(abc):
    a, b, c = abc
    l1, l2, u, v = kernels._eigen2(a, b, c)
    r1, r2 = _eigen_decimal(a, b, c)
    # each eigenvalue to relative accuracy (the small one too: det / the large one)
    assert l1 == pytest.approx(r1, rel=1e-13, abs=1e-300)
    assert l2 == pytest.approx(r2, rel=1e-13, abs=1e-300)
    assert u * u + v * v == pytest.approx(1.0, rel=1e-15)
    C = np.array([[a, b], [b, c]])
    e1, e2 = np.array([u, v]), np.array([-v, u])
    np.testing.assert_allclose(C @ e1, l1 * e1, rtol=1e-13, atol=1e-13 * np.max(np.abs(C)))
    np.testing.assert_allclose(C @ e2, l2 * e2, rtol=1e-13, atol=1e-13 * np.max(np.abs(C)))


def _problem(n=400, d=6, loss=None, q=0.2, seed=0, weights=None):
    X, y = make_classification(n, d, n_informative=3, random_state=seed)
    loss = HingeLoss(1.0) if loss is None else loss
    return Problem.create(X, 2.0 * y - 1.0, loss, Dropout(q), True, weights)


@pytest.mark.parametrize("loss", [HingeLoss(1.0), LogisticLoss(1.0)])
@pytest.mark.parametrize("spread, q", [(0.1, 0.2), (3.0, 1e-6)])
def test_split_hessian_equals_the_three_products(loss, spread, q, monkeypatch):
    """The signed-square Hessian (blocks of 7 rows: partial blocks, both kernels' paths)
    equals the generic ``Xbar^T diag Xbar + cross + noise`` products to rounding --
    ``q = 1e-6`` puts the examples far from their kink relative to their score
    deviation (strongly indefinite curvature: the exact-product path)."""
    problem = _problem(loss=loss, q=q)
    rng = np.random.default_rng(1)
    theta = spread * rng.normal(size=problem.design.n_params)
    _, _, curv = hessian.curvature(problem, theta)
    whole = hessian.hessian_matrix(problem.design, curv)
    monkeypatch.setattr(hessian, "HESSIAN_BLOCKED_MIN", 0)
    monkeypatch.setattr(hessian, "HESSIAN_BLOCK", 7)
    split = hessian.hessian_matrix(problem.design, curv)
    np.testing.assert_allclose(split, whole, rtol=0, atol=1e-13 * np.max(np.abs(whole)))
    ratio = curv.d_ms ** 2 / np.maximum(np.abs(curv.d_mm * curv.d_ss), 1e-300)
    if q < 0.1:  # both paths exercised
        assert np.any(ratio > kernels.SPLIT_MAX_RATIO) and np.any(ratio <= kernels.SPLIT_MAX_RATIO)


def test_split_hessian_keeps_the_small_eigenvalue_of_an_ill_conditioned_H(monkeypatch):
    """A weighted hinge fit near its optimum: ``H`` has eigenvalues from 0.4 to 10^10
    (examples close to their kink); the split form keeps the smallest to the rounding
    level of ``H`` (``~ eps ||H||``, shared by any way of summing it), and the compiled
    Newton loop ends next to the optimum where it once hit a non-positive-definite
    ``H``."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(60, 4))
    labels = np.random.default_rng(0).integers(0, 3, size=60)
    y = np.where(labels == 1, 1.0, -1.0)
    w = np.array([2.0, 0.5, 1.0])[labels]
    problem = Problem.create(X, y, HingeLoss(1.0), Dropout(0.2), True, w)
    late = newton.fit(problem, compiled=False, max_iter=9, warn=False).theta
    _, _, curv = hessian.curvature(problem, late)
    whole = hessian.hessian_matrix(problem.design, curv)
    monkeypatch.setattr(hessian, "HESSIAN_BLOCKED_MIN", 0)
    split = hessian.hessian_matrix(problem.design, curv)
    ew, es = np.linalg.eigvalsh(whole), np.linalg.eigvalsh(split)
    assert ew[-1] / ew[0] > 1e9
    assert es[0] == pytest.approx(ew[0], abs=100 * np.finfo(float).eps * ew[-1])
    assert es[0] > 0.3
    monkeypatch.undo()  # the fits below with the real threshold (no float32 products)
    # the optimum is the intercept alone (w = 0, b = -1, J = 42 exactly): both loops end
    # next to it without a positive-definite failure, and report the stall there (J is
    # not differentiable at w = 0); solver="auto" returns the bare model itself
    a = newton.fit(problem, compiled=True, warn=False)
    b = newton.fit(problem, compiled=False, warn=False)
    assert a.stalled and b.stalled and not (a.converged or b.converged)
    assert a.objective[-1] == pytest.approx(b.objective[-1], rel=1e-12)
    best = fit_problem(problem)
    assert problem.objective(best.theta) <= a.objective[-1]
    assert problem.objective(best.theta) == pytest.approx(42.0, rel=1e-15)


@pytest.mark.parametrize("loss", [HingeLoss(1.0), LogisticLoss(1.0)])
@pytest.mark.parametrize("compiled", [True, False])
def test_reused_factors_reach_the_classical_newton_optimum(loss, compiled, monkeypatch):
    """With factor reuse Newton computes fewer Hessians than it takes steps and ends as
    close to ``J*`` as classical Newton (every step a new Hessian, ``REUSE_DECREMENT =
    0``): within ``1e-13`` relative at the default ``tol`` (``CHORD_STOP``)."""
    problem = _problem(n=3000, d=20, loss=loss, q=0.3, seed=3)
    fast = newton.fit(problem, compiled=compiled)
    monkeypatch.setattr(newton, "REUSE_DECREMENT", 0.0)
    monkeypatch.setattr(newton, "QN_REUSE_DECREMENT", 0.0)  # 3000 x 20: single_applies
    classic = newton.fit(problem, compiled=compiled)
    tight = newton.fit(problem, tol=1e-15, compiled=compiled, warn=False)
    assert fast.converged and classic.converged
    assert classic.n_solves == classic.n_iter  # one Hessian per step
    assert fast.n_solves < classic.n_solves and fast.n_solves < fast.n_iter
    J = tight.objective[-1]
    assert fast.objective[-1] - J <= 1e-13 * J
    assert classic.objective[-1] - J <= 1e-13 * J
    # theta as close as that J implies: 1/2 d^T H d <= eps bounds each component by
    # |d_i| <= sqrt(2 eps (H^{-1})_ii) (the extent of that ellipsoid along axis i)
    H = hessian.hessian_matrix(problem.design, hessian.curvature(problem, tight.theta)[2])
    bound = np.sqrt(2e-13 * J * np.diag(np.linalg.inv(H)))
    assert np.all(np.abs(fast.theta - tight.theta) <= bound)
    assert np.all(np.diff(fast.objective) <= 1e-12 * J)  # monotone


@pytest.mark.parametrize("loss", [HingeLoss(1.0), LogisticLoss(1.0)])
@pytest.mark.parametrize("compiled", [True, False])
def test_expanded_far_steps_save_hessians_and_reach_the_same_optimum(loss, compiled,
                                                                     monkeypatch):
    """Far from the optimum a full step that passes the Armijo test is doubled while ``J``
    falls (``EXPAND_STEPS``): on standardised breast cancer it needs no more Hessians and
    fewer steps and Hessians together than plain Newton (logistic 3 Hessians and 11
    steps instead of 5 and 13, hinge 3 Hessians instead of 4), and ends at the same optimum; ``J`` never increases."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.preprocessing import StandardScaler

    X, y = load_breast_cancer(return_X_y=True)
    problem = Problem.create(StandardScaler().fit_transform(X), 2.0 * y - 1.0, loss,
                             Dropout(0.3))
    expanded = newton.fit(problem, compiled=compiled)
    monkeypatch.setattr(newton, "EXPAND_STEPS", 0)
    plain = newton.fit(problem, compiled=compiled)
    tight = newton.fit(problem, tol=1e-15, compiled=compiled, warn=False)
    assert expanded.converged and plain.converged
    assert expanded.n_solves <= plain.n_solves
    assert expanded.n_solves + expanded.n_iter < plain.n_solves + plain.n_iter
    J = tight.objective[-1]
    for res in (expanded, plain):
        assert res.objective[-1] - J <= 1e-13 * J
        assert np.all(np.diff(res.objective) <= 0.0)
        # theta to sqrt(J excess / smallest curvature ~ 1) ~ 1e-7
        np.testing.assert_allclose(res.theta, tight.theta, rtol=1e-6, atol=1e-7)


def test_a_far_step_is_doubled_only_when_J_fell_more_than_its_model_predicts(monkeypatch):
    """The doubling of a far full step is tried only when that step lowered ``J`` by more
    than ``EXPAND_RATIO`` times ``lambda^2 / 2`` (a flattening ``J``). On 3000 x 50 logistic
    the first step's ratio is below it: the doubling, which ``J`` would refuse, is not
    tried -- one evaluation of ``J`` fewer and the same iterates as when it is. (From
    ``HESSIAN_BLOCKED_MIN`` entries on every full step keeps its factor,
    ``QN_REUSE_DECREMENT``, so no step is far and none is doubled: the threshold is raised
    here.)"""
    monkeypatch.setattr(hessian, "HESSIAN_BLOCKED_MIN", 10**9)
    X, y = make_classification(3000, 50, n_informative=10, random_state=0)
    problem = Problem.create(X, 2.0 * y - 1.0, LogisticLoss(1.0), Dropout(0.3))
    assert not hessian.single_applies(problem.design)
    calls = []
    value = problem.loss.value

    def counted(*args):
        calls.append(1)
        return value(*args)

    monkeypatch.setattr(problem.loss, "value", counted)
    skipped = newton.fit(problem, compiled=False)
    n_skipped = len(calls)
    monkeypatch.setattr(newton, "EXPAND_RATIO", 0.0)  # always try (J must still fall)
    calls.clear()
    tried = newton.fit(problem, compiled=False)
    assert len(calls) == n_skipped + 1
    np.testing.assert_array_equal(skipped.objective, tried.objective)
    np.testing.assert_array_equal(skipped.theta, tried.theta)


@pytest.mark.parametrize("loss", [HingeLoss(1.0), LogisticLoss(1.0)])
@pytest.mark.parametrize("path", ["compiled", "python", "subsample"])
def test_max_iter_k_stops_the_same_iteration_after_step_k(loss, path, monkeypatch):
    """``max_iter=k`` gives the first ``k`` steps of the unlimited run exactly (the same
    ``J`` history and, after the last step, the same ``theta``) -- also with the subsample
    start, which keeps its own step budget. The solver benchmark times "time to 1e-8" as
    the fit stopped after the first step within 1e-8 of ``J*``."""
    compiled = path == "compiled"
    if path == "subsample":
        monkeypatch.setattr(newton, "SUBSAMPLE_MIN_ROWS", 1000)
        monkeypatch.setattr(newton, "SUBSAMPLE_STEP", 4)
    problem = _problem(n=3000, d=20, loss=loss, q=0.3, seed=5)
    full = newton.fit(problem, compiled=compiled)
    assert full.converged and full.n_iter >= 3
    for k in range(1, full.n_iter + 1):
        part = newton.fit(problem, max_iter=k, compiled=compiled, warn=False)
        assert part.n_iter == k
        np.testing.assert_array_equal(part.objective, full.objective[: k + 1])
    np.testing.assert_array_equal(part.theta, full.theta)


def _tall(loss, misleading=False, n=40_000, d=6):
    X, y = make_classification(n, d, n_informative=3, random_state=3)
    if misleading:  # feature 0 only on the rows the subsample keeps: its H_00 32x too big
        X[np.arange(n) % newton.SUBSAMPLE_STEP != 0, 0] = 0.0
    return Problem.create(X, 2.0 * y - 1.0, loss, Dropout(0.3))


@pytest.mark.parametrize("loss", [HingeLoss(1.0), LogisticLoss(1.0)])
@pytest.mark.parametrize("compiled", ["auto", False])
def test_the_subsample_start_hands_its_factor_to_the_steps_on_all_rows(loss, compiled,
                                                                       monkeypatch):
    """From the subsample's optimum, the subsample's last Cholesky factor (an estimate of
    ``H`` on all rows: every ``SUBSAMPLE_STEP``-th row weighted ``SUBSAMPLE_STEP``)
    directs chord steps on all rows: no Hessian of all the rows is computed
    (``n_solves == 0``), and the optimum is the one of Newton from zero at a tight tol.
    The subsample itself runs compiled (1250 rows) or in the Python loop."""
    problem = _tall(loss)
    ref = newton.fit(problem, tol=1e-14, compiled=compiled)
    assert ref.n_solves >= 1  # without the subsample start: Hessians of all rows
    monkeypatch.setattr(newton, "SUBSAMPLE_MIN_ROWS", 20_000)
    res = newton.fit(problem, compiled=compiled)
    assert res.converged and res.n_solves == 0
    J = ref.objective[-1]
    assert abs(res.objective[-1] - J) <= 1e-12 * J
    assert np.all(np.diff(res.objective) <= 0.0)
    np.testing.assert_allclose(res.theta, ref.theta, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("loss", [HingeLoss(1.0), LogisticLoss(1.0)])
def test_a_misleading_subsample_factor_is_replaced(loss, monkeypatch):
    """A subsample that overstates one feature's curvature 32-fold (the feature is nonzero
    only on the rows it keeps): its chord steps contract by about 1 - 1/32 along that
    feature, fail the :data:`newton.CONTRACTION` test, and a Hessian of all rows takes
    over; the optimum is the same."""
    problem = _tall(loss, misleading=True)
    ref = newton.fit(problem, tol=1e-14)
    monkeypatch.setattr(newton, "SUBSAMPLE_MIN_ROWS", 20_000)
    res = newton.fit(problem)
    assert res.converged and res.n_solves >= 1
    J = ref.objective[-1]
    assert abs(res.objective[-1] - J) <= 1e-12 * J
    np.testing.assert_allclose(res.theta, ref.theta, rtol=1e-6, atol=1e-7)


def _bfgs_inverse(H0_inv, pairs):
    """The BFGS inverse-Hessian recursion written out densely (Nocedal & Wright 2006,
    eq. 6.17): ``Hinv <- (I - rho s y^T) Hinv (I - rho y s^T) + rho s s^T``."""
    Hinv = H0_inv.copy()
    eye = np.eye(Hinv.shape[0])
    for s, y in pairs:
        rho = 1.0 / (s @ y)
        Hinv = (eye - rho * np.outer(s, y)) @ Hinv @ (eye - rho * np.outer(y, s)) \
            + rho * np.outer(s, s)
    return Hinv


@pytest.mark.parametrize("n_pairs", [0, 1, 3, 8])
def test_qn_direction_is_the_bfgs_updated_inverse(n_pairs):
    """The two-loop recursion on a Cholesky factor (the Python evaluator, and the same
    function compiled with the dense one) equals the dense BFGS recursion started from
    ``H^{-1}``: ``-B^{-1} g`` to rounding."""
    import numba
    import scipy.linalg as sla

    from bayesdrop.solvers.newton import compiled, loop, steps

    rng = np.random.default_rng(n_pairs)
    p = 6
    A = rng.normal(size=(p, p))
    H = A @ A.T + p * np.eye(p)
    T = H + np.diag(rng.uniform(0.5, 3.0, p))  # the curvature the pairs see
    pairs = [(s, T @ s + 0.01 * rng.normal(size=p)) for s in rng.normal(size=(n_pairs, p))]
    g = rng.normal(size=p)
    expected = -_bfgs_inverse(np.linalg.inv(H), pairs) @ g
    S = np.zeros((8, p))
    Yq = np.zeros((8, p))
    rho = np.zeros(8)
    for i, (s, y) in enumerate(pairs):
        S[i], Yq[i], rho[i] = s, y, 1.0 / (s @ y)
    python_ev = steps.DesignSteps(None, "cholesky", None)
    python_ev.factor = sla.cho_factor(H, lower=True)
    np.testing.assert_allclose(loop.qn_direction(python_ev, g, S, Yq, rho, n_pairs),
                               expected, rtol=1e-10, atol=1e-12)
    X = np.zeros((3, p - 1))
    dense_ev = compiled.dense_steps(LogisticLoss(1.0).kernel_params, X, X, 1.0, True,
                                    np.ones(3), np.ones(3), (0, 0), 0, 1e-10, (0, 0), 1e4)
    dense_ev.L[:] = np.linalg.cholesky(H)
    run = numba.njit(lambda ev, g, S, Yq, rho, k: loop.qn_direction(ev, g, S, Yq, rho, k))
    np.testing.assert_allclose(run(dense_ev, g, S, Yq, rho, n_pairs), expected,
                               rtol=1e-10, atol=1e-12)


def test_qn_pairs_keep_the_newest_with_positive_curvature():
    from bayesdrop.solvers.newton.loop import add_pair

    memory = newton.QN_MEMORY
    S, Yq, rho = np.zeros((memory, 2)), np.zeros((memory, 2)), np.zeros(memory)
    k = 0
    for i in range(memory + 3):
        k = add_pair(S, Yq, rho, k, np.array([1.0, float(i)]), np.array([1.0, 0.0]), memory)
    assert k == memory
    assert S[k - 1, 1] == memory + 2 and S[0, 1] == 3
    k = add_pair(S, Yq, rho, k, np.array([1.0, 0.0]), np.array([-1.0, 0.0]), memory)  # s.y < 0
    assert k == memory and S[k - 1, 1] == memory + 2


@pytest.mark.parametrize("loss", [HingeLoss(1.0), LogisticLoss(1.0)])
def test_bfgs_updated_factors_save_hessians_on_a_large_design(loss, monkeypatch):
    """On 10^4 x 50 (``single_applies``) the kept factor with BFGS updates needs no more
    Hessians than the plain chord steps and strictly fewer Hessians or steps (logistic:
    1 Hessian instead of 2, for one step more; a Hessian costs about four passes there;
    hinge: 5 steps instead of 7), and reaches the same optimum."""
    X, y = make_classification(10_000, 50, n_informative=10, random_state=0)
    problem = Problem.create(X, 2.0 * y - 1.0, loss, Dropout(0.3))
    assert hessian.single_applies(problem.design)
    qn = newton.fit(problem)
    monkeypatch.setattr(newton, "QN_MEMORY", 0)
    plain = newton.fit(problem)
    tight = newton.fit(problem, tol=1e-15, warn=False)
    J = tight.objective[-1]
    assert qn.converged and plain.converged
    assert qn.n_solves <= plain.n_solves
    assert qn.n_solves < plain.n_solves or qn.n_iter < plain.n_iter
    assert qn.objective[-1] - J <= 1e-13 * J
    assert np.all(np.diff(qn.objective) <= 1e-12 * J)


@pytest.mark.parametrize("compiled", [True, False])
def test_a_kept_factor_contracting_by_a_half_saves_a_hessian_on_a_large_design(
        compiled, monkeypatch):
    """Digits 0-vs-rest (hinge, dropout 0.2, ``C = 0.1``; ``single_applies``, where a
    Hessian costs about eight steps): with ``QN_CONTRACTION`` the kept factor directs
    every step after the first -- one Hessian -- where the stricter ``CONTRACTION`` asks
    for a second; both end within the stopping rule's bound of ``J*`` (a last kept-factor
    step has ``lambda^2 / 2 <= CHORD_STOP tol |J|``; directions contracting by ``rho <=
    1/2`` leave at most ``rho / (1 - rho) <= 1`` times that)."""
    from sklearn.datasets import load_digits

    X, digit = load_digits(return_X_y=True)
    problem = Problem.create(X / 16.0, np.where(digit == 0, 1.0, -1.0), HingeLoss(0.1),
                             Dropout(0.2))
    assert hessian.single_applies(problem.design) and newton.QN_CONTRACTION <= 0.5
    lax = newton.fit(problem, compiled=compiled)
    monkeypatch.setattr(newton, "QN_CONTRACTION", newton.CONTRACTION)
    strict = newton.fit(problem, compiled=compiled)
    tight = newton.fit(problem, tol=1e-15, compiled=compiled, warn=False)
    J = tight.objective[-1]
    assert lax.converged and strict.converged
    assert lax.n_solves == 1 < strict.n_solves
    assert lax.objective[-1] - J <= newton.CHORD_STOP * 1e-8 * J
    assert strict.objective[-1] - J <= newton.CHORD_STOP * 1e-8 * J
    assert np.all(np.diff(lax.objective) <= 1e-12 * J)  # monotone


def test_subsampled_start_factor(monkeypatch):
    """At ``w = 0`` on a large dense design the first factor is the Gram matrix of every
    ``k``-th row weighted ``k`` (plus penalty and the exact noise diagonal), and the fit
    ends at the optimum of the fit whose first factor uses every row."""
    X, y = make_classification(10_000, 50, n_informative=10, random_state=0)
    problem = Problem.create(X, 2.0 * y - 1.0, LogisticLoss(1.0), Dropout(0.3))
    design = problem.design
    k = newton.start_row_step(design)
    assert k == 10_000 // max(newton.START_GRAM_ROWS,
                              newton.START_GRAM_ROWS_PER_PARAM * design.n_params) > 1
    _, _, curv = hessian.curvature(problem, np.zeros(design.n_params))
    (L, _), used = newton.steps.factor_cholesky(design, curv, newton._factor_options(),
                                                True)
    Xk = np.c_[X[::k], np.ones(X[::k].shape[0])]
    expected = k * (Xk.T * curv.d_mm[::k]) @ Xk
    expected[np.diag_indices(50)] += 2.0 + curv.noise_diag
    assert used
    # float32 products: rounding ~ 1e-7 of the largest entry (summed over ~2500 rows)
    np.testing.assert_allclose(np.tril(L) @ np.tril(L).T, expected, rtol=0,
                               atol=1e-5 * np.abs(expected).max())
    wrong = (Xk.T * curv.d_mm[::k]) @ Xk  # without the weight k: far off
    assert np.abs(np.tril(L) @ np.tril(L).T - wrong).max() > 1e-2 * np.abs(expected).max()
    sub = newton.fit(problem)
    monkeypatch.setattr(newton, "START_GRAM_ROWS", 10 ** 9)  # every row
    assert newton.start_row_step(design) == 1
    full = newton.fit(problem)
    tight = newton.fit(problem, tol=1e-15, warn=False)
    J = tight.objective[-1]
    assert sub.objective[-1] - J <= 1e-13 * J and full.objective[-1] - J <= 1e-13 * J


_CACHED_KERNEL = '''
import numba, numpy as np

@numba.njit(cache=True)
def twice(x, k):
    return 2.0 * x[k]
'''

_READY_SCRIPT = '''
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import cached_kernel
from bayesdrop.solvers.newton.compiled import ready
args = (np.arange(3.0), 1)
if sys.argv[2] == "compile":
    print(cached_kernel.twice(*args), len(cached_kernel.twice.overloads))
else:
    print(ready(cached_kernel.twice, *args), len(cached_kernel.twice.overloads))
'''


def test_ready_finds_machine_code_that_another_process_cached(tmp_path):
    """``compiled="auto"`` runs the compiled Newton loop when numba's on-disk cache holds
    it (``python -m bayesdrop compile``): :func:`compiled.ready` must find what an earlier
    process cached -- it looked it up under a key numba does not use (a ``Signature``
    instead of the tuple of argument types), so every new process ran the Python loop.
    Not compiled anywhere, it is not ready (and compiles nothing)."""
    import os
    import subprocess
    import sys

    (tmp_path / "cached_kernel.py").write_text(_CACHED_KERNEL)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"))

    def run(mode):
        out = subprocess.run([sys.executable, "-c", _READY_SCRIPT, str(tmp_path), mode],
                             env=env, capture_output=True, text=True, check=True)
        return out.stdout.split()

    assert run("check") == ["False", "0"]  # nothing cached: not ready, nothing compiled
    assert run("compile") == ["2.0", "1"]
    assert run("check") == ["True", "1"]  # loaded from the cache, not compiled


def test_a_missing_compiled_loop_is_looked_up_once_per_process(monkeypatch):
    """Not compiled and not cached: the disk lookup (about a millisecond) is made once for
    the argument kinds, not once per fit (a CV path makes hundreds of fits)."""
    from bayesdrop.solvers.newton import compiled

    calls = []
    monkeypatch.setattr(newton, "_READY", set())
    monkeypatch.setattr(newton, "_MISSING", {})
    monkeypatch.setattr(compiled, "ready", lambda *a: calls.append(1) or False)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 4)); y = np.where(X[:, 0] > 0, 1.0, -1.0)
    problem = Problem.create(X, y, LogisticLoss(0.5), Dropout(0.2))
    first = newton.fit(problem)
    for C in (1.0, 2.0):
        newton.fit(problem._replace(loss=LogisticLoss(C)))
    assert calls == [1] and first.converged


@pytest.mark.parametrize("loss", [LogisticLoss(1.0), HingeLoss(1.0)])
def test_newton_cg_takes_one_pass_of_derivatives_per_step(monkeypatch, loss):
    """Newton-CG solves with a new Hessian every step, so each accepted point's pass over
    the data (``Design.rmatvec_pair``, or on a wide CSR design
    ``kernels.csr_gradient_entries``: the gradient and the Hessian's noise diagonal, with
    the CG products' entries) brings the second derivatives along, and the last point's
    pass the gradient only: one pass at the start and one per step, not a second one for
    the next direction (nor one for the entries). The optimum is that of Cholesky Newton."""
    import scipy.sparse as sp
    from bayesdrop.linalg import kernels
    from bayesdrop.model.design import Design

    rng = np.random.default_rng(0)
    X = sp.random(300, 900, density=0.02, format="csr", random_state=1)
    y = np.where(X @ rng.normal(size=900) + 0.1 * rng.normal(size=300) > 0, 1.0, -1.0)
    problem = Problem.create(X, y, loss, Dropout(0.3))
    passes, entries = [], []

    def counting(real, log):
        def call(*args, **kwargs):
            log.append(1)
            return real(*args, **kwargs)
        return call

    monkeypatch.setattr(Design, "rmatvec_pair", counting(Design.rmatvec_pair, passes))
    monkeypatch.setattr(kernels, "csr_gradient_entries",
                        counting(kernels.csr_gradient_entries, passes))
    monkeypatch.setattr(kernels, "csr_hessian_entries",
                        counting(kernels.csr_hessian_entries, entries))
    # the Python loop, whose passes can be counted (the compiled CSR loop takes the same
    # steps: test_solvers.test_compiled_newton_cg_takes_the_same_steps)
    res = newton.fit(problem, linalg="cg", compiled=False)
    assert res.converged
    assert len(passes) == res.n_iter + 1
    assert len(entries) == (0 if loss.smooth else 1)  # the hinge: its IRLS start's system
    monkeypatch.undo()
    exact = newton.fit(problem, linalg="cholesky", tol=1e-12)
    assert res.objective[-1] == pytest.approx(exact.objective[-1], rel=1e-8)


@pytest.mark.parametrize("noise", ["dropout", "multiplicative", "none"])
def test_the_compiled_passes_form_M_from_X_as_the_stored_M_gives_it(noise):
    """Where ``V = scale X * X`` (dropout, multiplicative noise, zero noise) the compiled
    dense loop gets ``M`` None (:meth:`~bayesdrop.model.design.Design.dense_kernel_arrays`)
    and forms the squares from ``X`` (:func:`bayesdrop.model._design_kernels.m_entry`):
    its scores, fused ``J`` and gradient, gradient pass, IRLS start factor and the
    Hessian's rows (float64 products; curvatures with strongly indefinite examples, the
    exact rows) equal those from the stored ``M = X * X`` to rounding (1e-13 relative).
    Poisson noise (``M = X``) keeps its stored ``M``."""
    from bayesdrop import MultiplicativeGaussian, Poisson
    from bayesdrop._blas import dpotrf_address, gram_pair
    from bayesdrop.solvers.newton import compiled

    rng = np.random.default_rng(11)
    n, D = 301, 9
    X = rng.normal(size=(n, D))
    y = np.where(X[:, 0] + rng.normal(size=n) > 0, 1.0, -1.0)
    made = {"dropout": Dropout(0.3), "multiplicative": MultiplicativeGaussian(0.4),
            "none": "none"}[noise]
    problem = Problem.create(X, y, HingeLoss(0.8), made)
    Xc, M, scale = problem.design.dense_kernel_arrays()
    assert M is None
    stored = np.ascontiguousarray(X * X)
    lp, fi, p = problem.loss.kernel_params, True, D + 1
    sw, yy = np.ones(n), problem.y.astype(float)
    theta = rng.normal(size=p)
    rho = rng.uniform(0.5, 2.0, n)
    d_mm, d_ss = rng.uniform(0.1, 2.0, n), rng.uniform(-1.0, 1.0, n)
    d_ms = rng.uniform(-1.0, 1.0, n)
    d_ms[::7] = 1e3 * np.sqrt(np.abs(d_mm[::7] * d_ss[::7]))  # strongly indefinite rows
    noisy = 0.5 if scale == 0.0 else float(scale)  # where M is read at zero noise too

    def passes(M_):
        m, s, d_m, d_s, g, nd = (np.empty(n), np.empty(n), np.empty(n), np.empty(n),
                                 np.empty(p), np.empty(D))
        J = compiled._value_gradient(lp, Xc, M_, float(scale), fi, yy, sw, theta, m, s,
                                     d_m, d_s, g, nd)
        nd2 = np.zeros(D)
        g2 = compiled._gradient(Xc, M_, float(scale), fi, d_m, d_s, theta, nd2)
        L0 = compiled.start_factor(Xc, M_, noisy, fi, rho, p, gram_pair(),
                                   dpotrf_address())
        P, Q, Z, Y, work, single = compiled.hessian_workspace(n, p, (0, 0))
        H = np.empty((p, p))
        compiled.hessian_rows(Xc, M_, noisy, fi, theta, d_mm, d_ms, d_ss, P, Q, Z, Y,
                              gram_pair(), work, H, single)
        return [np.array([J]), m, s, g, nd, g2, nd2, np.tril(L0), H]

    for a, b in zip(passes(None), passes(stored)):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-13 * np.abs(b).max())
    assert Problem.create(np.abs(X), y, HingeLoss(0.8), Poisson(0.5)).design \
        .dense_kernel_arrays()[1] is not None


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("noise", ["dropout", "none"])
def test_the_fused_pass_gives_J_and_the_gradient_of_the_objective(fit_intercept, noise):
    """The compiled loop's one-pass ``J`` and gradient at a trial point
    (``compiled._value_gradient``, used where the full step is expected to be taken)
    against ``Problem.objective`` with its gradient (numpy's products, the losses' own
    terms) -- hinge, logistic and epsilon-insensitive losses with sample weights, with and
    without noise and intercept -- and its noise diagonal against ``2 V^T d_s`` from the
    same derivatives: equal to rounding (1e-12 relative). ``M`` is None there: the
    squares ``X * X`` are formed in the pass (reading ``X`` for ``X * X`` fails it)."""
    from bayesdrop import EpsilonInsensitiveLoss
    from bayesdrop.solvers.newton import compiled

    rng = np.random.default_rng(4)
    X = rng.normal(size=(83, 7))
    sw = rng.uniform(0.2, 3.0, size=83)
    labels = np.where(X[:, 0] + rng.normal(size=83) > 0, 1.0, -1.0)
    for loss, y in ((HingeLoss(0.7), labels), (LogisticLoss(1.3), labels),
                    (EpsilonInsensitiveLoss(0.9, 0.3), X[:, 1] + rng.normal(size=83))):
        problem = Problem.create(X, y, loss.weighted(sw), noise if noise == "none"
                                 else Dropout(0.35), fit_intercept=fit_intercept)
        Xc, M, scale = problem.design.dense_kernel_arrays()
        assert M is None  # V = scale X * X (zero at no noise): formed from X in the pass
        p = problem.design.n_params
        theta = rng.normal(size=p)
        n = X.shape[0]
        m, s, d_m, d_s, g, nd = (np.empty(n), np.empty(n), np.empty(n), np.empty(n),
                                 np.empty(p), np.empty(7))
        J = compiled._value_gradient(problem.loss.kernel_params, Xc, M, float(scale),
                                     fit_intercept, problem.y.astype(float), sw, theta, m,
                                     s, d_m, d_s, g, nd)
        J_ref, g_ref = problem.objective(theta, True)
        assert J == pytest.approx(J_ref, rel=1e-12)
        np.testing.assert_allclose(g, g_ref, rtol=1e-12, atol=1e-12 * np.abs(g_ref).max())
        m_ref, s_ref = problem.design.scores(theta)
        np.testing.assert_allclose(m, m_ref, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(s, s_ref, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(nd, problem.design.noise_diagonal(2.0 * d_s)[:7],
                                   rtol=1e-12, atol=1e-14)
