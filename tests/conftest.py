import numpy as np
import pytest
import scipy.sparse as sp
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
