"""The solution path of the zero-noise hinge and epsilon-insensitive losses followed from a
neighbouring ``C`` (:mod:`bayesdrop.solvers.homotopy`): its end point against libsvm and
the smoothing solver, its gaps (a flat intercept, a wrong start, duplicated rows), and
its use on the CV estimators' path."""

import numpy as np
import pytest
from sklearn.datasets import load_diabetes, make_classification
from sklearn.svm import SVC, SVR

from bayesdrop import DropoutSVC, DropoutSVR, EpsilonInsensitiveLoss, HingeLoss, Problem
from bayesdrop.solvers import fit_problem, homotopy, irls, smoothing


def _case(loss_name, seed=0, n=120):
    X, y = make_classification(n_samples=n, n_features=5, n_informative=4, n_redundant=0,
                               random_state=seed)
    if loss_name == "hinge":
        return X, 2.0 * y - 1.0, (lambda C, **kw: HingeLoss(C, margin=1.3, **kw))
    rng = np.random.default_rng(seed)
    target = X @ np.array([1.0, -2.0, 0.5, 0.0, 1.5]) + rng.standard_t(3, size=n)
    return X, target, (lambda C, **kw: EpsilonInsensitiveLoss(C, 0.4, **kw))


def _exact(problem):
    """The optimum by the smoothing solver (certified), the reference of these tests."""
    res = smoothing.fit(problem)
    assert res.converged and res.solver == "smoothing"
    return res


@pytest.mark.parametrize("loss_name", ["hinge", "epsilon"])
@pytest.mark.parametrize("intercept", [True, False])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ratio", [7.7, 1 / 7.7])
def test_follow_reaches_the_exact_optimum(loss_name, intercept, weighted, ratio):
    """From the optimum at ``C ratio`` to ``C``: certified, events walked, ``J`` equal to
    the smoothing solver's to 1e-12 and the same coefficients (the optimum is unique
    here); with an intercept and no weights also against libsvm at ``tol=1e-12``."""
    X, y, make = _case(loss_name)
    weights = np.random.default_rng(1).uniform(0.5, 2.0, size=y.size) if weighted else None
    C = 0.8

    def problem(c):
        return Problem.create(X, y, make(c), "none", fit_intercept=intercept,
                              sample_weight=weights)

    start = _exact(problem(C * ratio)).theta
    res = homotopy.follow(problem(C), start, ratio)
    ref = _exact(problem(C))
    assert res is not None and res.solver == "homotopy" and res.converged
    assert res.n_iter > 0  # the path changed direction on the way
    assert res.objective[-1] == pytest.approx(ref.objective[-1], rel=1e-12)
    np.testing.assert_allclose(res.theta, ref.theta, atol=1e-8)
    if intercept and not weighted:
        if loss_name == "hinge":  # margin 1.3: libsvm's problem in w / 1.3
            peer = SVC(kernel="linear", C=C * 1.3, tol=1e-12).fit(X / 1.3, y)
            coef = peer.coef_.ravel() / 1.3
        else:
            peer = SVR(kernel="linear", C=C, epsilon=0.4, tol=1e-12).fit(X, y)
            coef = peer.coef_.ravel()
        J_peer = problem(C).objective(np.append(coef, peer.intercept_[0] * (
            1.3 if loss_name == "hinge" else 1.0)))
        assert res.objective[-1] <= J_peer * (1 + 1e-10)


@pytest.mark.parametrize("loss_name", ["hinge", "epsilon"])
def test_a_whole_path_in_both_directions_equals_cold_fits(loss_name):
    """Eleven values of ``C`` over five decades, up then down, each fit followed from the
    previous fit's end point (as the CV path chains them): every end point certified with
    the cold optimum's ``J``."""
    X, y, make = _case(loss_name, seed=2, n=150)
    Cs = np.logspace(-2, 3, 11)
    for order in (Cs, Cs[::-1]):
        theta = None
        for prev, C in zip(np.r_[np.nan, order[:-1]], order):
            p = Problem.create(X, y, make(C), "none")
            ref = _exact(p)
            if theta is None:
                theta = ref.theta
                continue
            res = homotopy.follow(p, theta, prev / C)
            assert res is not None and res.solver == "homotopy"
            assert res.objective[-1] == pytest.approx(ref.objective[-1], rel=1e-12)
            theta = res.theta


