import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize
from sklearn.datasets import load_breast_cancer
from sklearn.preprocessing import StandardScaler


@pytest.fixture(scope="session")
def cancer():
    X, y = load_breast_cancer(return_X_y=True)
    return StandardScaler().fit_transform(X), 2.0 * y - 1.0


@pytest.fixture(scope="session")
def small_problem_data():
    """A small, noisy binary problem (N=120, D=5) plus a regression target."""
    rng = np.random.default_rng(42)
    X = rng.normal(size=(120, 5))
    w = np.array([1.5, -1.0, 0.5, 0.0, 0.0])
    y = np.where(X @ w + 0.3 + 0.8 * rng.normal(size=120) > 0, 1.0, -1.0)
    yr = X @ w + 0.3 + 0.5 * rng.normal(size=120)
    return X, y, yr


def sparse_counts(n=200, d=40, density=0.15, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=density, random_state=rng, format="csr",
                  data_rvs=lambda k: rng.poisson(2.0, size=k) + 1.0)
    return X


def conformance_data(kind, binary, seed=0):
    """The solver conformance data: 90 x 7 counts with no all-zero row (every example
    noisy, see ``newton.applicable``), dense or CSR; labels in {-1, +1} or real targets."""
    X = sparse_counts(n=90, d=7, density=0.4, seed=seed).tolil()
    for n in range(90):
        if X[n].nnz == 0:
            X[n, n % 7] = 1.0
    X = X.tocsr()
    if kind == "dense":
        X = X.toarray()
    rng = np.random.default_rng(seed)
    score = X @ rng.normal(size=7) * 0.5
    if binary:
        y = np.where(score + rng.normal(size=90) > np.median(score), 1.0, -1.0)
    else:
        y = score + 0.3 * rng.normal(size=90)
    return X, y


def lbfgs_reference(problem):
    """The independent reference optimum: scipy's L-BFGS-B on ``J`` with its analytic
    gradient at a tight tolerance; ``(theta, J)``."""
    res = minimize(lambda th: problem.objective(th, gradient=True),
                   np.zeros(problem.design.n_params), jac=True, method="L-BFGS-B",
                   options={"maxiter": 50_000, "gtol": 1e-11, "ftol": 1e-15, "maxcor": 30})
    return res.x, float(res.fun)


def assert_conformance(problem, results, theta_ref, J_ref):
    """Every solver result converged, reached ``J_ref`` within 1e-9 relative, the
    reference minimiser, and decreased ``J`` monotonically, with its recorded objective
    equal to ``J`` at its ``theta``."""
    scale = max(abs(J_ref), 1.0)
    for name, res in results.items():
        J = problem.objective(res.theta)
        assert res.converged, name
        assert J <= J_ref + 1e-9 * scale, (name, J, J_ref)
        # strongly convex: the minimisers agree with the reference's
        np.testing.assert_allclose(res.theta, theta_ref, rtol=0, atol=1e-4 * max(
            1.0, np.max(np.abs(theta_ref))), err_msg=name)
        assert res.objective[-1] == pytest.approx(J, rel=1e-12)
        assert np.all(np.diff(res.objective) <= 1e-12 * scale), name  # monotone
