"""Data generators, loaders, metrics and the study harnesses (small versions of the studies)."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import brier_score_loss, log_loss

from bayesdrop import DropoutLogisticRegression, DropoutSVC
from bayesdrop.baselines import InvariantSVC, MCFQuadraticClassifier, TLogisticRegression
from bayesdrop.studies.datasets import (
    flip_labels,
    load_breast_cancer,
    load_digits,
    load_fashion_mnist,
    load_newsgroups,
    make_long_servedio,
    make_mease_wyner,
    make_rare_features,
)
from bayesdrop.predictive import posterior_predictive_proba
from bayesdrop.studies import (
    classification_metrics,
    delete_features,
    expected_calibration_error,
    grid,
    label_noise_study,
    nightmare_at_test_time,
    plot_study,
    uncertainty_study,
)


# -- data --------------------------------------------------------------------------------
def test_long_servedio_roles():
    X, y, role = make_long_servedio(4000, random_state=0)
    Z = X * y[:, None]  # in units of the label
    lm, pu, pe = role == "large_margin", role == "puller", role == "penalizer"
    assert np.all(Z[lm] == 1)
    assert np.all(Z[pu, :11] == 1) and np.all(Z[pu, 11:] == -1)
    assert np.all((Z[pe, :11] == 1).sum(axis=1) == 5)
    assert np.all((Z[pe, 11:] == 1).sum(axis=1) == 6)
    for mask, p in ((lm, 0.25), (pu, 0.25), (pe, 0.5)):
        assert abs(mask.mean() - p) < 4 * np.sqrt(p * (1 - p) / 4000)
    assert np.all(np.sign(X.sum(axis=1)) == y)  # separable by w = 1


def test_mease_wyner_and_rare_features():
    X, y = make_mease_wyner(3000, random_state=0)
    assert X.shape == (3000, 20) and X.min() >= 0 and X.max() <= 1
    np.testing.assert_array_equal(y == 1, X[:, :5].sum(axis=1) >= 2.5)
    X, y, has_signal = make_rare_features(4000, n_nuisance=20, random_state=0)
    rare = X[:, :50]
    p = (rare > 0).mean()
    assert abs(p - 0.04) < 4 * np.sqrt(0.04 * 0.96 / rare.size)
    np.testing.assert_allclose((X**2).mean(axis=0).mean(), 1.0, atol=0.03)
    np.testing.assert_array_equal(has_signal, (rare > 0).any(axis=1))
    # rows without signal have balanced labels, rows with signal are predictable
    assert abs((y[~has_signal] == 1).mean() - 0.5) < 4 * np.sqrt(0.25 / (~has_signal).sum())


def test_flip_labels_exact_count_and_multiclass():
    y = np.repeat([0, 1, 2], 100)
    y_noisy, flipped = flip_labels(y, 0.2, random_state=0)
    assert flipped.sum() == 60
    assert np.all(y_noisy[flipped] != y[flipped]) and np.all(y_noisy[~flipped] == y[~flipped])
    a, _ = flip_labels(y, 0.2, random_state=1)
    b, _ = flip_labels(y, 0.2, random_state=1)
    np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="rate"):
        flip_labels(y, 1.0)


def test_loaders(tmp_path):
    X, y = load_digits()
    assert X.shape == (1797, 64) and X.max() == 1.0
    X, y = load_breast_cancer()
    np.testing.assert_allclose(X.mean(axis=0), 0, atol=1e-12)
    X, y = load_newsgroups()
    assert sp.issparse(X) and X.shape == (1427, 22178)
    with pytest.raises(FileNotFoundError, match="apt-get install dataset-fashion-mnist"):
        load_fashion_mnist(directory=str(tmp_path))


# -- metrics -----------------------------------------------------------------------------
def test_delete_features_rate_and_no_mutation():
    X = np.ones((400, 50))
    Xd = delete_features(X, 0.3, random_state=0)
    assert np.all(X == 1)
    frac = 1 - Xd.mean()
    assert abs(frac - 0.3) < 4 * np.sqrt(0.21 / X.size)
    S = sp.csr_matrix(X)
    Sd = delete_features(S, 0.3, random_state=0)
    assert sp.issparse(Sd) and S.nnz == X.size
    assert abs(1 - Sd.nnz / X.size - 0.3) < 4 * np.sqrt(0.21 / X.size)
    np.testing.assert_array_equal(delete_features(X, 0.0), X)
    assert delete_features(S, 1.0).nnz == 0


def test_metrics_against_sklearn_and_brute_force():
    rng = np.random.default_rng(0)
    p1 = rng.random(500)
    y = (rng.random(500) < p1 ** 1.5).astype(int)
    P = np.column_stack([1 - p1, p1])
    m = classification_metrics(P, y)
    assert np.isclose(m["brier"], 2 * brier_score_loss(y, p1))  # summed over both classes
    assert np.isclose(m["log_loss"], log_loss(y, P))
    assert np.isclose(m["error"], np.mean((p1 > 0.5) != y))
    # ECE by an explicit loop over the bins
    conf, pred = P.max(axis=1), P.argmax(axis=1)
    edges = np.linspace(0, 1, 16)
    ece = 0.0
    for lo, hi in zip(edges[:-1], edges[1:]):
        sel = (conf >= lo) & ((conf < hi) if hi < 1 else (conf <= hi))
        if sel.any():
            ece += sel.mean() * abs((pred[sel] == y[sel]).mean() - conf[sel].mean())
    assert np.isclose(expected_calibration_error(P, y), ece)
    # a calibrated forecaster has small ECE, a sharpened one does not
    yc = (rng.random(20000) < (p := rng.random(20000))).astype(int)
    Pc = np.column_stack([1 - p, p])
    sharp = np.column_stack([1 - (p > 0.5), (p > 0.5)]).astype(float)
    assert expected_calibration_error(Pc, yc) < 0.02 < expected_calibration_error(sharp, yc)


# -- harnesses (tiny versions of the benchmark studies) -----------------------------------
@pytest.fixture(scope="module")
def digits_split():
    X, y = load_digits()
    sel = y < 3
    X, y = X[sel], y[sel]
    return X[:300], y[:300], X[300:], y[300:]


def test_nightmare_harness_selects_on_validation(digits_split):
    Xtr, ytr, Xte, yte = digits_split
    models = {"dsvm": grid(DropoutSVC(tol=1e-5), {"noise_level": [0.0, 0.6]}),
              "mcfq": MCFQuadraticClassifier(noise_level=0.5),
              "fdrop": InvariantSVC(n_changes=4, tol=1e-2)}
    df = nightmare_at_test_time(models, Xtr, ytr, Xte, yte, deletion=[0.0, 0.5, 0.8],
                                refit=False, random_state=0)
    assert len(df) == 9 and set(df.model) == set(models)
    assert df.test_error.between(0, 1).all()
    # deleting 80% of the pixels hurts every model
    for _, sub in df.groupby("model"):
        assert sub.test_error.iloc[-1] > sub.test_error.iloc[0]
    # the selected dropout level is the validation argmin: recompute it
    again = nightmare_at_test_time({"dsvm": models["dsvm"]}, Xtr, ytr, Xte, yte,
                                   deletion=[0.0, 0.5, 0.8], refit=False, random_state=0)
    np.testing.assert_array_equal(again.test_error, df[df.model == "dsvm"].test_error)
    assert "noise_level" in again.selected.iloc[0]


def test_label_noise_harness():
    X, y, _ = make_long_servedio(400, random_state=0)
    Xt, yt, _ = make_long_servedio(1000, random_state=1)
    models = {"lr": LogisticRegression(), "tlr": grid(TLogisticRegression(), {"t": [1.5, 1.9]})}
    df = label_noise_study(models, X, y, Xt, yt, rates=(0.0, 0.1), n_repeats=2, random_state=0)
    assert len(df) == 8
    mean = df.groupby(["model", "rate"]).test_error.mean()
    assert mean[("lr", 0.0)] == 0.0 and mean[("tlr", 0.1)] < mean[("lr", 0.1)]
    ax = plot_study(df, "rate")
    assert len(ax.lines) >= 2


def test_uncertainty_harness_and_posterior_predictive(digits_split):
    Xtr, ytr, Xte, yte = digits_split
    sel_tr, sel_te = ytr < 2, yte < 2
    models = {"dlr": DropoutLogisticRegression(C=0.1, noise_level=0.3),
              "dsvm": DropoutSVC(C=0.1, noise_level=0.3)}
    df = uncertainty_study(models, Xtr[sel_tr], ytr[sel_tr], Xte[sel_te], yte[sel_te],
                           deletion=[0.0, 0.6], draws=100, tune=50, chains=2, random_state=0)
    assert len(df) == 8
    assert (df[df.kind == "posterior"].min_ess > 20).all()
    assert df[["error", "brier", "ece", "log_loss"]].notna().all().all()
    # posterior predictive of the logistic model = mean over the draws of the
    # pseudo-likelihood's sigmoid(2C m)
    est = DropoutLogisticRegression(C=0.1, noise_level=0.3)
    idata = est.sample_posterior(Xtr[sel_tr], ytr[sel_tr], draws=50, tune=20, chains=1,
                                 random_state=1, progressbar=False)
    coef = idata.posterior["coef"].values.reshape(50, -1)
    b = idata.posterior["intercept"].values.reshape(50)
    p1 = (1 / (1 + np.exp(-2 * 0.1 * (Xte[sel_te] @ coef.T + b)))).mean(axis=1)
    np.testing.assert_allclose(posterior_predictive_proba(idata, Xte[sel_te])[:, 1], p1)


def test_benchmark_script_quick_versions(tmp_path, monkeypatch):
    """The committed studies' code paths, at tiny sizes (the full runs are benchmarks)."""
    import importlib.util
    import pathlib

    import pandas as pd

    path = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "robustness.py"
    spec = importlib.util.spec_from_file_location("robustness_bench", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    monkeypatch.setenv("CI", "true")
    for study in ("labelnoise", "uncertainty"):
        assert bench.main([study, "--quick", "--out", str(tmp_path)]) == 0
        df = pd.read_csv(tmp_path / f"robustness_{study}_quick.csv")
        assert (tmp_path / f"robustness_{study}_quick.png").exists()
        if study == "labelnoise":
            # 2 data sets x 3 rates x 2 repeats x 4 models; clean Long-Servedio is separable
            assert len(df) == 48
            clean = df[(df.data == "Long-Servedio") & (df.rate == 0.0) & (df.model == "LR")]
            assert (clean.test_error == 0.0).all()
        else:
            # one-hot point predictions have confidence 1, so their ECE equals the error
            svm = df[(df.kind == "point") & df.model.str.startswith("Dropout-SVM")]
            assert len(svm) == 10
            np.testing.assert_allclose(svm.ece, svm.error, atol=1e-12)


def test_benchmark_script_combines_nightmare_tables(tmp_path):
    import importlib.util
    import pathlib

    import pandas as pd

    path = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "robustness.py"
    spec = importlib.util.spec_from_file_location("robustness_bench", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)

    def table(model, n_train=100):
        return pd.DataFrame({"data": "digits", "model": model, "deletion": [0.0, 0.5],
                             "selected": "", "val_error": [0.1, 0.4],
                             "test_error": [0.1, 0.5], "fit_seconds": 1.0,
                             "n_train": n_train})

    paths = []
    for i, (model, n) in enumerate((("A", 100), ("B", 100), ("A", 100), ("C", 50))):
        paths.append(str(tmp_path / f"in{i}.csv"))
        table(model, n).to_csv(paths[-1], index=False)
    assert bench.main(["combine", "--inputs", *paths[:2], "--tag", "_j",
                       "--out", str(tmp_path)]) == 0
    joined = pd.read_csv(tmp_path / "robustness_nightmare_j.csv")
    assert sorted(joined.model.unique()) == ["A", "B"] and len(joined) == 4
    assert (tmp_path / "robustness_nightmare_j.png").exists()
    with pytest.raises(SystemExit, match="more than one input"):
        bench.main(["combine", "--inputs", paths[0], paths[2], "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="n_train"):
        bench.main(["combine", "--inputs", paths[0], paths[3], "--out", str(tmp_path)])


def test_rare_features_share_the_model_across_draws():
    """Training and test draws share beta: a model fitted on one predicts the other where
    the signal is active, and is at chance where it is not."""
    X, y, _ = make_rare_features(3000, n_nuisance=10, random_state=0)
    Xt, yt, sig = make_rare_features(3000, n_nuisance=10, random_state=1)
    clf = LogisticRegression(C=1.0).fit(X, y)
    correct = clf.predict(Xt) == yt
    assert correct[sig].mean() > 0.85
    assert abs(correct[~sig].mean() - 0.5) < 4 * np.sqrt(0.25 / (~sig).sum())


def test_main_job_fits_samples_summarises_and_draws(tmp_path):
    import io

    from bayesdrop.demo import run_main

    out = tmp_path / "demo.png"
    text = io.StringIO()
    res = run_main(str(out), draws=200, chains=2, file=text)
    printed = text.getvalue()
    assert out.stat().st_size > 10_000
    for needle in ("ArviZ summary", "r_hat", "ess_bulk", "Mode check", "deleted"):
        assert needle in printed
    assert bool(res["mode_check"]["is_mode"].all())
    rows = res["deletion"]
    dropout, clean = rows["Dropout-LR (q=0.2)"], rows["LR (q=0)"]
    half = list(dropout[:, 0]).index(0.5)
    # the point of the library: at half the pixels deleted the dropout model's whole
    # 5-95% range of single draws' accuracy lies above the clean model's point accuracy,
    # and so does its posterior predictive's accuracy (column 2)
    assert dropout[half, 3] > clean[half, 1]
    assert dropout[half, 2] > clean[half, 1]
    assert np.all((rows["LR (q=0)"][:, 2] >= 0) & (rows["LR (q=0)"][:, 2] <= 1))
    assert "posterior predictive" in printed


@pytest.mark.parametrize("strategy", ["uniform", "quantile"])
def test_calibration_table_is_calibration_curve(strategy):
    """The binary table's rows are scikit-learn's ``calibration_curve`` (same bins); the
    confidence table's weighted gap is the expected calibration error."""
    from sklearn.calibration import calibration_curve

    from bayesdrop.studies import calibration_table, expected_calibration_error

    rng = np.random.default_rng(0)
    p = rng.beta(0.7, 0.7, size=500)
    y = (rng.random(500) < p ** 1.3).astype(int)
    table = calibration_table(np.column_stack([1 - p, p]), y, 8, strategy=strategy)
    true, pred = calibration_curve(y, p, n_bins=8, strategy=strategy)
    np.testing.assert_allclose(table["observed"], true, rtol=1e-12)
    np.testing.assert_allclose(table["mean_predicted"], pred, rtol=1e-12)
    assert table["count"].sum() == 500
    P = rng.dirichlet(np.ones(4), size=400)
    labels = np.array([rng.choice(4, p=row) for row in P])
    conf = calibration_table(P, labels, 15)
    ece = float(np.sum(conf["count"] * np.abs(conf["gap"])) / 400)
    assert ece == pytest.approx(expected_calibration_error(P, labels, n_bins=15), abs=1e-12)
    with pytest.raises(ValueError, match="two columns"):
        calibration_table(P, labels, kind="positive")
    with pytest.raises(ValueError, match=r"y_idx must have shape \(10,\)"):
        calibration_table(P[:10], labels)
