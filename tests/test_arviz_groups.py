"""ArviZ completeness: the log_likelihood group (az.loo / waic / compare), the posterior
predictive group (az.plot_ppc), wall-clock sampling_time, the pandas index as the example
coordinate; and the driver's interrupt / SIGTERM / progress behaviour."""

import subprocess
import sys
import textwrap
import time

import matplotlib

matplotlib.use("Agg")

import arviz as az
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from scipy.special import expit
from sklearn.datasets import load_iris

from bayesdrop import (
    DropoutLogisticRegression,
    DropoutSVC,
    DropoutSVR,
    LogisticLoss,
    NoNoise,
    Problem,
)
from bayesdrop.samplers import sample
from bayesdrop.solvers import irls

KW = dict(draws=300, tune=50, chains=2, random_state=0, progressbar=False, cores=1)


def _theta(idata, k=None):
    coef = idata.posterior["coef"].values
    b = idata.posterior["intercept"].values
    if k is not None:
        coef, b = coef[:, :, k], b[:, :, k]
    return coef, b


@pytest.mark.parametrize("Est", [DropoutSVC, DropoutLogisticRegression])
def test_log_likelihood_sums_to_minus_J_and_feeds_loo(Est, small_problem_data):
    X, y, _ = small_problem_data
    w = np.random.default_rng(0).integers(0, 3, size=120).astype(float)
    clf = Est(noise_level=0.3).fit(X, y, sample_weight=w)
    idata = clf.sample_posterior(X, y, sample_weight=w, **KW)
    ll = idata.log_likelihood["y"].values
    assert ll.shape == (2, 300, 120)
    assert np.all(ll[..., w == 0] == 0.0)  # a removed example contributes nothing
    # lp = -J = -||w||^2 + sum_n log p_n: an exact identity between two code paths
    coef, _ = _theta(idata)
    lp = idata.sample_stats["lp"].values
    np.testing.assert_allclose(ll.sum(-1) - np.sum(coef**2, -1), lp, rtol=1e-10)
    loo = az.loo(idata)
    assert np.isfinite(loo.elpd_loo) and np.isfinite(az.waic(idata).elpd_waic)


