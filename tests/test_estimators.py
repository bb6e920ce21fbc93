import pickle

import numpy as np
import pytest
from sklearn.datasets import load_digits, load_iris
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.multiclass import OneVsRestClassifier
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC, SVR
from sklearn.utils.estimator_checks import parametrize_with_checks

from bayesdrop import (
    Dropout, DropoutLogisticRegression, DropoutSVC, DropoutSVR, Problem,
)
from bayesdrop.model.losses import EpsilonInsensitiveLoss, HingeLoss

from .conftest import sparse_counts


@parametrize_with_checks([DropoutSVC(), DropoutLogisticRegression(), DropoutSVR()])
def test_sklearn_compatible(estimator, check):
    check(estimator)


def _J(problem, coef, intercept):
    return problem.objective(problem.design.pack(coef, intercept))


@pytest.mark.parametrize("C", [0.05, 1.0])
def test_zero_noise_svc_reaches_libsvm_objective(C, cancer):
    X, y = cancer
    ref = SVC(kernel="linear", C=C, tol=1e-8).fit(X, y)
    ours = DropoutSVC(C=C, noise="none", tol=1e-10).fit(X, y)
    p = Problem.create(X, y, HingeLoss(C), "none")
    J_ref = _J(p, ref.coef_, ref.intercept_[0])
    J_ours = _J(p, ours.coef_, ours.intercept_[0])
    assert J_ours <= J_ref * (1 + 1e-6)
    assert J_ours == pytest.approx(ours.objective_[0][-1], rel=1e-12)
    assert np.mean(ours.predict(X) == ref.predict(X)) >= 0.99


@pytest.mark.parametrize("C", [0.01, 1.0, 100.0])
def test_zero_noise_logistic_matches_sklearn(C, cancer):
    X, y = cancer
    ref = LogisticRegression(C=C, tol=1e-12, max_iter=100_000, solver="newton-cholesky").fit(X, y)
    ours = DropoutLogisticRegression(C=C, noise="none", tol=1e-14, max_iter=5000).fit(X, y)
    scale = max(1.0, np.abs(ref.coef_).max())
    assert np.allclose(ours.coef_, ref.coef_, rtol=1e-5, atol=1e-5 * scale)
    assert np.allclose(ours.intercept_, ref.intercept_, rtol=1e-5, atol=1e-5 * scale)
    assert np.allclose(ours.predict_proba(X), ref.predict_proba(X), atol=1e-6)


