"""Dask row back-end: fits, predictions and posteriors on a real LocalCluster.

Every statistic is computed on two worker processes and tree-summed; the results must
equal the in-memory estimators' (fits to 1e-7, predictions exactly, posteriors within
Monte Carlo error), not depend on the number of workers, keep the client's memory far
below the data's, and report bad chunks with their rows.
"""

import os
import signal
import threading
import time

import numpy as np
import pytest
import scipy.sparse as sp

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")
import dask  # noqa: E402

from bayesdrop import DropoutLogisticRegression, DropoutSVC, DropoutSVR  # noqa: E402
from bayesdrop.linalg.backend import InMemoryRows  # noqa: E402
from bayesdrop.linalg.dask_backend import DaskRows  # noqa: E402
from bayesdrop.model.losses import HingeLoss, LogisticLoss  # noqa: E402
from bayesdrop.model.noise import Dropout  # noqa: E402
from bayesdrop.model.problem import Problem  # noqa: E402


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None, silence_logs=50)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def _data(n=600, d=6, seed=0, sparse=False, regression=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    if sparse:
        X = X * (rng.random((n, d)) < 0.4)
    score = X @ np.linspace(1.0, -0.5, d) + 0.5 * rng.normal(size=n)
    y = score if regression else (score > 0).astype(int)
    return (sp.csr_matrix(X) if sparse else X), y


def _dask(X, rows=150):
    return da.from_array(X, chunks=(rows, X.shape[1]), asarray=not sp.issparse(X))


ESTIMATORS = {
    "hinge": lambda **kw: DropoutSVC(C=1.0, **kw),
    "logistic": lambda **kw: DropoutLogisticRegression(C=1.0, **kw),
    "epsilon": lambda **kw: DropoutSVR(C=1.0, epsilon=0.2, **kw),
}


@pytest.mark.parametrize("loss", list(ESTIMATORS))
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_fit_on_the_cluster_equals_in_memory(client, loss, sparse, fit_intercept):
    X, y = _data(sparse=sparse, regression=loss == "epsilon")
    make = ESTIMATORS[loss]
    ref = make(noise_level=0.3, fit_intercept=fit_intercept, tol=1e-10).fit(X, y)
    est = make(noise_level=0.3, fit_intercept=fit_intercept, tol=1e-10).fit(_dask(X), y)
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-7, atol=1e-7)
    np.testing.assert_allclose(est.intercept_, ref.intercept_, rtol=1e-7, atol=1e-7)
    assert np.all(est.converged_)
    pred = est.predict(_dask(X))
    assert isinstance(pred, da.Array)  # lazy, like dask-ml
    if loss == "epsilon":
        np.testing.assert_allclose(pred.compute(), ref.predict(X), rtol=1e-7, atol=1e-7)
    else:
        np.testing.assert_array_equal(pred.compute(), ref.predict(X))
        np.testing.assert_allclose(est.decision_function(_dask(X)).compute(),
                                   ref.decision_function(X), rtol=1e-7, atol=1e-7)


@pytest.mark.parametrize("loss", ["logistic", "hinge"])
def test_subsample_start_on_the_cluster_reaches_the_in_memory_optimum(client, loss,
                                                                      monkeypatch):
    """Newton through the dask back-end from the optimum of every 8th row of each chunk:
    the in-memory optimum (without subsample start) to 1e-7, with the subsample's passes
    counted in n_passes_ (the saving in full passes needs many rows: benchmarks/dask_cluster.py)."""
    from bayesdrop.solvers import newton

    X, y = _data(seed=9)
    make = ESTIMATORS[loss]
    ref = make(noise_level=0.3, tol=1e-10).fit(X, y)
    plain = make(noise_level=0.3, tol=1e-10).fit(_dask(X), y)
    monkeypatch.setattr(newton, "SUBSAMPLE_MIN_ROWS", 100)  # the client runs fit_rows
    est = make(noise_level=0.3, tol=1e-10).fit(_dask(X), y)
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-7, atol=1e-7)
    np.testing.assert_allclose(est.intercept_, ref.intercept_, rtol=1e-7, atol=1e-7)
    assert np.all(est.converged_)
    assert est.n_passes_[0] > plain.n_passes_[0] - plain.n_iter_[0] + est.n_iter_[0]