def test_log_likelihood_multiclass_is_the_sum_over_problems_and_compare_works():
    X, y = load_iris(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    fits = {}
    for q in (0.1, 0.5):
        clf = DropoutSVC(noise_level=q).fit(X, y)
        fits[f"q={q}"] = clf.sample_posterior(X, y, **KW)
    idata = fits["q=0.1"]
    coef, _ = _theta(idata)
    lp = idata.sample_stats["lp"].values  # (chain, draw, class)
    ll = idata.log_likelihood["y"].values
    np.testing.assert_allclose(ll.sum(-1), (lp + np.sum(coef**2, -1)).sum(-1), rtol=1e-10)
    table = az.compare(fits)
    assert list(table.index) == ["q=0.1", "q=0.5"]  # less noise fits iris better


def test_log_likelihood_can_be_skipped(small_problem_data):
    X, y, _ = small_problem_data
    idata = DropoutSVC().fit(X, y).sample_posterior(X, y, log_likelihood=False, **KW)
    assert "log_likelihood" not in idata.groups()


def test_pandas_index_is_the_example_coordinate(small_problem_data):
    X, y, _ = small_problem_data
    frame = pd.DataFrame(X, index=[f"id{i}" for i in range(120)])
    clf = DropoutLogisticRegression(noise_level=0.2).fit(frame, y)
    idata = clf.sample_posterior(frame, y, **KW)
    for group in ("observed_data", "log_likelihood", "augmentation_mean"):
        assert list(idata[group]["example"].values[:2]) == ["id0", "id1"]
    pp = clf.sample_posterior_predictive(frame, idata, random_state=0)
    assert list(pp.posterior_predictive["example"].values[:2]) == ["id0", "id1"]


def test_posterior_predictive_logistic_is_bernoulli_of_the_sigmoid(small_problem_data):
    X, y, _ = small_problem_data
    clf = DropoutLogisticRegression(C=0.5, noise="none").fit(X, y)
    idata = clf.sample_posterior(X, y, **KW)
    pp = clf.sample_posterior_predictive(X, idata, random_state=1)
    assert "posterior_predictive" not in idata.groups()  # the input is not modified
    y_rep = pp.posterior_predictive["y"].values
    assert y_rep.shape == (2, 300, 120) and set(np.unique(y_rep)) <= {-1.0, 1.0}
    coef, b = _theta(idata)
    p = expit(np.einsum("cdf,nf->cdn", coef, X) + b[..., None])  # 2C = 1
    # per example: frequency of +1 over 600 draws vs the mean probability (4 SE)
    freq = (y_rep > 0).mean(axis=(0, 1))
    se = np.sqrt(p.mean(axis=(0, 1)) * (1 - p.mean(axis=(0, 1))) / 600) + 1e-3
    assert np.mean(np.abs(freq - p.mean(axis=(0, 1))) < 4 * se) > 0.98
    az.plot_ppc(pp, num_pp_samples=20)


def test_posterior_predictive_svr_law_and_interval(small_problem_data):
    X, _, yr = small_problem_data
    C, eps = 0.8, 0.3
    reg = DropoutSVR(C=C, epsilon=eps, noise_level=0.1).fit(X, yr)
    idata = reg.sample_posterior(X, yr, **KW)
    pp = reg.sample_posterior_predictive(X, idata, random_state=2)
    coef, b = _theta(idata)
    m = np.einsum("cdf,nf->cdn", coef, X) + b[..., None]
    r = pp.posterior_predictive["y"].values - m
    # inside the tube with probability 2 eps / (2 eps + 1/C); tails Exp(2C) beyond eps
    p_in = 2 * eps / (2 * eps + 1 / C)
    inside = np.abs(r) <= eps
    assert abs(inside.mean() - p_in) < 4 * np.sqrt(p_in * (1 - p_in) / r.size)
    excess = np.abs(r[~inside]) - eps
    assert abs(excess.mean() - 1 / (2 * C)) < 4 * (1 / (2 * C)) / np.sqrt(excess.size)
    mean, band = reg.predict_interval(X, idata, prob=0.9, kind="mean")
    _, pred = reg.predict_interval(X, idata, prob=0.9)
    assert np.all(pred[:, 0] < band[:, 0]) and np.all(band[:, 1] < pred[:, 1])
    covered = (yr >= pred[:, 0]) & (yr <= pred[:, 1])
    assert covered.mean() > band_cover(yr, band)  # a predictive interval covers more y
    with pytest.raises(ValueError, match="kind"):
        reg.predict_interval(X, idata, kind="band")


def band_cover(y, band):
    return ((y >= band[:, 0]) & (y <= band[:, 1])).mean()


def test_posterior_predictive_multiclass_frequencies():
    X, y = load_iris(return_X_y=True)
    clf = DropoutLogisticRegression(C=0.5, noise_level=0.1).fit(X, y)
    idata = clf.sample_posterior(X, y, **KW)
    y_rep = clf.sample_posterior_predictive(X[:3], idata, random_state=0)
    values = y_rep.posterior_predictive["y"].values
    assert set(np.unique(values)) <= {0, 1, 2}
    coef, b = idata.posterior["coef"].values, idata.posterior["intercept"].values
    s = np.einsum("cdkf,nf->cdnk", coef, X[:3]) + b[:, :, None, :]
    p = np.exp(s - s.max(-1, keepdims=True))  # softmax of 2C (loss(-1) - loss(+1)) = m
    p /= p.sum(-1, keepdims=True)
    for n in range(3):
        for k in range(3):
            pk = p[:, :, n, k].mean()
            se = np.sqrt(pk * (1 - pk) / 600) + 1e-3
            assert abs((values[:, :, n] == k).mean() - pk) < 4 * se


def test_sampling_time_is_wall_clock(small_problem_data):
    X, y, _ = small_problem_data
    clf = DropoutLogisticRegression(noise_level=0.2).fit(X, y)
    t0 = time.perf_counter()
    idata = clf.sample_posterior(X, y, draws=400, tune=100, chains=2, cores=2,
                                 random_state=0, progressbar=False)
    wall = time.perf_counter() - t0
    attrs = idata.posterior.attrs
    assert 0 < attrs["sampling_time"] <= wall
    assert attrs["tuning_time"] <= attrs["sampling_time"]
    assert attrs["chain_seconds"] > 0


def test_interrupt_during_tuning_raises_keyboard_interrupt_without_warning(
        small_problem_data, monkeypatch, recwarn):
    from bayesdrop.samplers import gibbs

    X, y, _ = small_problem_data
    problem = Problem.create(X, y, LogisticLoss(1.0), NoNoise(), True)
    theta_hat = irls.fit(problem, None).theta
    real, calls = gibbs.step, [0]

    def step(*args, **kwargs):
        calls[0] += 1
        if calls[0] == 5:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(gibbs, "step", step)
    with pytest.raises(KeyboardInterrupt):
        sample(problem, draws=10, tune=50, chains=1, theta_hat=theta_hat, random_state=0,
               progressbar=False, cores=1, compiled=False)
    assert not [w for w in recwarn if "interrupted" in str(w.message)]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sigterm_to_the_parent_leaves_no_chain_running(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent("""
        import os, sys
        import numpy as np
        from bayesdrop import Problem, LogisticLoss, Dropout
        from bayesdrop.samplers import sample
        from bayesdrop.solvers import irls
        rng = np.random.default_rng(0)
        X = rng.normal(size=(200, 5)); y = np.sign(X[:, 0] + rng.normal(size=200))
        p = Problem.create(X, y, LogisticLoss(1.0), Dropout(0.3))
        print("ready", flush=True)
        sample(p, draws=10**7, tune=10, chains=2, theta_hat=irls.fit(p).theta,
               progressbar=False, cores=2, compiled=False)  # chains in processes
    """))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        children = []
        deadline = time.time() + 60
        while len(children) < 2 and time.time() < deadline:
            time.sleep(0.2)
            path = f"/proc/{proc.pid}/task/{proc.pid}/children"
            children = [int(c) for c in open(path).read().split()]
        assert len(children) >= 2
        time.sleep(1.0)  # the chains are running
        proc.terminate()
        proc.wait(timeout=30)
    finally:  # never leave the sampling process behind, whatever failed
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    deadline = time.time() + 30
    alive = children
    while alive and time.time() < deadline:
        time.sleep(0.2)
        alive = [c for c in alive if _running(c)]
    assert not alive, f"chain processes {alive} survived SIGTERM to their parent"


def _running(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] not in ("Z", "X")
    except FileNotFoundError:
        return False


def test_progress_goes_to_a_log_file_sparingly(monkeypatch, tmp_path):
    from bayesdrop._progress import ProgressBar

    monkeypatch.delenv("CI", raising=False)
    log = open(tmp_path / "log.txt", "w")
    with ProgressBar(10_000, description="Gibbs", stream=log) as bar:
        for k in range(1, 10_001):
            bar.update(k)
    log.close()
    text = (tmp_path / "log.txt").read_text()
    assert "10000/10000" in text and "nan" not in text
    assert text.count("\r") <= 3  # start, end: not one line per 0.1 s
    monkeypatch.setenv("CI", "true")
    log = open(tmp_path / "ci.txt", "w")
    with ProgressBar(10, stream=log) as bar:
        bar.update(10)
    log.close()
    assert (tmp_path / "ci.txt").read_text() == ""


def test_verbose_fit_reports_each_problem(monkeypatch, capsys):
    monkeypatch.delenv("CI", raising=False)
    X, y = load_iris(return_X_y=True)
    DropoutSVC(noise_level=0.1, verbose=2).fit(X, y)
    err = capsys.readouterr().err
    assert "problem 1/3" in err and "problem 3/3" in err and "3/3" in err
    DropoutSVC(noise_level=0.1).fit(X, y)
    assert capsys.readouterr().err == ""
    monkeypatch.setenv("CI", "true")
    DropoutSVC(noise_level=0.1, verbose=2).fit(X, y)
    assert capsys.readouterr().err == ""


def test_posterior_predictive_at_corrupted_inputs():
    """At corrupted inputs P(y = +1 | w, b) = E_x~ sigmoid(w x~ + b) (2C = 1); with one
    feature under dropout q that is q sigmoid(b) + (1 - q) sigmoid(w x / (1 - q) + b),
    exactly. Frequencies over the draws are compared with it (4 standard errors)."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(60, 1)) * 2
    y = np.where(X[:, 0] + rng.logistic(size=60) > 0, 1, -1)
    q = 0.5
    clf = DropoutLogisticRegression(C=0.5, noise_level=q).fit(X, y)
    idata = clf.sample_posterior(X, y, draws=1000, tune=100, chains=2, random_state=0,
                                 progressbar=False, cores=1)
    y_rep = clf.sample_posterior_predictive(X, idata, random_state=3, corrupted=True)
    freq = (y_rep.posterior_predictive["y"].values > 0).mean(axis=(0, 1))
    w = idata.posterior["coef"].values[..., 0][..., None]
    b = idata.posterior["intercept"].values[..., None]
    p = (q * expit(b) + (1 - q) * expit(w * X[:, 0] / (1 - q) + b)).mean(axis=(0, 1))
    se = np.sqrt(p * (1 - p) / 2000)
    assert np.mean(np.abs(freq - p) < 4 * se + 1e-3) > 0.98
    clean = expit(w * X[:, 0] + b).mean(axis=(0, 1))
    assert np.max(np.abs(clean - p)) > 0.1  # the corrupted law is a different law


def test_convergence_warning_names_the_parameters(small_problem_data):
    import warnings

    from bayesdrop import ConvergenceWarning

    X, y, _ = small_problem_data
    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(5)])
    clf = DropoutLogisticRegression(noise_level=0.2).fit(frame, y)
    with pytest.warns(ConvergenceWarning, match=r"coef\[f\d\].*r_hat") as caught:
        clf.sample_posterior(frame, y, draws=20, tune=5, chains=2, random_state=0,
                             progressbar=False)
    assert "per chain" in str(caught[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        clf.sample_posterior(frame, y, draws=2000, tune=300, chains=2, random_state=0,
                             progressbar=False)


# ---------------------------------------------------------- vectorised rank diagnostics
def _diagnostic_cases():
    rng = np.random.default_rng(1)
    ar = np.zeros((4, 1001, 3))
    for t in range(1, 1001):
        ar[:, t] = 0.95 * ar[:, t - 1] + rng.normal(size=(4, 3))
    shifted = rng.normal(size=(2, 200, 2))
    shifted[1] += 3.0
    return {"iid": rng.normal(size=(4, 1000, 5)), "ar(0.95), odd draws": ar,
            "ties": np.round(rng.normal(size=(3, 57, 4)), 1), "not mixed": shifted,
            "random walk": np.cumsum(rng.normal(size=(4, 300, 2)), axis=1),
            "7 draws": rng.normal(size=(4, 7, 3)),
            "heavy tails": rng.standard_cauchy(size=(4, 400, 3))}


@pytest.mark.parametrize("name", list(_diagnostic_cases()))
def test_rank_diagnostics_equal_arviz(name):
    """R-hat and bulk / tail ESS of every parameter at once equal ArviZ's
    ``az.rhat`` / ``az.ess`` called parameter by parameter (relative 1e-10)."""
    from bayesdrop._arviz import rank_diagnostics

    x = _diagnostic_cases()[name]
    r, bulk, tail = rank_diagnostics(x)
    for k in range(x.shape[2]):
        assert r[k] == pytest.approx(float(az.rhat(x[:, :, k])), rel=1e-10)
        assert bulk[k] == pytest.approx(float(az.ess(x[:, :, k], method="bulk")), rel=1e-10)
        assert tail[k] == pytest.approx(float(az.ess(x[:, :, k], method="tail")), rel=1e-10)


@pytest.mark.parametrize("name", list(_diagnostic_cases()))
def test_one_chains_ess_equals_arviz(name):
    """The tuning schedule's ESS of one unsplit chain (``samplers.ess.ess_chain``, every
    column at once) equals ArviZ's own estimator of it (``_ess``, which ``az.ess`` runs
    on split chains) column by column (relative 1e-10)."""
    from arviz.stats.diagnostics import _ess

    from bayesdrop.samplers.ess import ess_chain

    trace = _diagnostic_cases()[name][0]
    got = ess_chain(trace)
    for k in range(trace.shape[1]):
        assert got[k] == pytest.approx(float(_ess(trace[None, :, k])), rel=1e-10)


def test_rank_diagnostics_validate():
    from bayesdrop._arviz import rank_diagnostics

    with pytest.raises(ValueError, match="chains >= 2"):
        rank_diagnostics(np.zeros((1, 100, 2)))
    with pytest.raises(ValueError, match="draws >= 4"):
        rank_diagnostics(np.zeros((2, 3, 2)))
    r, bulk, tail = rank_diagnostics(np.ones((2, 50, 1)))  # constant: as ArviZ
    assert np.isnan(r[0]) and bulk[0] == 100 and tail[0] == 100


def test_average_ranks_equal_scipy_rankdata():
    """The ranks behind the rank normalisation equal ``scipy.stats.rankdata(method=
    "average")`` row by row, ties included."""
    from scipy.stats import rankdata

    from bayesdrop._arviz import _average_ranks

    rng = np.random.default_rng(3)
    for x in (rng.normal(size=(4, 200)), np.round(rng.normal(size=(5, 300)), 1),
              np.ones((2, 7)), rng.integers(0, 3, size=(3, 50)).astype(float)):
        np.testing.assert_array_equal(_average_ranks(x), rankdata(x, axis=1))


def test_plot_ppc_works_for_string_class_labels():
    """``az.plot_ppc`` needs numeric data: string labels are stored as their index in
    ``classes_`` in both ``observed_data`` and ``posterior_predictive``, consistently."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bayesdrop._arviz import az

    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 3))
    labels = np.where(X[:, 0] + 0.3 * rng.normal(size=80) > 0, "yes", "no")
    clf = DropoutLogisticRegression(noise_level=0.2).fit(X, labels)
    idata = clf.sample_posterior(X, labels, draws=100, tune=50, chains=2,
                                 progressbar=False, random_state=0)
    idata = clf.sample_posterior_predictive(X, idata, random_state=1)
    obs, rep = idata.observed_data["y"].values, idata.posterior_predictive["y"].values
    assert obs.dtype.kind in "iu" and rep.dtype.kind in "iu"
    assert list(clf.classes_[obs]) == list(labels) and set(np.unique(rep)) <= {0, 1}
    az.plot_ppc(idata)
    plt.close("all")