@pytest.mark.parametrize("C, eps", [(0.5, 0.1), (10.0, 0.5)])
def test_zero_noise_svr_reaches_libsvm_objective(C, eps):
    """sklearn.svm.SVR (libsvm, unpenalised intercept) is an independent reference for
    1/2 ||w||^2 + C sum max(0, |y - w.x - b| - eps)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    y = X @ [1.0, -0.5, 0.0, 2.0] + 0.5 + 0.4 * rng.standard_t(3, size=200)
    ref = SVR(kernel="linear", C=C, epsilon=eps, tol=1e-8).fit(X, y)
    ours = DropoutSVR(C=C, epsilon=eps, noise="none", tol=1e-12, max_iter=5000).fit(X, y)
    p = Problem.create(X, y, EpsilonInsensitiveLoss(C, eps), "none")
    J_ref = _J(p, ref.coef_, ref.intercept_[0])
    J_ours = _J(p, ours.coef_, ours.intercept_)
    assert J_ours <= J_ref * (1 + 1e-6)
    assert np.allclose(ours.predict(X), ref.predict(X), atol=1e-3 * np.std(y))


def test_multiclass_one_vs_rest_equals_binary_fits():
    X, y = load_iris(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    clf = DropoutLogisticRegression(C=1.0, noise_level=0.3).fit(X, y)
    assert clf.coef_.shape == (3, 4) and clf.intercept_.shape == (3,)
    assert clf.n_iter_.shape == (3,) and len(clf.objective_) == 3
    for k in range(3):
        bin_ = DropoutLogisticRegression(C=1.0, noise_level=0.3).fit(X, y == k)
        assert np.allclose(clf.coef_[k], bin_.coef_[0], rtol=1e-8, atol=1e-10)
    P = clf.predict_proba(X)
    assert P.shape == (150, 3) and np.allclose(P.sum(1), 1)
    assert np.array_equal(clf.predict(X), clf.classes_[np.argmax(clf.decision_function(X), 1)])
    assert clf.score(X, y) > 0.85


@pytest.mark.parametrize("Est, kw", [(DropoutSVC, {}), (DropoutLogisticRegression, {}),
                                     (DropoutSVR, {"epsilon": 0.2})])
@pytest.mark.parametrize("noise", ["dropout", "poisson", "gaussian"])
def test_dense_and_sparse_give_the_same_fit(Est, kw, noise):
    X = sparse_counts(n=120, d=15, density=0.3, seed=5)
    rng = np.random.default_rng(1)
    score = X @ rng.normal(size=15)
    y = score if Est is DropoutSVR else (score > np.median(score)).astype(int)
    Xc = X.copy()
    a = Est(noise=noise, noise_level=0.4, tol=1e-12, **kw).fit(X, y)
    b = Est(noise=noise, noise_level=0.4, tol=1e-12, **kw).fit(X.toarray(), y)
    c = Est(noise=noise, noise_level=0.4, tol=1e-12, linalg="cg", **kw).fit(X.tocsc(), y)
    for other in (b, c):
        assert np.allclose(a.coef_, other.coef_, rtol=1e-6, atol=1e-8)
        assert np.allclose(a.intercept_, other.intercept_, rtol=1e-6, atol=1e-8)
    assert (X != Xc).nnz == 0


def test_callers_arrays_are_not_modified(cancer):
    X, y = cancer
    X = np.asfortranarray(X[:100])
    y = y[:100].copy()
    X0, y0 = X.copy(), y.copy()
    for est in (DropoutSVC(), DropoutLogisticRegression(), DropoutSVR()):
        est.fit(X, y)
        est.predict(X)
    assert np.array_equal(X, X0) and np.array_equal(y, y0)


def test_noise_reduces_weight_norm_and_grid_search(cancer):
    X, y = cancer
    norms = [np.linalg.norm(DropoutSVC(C=1.0, noise_level=q).fit(X, y).coef_)
             for q in (0.0, 0.3, 0.6)]
    assert norms[0] > norms[1] > norms[2]  # dropout acts as a data-dependent regulariser
    gs = GridSearchCV(DropoutSVC(noise=Dropout(0.1)),
                      {"noise_level": [0.0, 0.5], "C": [0.1, 1.0]}, cv=3).fit(X, y)
    assert gs.best_estimator_.noise_ == Dropout(gs.best_params_["noise_level"])


def test_noise_object_and_level():
    X, y = load_iris(return_X_y=True)
    assert DropoutSVC(noise=Dropout(0.2)).fit(X, y).noise_ == Dropout(0.2)
    assert DropoutSVC(noise=Dropout(0.2), noise_level=0.4).fit(X, y).noise_ == Dropout(0.4)
    assert DropoutSVC().fit(X, y).noise_ == Dropout(0.1)
    # zero level is the clean model
    a = DropoutSVC(noise_level=0.0).fit(X, y)
    b = DropoutSVC(noise="none").fit(X, y)
    assert np.allclose(a.coef_, b.coef_)


def test_pickle_round_trip(cancer):
    X, y = cancer
    clf = DropoutLogisticRegression(noise_level=0.2).fit(X, y)
    clone = pickle.loads(pickle.dumps(clf))
    assert np.array_equal(clone.predict_proba(X), clf.predict_proba(X))
    assert clone.noise_ == clf.noise_


def test_warm_start_reuses_solution(cancer):
    X, y = cancer
    clf = DropoutSVC(noise_level=0.3, warm_start=True).fit(X, y)
    it0 = clf.n_iter_[0]
    clf.fit(X, y)
    assert clf.n_iter_[0] < it0
    reg = DropoutSVR(noise_level=0.3, warm_start=True).fit(X, y)
    it0 = reg.n_iter_
    assert reg.fit(X, y).n_iter_ < it0


@pytest.mark.parametrize(
    "est, X, y, err, match",
    [
        (DropoutSVC(C=0), np.eye(3), [0, 1, 1], ValueError, "C must be > 0"),
        (DropoutSVC(C=-1.0), np.eye(3), [0, 1, 1], ValueError, "C must be > 0"),
        (DropoutSVC(noise_level=1.0), np.eye(3), [0, 1, 1], ValueError, r"q\) must be in"),
        (DropoutSVC(noise="salt"), np.eye(3), [0, 1, 1], ValueError, "noise must be one of"),
        (DropoutSVC(solver="qr"), np.eye(3), [0, 1, 1], ValueError, "solver must be one of"),
        (DropoutSVC(tol=-1), np.eye(3), [0, 1, 1], ValueError, "tol must be > 0"),
        (DropoutSVC(max_iter=0), np.eye(3), [0, 1, 1], ValueError, "max_iter must be >= 1"),
        (DropoutSVC(), np.eye(3), [1, 1, 1], ValueError, "one class"),
        (DropoutSVC(), np.eye(3), [0, 1], ValueError, "inconsistent numbers of samples"),
        (DropoutSVC(), [[np.nan, 1.0], [1.0, 1.0]], [0, 1], ValueError, "NaN"),
        (DropoutSVC(), np.eye(3), [0.5, 1.5, 2.5], ValueError, "Unknown label type"),
        (DropoutLogisticRegression(noise="poisson"), -np.eye(3), [0, 1, 1], ValueError,
         "non-negative"),
        (DropoutSVR(epsilon=-0.1), np.eye(3), [0, 1, 1], ValueError, "epsilon must be >= 0"),
        (DropoutSVR(), np.eye(3), [0.0, np.inf, 1.0], ValueError, "infinity"),
        (DropoutSVC(margin=-1), np.eye(3), [0, 1, 1], ValueError, "margin must be >= 0"),
    ],
)
def test_bad_inputs_raise_clear_errors(est, X, y, err, match):
    with pytest.raises(err, match=match):
        est.fit(X, y)


def test_predict_checks_feature_count(cancer):
    X, y = cancer
    clf = DropoutSVC().fit(X, y)
    with pytest.raises(ValueError, match="features"):
        clf.predict(X[:, :5])


def test_zero_noise_multiclass_matches_one_vs_rest_libsvm():
    X, y = load_digits(return_X_y=True)
    X, y = X[:600] / 16.0, y[:600]
    ref = OneVsRestClassifier(SVC(kernel="linear", C=0.1, tol=1e-8)).fit(X, y)
    ours = DropoutSVC(C=0.1, noise="none").fit(X, y)
    assert np.array_equal(ours.classes_, ref.classes_)
    assert np.mean(ours.predict(X) == ref.predict(X)) >= 0.99
    for k in (0, 5, 9):
        p = Problem.create(X, np.where(y == k, 1.0, -1.0), HingeLoss(0.1), "none")
        est = ref.estimators_[k]
        assert _J(p, ours.coef_[k], ours.intercept_[k]) <= _J(
            p, est.coef_, est.intercept_[0]) * (1 + 1e-6)


@pytest.mark.parametrize("Est", [DropoutSVC, DropoutLogisticRegression])
def test_one_vs_rest_threads_give_the_same_fit(Est):
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True)
    a = Est(noise_level=0.2, n_jobs=1).fit(X, y)
    b = Est(noise_level=0.2, n_jobs=2).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.intercept_, b.intercept_)
    assert list(a.solver_) == list(b.solver_)


@pytest.mark.parametrize("y", [
    np.array([0, 1, 1, 0]), np.array([3, 7, 5, 3], dtype=np.uint8),
    np.array([True, False, True, True]), np.array([0.0, 1.0, 2.0, 1.0]),
    np.array([-1.0, 1.0, 1.0, -1.0]), np.array([0.5, 1.0, 1.0, 0.0]),
    np.array([1e300, 0.0, 1.0, 0.0]), np.array([np.nan, 0.0, 1.0, 0.0]),
    np.array([np.inf, 0.0, 1.0, 0.0]), np.array(["a", "b", "a", "a"]),
    np.array([1, "b", 1, "b"], dtype=object), np.array([0.0, 1.0, 0.0, 1.0]) + 1e-9,
], ids=lambda y: f"{y.dtype}-{y[0]}")
def test_label_check_shortcut_accepts_and_rejects_as_scikit_learn(y):
    """``set_classes`` skips scikit-learn's ``check_classification_targets`` only for
    labels it would accept: every label array is accepted or rejected exactly as by
    scikit-learn's check."""
    from sklearn.utils.multiclass import check_classification_targets

    from bayesdrop.estimators._base import set_classes

    class E:
        pass

    try:
        check_classification_targets(y)
        expected = None
    except ValueError as err:
        expected = str(err)
    if expected is None:
        set_classes(E(), y)
    else:
        with pytest.raises(ValueError) as info:
            set_classes(E(), y)
        assert str(info.value) == expected


