"""SMO with shrinking (bayesdrop.solvers.dual._smo): the stopping rule holds for every
variable, the returned gradient is complete, and the optimum is the unshrunk one."""

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, make_classification
from sklearn.preprocessing import StandardScaler

from bayesdrop.solvers import dual

NO_SHRINKING = 10**9


def _problem(kind, seed):
    if kind == "cancer":
        X, y = load_breast_cancer(return_X_y=True)
        X = StandardScaler().fit_transform(X)
    else:  # overlapping classes: many bounded support vectors, and redundant features
        X, y = make_classification(300, 8, n_informative=3, n_redundant=3, flip_y=0.1,
                                   random_state=seed)
    y = 2.0 * y - 1.0
    rng = np.random.default_rng(seed)
    C = rng.uniform(0.2, 3.0, size=y.shape[0]) if seed % 2 else np.ones(y.shape[0])
    return X @ X.T, y, C


def _violation(K, y, C, a):
    """m(a) - M(a), the maximal KKT violation, from scratch over all variables."""
    G = y * (K @ (y * a)) - 1.0
    v = -y * G
    up = ((y > 0) & (a < C)) | ((y < 0) & (a > 0))
    low = ((y > 0) & (a > 0)) | ((y < 0) & (a < C))
    return np.max(v[up]) - np.min(v[low]), G


def _dual_objective(K, y, a):
    return 0.5 * (y * a) @ K @ (y * a) - np.sum(a)


@pytest.mark.parametrize("kind,seed", [("cancer", 0), ("cancer", 1), ("synthetic", 2),
                                       ("synthetic", 3), ("synthetic", 4)])
@pytest.mark.parametrize("shrink_every", [1, 5, 50])
@pytest.mark.parametrize("tol", [3e-2, 1e-6])
def test_shrinking_smo_stops_only_when_every_variable_satisfies_kkt(kind, seed, shrink_every,
                                                                    tol):
    K, y, C = _problem(kind, seed)
    n = y.shape[0]
    a, G = np.zeros(n), -np.ones(n)
    steps, _ = dual._smo(K, y, C, tol, 10**6, a, G, shrink_every)
    assert 0 < steps < 10**6
    assert np.all(a >= 0.0) and np.all(a <= C) and abs(y @ a) <= 1e-9 * np.sum(a)
    gap, G_exact = _violation(K, y, C, a)
    assert gap < tol  # the stopping rule, checked on all variables, shrunk or not
    # the returned gradient is the full Q a - 1 (the shrunk entries reconstructed)
    np.testing.assert_allclose(G, G_exact, rtol=0, atol=1e-10 * np.max(np.abs(G_exact)))
    # the same optimum as the loop without shrinking: the dual objective to the accuracy
    # the violation tolerance allows (at 1e-6 both are within 1e-9 relative)
    a0, G0 = np.zeros(n), -np.ones(n)
    dual._smo(K, y, C, tol, 10**6, a0, G0, NO_SHRINKING)
    f, f0 = _dual_objective(K, y, a), _dual_objective(K, y, a0)
    if tol <= 1e-6:
        assert abs(f - f0) <= 1e-9 * abs(f0)


def test_shrinking_leaves_most_variables_out_at_no_more_steps():
    """On breast cancer (41 support vectors of 569) the working set shrinks to a fraction
    of the variables (the run is not the unshrunk loop in disguise), and the number of
    steps stays within 5% of the unshrunk loop's."""
    K, y, C = _problem("cancer", 0)
    n = y.shape[0]
    a, G = np.zeros(n), -np.ones(n)
    steps, smallest = dual._smo(K, y, C, 3e-2, 10**6, a, G, 50)
    a0, G0 = np.zeros(n), -np.ones(n)
    steps0, smallest0 = dual._smo(K, y, C, 3e-2, 10**6, a0, G0, NO_SHRINKING)
    assert smallest0 == n and smallest <= n // 4
    assert steps <= 1.05 * steps0


@pytest.mark.parametrize("max_iter", [120, 300, 700])
def test_smo_stopped_by_its_step_budget_returns_the_complete_gradient(max_iter):
    """Stopped with variables shrunk (a budget, not the tolerance), ``G`` still holds
    ``Q a - 1`` for every variable: the next SMO stage and the intercept read it."""
    K, y, C = _problem("cancer", 1)
    n = y.shape[0]
    a, G = np.zeros(n), -np.ones(n)
    steps, smallest = dual._smo(K, y, C, 1e-9, max_iter, a, G, 5)
    assert steps == max_iter and smallest < n
    np.testing.assert_allclose(G, _violation(K, y, C, a)[1], rtol=0, atol=1e-10)


def test_dual_fit_with_shrinking_matches_libsvm():
    from sklearn.svm import SVC

    from bayesdrop import HingeLoss, Problem

    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    y = 2.0 * y - 1.0
    res = dual.fit(Problem.create(X, y, HingeLoss(0.3), "none"))
    ref = SVC(kernel="linear", C=0.3, tol=1e-10).fit(X, y)
    assert res.solver == "dual" and res.converged
    np.testing.assert_allclose(res.theta[:-1], ref.coef_[0], atol=1e-6)
    assert res.theta[-1] == pytest.approx(ref.intercept_[0], abs=1e-6)