def test_zero_noise_losses_use_irls_and_reach_the_optimum(client):
    X, y = _data(seed=1)
    ref = DropoutLogisticRegression(noise="none", tol=1e-10).fit(X, y)
    est = DropoutLogisticRegression(noise="none", tol=1e-10).fit(_dask(X), y)
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-7, atol=1e-7)
    ref = DropoutSVC(noise="none").fit(X, y)  # exact (dual SMO + polish)
    est = DropoutSVC(noise="none", tol=1e-12, max_iter=5000).fit(_dask(X), y)
    assert est.solver_[0] == "irls"
    J = [float(e.objective_[0][-1]) if isinstance(e.objective_, list)
         else float(e.objective_[0]) for e in (ref, est)]
    assert J[1] - J[0] <= 1e-6 * J[0]


def test_multiclass_weights_and_dask_labels(client):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(500, 4))
    y = np.array(["a", "b", "c"])[np.argmax(X[:, :3] + 0.3 * rng.normal(size=(500, 3)),
                                            axis=1)]
    w = rng.uniform(0.0, 2.0, size=500)
    w[:20] = 0.0
    kw = dict(noise_level=0.2, class_weight="balanced", tol=1e-10)
    ref = DropoutLogisticRegression(**kw).fit(X, y, sample_weight=w)
    est = DropoutLogisticRegression(**kw).fit(
        _dask(X, 120), da.from_array(y, chunks=100), sample_weight=da.from_array(w, 77))
    np.testing.assert_array_equal(est.classes_, ref.classes_)
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-7, atol=1e-7)
    proba = est.predict_proba(_dask(X, 120))
    np.testing.assert_allclose(proba.compute(), ref.predict_proba(X), rtol=1e-6, atol=1e-9)
    assert proba.chunks[0] == (120, 120, 120, 120, 20)


def test_row_backend_sums_equal_the_in_memory_ones(client):
    X, y = _data(seed=4)
    y = np.where(y == 1, 1.0, -1.0)
    theta = np.random.default_rng(0).normal(size=X.shape[1] + 1) * 0.3
    for loss in (HingeLoss(1.0), LogisticLoss(0.5)):
        ref = InMemoryRows(Problem.create(X, y, loss, Dropout(0.3)))
        rows = DaskRows(_dask(X, 64), y, loss, Dropout(0.3))
        for a, b in zip(rows.newton(theta, theta[None, :] * 0.5), ref.newton(
                theta, theta[None, :] * 0.5)):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
        for a, b in zip(rows.irls(theta), ref.irls(theta)):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


def test_draws_do_not_depend_on_the_workers(client):
    X, y = _data(n=400, seed=5)
    est = DropoutLogisticRegression(noise_level=0.3).fit(X, y)
    kw = dict(draws=30, tune=5, chains=2, random_state=11, progressbar=False)
    on_cluster = est.sample_posterior(_dask(X, 90), y, **kw)
    for scheduler in ("sync", "threads"):  # one thread / a thread pool, no cluster
        with dask.config.set(scheduler=scheduler):
            local = est.sample_posterior(_dask(X, 90), y, **kw)
        np.testing.assert_array_equal(on_cluster.posterior["coef"].values,
                                      local.posterior["coef"].values)
        np.testing.assert_array_equal(on_cluster.sample_stats["lp"].values,
                                      local.sample_stats["lp"].values)
    again = est.sample_posterior(_dask(X, 90), y, **kw)  # chunks land on other workers
    np.testing.assert_array_equal(on_cluster.posterior["coef"].values,
                                  again.posterior["coef"].values)


@pytest.mark.parametrize("loss", ["logistic", "hinge"])
def test_posterior_on_the_cluster_matches_in_memory(client, loss):
    """Posterior means within 4 combined Monte Carlo standard errors, sds within 10%."""
    import arviz as az

    X, y = _data(n=300, d=3, seed=6)
    est = ESTIMATORS[loss](noise_level=0.3).fit(X, y)
    kw = dict(draws=400, tune=50, chains=2, random_state=2, progressbar=False)
    ref = est.sample_posterior(X, y, **kw)
    got = est.sample_posterior(_dask(X, 100).persist(), y, **kw)
    assert "observed_data" not in got.groups() and got.posterior.attrs["backend"] == "dask"
    for name in ("coef", "intercept"):
        a = az.summary(ref, var_names=[name])
        b = az.summary(got, var_names=[name])
        z = np.abs(a["mean"] - b["mean"]) / np.hypot(a["mcse_mean"], b["mcse_mean"])
        assert np.all(z < 4.0), z
        np.testing.assert_allclose(b["sd"], a["sd"], rtol=0.1)
    np.testing.assert_allclose(got.mode["coef"].values, est.coef_[0], rtol=1e-6, atol=1e-8)
    # lp is -J of the stored draw (computed on the workers one pass later)
    problem = Problem.create(X, np.where(y == 1, 1.0, -1.0), est.loss_, est.noise_)
    for c, d in [(0, 0), (1, 399)]:
        theta = np.append(got.posterior["coef"].values[c, d],
                          got.posterior["intercept"].values[c, d])
        assert got.sample_stats["lp"].values[c, d] == pytest.approx(
            -problem.objective(theta), rel=1e-10)


