"""Bad and odd input at every public entry point: each case gets a clear error naming the
argument, or a documented correct result; the caller's arrays are never modified."""

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.exceptions import NotFittedError

from bayesdrop import (
    DropoutLatentSVC,
    DropoutLogisticRegression,
    DropoutSVC,
    DropoutSVR,
    sample_posterior,
)
from bayesdrop.baselines import InvariantSVC
from bayesdrop.studies.datasets import flip_labels
from bayesdrop.studies.robustness import delete_features, nightmare_at_test_time

RNG = np.random.default_rng(3)
X = RNG.normal(size=(40, 3))
Y = np.where(X[:, 0] + 0.3 * RNG.normal(size=40) > 0, 1, 0)
YR = X @ np.array([1.0, -1.0, 0.5]) + 0.1 * RNG.normal(size=40)
SAMPLE = dict(draws=5, tune=2, chains=1, progressbar=False, random_state=0)


def with_value(value, where=(0, 1)):
    Z = X.copy()
    Z[where] = value
    return Z


def fitted(Est=DropoutSVC, **kw):
    return Est(**kw).fit(X, Y if Est is not DropoutSVR else YR)


# (id, call, expected): expected is (exception, regex) or a callable checking the result
CASES = [
    # -- X: values
    ("nan-X", lambda: DropoutSVC().fit(with_value(np.nan), Y), (ValueError, "NaN")),
    ("inf-X", lambda: DropoutLogisticRegression().fit(with_value(np.inf), Y),
     (ValueError, "infinity|NaN")),
    ("-inf-X-svr", lambda: DropoutSVR().fit(with_value(-np.inf), YR), (ValueError, "infinity|NaN")),
    ("overflow-X", lambda: DropoutSVC().fit(with_value(1e200, (2, 2)), Y),
     (ValueError, r"feature 2")),
    ("overflow-X-sparse", lambda: DropoutSVC().fit(sp.csr_matrix(with_value(1e200)), Y),
     (ValueError, r"feature 1")),
    ("overflow-X-scaled", lambda: DropoutSVC().fit(X * 1e200, Y), (ValueError, "rescale")),
    ("denormal-X", lambda: DropoutSVC().fit(with_value(1e-310), Y),
     lambda est: np.all(np.isfinite(est.coef_))),
    ("complex-X", lambda: DropoutSVC().fit(X + 1j, Y), (ValueError, "[Cc]omplex")),
    ("3d-X", lambda: DropoutSVC().fit(X[:, :, None], Y), (ValueError, "dim")),
    ("empty-X", lambda: DropoutSVC().fit(np.empty((0, 3)), []), (ValueError, "0 sample")),
    ("no-features", lambda: DropoutSVC().fit(np.empty((40, 0)), Y), (ValueError, "0 feature")),
    # -- shapes and sizes that are fine
    ("one-feature", lambda: DropoutLogisticRegression().fit(X[:, :1], Y),
     lambda est: est.coef_.shape == (1, 1) and est.coef_[0, 0] > 0),
    ("constant-column", lambda: DropoutSVC().fit(np.column_stack([X, np.ones(40)]), Y),
     lambda est: np.all(np.isfinite(est.coef_))),
    ("zero-column-dropout", lambda: DropoutSVC().fit(np.column_stack([X, np.zeros(40)]), Y),
     lambda est: est.coef_[0, 3] == 0.0),
    ("all-zero-sparse-rows",
     lambda: DropoutSVC().fit(sp.vstack([sp.csr_matrix(X), sp.csr_matrix((5, 3))]),
                              np.append(Y, [0, 1, 0, 1, 0])),
     lambda est: np.all(np.isfinite(est.coef_))),
    ("one-sample-svr", lambda: DropoutSVR().fit(X[:1], YR[:1]),
     lambda est: np.all(np.isfinite(est.coef_))),
    ("fortran-X", lambda: DropoutSVC(noise_level=0.2).fit(np.asfortranarray(X), Y),
     lambda est: np.allclose(est.coef_, DropoutSVC(noise_level=0.2).fit(X, Y).coef_)),
    ("readonly-X", lambda: DropoutSVC().fit(_readonly(X), _readonly(Y)),
     lambda est: np.all(np.isfinite(est.coef_))),
    ("dataframe-X", lambda: DropoutSVC().fit(pd.DataFrame(X, columns=list("abc")), Y),
     lambda est: list(est.feature_names_in_) == ["a", "b", "c"]),
    # -- labels
    ("one-class", lambda: DropoutSVC().fit(X, np.ones(40)), (ValueError, "one class")),
    ("one-sample", lambda: DropoutLogisticRegression().fit(X[:1], Y[:1]),
     (ValueError, "one class")),
    ("bool-labels", lambda: DropoutSVC().fit(X, Y.astype(bool)),
     lambda est: est.classes_.tolist() == [False, True]),
    ("object-labels", lambda: DropoutSVC().fit(X, np.where(Y, "yes", "no").astype(object)),
     lambda est: set(est.predict(X)) <= {"yes", "no"}),
    ("categorical-labels",
     lambda: DropoutSVC().fit(X, pd.Categorical(np.where(Y, "b", "a"))),
     lambda est: est.classes_.tolist() == ["a", "b"]),
    ("float-class-labels", lambda: DropoutSVC().fit(X, Y * 2.0 - 1.0),
     lambda est: est.classes_.tolist() == [-1.0, 1.0]),
    ("continuous-labels", lambda: DropoutSVC().fit(X, YR), (ValueError, "[Uu]nknown label")),
    ("nan-labels", lambda: DropoutSVC().fit(X, np.where(Y, np.nan, 1.0)), (ValueError, "NaN")),
    ("nan-target-svr", lambda: DropoutSVR().fit(X, np.where(Y, np.nan, 1.0)), (ValueError, "NaN")),
    ("overflow-target-svr", lambda: DropoutSVR().fit(X, YR * 1e200), (ValueError, "y")),
    ("mismatched-lengths", lambda: DropoutSVC().fit(X, Y[:-1]),
     (ValueError, "inconsistent numbers of samples")),
    # -- hyper-parameters
    ("C-zero", lambda: DropoutSVC(C=0.0).fit(X, Y), (ValueError, "C must be > 0")),
    ("C-nan", lambda: DropoutSVC(C=np.nan).fit(X, Y), (ValueError, "C must be finite")),
    ("C-string", lambda: DropoutSVC(C="1").fit(X, Y), (TypeError, "C must be a real")),
    ("dropout-q-one", lambda: DropoutSVC(noise_level=1.0).fit(X, Y), (ValueError, "level")),
    ("noise-level-negative", lambda: DropoutLogisticRegression(noise_level=-0.1).fit(X, Y),
     (ValueError, "level")),
    ("noise-unknown", lambda: DropoutSVC(noise="salt").fit(X, Y), (ValueError, "noise must be")),
    ("tol-zero", lambda: DropoutSVC(tol=0.0).fit(X, Y), (ValueError, "tol")),
    ("max-iter-zero", lambda: DropoutSVC(max_iter=0).fit(X, Y), (ValueError, "max_iter")),
    ("margin-negative", lambda: DropoutSVC(margin=-1.0).fit(X, Y), (ValueError, "margin")),
    ("epsilon-negative", lambda: DropoutSVR(epsilon=-1.0).fit(X, YR), (ValueError, "epsilon")),
    ("solver-unknown", lambda: DropoutSVC(solver="sgd").fit(X, Y), (ValueError, "solver must be")),
    ("linalg-unknown", lambda: DropoutSVC(linalg="qr").fit(X, Y), (ValueError, "linalg must be")),
    ("class-weight-bad", lambda: DropoutSVC(class_weight="uniform").fit(X, Y),
     (ValueError, "class_weight")),
    ("latent-n-hidden-zero", lambda: DropoutLatentSVC(n_hidden=0).fit(X, Y), (ValueError, "n_hidden")),
    ("invariant-n-changes-all",
     lambda: _warns(lambda: InvariantSVC(n_changes=3).fit(X, Y), "n_changes"),
     lambda est: est.n_changes_ == 2),
    # -- predict / decision
    ("predict-unfitted", lambda: DropoutSVC().predict(X), (NotFittedError, "not fitted")),
    ("predict-wrong-features", lambda: fitted().predict(X[:, :2]), (ValueError, "features")),
    ("predict-nan", lambda: fitted().predict(with_value(np.nan)), (ValueError, "NaN")),
    ("predict-sparse", lambda: fitted().predict(sp.csr_matrix(X)),
     lambda pred: np.array_equal(pred, fitted().predict(X))),
    # -- sampling
    ("draws-zero", lambda: fitted().sample_posterior(X, Y, **{**SAMPLE, "draws": 0}),
     (ValueError, "draws")),
    ("chains-zero", lambda: fitted().sample_posterior(X, Y, **{**SAMPLE, "chains": 0}),
     (ValueError, "chains")),
    ("thin-zero", lambda: fitted().sample_posterior(X, Y, **{**SAMPLE, "thin": 0}),
     (ValueError, "thin")),
    ("tune-negative", lambda: fitted().sample_posterior(X, Y, **{**SAMPLE, "tune": -1}),
     (ValueError, "tune")),
    ("sample-nan-X", lambda: fitted().sample_posterior(with_value(np.nan), Y, **SAMPLE),
     (ValueError, "NaN")),
    ("sample-unseen-label", lambda: fitted().sample_posterior(X, Y + 5, **SAMPLE),
     (ValueError, "not seen")),
    ("sample-bad-weight", lambda: fitted().sample_posterior(X, Y, sample_weight=-np.ones(40),
                                                            **SAMPLE),
     (ValueError, "sample_weight")),
    ("functional-one-class", lambda: sample_posterior(X, np.ones(40), **SAMPLE),
     (ValueError, "two classes")),
    ("functional-unknown-loss", lambda: sample_posterior(X, Y, loss="huber", **SAMPLE),
     (ValueError, "loss must be")),
    ("functional-zero-one-labels", lambda: sample_posterior(X, Y, noise="none", **SAMPLE),
     lambda idata: np.all(np.isfinite(idata.posterior["coef"].values))),
    # -- studies and datasets
    ("flip-rate-one", lambda: flip_labels(Y, 1.0), (ValueError, "rate")),
    ("flip-one-class", lambda: flip_labels(np.ones(5), 0.2), (ValueError, "two classes")),
    ("delete-fraction-bad", lambda: delete_features(X, 1.5), (ValueError, "fraction")),
    ("nightmare-deletion-bad",
     lambda: nightmare_at_test_time({"svm": DropoutSVC()}, X, Y, X, Y, deletion=[1.5]),
     (ValueError, "deletion")),
]


def _readonly(a):
    a = a.copy()
    a.setflags(write=False)
    return a


def _warns(call, match):
    with pytest.warns(UserWarning, match=match):
        return call()


def test_enough_cases():
    assert len(CASES) >= 40


@pytest.mark.parametrize("call,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_entry_point(call, expected):
    before = (X.copy(), Y.copy(), YR.copy())
    if isinstance(expected, tuple):
        exc, match = expected
        with pytest.raises(exc, match=match):
            call()
    else:
        assert expected(call())
    assert np.array_equal(X, before[0]) and np.array_equal(Y, before[1])
    assert np.array_equal(YR, before[2])
