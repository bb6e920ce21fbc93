"""The one-vs-rest engine: every classifier behaves the same, and the old paths still work."""

import importlib

import numpy as np
import pytest
from sklearn.datasets import load_iris
from sklearn.preprocessing import StandardScaler

from bayesdrop import (
    DropoutLatentLogisticRegression,
    DropoutLogisticRegression,
    DropoutSVC,
    DropoutSVR,
)
from bayesdrop.baselines import (
    InvariantSVC,
    MCFLogisticRegression,
    MCFQuadraticClassifier,
    WagerDropoutLogisticRegression,
)


def _iris():
    X, y = load_iris(return_X_y=True)
    return StandardScaler().fit_transform(X), y


CLASSIFIERS = [
    (DropoutSVC(C=0.5, noise_level=0.2), 4),
    (DropoutLogisticRegression(C=0.5, noise_level=0.2), 4),
    (MCFQuadraticClassifier(C=0.5, noise_level=0.2), 4),
    (MCFLogisticRegression(C=0.5, noise_level=0.2), 4),
    (WagerDropoutLogisticRegression(C=0.5, noise_level=0.2), 4),
    (InvariantSVC(C=0.5, n_changes=1), 4),
    (DropoutLatentLogisticRegression(C=0.5, noise_level=0.1, n_hidden=3, max_iter=3,
                                     random_state=0), 3),
]


@pytest.mark.parametrize("est, n_coef", CLASSIFIERS, ids=lambda e: type(e).__name__)
def test_every_classifier_has_the_engine_attributes(est, n_coef):
    X, y = _iris()
    labels = np.array(["setosa", "versicolor", "virginica"])[y]
    est.fit(X, labels)
    assert est.classes_.tolist() == ["setosa", "versicolor", "virginica"]
    assert est.coef_.shape == (3, n_coef) and est.intercept_.shape == (3,)
    assert est.n_iter_.shape == (3,) and est.n_iter_.dtype.kind == "i"
    assert est.converged_.shape == (3,) and est.converged_.dtype == bool
    assert len(est.objective_) == 3 and est.fit_time_ > 0
    scores = est.decision_function(X)
    assert scores.shape == (150, 3)
    np.testing.assert_array_equal(est.predict(X), est.classes_[np.argmax(scores, axis=1)])
    # binary: one problem, a 1-D score of classes_[1]
    mask = y > 0
    est.fit(X[mask], labels[mask])
    s = est.decision_function(X[mask])
    assert s.shape == (int(mask.sum()),) and est.coef_.shape == (1, n_coef)
    np.testing.assert_array_equal(est.predict(X[mask]), est.classes_[(s > 0).astype(int)])


@pytest.mark.parametrize("make", [
    lambda: MCFLogisticRegression(C=1.0, noise_level=0.3, tol=1e-10),
    lambda: WagerDropoutLogisticRegression(C=1.0, noise_level=0.3, tol=1e-10),
    lambda: DropoutLogisticRegression(C=1.0, noise_level=0.3, tol=1e-10),
], ids=["mcf", "wager", "dropout"])
def test_warm_start_starts_at_the_previous_solution(make):
    X, y = _iris()
    cold = make().fit(X, y)
    warm = make().set_params(warm_start=True).fit(X, y)
    first = warm.n_iter_.copy()
    warm.fit(X, y)  # same data: the previous solution is the optimum
    assert np.all(warm.n_iter_ < first)
    np.testing.assert_allclose(warm.coef_, cold.coef_, rtol=1e-5, atol=1e-6)


def test_warm_start_ignored_when_the_shape_changes():
    X, y = _iris()
    est = DropoutSVC(C=1.0, noise_level=0.2, warm_start=True).fit(X, y)
    est.fit(X[:, :3], y)  # different number of features: a cold start, no error
    ref = DropoutSVC(C=1.0, noise_level=0.2).fit(X[:, :3], y)
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-6, atol=1e-8)


def test_regressor_keeps_its_flat_attributes():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    y = X @ [1.0, -1.0, 0.5] + 0.1 * rng.normal(size=60)
    reg = DropoutSVR(C=1.0, noise_level=0.1).fit(X, y)
    assert reg.coef_.shape == (3,) and isinstance(reg.intercept_, float)
    assert isinstance(reg.n_iter_, int) and isinstance(reg.converged_, bool)


@pytest.mark.parametrize("name", ["augmentation", "datasets", "design", "gibbs", "irls",
                                  "latent", "losses", "noise", "problem", "wls", "_compat"])
def test_flat_module_paths_are_gone(name):
    """The package was never released: the flat paths of early versions have no aliases
    (each module has one home, e.g. ``bayesdrop.solvers.irls``)."""
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(f"bayesdrop.{name}")
    assert not hasattr(importlib.import_module("bayesdrop"), name)


def test_single_blas_pool_limits_only_the_second_blas_build():
    """numpy's BLAS keeps its threads; any other BLAS build runs on one thread inside the
    block, and every pool is restored afterwards."""
    import os

    from threadpoolctl import threadpool_info, threadpool_limits

    from bayesdrop._threads import single_blas_pool

    numpy_dir = os.path.dirname(np.__file__)
    with threadpool_limits(2, user_api="blas"):
        before = {i["filepath"]: i["num_threads"] for i in threadpool_info()
                  if i["user_api"] == "blas"}
        with single_blas_pool():
            inside = {i["filepath"]: i["num_threads"] for i in threadpool_info()
                      if i["user_api"] == "blas"}
        after = {i["filepath"]: i["num_threads"] for i in threadpool_info()
                 if i["user_api"] == "blas"}
    assert after == before
    ours = [p for p in before if p.startswith(numpy_dir)]
    others = [p for p in before if not p.startswith(numpy_dir)]
    for p in ours:
        assert inside[p] == before[p]
    if ours and others:  # pip wheels: numpy.libs and scipy.libs
        assert all(inside[p] == 1 for p in others)
    else:  # one shared BLAS: nothing is limited
        assert inside == before