def test_bad_dask_input_gets_a_clear_error(client):
    X, y = _data(n=300, seed=7)
    Xd = _dask(X, 100)
    est = DropoutLogisticRegression()
    with pytest.raises(ValueError, match="unknown chunk sizes"):
        est.fit(Xd[Xd[:, 0] > -10], y)
    with pytest.raises(ValueError, match="chunked along its columns"):
        est.fit(da.from_array(X, chunks=(100, 3)), y)
    with pytest.raises(ValueError, match="y must have shape"):
        est.fit(Xd, y[:-1])
    with pytest.raises(ValueError, match="y has 299 entries"):
        DropoutSVR().fit(Xd, y[:-1].astype(float))
    with pytest.raises(ValueError, match="only one class"):
        est.fit(Xd, np.zeros(300, dtype=int))
    bad = X.copy()
    bad[250, 2] = np.nan  # found on a worker, reported with its chunk and rows
    with pytest.raises(ValueError, match=r"chunk 2 of X \(rows 200 to 299\).*NaN"):
        est.fit(_dask(bad, 100), y)
    with pytest.raises(ValueError, match=r"chunk \d of X .*sample_weight"):
        est.fit(Xd, y, sample_weight=-np.ones(300))
    est.fit(Xd, y)
    with pytest.raises(ValueError, match="labels not seen in fit"):
        est.sample_posterior(Xd, np.where(y == 1, 2, 0), draws=5, tune=0, chains=1,
                             progressbar=False)
    with pytest.raises(ValueError, match="solver='dual'"):
        DropoutSVC(noise="none", solver="dual").fit(Xd, y)


def test_client_memory_stays_far_below_the_data(client):
    """A 160 MB design generated and kept on the workers: the client grows by < 20 MB."""
    psutil = pytest.importorskip("psutil")
    n, d = 312_500, 64
    rs = da.random.RandomState(0)
    X = rs.standard_normal((n, d), chunks=(31_250, d)).persist()
    y = ((X[:, 0] + 0.5 * X[:, 1] + rs.standard_normal(n, chunks=31_250)) > 0).astype(int)
    y = y.persist()
    distributed.wait([X, y])
    proc = psutil.Process(os.getpid())
    base, peak, stop = proc.memory_info().rss, [0], threading.Event()

    def watch():
        while not stop.is_set():
            peak[0] = max(peak[0], proc.memory_info().rss)
            time.sleep(0.005)

    thread = threading.Thread(target=watch)
    thread.start()
    try:
        est = DropoutLogisticRegression(noise_level=0.3).fit(X, y)
    finally:
        stop.set()
        thread.join()
    assert est.converged_.all()
    grown = (peak[0] - base) / 2**20
    assert grown < 20, f"client grew by {grown:.1f} MB for {X.nbytes / 2**20:.0f} MB of data"


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_a_worker_lost_mid_fit_is_recovered(client):
    """Kill a worker process while a fit runs: the lost chunks are recomputed from their
    graph and the fit returns the same answer as without the loss."""
    rs = da.random.RandomState(1)
    X = rs.standard_normal((40_000, 8), chunks=(5_000, 8)).persist()
    y = (X[:, 0] + rs.standard_normal(40_000, chunks=5_000) > 0).astype(int).persist()
    distributed.wait([X, y])
    kw = dict(noise="none", solver="irls", tol=1e-14, max_iter=40, accelerate=False)
    t0 = time.perf_counter()
    ref = DropoutLogisticRegression(**kw).fit(X, y)
    duration = time.perf_counter() - t0
    pids = client.run(os.getpid)
    victim = sorted(pids.values())[0]
    killed = []

    def kill():
        time.sleep(duration / 3)
        os.kill(victim, signal.SIGKILL)
        killed.append(time.perf_counter())

    thread = threading.Thread(target=kill)
    t0 = time.perf_counter()
    thread.start()
    got = DropoutLogisticRegression(**kw).fit(X, y)
    end = time.perf_counter()
    thread.join()
    assert killed and killed[0] < end, "the worker was not killed during the fit"
    np.testing.assert_array_equal(got.coef_, ref.coef_)
    client.wait_for_workers(2, timeout=60)
    assert victim not in client.run(os.getpid).values()