def test_a_flat_intercept_stretch_is_walked():
    """Diabetes at tiny ``C``: no example on a kink for a while, as many above the tube as
    below it, so ``J`` is flat in ``b`` there; the walk keeps ``b`` (any point of the
    stretch is optimal) instead of stopping at the singular system. Same ``J`` as the
    smoothing solver; the minimiser need not be the same point."""
    X, y = load_diabetes(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    y = (y - y.mean()) / y.std()
    X, y = X[:353], y[:353]

    def problem(C):
        return Problem.create(X, y, EpsilonInsensitiveLoss(C, 0.1), "none")

    start = _exact(problem(1e-4)).theta
    res = homotopy.follow(problem(7.7e-4), start, 1e-4 / 7.7e-4)
    ref = _exact(problem(7.7e-4))
    assert res is not None and res.solver == "homotopy"
    assert res.objective[-1] == pytest.approx(ref.objective[-1], rel=1e-12)
    np.testing.assert_allclose(res.theta[:-1], ref.theta[:-1], atol=1e-9)  # w is unique


def test_a_start_that_is_not_the_optimum_is_refused():
    """``theta0`` that is not the optimum at ``C t0``: None, and ``fit_problem`` then runs
    the chosen solver from it (the same optimum)."""
    X, y, make = _case("hinge")
    start = _exact(Problem.create(X, y, make(0.1), "none")).theta
    p = Problem.create(X, y, make(1.0), "none")
    assert homotopy.follow(p, start + 0.05, 0.1) is None
    assert homotopy.follow(p, start, 0.2) is None  # the optimum of another C
    res = fit_problem(p, start + 0.05, theta0_scale=0.1)
    assert res.solver != "homotopy"
    assert res.objective[-1] == pytest.approx(_exact(p).objective[-1], rel=1e-12)


def test_duplicated_rows_fall_back_to_an_exact_solver():
    """Every row twice: more examples on kinks than parameters (a degenerate optimum).
    ``fit_problem`` with the path's start still returns the exact optimum."""
    X, y, make = _case("hinge", n=60)
    X, y = np.vstack([X, X]), np.r_[y, y]
    start = fit_problem(Problem.create(X, y, make(0.5), "none")).theta
    p = Problem.create(X, y, make(4.0), "none")
    res = fit_problem(p, start, theta0_scale=0.5 / 4.0)
    ref = fit_problem(p, solver="irls", tol=1e-14, max_iter=50_000, warn=False)
    assert res.converged
    assert res.objective[-1] <= ref.objective[-1] * (1 + 1e-10)


def test_applicable_and_bad_use():
    X, y, make = _case("hinge", n=40)
    assert homotopy.applicable(Problem.create(X, y, make(1.0), "none"))
    assert not homotopy.applicable(Problem.create(X, y, make(1.0), "dropout"))
    wide = np.hstack([X] * 70)  # 351 parameters
    assert not homotopy.applicable(Problem.create(wide, y, make(1.0), "none"))
    with pytest.raises(ValueError, match="piecewise-linear"):
        homotopy.follow(Problem.create(X, y, make(1.0), "dropout"), np.zeros(6), 0.5)


@pytest.mark.parametrize("estimator", [DropoutSVC, DropoutSVR])
def test_the_estimators_path_follows_and_matches_cold_fits(estimator):
    """``_fit_path`` (the CV estimators' walk) at zero noise: after its first fit every
    fit is the homotopy's, with the cold fit's ``J``; the caller's arrays unchanged."""
    loss_name = "hinge" if estimator is DropoutSVC else "epsilon"
    X, y, _ = _case(loss_name, seed=4, n=140)
    if loss_name == "hinge":
        y = (y > 0).astype(int)
    X0, y0 = X.copy(), y.copy()
    Cs = np.logspace(-2, 2, 7)
    est = estimator(noise_level=0.0)
    solvers = []
    for C, fitted in zip(Cs, est._fit_path(X, y, None, Cs)):
        solvers.append(str(np.ravel(fitted.solver_)[0]))
        cold = estimator(C=C, noise_level=0.0).fit(X, y)
        J, J_cold = (float(np.ravel(e.objective_[-1])[-1]) for e in (fitted, cold))
        assert J == pytest.approx(J_cold, rel=1e-12)
    assert solvers[0] != "homotopy" and set(solvers[1:]) == {"homotopy"}
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)