def _validation_cases():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(6, 3))
    y = np.array([0, 1, 1, 0, 1, 0])
    nan, inf = X.copy(), X.copy()
    nan[2, 1], inf[4, 0] = np.nan, -np.inf
    huge = np.full((6, 3), 1e308)  # finite entries, infinite sum
    yf = y.astype(float)
    ynan = yf.copy()
    ynan[3] = np.nan
    return {
        "plain": (X, y), "F-ordered": (np.asfortranarray(X), y),
        "strided view": (rng.normal(size=(12, 3))[::2], y), "float y": (X, yf),
        "bool y": (X, y.astype(bool)), "uint8 y": (X, y.astype(np.uint8)),
        "string y": (X, np.array(list("abbaba"))), "NaN in X": (nan, y),
        "inf in X": (inf, y), "sum overflows": (huge, y), "NaN in y": (X, ynan),
        "int X": (np.arange(18).reshape(6, 3), y), "float32 X": (X.astype(np.float32), y),
        "list X": (X.tolist(), y.tolist()), "column y": (X, y[:, None]),
        "short y": (X, y[:5]), "1-D X": (X[:, 0], y), "3-D X": (X[:, :, None], y),
        "no rows": (X[:0], y[:0]), "no columns": (X[:, :0], y),
        "matrix X": (np.asmatrix(X), y), "y None": (X, None),
    }


