"""The CV estimators (:mod:`bayesdrop.estimators.cv`) against ``GridSearchCV`` over the same
grid and folds: the same scores, ranks and choice; the refitted model is the base
estimator's fit at the chosen parameters."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_diabetes, load_iris, make_classification
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.utils.estimator_checks import parametrize_with_checks

from bayesdrop import (
    DropoutLogisticRegression, DropoutLogisticRegressionCV, DropoutSVC, DropoutSVCCV,
    DropoutSVR, DropoutSVRCV,
)

CS = [0.01, 0.3, 3.0]
LEVELS = [0.0, 0.1, 0.4]


def _binary():
    X, y = make_classification(n_samples=160, n_features=6, n_informative=4,
                               random_state=0)
    return X, y


def _regression():
    X, y = load_diabetes(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    return X[:200], (y[:200] - y.mean()) / y.std()


CASES = {
    "logistic": (DropoutLogisticRegression, DropoutLogisticRegressionCV, _binary),
    "svc": (DropoutSVC, DropoutSVCCV, _binary),
    "svr": (DropoutSVR, DropoutSVRCV, _regression),
}


def _compare(cv_est, grid, exact):
    """Scores equal to rounding (``exact``: equal) and the same choice."""
    ours = cv_est.cv_results_
    for key in ("mean_test_score",) + tuple(f"split{k}_test_score" for k in range(3)):
        if exact:
            np.testing.assert_array_equal(ours[key], grid.cv_results_[key])
        else:
            np.testing.assert_allclose(ours[key], grid.cv_results_[key], rtol=1e-6,
                                       atol=1e-7)
    assert ours["params"] == [{k: float(v) for k, v in p.items()}
                              for p in grid.cv_results_["params"]]
    np.testing.assert_array_equal(ours["rank_test_score"], grid.cv_results_["rank_test_score"])
    assert cv_est.best_index_ == grid.best_index_
    assert cv_est.best_params_ == {k: float(v) for k, v in grid.best_params_.items()}
    assert (cv_est.C_, cv_est.noise_level_) == (grid.best_params_["C"],
                                                 grid.best_params_["noise_level"])


@pytest.mark.parametrize("case", sorted(CASES))
def test_same_scores_and_choice_as_gridsearchcv(case):
    """Default scoring: accuracy (exactly the same: the same predictions) or ``R^2`` (to
    rounding of fits at ``tol``); the refitted model is the base estimator's fit."""
    base, cv_cls, data = CASES[case]
    X, y = data()
    folds = KFold(3, shuffle=True, random_state=1)
    grid = GridSearchCV(base(), {"C": CS, "noise_level": LEVELS}, cv=folds).fit(X, y)
    ours = cv_cls(Cs=CS, noise_levels=LEVELS, cv=folds).fit(X, y)
    _compare(ours, grid, exact=case != "svr")
    np.testing.assert_allclose(ours.coef_, grid.best_estimator_.coef_, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(ours.predict(X), grid.predict(X), rtol=1e-6, atol=1e-8)
    assert ours.scores_.shape == (3, len(LEVELS), len(CS))
    assert ours.scores_[:, LEVELS.index(ours.noise_level_), CS.index(ours.C_)].mean() == \
        pytest.approx(ours.best_score_)


def test_scoring_sample_weight_and_multiclass_match_gridsearchcv():
    """A probabilistic score, weights passed to the fits (the training part of each
    fold), three classes (one-vs-rest) and sparse input, against ``GridSearchCV``."""
    X, y = load_iris(return_X_y=True)
    w = np.random.default_rng(0).uniform(0.5, 2.0, size=y.size)
    folds = KFold(3, shuffle=True, random_state=0)
    grid = GridSearchCV(DropoutLogisticRegression(), {"C": CS, "noise_level": LEVELS},
                        cv=folds, scoring="neg_log_loss").fit(X, y, sample_weight=w)
    ours = DropoutLogisticRegressionCV(Cs=CS, noise_levels=LEVELS, cv=folds,
                                       scoring="neg_log_loss").fit(X, y, sample_weight=w)
    _compare(ours, grid, exact=False)
    Xs = sp.csr_matrix(np.where(X > 2.0, X, 0.0))
    grid = GridSearchCV(DropoutSVC(), {"C": CS, "noise_level": LEVELS[1:]},
                        cv=folds).fit(Xs, y)
    ours = DropoutSVCCV(Cs=CS, noise_levels=LEVELS[1:], cv=folds).fit(Xs, y)
    _compare(ours, grid, exact=True)
    assert ours.coef_.shape == (3, 4)


def test_groups_reach_a_group_wise_splitter_as_in_gridsearchcv():
    """``fit(..., groups=g)`` with ``GroupKFold``: the folds and so the scores and choice
    of ``GridSearchCV.fit(..., groups=g)``; a ``GroupKFold`` without groups, or groups of
    the wrong shape, are errors naming the argument."""
    from sklearn.model_selection import GroupKFold

    X, y = _binary()
    g = np.arange(y.size) % 7
    grid = GridSearchCV(DropoutSVC(), {"C": CS, "noise_level": LEVELS},
                        cv=GroupKFold(3)).fit(X, y, groups=g)
    ours = DropoutSVCCV(Cs=CS, noise_levels=LEVELS, cv=GroupKFold(3)).fit(X, y, groups=g)
    _compare(ours, grid, exact=True)
    with pytest.raises(ValueError, match="cv: .*groups"):
        DropoutSVCCV(Cs=CS, noise_levels=LEVELS, cv=GroupKFold(3)).fit(X, y)
    with pytest.raises(ValueError, match=r"groups must have shape \(160,\)"):
        DropoutSVCCV(Cs=CS, noise_levels=LEVELS, cv=GroupKFold(3)).fit(X, y, groups=g[:5])


def test_same_result_for_any_n_jobs_and_grid_order():
    """The folds in worker processes give the same scores; a grid given in another order gives the
    same scores at the same points (the path walks it sorted)."""
    X, y = _binary()
    one = DropoutSVCCV(Cs=CS, noise_levels=LEVELS, cv=3).fit(X, y)
    two = DropoutSVCCV(Cs=CS, noise_levels=LEVELS, cv=3, n_jobs=2).fit(X, y)
    np.testing.assert_array_equal(one.scores_, two.scores_)
    np.testing.assert_array_equal(one.coef_, two.coef_)
    rev = DropoutSVCCV(Cs=CS[::-1], noise_levels=LEVELS[::-1], cv=3).fit(X, y)
    np.testing.assert_array_equal(rev.scores_[:, ::-1, ::-1], one.scores_)


def test_refit_false_and_the_posterior_at_the_chosen_parameters():
    X, y = _binary()
    est = DropoutLogisticRegressionCV(Cs=CS, noise_levels=LEVELS, cv=3, refit=False)
    est.fit(X, y)
    assert not hasattr(est, "coef_") and est.C_ in CS
    with pytest.raises(NotFittedError):
        est.predict(X)
    est = DropoutLogisticRegressionCV(Cs=CS, noise_levels=[0.2], cv=3).fit(X, y)
    base = DropoutLogisticRegression(C=est.C_, noise_level=0.2).fit(X, y)
    kw = dict(draws=40, tune=20, chains=1, random_state=3, progressbar=False)
    a, b = est.sample_posterior(X, y, **kw), base.sample_posterior(X, y, **kw)
    np.testing.assert_array_equal(a.posterior["coef"].values, b.posterior["coef"].values)


@pytest.mark.parametrize("params, match", [
    ({"Cs": 0}, r"Cs must be in \[1, 10000\]"),
    ({"Cs": [1.0, -2.0]}, "Cs must hold finite values > 0"),
    ({"Cs": [[1.0]]}, "Cs must be a non-empty 1-D"),
    ({"Cs": ["a"]}, "Cs must be a sequence of numbers"),
    ({"noise_levels": [0.1, np.nan]}, "noise_levels must hold finite values"),
    ({"noise_levels": [0.1, 1.0]}, "q"),
    ({"refit": "yes"}, "refit must be a bool"),
    ({"tol": -1.0}, "tol"),
])
def test_bad_parameters_raise_naming_them(params, match):
    X, y = _binary()
    with pytest.raises((ValueError, TypeError), match=match):
        DropoutLogisticRegressionCV(**params).fit(X, y)


def test_a_fold_without_weight_is_a_clear_error():
    """Weights zero on every held-out row of a fold (the weighted default score is then
    0 / 0) or on every training row (nothing to fit): a ``ValueError`` naming
    ``sample_weight`` and the fold, before any fit -- not numpy's ``ZeroDivisionError``
    from inside the scoring. A custom scorer that takes no weights needs none."""
    from sklearn.model_selection import KFold

    X, y = _binary()
    n = X.shape[0]
    cv = KFold(3)
    test0 = next(cv.split(X))[1]
    w = np.ones(n)
    w[test0] = 0.0
    with pytest.raises(ValueError, match="^sample_weight: the held-out rows of fold 0"):
        DropoutLogisticRegressionCV(Cs=2, noise_levels=[0.0], cv=cv).fit(X, y, w)
    only = np.zeros(n)
    only[test0] = 1.0
    with pytest.raises(ValueError, match="^sample_weight: the training rows of fold 0"):
        DropoutLogisticRegressionCV(Cs=2, noise_levels=[0.0], cv=cv).fit(X, y, only)

    def unweighted(est, X, y):
        return est.score(X, y)

    est = DropoutLogisticRegressionCV(Cs=2, noise_levels=[0.0], cv=cv, scoring=unweighted)
    assert est.fit(X, y, w).scores_.shape == (3, 1, 2)


@parametrize_with_checks([DropoutLogisticRegressionCV(Cs=[0.1, 1.0], noise_levels=[0.0, 0.2],
                                                      cv=3),
                          DropoutSVRCV(Cs=[0.1, 1.0], noise_levels=[0.0, 0.2], cv=3)])
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.mark.parametrize("case", ["svc", "svr"])
def test_default_score_is_weighted_as_gridsearchcv_weights_it(case):
    """With ``sample_weight`` ``GridSearchCV`` weights the held-out accuracy / ``R^2``."""
    base, cv_cls, data = CASES[case]
    X, y = data()
    w = np.random.default_rng(1).uniform(0.2, 3.0, size=y.size)
    folds = KFold(3, shuffle=True, random_state=2)
    grid = GridSearchCV(base(), {"C": CS, "noise_level": LEVELS[1:]}, cv=folds)
    grid.fit(X, y, sample_weight=w)
    ours = cv_cls(Cs=CS, noise_levels=LEVELS[1:], cv=folds).fit(X, y, sample_weight=w)
    _compare(ours, grid, exact=case == "svc")


def test_refit_keeps_the_feature_names_of_a_dataframe():
    import pandas as pd

    X, y = _binary()
    df = pd.DataFrame(X, columns=[f"f{k}" for k in range(X.shape[1])])
    est = DropoutSVCCV(Cs=CS, noise_levels=[0.1], cv=3).fit(df, y)
    assert list(est.feature_names_in_) == list(df.columns)
    base = DropoutSVC(C=est.C_, noise_level=0.1).fit(df, y)
    np.testing.assert_array_equal(est.predict(df), base.predict(df))


def test_zero_noise_path_with_weights_and_classes_matches_gridsearchcv():
    """The zero-noise SVM fits of the path follow the solution path
    (:mod:`bayesdrop.solvers.homotopy`) one-vs-rest, with ``class_weight`` and
    ``sample_weight`` scaling every slope: the same held-out scores and choice as
    ``GridSearchCV``'s cold fits."""
    X, y = load_iris(return_X_y=True)
    w = np.random.default_rng(2).uniform(0.5, 2.0, size=y.size)
    folds = KFold(3, shuffle=True, random_state=2)
    Cs, levels = [0.05, 0.4, 3.0, 20.0], [0.0, 0.1]
    grid = GridSearchCV(DropoutSVC(class_weight="balanced"), {"C": Cs, "noise_level": levels},
                        cv=folds).fit(X, y, sample_weight=w)
    ours = DropoutSVCCV(Cs=Cs, noise_levels=levels, cv=folds,
                        class_weight="balanced").fit(X, y, sample_weight=w)
    _compare(ours, grid, exact=True)
    est = DropoutSVC(class_weight="balanced", noise_level=0.0)
    solvers = [list(map(str, f.solver_)) for f in est._fit_path(X, y, w, Cs)]
    assert "homotopy" not in solvers[0]
    # each later fit follows the path for its classes (a class may hand over to SMO: iris
    # has duplicated rows, more examples on a kink than parameters)
    assert all("homotopy" in fits for fits in solvers[1:])


def test_each_fit_starts_from_a_neighbouring_grid_point(monkeypatch):
    """The documented walk: the noisiest level first, ``C`` ascending at every level; a
    level's first fit starts
    from the previous level's fit at the smallest ``C``; the first level's other fits
    from the fit at the previous ``C``, the later levels' from the parallelogram of the
    three fitted neighbours -- :func:`bayesdrop.solvers.fit_path` with the previous
    level's fits as ``previous`` (whose starts ``tests/test_solvers.py`` checks)."""
    import bayesdrop.estimators.linear as linear

    calls = []
    real = linear.fit_path

    def fit_path(problem, Cs, theta0=None, previous=None, **kwargs):
        results = real(problem, Cs, theta0, previous, **kwargs)
        variance = problem.design.variance
        calls.append((list(Cs), theta0, previous, np.array([r.theta for r in results]),
                      0.0 if variance.is_zero else variance.scale))
        return results

    monkeypatch.setattr(linear, "fit_path", fit_path)
    X, y = _binary()
    levels, Cs = [0.3, 0.0, 0.1], [3.0, 0.01, 0.3]
    DropoutLogisticRegressionCV(Cs=Cs, noise_levels=levels, cv=2, refit=False).fit(X, y)
    assert [c[0] for c in calls] == [sorted(Cs)] * 6  # two folds, three levels each
    for fold in (calls[:3], calls[3:]):
        scales = [c[4] for c in fold]  # dropout's q / (1 - q): the noisiest level first
        assert scales == sorted(scales, reverse=True) and scales[-1] == 0.0
        assert fold[0][1] is None and fold[0][2] is None  # a cold start
        for before, level in itertools.pairwise(fold):
            np.testing.assert_array_equal(level[2], before[3])
            np.testing.assert_array_equal(level[1], before[3][0])