def test_the_event_budget_shrinks_with_the_data(monkeypatch):
    """The default budget is ``EVENT_WORK / (n_samples n_params)`` events (at least 100,
    at most ``MAX_EVENTS``): a step that needs more events than it allows hands over
    (None), and ``fit_problem`` still returns the exact optimum."""
    X, y, make = _case("hinge", seed=5, n=400)
    start = _exact(Problem.create(X, y, make(0.002), "none")).theta
    p = Problem.create(X, y, make(0.02), "none")
    walked = homotopy.follow(p, start, 0.1)
    assert walked is not None and walked.n_iter > 100  # the step needs more than 100
    monkeypatch.setattr(homotopy, "EVENT_WORK", 1.0)  # the floor: 100 events
    assert homotopy.follow(p, start, 0.1) is None
    res = fit_problem(p, start, theta0_scale=0.1)
    assert res.solver != "homotopy"
    assert res.objective[-1] == pytest.approx(walked.objective[-1], rel=1e-12)


@pytest.mark.parametrize("loss_name", ["hinge", "epsilon"])
def test_kkt_certificate_accepts_the_optimum_only(loss_name):
    """The walk's own certificate: it holds at the optimum with the terms' derivatives the
    walk returns, and fails for a point moved by 1e-6, for a multiplier pushed out of its
    interval, and for an example assigned to the wrong piece."""
    from bayesdrop.solvers._homotopy_compiled import OK, walk
    from bayesdrop.solvers.irls import kink_assignment

    X, y, make = _case(loss_name)
    problem = Problem.create(X, y, make(0.8), "none")
    start = _exact(Problem.create(X, y, make(0.8 / 7.7), "none")).theta
    pos, slopes = problem.loss.kinks(problem.y)
    kink, dist, piece = kink_assignment(problem.design.matvec(start), pos)
    on = dist <= 1e-9 * max(float(np.max(np.abs(pos))), 1.0)
    kink, piece = kink.astype(np.int64), piece.astype(np.int64)
    a = np.empty(y.size)
    status, _, theta = walk(np.ascontiguousarray(X), True, pos, slopes, on, kink, piece,
                            start, 1.0 / 7.7, 2000, a)
    assert status == OK and on.any() and (~on).any()
    check = irls.kkt_certificate
    assert check(problem, theta, on, kink, piece, a)
    moved = theta.copy()
    moved[0] += 1e-6
    assert not check(problem, moved, on, kink, piece, a)
    i = np.flatnonzero(on)[0]
    bad = a.copy()
    bad[i] = slopes[i, kink[i] + 1] + 1e-3  # beyond the right slope
    assert not check(problem, theta, on, kink, piece, bad)
    j = np.flatnonzero(~on)[0]
    wrong = piece.copy()
    wrong[j] = (piece[j] + 1) % (pos.shape[1] + 1)
    assert not check(problem, theta, on, kink, wrong, a)