def test_functional_sample_posterior_on_the_cluster(client):
    from bayesdrop import sample_posterior

    X, y = _data(n=300, d=3, seed=8)
    labels = np.where(y == 1, "yes", "no")
    idata = sample_posterior(_dask(X, 100), da.from_array(labels, chunks=60), loss="hinge",
                             noise_level=0.3, draws=20, tune=5, chains=2, random_state=0,
                             progressbar=False)
    ref = DropoutSVC(noise_level=0.3, tol=1e-10).fit(X, labels)
    np.testing.assert_allclose(idata.posterior.attrs["mode_theta"][:3], ref.coef_[0],
                               rtol=1e-6, atol=1e-8)
    assert idata.posterior["coef"].shape == (2, 20, 3)


def test_other_estimators_refuse_dask_instead_of_loading_it(client):
    from bayesdrop.baselines import MCFLogisticRegression

    X, y = _data(n=200, seed=9)
    with pytest.raises(TypeError, match="X is a dask array.*compute"):
        MCFLogisticRegression().fit(_dask(X), y)
    est = DropoutLogisticRegression().fit(X, y)
    with pytest.raises(TypeError, match="X is a dask array"):
        est.predict_vote_fractions(_dask(X), None)


def test_convergence_warnings_point_at_the_callers_line():
    """A solver's ConvergenceWarning (in memory and on dask) and the sampler's (on dask)
    name this file as where they come from, not a module of the library."""
    import warnings

    import dask.array as da

    from bayesdrop import DropoutLogisticRegression

    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = (X[:, 0] > 0).astype(int)
    Xd, yd = da.from_array(X, chunks=(100, 3)), da.from_array(y, chunks=100)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        DropoutLogisticRegression(max_iter=1).fit(X, y)
        DropoutLogisticRegression(max_iter=1).fit(Xd, yd)
        DropoutLogisticRegression().fit(Xd, yd).sample_posterior(
            Xd, yd, draws=4, tune=1, chains=2, progressbar=False, random_state=0)
    conv = [w for w in caught if w.category.__name__ == "ConvergenceWarning"]
    assert len(conv) >= 3
    assert all(w.filename == __file__ for w in conv), [(w.filename, w.lineno) for w in conv]


@pytest.mark.parametrize("method", ["predict", "predict_proba", "predict_log_proba",
                                    "decision_function"])
def test_latent_predictions_on_a_dask_x_are_lazy_and_equal_in_memory(method):
    """The latent estimators (fitted in memory) predict chunk by chunk on a dask ``X``:
    a dask array, equal to the in-memory predictions (nothing computed before asked)."""
    import dask.array as da

    from bayesdrop import DropoutLatentLogisticRegression

    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 4))
    y = np.digitize(X[:, 0], [-0.5, 0.5])  # three classes
    model = DropoutLatentLogisticRegression(n_hidden=2, max_iter=50, random_state=0).fit(X, y)
    out = getattr(model, method)(da.from_array(X, chunks=(40, 4)))
    assert isinstance(out, da.Array)
    np.testing.assert_allclose(out.compute(), getattr(model, method)(X), rtol=1e-12)


def test_dask_fit_finds_an_optimum_at_w_zero_as_in_memory(client):
    """Digits one-vs-rest at q = 0.5, C = 0.1: some classes have their optimum at w = 0,
    where Newton stalls; on dask chunks the fit continues as in memory (Newton's early
    trap check, then the bare model certified by Newton on the bound's problem summed
    over the chunks, ``bare_newton_rows``; where that fails, IRLS, the maps' bound and
    IRLS from the start) and reaches the same J (the passes: ``test_solvers``)."""
    from sklearn.datasets import load_digits

    X, labels = load_digits(return_X_y=True)
    X, labels = X[:900] / 16.0, labels[:900]
    y = (labels == 3).astype(int)
    ref = DropoutSVC(C=0.1, noise_level=0.5).fit(X, y)
    est = DropoutSVC(C=0.1, noise_level=0.5).fit(_dask(X, 200), y)
    problem = Problem.create(X, 2.0 * y - 1.0, HingeLoss(0.1), Dropout(0.5))
    J = problem.objective(np.append(est.coef_.ravel(), est.intercept_))
    J_ref = problem.objective(np.append(ref.coef_.ravel(), ref.intercept_))
    assert J <= J_ref * (1 + 1e-9)
    assert est.solver_[0] == "newton+bare"
    assert np.all(ref.coef_ == 0.0) and np.all(est.coef_ == 0.0)  # the bare model, exactly