@pytest.mark.parametrize("case", list(_validation_cases()))
@pytest.mark.parametrize("with_y", [True, False])
def test_validation_shortcut_equals_scikit_learn(case, with_y):
    """``validate_arrays`` returns, sets, warns and raises exactly as scikit-learn's
    ``validate_data`` with the same arguments, also on the inputs its shortcut must
    leave to scikit-learn (NaN, inf, an overflowing sum, other types, dtypes and
    shapes)."""
    import warnings

    from sklearn.utils.validation import validate_data

    from bayesdrop.estimators._base import ACCEPT_SPARSE, validate_arrays

    X, y = _validation_cases()[case]
    args = (X, y) if with_y else (X,)

    def run(fn):
        est = DropoutLogisticRegression()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                out = fn(est)
            except (ValueError, TypeError) as err:
                out = err
        return est, out, [(w.category, str(w.message)) for w in caught]

    ours = run(lambda est: validate_arrays(est, *args))
    ref = run(lambda est: validate_data(est, *args, accept_sparse=ACCEPT_SPARSE,
                                        dtype=np.float64))
    assert ours[2] == ref[2]
    if isinstance(ref[1], Exception):
        assert type(ours[1]) is type(ref[1]) and str(ours[1]) == str(ref[1])
        return
    out, expected = (ours[1], ref[1]) if with_y else ((ours[1],), (ref[1],))
    for a, b in zip(out, expected):
        assert type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
        for arg in args:  # a view of the caller's array exactly when scikit-learn's is
            assert np.shares_memory(a, arg) == np.shares_memory(b, arg)
    assert ours[0].n_features_in_ == ref[0].n_features_in_


def test_validation_shortcut_feature_names_as_scikit_learn():
    """After a fit on a DataFrame, an ndarray refit drops ``feature_names_in_`` and an
    ndarray ``predict`` warns as scikit-learn's ``validate_data`` does; a wrong feature
    count raises its error."""
    import warnings

    import pandas as pd

    X, y = load_iris(return_X_y=True)
    X, y = X[:100], y[:100]
    est = DropoutLogisticRegression(noise_level=0.1)
    est.fit(pd.DataFrame(X, columns=list("abcd")), y)
    assert list(est.feature_names_in_) == list("abcd")
    with pytest.warns(UserWarning, match="does not have valid feature names"):
        est.predict(X)
    with pytest.raises(ValueError, match="expecting 4 features"):
        est.predict(X[:, :3])
    est.fit(X, y)
    assert not hasattr(est, "feature_names_in_") and est.n_features_in_ == 4
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est.predict(X)
    with pytest.raises(ValueError, match="expecting 4 features"):
        est.predict(X[:, :3])