# ------------------------------------------------------------- continuing from an idata
def test_init_with_an_inference_data_continues_each_chain_from_its_last_draw():
    """``sample_posterior(..., init=idata, tune=0)``: each chain goes on from its last
    draw -- the same draws as ``init`` given as the array of those last draws."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 3))
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=80) > 0, 1, 0)
    clf = DropoutLogisticRegression(noise_level=0.2).fit(X, y)
    first = clf.sample_posterior(X, y, draws=40, tune=20, chains=2, random_state=0,
                                 progressbar=False, cores=1)
    last = np.column_stack([first.posterior["coef"].values[:, -1],
                            first.posterior["intercept"].values[:, -1]])
    kw = {"draws": 30, "tune": 0, "chains": 2, "random_state": 1, "progressbar": False,
          "cores": 1}
    again = clf.sample_posterior(X, y, init=first, **kw)
    by_hand = clf.sample_posterior(X, y, init=last, **kw)
    np.testing.assert_array_equal(again.posterior["coef"].values,
                                  by_hand.posterior["coef"].values)
    assert not np.array_equal(again.posterior["coef"].values[:, 0],
                              first.posterior["coef"].values[:, -1])  # it moved on
    both = xr.concat([first.posterior, again.posterior], "draw")  # as the docstring says
    assert both.sizes["draw"] == 70


def test_init_with_an_inference_data_multiclass_and_its_errors():
    X, y = load_iris(return_X_y=True)
    clf = DropoutLogisticRegression().fit(X, y)
    kw = {"draws": 20, "tune": 10, "chains": 2, "random_state": 0, "progressbar": False,
          "cores": 1}
    first = clf.sample_posterior(X, y, **kw)
    again = clf.sample_posterior(X, y, init=first, **{**kw, "tune": 0})
    assert again.posterior["coef"].shape == (2, 20, 3, 4)
    with pytest.raises(ValueError, match="init: .*2 chain.*needs 3"):
        clf.sample_posterior(X, y, init=first, **{**kw, "chains": 3})
    with pytest.raises(ValueError, match="init: an InferenceData of DropoutLogisticRegression"):
        DropoutSVC().fit(X, y).sample_posterior(X, y, init=first, **kw)
    with pytest.raises(ValueError, match="init: .*5 parameters.*needs 2 .*3 and 4"):
        DropoutLogisticRegression().fit(X[:, :3], y).sample_posterior(X[:, :3], y,
                                                                      init=first, **kw)
    with pytest.raises(TypeError, match="init must be"):
        clf.sample_posterior(X, y, init={"coef": 0}, **kw)
    with pytest.raises(ValueError, match="init contains NaN"):
        clf.sample_posterior(X, y, init=np.full(5, np.nan), **kw)