def _unscaled(name):
    """Unscaled features: breast cancer's raw ones (all positive, areas in the thousands;
    the training rows of the first of three folds that leave out every fifth row's
    group), or 20 of both signs on scales from 1 to 3162."""
    if name == "cancer":
        from sklearn.datasets import load_breast_cancer
        from sklearn.model_selection import GroupKFold

        X, y = load_breast_cancer(return_X_y=True)
        train = next(GroupKFold(3).split(X, y, np.arange(y.size) % 5))[0]
        return X[train], 2.0 * y[train] - 1.0
    X, y = make_classification(400, 20, random_state=0)
    return X * np.logspace(0.0, 3.5, 20), 2.0 * y - 1.0


def _dual_lower_bound(problem, theta):
    """A lower bound on ``min J`` by weak duality, computed here with numpy alone: for
    ``J = ||w||^2 + sum_n c_n max(0, 1 - y_n (x_n w + b))``, ``c_n = 2 C`` (MATH.md
    section 1), any ``0 <= alpha <= c`` with
    ``sum alpha y = 0`` gives ``J* >= sum alpha - ||X^T (alpha y)||^2 / 4``. The ``alpha``
    are read off ``theta`` -- ``c_n`` inside the margin, 0 beyond it, and on the margin
    the least-squares solution of ``2 w = X^T (alpha y)``, ``sum alpha y = 0`` --, clipped
    to the box and shifted along ``y`` to meet the equality."""
    X, y = problem.design.X, problem.y
    c = 2.0 * problem.loss.c * np.ones(y.size)
    w, b = theta[:-1], theta[-1]
    ym = y * (X @ w + b)
    on = np.abs(ym - 1.0) <= 1e-6
    alpha = np.where(ym < 1.0, c, 0.0)
    alpha[on] = 0.0
    rest = 2.0 * w - X.T @ (alpha * y)
    A = np.vstack([(X[on] * y[on, None]).T, y[on]])
    alpha[on] = np.linalg.lstsq(A, np.append(rest, -np.sum(alpha * y)), rcond=None)[0]
    alpha = np.clip(alpha, 0.0, c)
    free = on & (alpha > 0.0) & (alpha < c)
    alpha[free] -= y[free] * np.sum(alpha * y) / free.sum()
    assert np.all((alpha >= 0.0) & (alpha <= c)) and abs(np.sum(alpha * y)) < 1e-9 * c[0]
    v = X.T @ (alpha * y)
    return float(np.sum(alpha) - v @ v / 4.0)


@pytest.mark.parametrize("data", ["cancer", "both signs"])
@pytest.mark.parametrize("C", [1.0, 100.0, 1e4])
def test_unscaled_features_reach_the_certified_optimum(data, C):
    """Unscaled features at zero noise: a cold fit is converged and within 1e-9
    (relative) of the duality bound computed with numpy alone, and a path over ``C``
    reaches the same ``J`` (on cancer by walking: ``homotopy``). Before the scores' slack scaled with
    their terms (:func:`bayesdrop.solvers.irls.kink_tolerance`), the active-set solve was
    refined and checked, and the stationarity slack used ``sum_n |x_nj a_n|`` (not
    ``X^T |a|``, below zero for features of both signs), cancer ``C = 10^4`` ended
    unconverged 5e-4 above the bound, ``C = 100`` "converged" 2e-8 above it, and
    both-signs ``C = 100`` unconverged."""
    import warnings

    from bayesdrop.solvers import fit_path

    X, y = _unscaled(data)
    problem = Problem.create(X, y, HingeLoss(C), "none")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = fit_problem(problem)
        path = fit_path(problem, [1e-4, 1.0, 100.0, 1e4][: [1.0, 100.0, 1e4].index(C) + 2])
    assert res.converged
    J = problem.objective(res.theta)
    bound = _dual_lower_bound(problem, res.theta)
    assert bound <= J * (1.0 + 1e-12) and J - bound <= 1e-9 * J, (J, bound)
    assert all(r.converged for r in path)
    if data == "cancer":
        assert [r.solver for r in path[1:]] == ["homotopy"] * (len(path) - 1)
    assert path[-1].objective[-1] == pytest.approx(J, rel=1e-12)
