"""Sampling that never hangs or blows up: Polya-Gamma draws whose cost is bounded in the
shape ``h = 2 C w_n`` (and still exact), compiled loops that hand back to Python so that
SIGINT / SIGTERM act within seconds, no ``D x D`` matrix on wide sparse data, the latent
models sampling at their defaults."""

import os
import signal
import subprocess
import sys
import textwrap
import time
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp
from polyagamma import random_polyagamma
from scipy import stats
from scipy.special import logsumexp

from bayesdrop import (
    DropoutLatentLogisticRegression,
    DropoutLatentSVC,
    DropoutLogisticRegression,
    DropoutSVC,
    Dropout,
    LogisticLoss,
    NoNoise,
    Problem,
)
from bayesdrop._arviz import mcse
from bayesdrop.samplers import sample
from bayesdrop.model.augmentation import polya_gamma
from bayesdrop.model.pg_compiled import polya_gamma_compiled
from bayesdrop._blocks import BLOCK_SECONDS, next_block
from bayesdrop.solvers import fit_problem


# ------------------------------------------------------------ Polya-Gamma, large shapes
@pytest.mark.parametrize("z", [0.0, 2.0, 9.0])
@pytest.mark.parametrize("h", [1, 2, 3, 8, 40])
def test_series_draw_has_the_law_of_devroye(h, z):
    """PG(h, z), h >= 1, by the series draw (both the numpy entry point and the compiled
    one) against ``polyagamma``'s exact devroye method (h PG(1) draws each):
    two-sample KS."""
    n = 60_000
    zz = np.full(n, z)
    ref = random_polyagamma(h, zz, method="devroye", random_state=np.random.default_rng(3))
    for ours in (polya_gamma(float(h), zz, random_state=1),
                 polya_gamma_compiled(float(h), zz, 2)):
        assert stats.ks_2samp(ours, ref).pvalue > 1e-3


def _one_feature_logistic(C, noise, seed=0, n=25):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n) + 0.5
    y = np.where(x - 0.3 + rng.normal(size=n) > 0, 1.0, -1.0)
    return Problem.create(x[:, None], y, LogisticLoss(C), noise, fit_intercept=False)


@pytest.mark.parametrize("noise", [NoNoise(), Dropout(0.4)], ids=repr)
@pytest.mark.parametrize("C", [1.3, 25.3, 5000.3])  # h = 2.6, 50.6, 10000.6: the series draw
def test_large_C_posterior_matches_quadrature(C, noise):
    """With Polya-Gamma shapes of 1 and more (the series draw, from a shape of a few
    units to ten thousand) both kernels still
    sample ``exp(-J)``: mean and sd of ``w`` within 4 MCSE of quadrature on a grid of
    +-12 Laplace standard deviations."""
    problem = _one_feature_logistic(C, noise)
    w0 = fit_problem(problem).theta[0]
    step = 1e-4 * (1.0 + abs(w0))
    d2 = (problem.objective(np.array([w0 + step])) - 2 * problem.objective(np.array([w0]))
          + problem.objective(np.array([w0 - step]))) / step**2
    sd0 = 1.0 / np.sqrt(d2 / 2.0)  # exp(-J) ~ N(w0, 2 / J'')
    ws = np.linspace(w0 - 12 * sd0, w0 + 12 * sd0, 4001)
    logp = -np.array([problem.objective(np.array([w])) for w in ws])
    p = np.exp(logp - logsumexp(logp))
    assert p[[0, -1]].max() < 1e-12
    mean = np.sum(p * ws)
    sd = np.sqrt(np.sum(p * (ws - mean) ** 2))
    for compiled in ("auto", False):
        res = sample(problem, draws=2000, tune=200, chains=2, theta_hat=np.array([w0]),
                     random_state=11, progressbar=False, cores=1, compiled=compiled)
        draws = res.theta[..., 0]
        assert abs(draws.mean() - mean) <= 4 * mcse(draws, "mean")
        assert abs(draws.std() - sd) <= 4 * mcse(draws, "sd")


def test_polya_gamma_large_shapes_take_the_bounded_path():
    """Draws of PG(h, z) for h up to 10^7 are finite, positive, and the same from the numpy
    entry point and the compiled sampler (one algorithm, one stream of random numbers)."""
    z = np.linspace(0.0, 40.0, 500)
    for h in (9.0, 1e3, 1e7):
        a = polya_gamma(h, z, random_state=4)
        b = polya_gamma_compiled(np.full(z.shape, h), z, 4)
        assert np.all(np.isfinite(a) & (a > 0))
        np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------------ blocks of sweeps
def test_block_size_follows_the_time_per_sweep():
    """The compiled chain's blocks aim at BLOCK_SECONDS: slow sweeps give one-sweep
    blocks, fast ones grow (at most doubling) up to the cap."""
    assert next_block(50, 50 * 10.0) == 1
    assert next_block(4, 4 * BLOCK_SECONDS / 2) == 2
    assert next_block(4, 4 * BLOCK_SECONDS / 1000) == 8
    assert next_block(1000, 1e-6) == 1000


def _signal_mid_run(script, args=(), sig=signal.SIGINT, after=1.5, timeout=30, env=None):
    """Run ``script`` (a path) with ``args`` in a fresh Python; once it prints ``READY``,
    wait ``after`` seconds, send ``sig`` and wait for the end. Returns ``(stdout, stderr,
    seconds from the signal to the end, return code)``; the process never outlives it."""
    proc = subprocess.Popen([sys.executable, str(script), *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline()
        assert line.strip() == "READY", (line, proc.stderr.read() if proc.poll() else "")
        time.sleep(after)
        assert proc.poll() is None
        sent = time.perf_counter()
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=timeout)
        return out, err, time.perf_counter() - sent, proc.returncode
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


_INTERRUPT_SCRIPT = textwrap.dedent("""
    import sys, numpy as np
    from bayesdrop import DropoutLogisticRegression, LogisticLoss, Dropout, Problem
    from bayesdrop.samplers import sample
    from bayesdrop.solvers import fit_problem
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1500, 30))
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=1500) > 0, 1, -1)
    kind, cores = sys.argv[1], int(sys.argv[2])
    problem = Problem.create(X, y.astype(float), LogisticLoss(1e5), Dropout(0.3))
    theta = fit_problem(problem).theta
    kw = dict(draws=10**7, tune=5, chains=2, theta_hat=theta, progressbar=False, cores=cores,
              random_state=0)
    if kind == "python":
        kw["compiled"] = False
    sample(problem, draws=2, tune=1, chains=1, theta_hat=theta, progressbar=False,
           compiled=kw.get("compiled", "auto"))  # compile before the clock
    print("READY", flush=True)
    try:
        res = sample(problem, **kw)
    except KeyboardInterrupt:
        print("INTERRUPTED-IN-TUNING", flush=True)
    else:
        print("RETURNED", res.theta.shape[1], res.interrupted, flush=True)
""")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("kind,cores", [("compiled", 1), ("compiled", 2), ("python", 2)])
def test_signals_stop_sampling_within_two_seconds(tmp_path, sig, kind, cores):
    """SIGINT / SIGTERM delivered mid-run (C = 10^5: Polya-Gamma shapes 2 x 10^5, a run of
    10^7 draws) end the call within 2 s: SIGINT returns the draws so far, SIGTERM ends the
    process."""
    script = tmp_path / "run.py"
    script.write_text(_INTERRUPT_SCRIPT)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    out, err, waited, returncode = _signal_mid_run(script, (kind, cores), sig, env=env)
    assert waited < 2.0, (waited, err[-2000:])
    if sig == signal.SIGINT:
        assert "RETURNED" in out, (returncode, out, err[-2000:])
        n_kept, interrupted = out.split("RETURNED")[1].split()
        assert int(n_kept) > 0 and interrupted == "True"
    else:
        assert returncode == -signal.SIGTERM


def _small_logistic():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(120, 4))
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=120) > 0, 1.0, -1.0)
    problem = Problem.create(X, y, LogisticLoss(1.0), NoNoise())
    return problem, fit_problem(problem).theta


def _sigint_self(times=1):
    """Deliver a real SIGINT to this process and let its handler run (between two
    bytecodes of this thread)."""
    for _ in range(times):
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):
            time.sleep(0)


def _sigint_after_tuning(monkeypatch, tune, times=1):
    """Patch the progress bar so that, once the chains are past ``tune`` sweeps each (two
    chains), this process gets ``times`` real SIGINTs (:func:`_sigint_self`); returns the
    list that records the progress count at which they were sent."""
    from bayesdrop import _progress

    real_update, sent = _progress.ProgressBar.update, []

    def update(self, n):
        if n > 2 * tune and not sent:
            sent.append(n)
            _sigint_self(times)
        return real_update(self, n)

    monkeypatch.setattr(_progress.ProgressBar, "update", update)
    return sent


_RUNNERS = [("threads", {"cores": 2}), ("processes", {"cores": 2, "compiled": False}),
            ("sequence", {"cores": 1})]


@pytest.mark.parametrize("runner,kw", _RUNNERS, ids=[r[0] for r in _RUNNERS])
def test_a_real_sigint_mid_run_returns_the_draws_so_far(runner, kw, monkeypatch):
    """A SIGINT delivered to the sampling process (in the progress update, while the
    chains run) stops every chain at its next block: the draws so far come back, equal in
    number per chain (in sequence: the first chain's, the second never starts), with
    ``interrupted`` and the warning; the SIGINT handler in place before the call is in
    place after it."""
    problem, theta = _small_logistic()
    sent = _sigint_after_tuning(monkeypatch, 40)
    before = signal.getsignal(signal.SIGINT)
    try:
        with pytest.warns(RuntimeWarning, match="interrupted"):
            res = sample(problem, draws=10**6, tune=40, chains=2, theta_hat=theta,
                         random_state=0, progressbar=False, **kw)
    except KeyboardInterrupt:
        pytest.fail("the SIGINT escaped as KeyboardInterrupt")
    assert sent and res.interrupted
    assert res.theta.shape[0] == (1 if runner == "sequence" else 2)
    assert 0 < res.theta.shape[1] < 10**6
    assert np.all(np.isfinite(res.theta))
    assert signal.getsignal(signal.SIGINT) is before


@pytest.mark.parametrize("runner,kw", _RUNNERS, ids=[r[0] for r in _RUNNERS])
def test_a_sigint_after_the_last_sweep_loses_no_draw(runner, kw, monkeypatch):
    """A SIGINT that arrives after the chains have finished (here: as the progress bar
    closes) returns every draw, not interrupted -- it used to raise KeyboardInterrupt out
    of ``sample`` and lose them all."""
    from bayesdrop import _progress

    problem, theta = _small_logistic()
    real_exit = _progress.ProgressBar.__exit__

    def exit_(self, *exc):
        _sigint_self()
        return real_exit(self, *exc)

    monkeypatch.setattr(_progress.ProgressBar, "__exit__", exit_)
    try:
        res = sample(problem, draws=30, tune=10, chains=2, theta_hat=theta, random_state=0,
                     progressbar=False, **kw)
    except KeyboardInterrupt:
        pytest.fail("the SIGINT escaped as KeyboardInterrupt and the draws were lost")
    assert not res.interrupted and res.theta.shape == (2, 30, 5)
    undisturbed = sample(problem, draws=30, tune=10, chains=2, theta_hat=theta,
                         random_state=0, progressbar=False, **kw)
    np.testing.assert_array_equal(res.theta, undisturbed.theta)


_LOCK_SCRIPT = textwrap.dedent("""
    import os, signal, sys, time
    import concurrent.futures._base as base
    import numpy as np
    from bayesdrop import LogisticLoss, NoNoise, Problem
    from bayesdrop.samplers import sample
    from bayesdrop.solvers import fit_problem

    real_enter, sent = base._AcquireFutures.__enter__, []

    def enter(self):  # the worst moment: one future's lock taken, the others not yet
        if len(sent) == 0 and len(self.futures) > 1:
            first = sorted(self.futures, key=id)[0]
            first._condition.acquire()
            sent.append(1)
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):
                time.sleep(0)  # the handler runs here
            first._condition.release()
        return real_enter(self)

    base._AcquireFutures.__enter__ = enter
    rng = np.random.default_rng(3)
    X = rng.normal(size=(120, 4))
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=120) > 0, 1.0, -1.0)
    problem = Problem.create(X, y, LogisticLoss(1.0), NoNoise())
    theta = fit_problem(problem).theta
    kw = dict(cores=2) if sys.argv[1] == "threads" else dict(cores=2, compiled=False)
    res = sample(problem, draws=10**6, tune=0, chains=2, theta_hat=theta, random_state=0,
                 progressbar=False, **kw)
    print("RETURNED", res.interrupted, res.theta.shape[1] > 0, flush=True)
""")


@pytest.mark.parametrize("runner", ["threads", "processes"])
def test_a_sigint_while_a_lock_is_half_taken_does_not_hang(tmp_path, runner):
    """The hang behind a SIGINT: ``concurrent.futures.wait`` takes the futures' locks one
    by one; a ``KeyboardInterrupt`` raised after the first left it taken for good, and
    the chain finishing next blocked on it (the runner never returned). Here the SIGINT
    is delivered at exactly that point (in a fresh process: a hang ends in the timeout):
    the call returns the draws so far."""
    script = tmp_path / "run.py"
    script.write_text(_LOCK_SCRIPT)
    proc = subprocess.run([sys.executable, str(script), runner], capture_output=True,
                          text=True, timeout=60, check=False)
    assert "RETURNED True True" in proc.stdout, (proc.returncode, proc.stderr[-2000:])


def test_a_second_sigint_raises_keyboard_interrupt(monkeypatch):
    """Ctrl-C twice: the second goes to Python's handler, ``KeyboardInterrupt`` at once
    (for a user who does not want to wait for the next block)."""
    problem, theta = _small_logistic()
    sent = _sigint_after_tuning(monkeypatch, 40, times=2)
    with pytest.raises(KeyboardInterrupt):
        sample(problem, draws=10**6, tune=40, chains=2, theta_hat=theta, random_state=0,
               progressbar=False, cores=2)
    assert sent and signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_sampling_outside_the_main_thread_leaves_sigint_alone():
    """``signal.signal`` works in the main thread only: a sample run in another thread
    (a notebook's background job) runs as before, and the handler is untouched."""
    from concurrent.futures import ThreadPoolExecutor

    problem, theta = _small_logistic()
    with ThreadPoolExecutor(1) as pool:
        res = pool.submit(sample, problem, draws=20, tune=5, chains=2, theta_hat=theta,
                          random_state=0, progressbar=False, cores=2).result()
    assert res.theta.shape == (2, 20, 5) and not res.interrupted
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def _interrupt_problem(monkeypatch, which):
    """Raise KeyboardInterrupt (as Ctrl-C does) in the progress update of the
    ``which``-th ``sample`` call (0-based), once its chains are well past tuning (0.2 s
    and 4000 sweeps in: chains in threads report in blocks, one may lag the other);
    returns the list of the calls' numbers of sweeps reported."""
    from bayesdrop import _progress

    real_enter, real_update, calls = (_progress.ProgressBar.__enter__,
                                      _progress.ProgressBar.update, [])

    def enter(self):
        calls.append(0)
        self._call, self._t0 = len(calls) - 1, time.perf_counter()
        return real_enter(self)

    def update(self, n):
        calls[self._call] = n
        if (self._call == which and n > 4000 and time.perf_counter() - self._t0 > 0.2
                and not getattr(self, "_sent", False)):
            self._sent = True
            raise KeyboardInterrupt
        return real_update(self, n)

    monkeypatch.setattr(_progress.ProgressBar, "__enter__", enter)
    monkeypatch.setattr(_progress.ProgressBar, "update", update)
    return calls


def _three_classes():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(150, 3))
    y = np.argmax(X + 0.5 * rng.normal(size=(150, 3)), axis=1)
    return X, y, DropoutLogisticRegression().fit(X, y)


@pytest.mark.parametrize("cores", [1, 2])
def test_ctrl_c_in_the_last_class_returns_every_class_cut_to_one_shape(cores, monkeypatch):
    """One-vs-rest posteriors are sampled class after class. A Ctrl-C in the last class
    returns the InferenceData of every class, each cut to the draws (and, in sequence,
    the chains) the last one has -- it used to end in a numpy broadcasting error."""
    X, y, clf = _three_classes()
    calls = _interrupt_problem(monkeypatch, 2)
    with pytest.warns(RuntimeWarning, match="interrupted"):
        idata = clf.sample_posterior(X, y, draws=3 * 10**4, tune=30, chains=2, cores=cores,
                                     progressbar=False, random_state=0,
                                     log_likelihood=False)  # (3 x 10^7 values otherwise)
    coef = idata.posterior["coef"]
    assert len(calls) == 3 and calls[0] == calls[1] == 2 * (30 + 3 * 10**4)  # whole chains
    chains = 1 if cores == 1 else 2  # in sequence the second chain never started
    assert coef.shape[:2] == (chains, idata.sample_stats["lp"].shape[1])
    assert 0 < coef.shape[1] < 3 * 10**4 and coef.shape[2:] == (3, 3)
    assert idata.sample_stats.attrs["interrupted"] == 1
    assert np.all(np.isfinite(coef.values))


def test_ctrl_c_in_an_earlier_class_raises_at_once(monkeypatch):
    """A Ctrl-C in the first of three classes: the later classes would have no draws,
    so ``KeyboardInterrupt`` is raised without sampling them (before: they ran their
    whole chains, then the call failed)."""
    X, y, clf = _three_classes()
    calls = _interrupt_problem(monkeypatch, 0)
    with pytest.warns(RuntimeWarning, match="interrupted"), \
            pytest.raises(KeyboardInterrupt, match="problem 1 of 3"):
        clf.sample_posterior(X, y, draws=10**5, tune=30, chains=2, progressbar=False,
                             random_state=0, log_likelihood=False)
    assert len(calls) == 1  # the second and third classes were not sampled


_LATENT_FIT_SCRIPT = textwrap.dedent("""
    import numpy as np
    from bayesdrop import DropoutLatentLogisticRegression
    rng = np.random.default_rng(0)
    X = rng.normal(size=(5000, 50))
    y = (X[:, 0] * X[:, 1] + 0.3 * rng.normal(size=5000) > 0).astype(int)
    DropoutLatentLogisticRegression(noise_level=0.2, n_hidden=20, random_state=0,
                                    max_iter=20, tol=1e-14).fit(X[:200], y[:200])  # compile
    print("READY", flush=True)
    try:
        DropoutLatentLogisticRegression(noise_level=0.2, n_hidden=20, random_state=0,
                                        max_iter=10**6, tol=1e-14).fit(X, y)
    except KeyboardInterrupt:
        print("INTERRUPTED", flush=True)
    else:
        print("FINISHED", flush=True)
""")


def test_sigint_stops_a_latent_fit_within_two_seconds(tmp_path):
    """The latent models' compiled L-BFGS returns to Python between blocks of about
    0.1 s (``bayesdrop._blocks``): a SIGINT mid-fit raises ``KeyboardInterrupt`` within
    2 s. Before, the whole fit (up to ``max_iter`` iterations) ran in one compiled call
    and ignored Ctrl-C for minutes."""
    script = tmp_path / "fit.py"
    script.write_text(_LATENT_FIT_SCRIPT)
    out, err, waited, _ = _signal_mid_run(script, after=1.5, timeout=60)  # in the L-BFGS
    assert "INTERRUPTED" in out, (out, err[-2000:])
    assert waited < 2.0, waited


_CG_SOLVE_SCRIPT = textwrap.dedent("""
    import numpy as np, scipy.sparse as sp
    from bayesdrop import Design, Dropout
    from bayesdrop.linalg import wls
    rng = np.random.default_rng(0)
    X = sp.random(20000, 5000, density=0.002, format="csr", random_state=1)
    design = Design(X, Dropout(0.01), True)
    rho = 10.0 ** rng.uniform(-8, 8, size=20000)  # ill-conditioned: a long CG solve
    t = rng.normal(size=20000)
    wls.solve(design, rho, t, linalg="cg", cg_tol=1e-3)  # compiles
    print("READY", flush=True)
    try:
        wls.solve(design, rho, t, linalg="cg", cg_tol=1e-300, cg_maxiter=10**6)
    except KeyboardInterrupt:
        print("INTERRUPTED", flush=True)
    else:
        print("FINISHED", flush=True)
""")


def test_sigint_stops_a_long_compiled_cg_solve_within_two_seconds(tmp_path):
    """The compiled CG of CSR designs (IRLS, the sampler's primal system, Newton-CG's
    Python loop: ``kernels.csr_pcg_blocks``) returns to Python between blocks of about
    0.1 s: a SIGINT during a solve of up to 10^6 products raises ``KeyboardInterrupt``
    within 2 s. Before, the solve ran in one compiled call (a zero-noise SVC on a
    300000 x 100000 text-like design ignored Ctrl-C for over 90 s)."""
    script = tmp_path / "solve.py"
    script.write_text(_CG_SOLVE_SCRIPT)
    out, err, waited, _ = _signal_mid_run(script, after=1.0, timeout=60)
    assert "INTERRUPTED" in out, (out, err[-2000:])
    assert waited < 2.0, waited


# ------------------------------------------------------------- wide sparse, no D x D
@pytest.mark.parametrize("Est", [DropoutLogisticRegression, DropoutSVC])
def test_wide_sparse_sampling_memory_is_linear(Est):
    """D = 10^5 features, 200 rows: sampling allocates O(nnz + N + D) -- under 100 MB
    (one dense N x D copy would be 160 MB, a D x D matrix 80 GB)."""
    X = sp.random(200, 100_000, density=0.001, format="csr", random_state=0)
    y = np.array([0, 1] * 100)
    est = Est().fit(X, y)
    kw = dict(draws=5, tune=5, chains=2, progressbar=False, random_state=0)
    est.sample_posterior(X, y, **kw)  # compile outside the measurement
    tracemalloc.start()
    try:
        idata = est.sample_posterior(X, y, **kw)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert idata.posterior["coef"].shape == (2, 5, 100_000)
    assert peak < 100e6, peak


# ------------------------------------------------------------------ latent defaults
@pytest.mark.parametrize("Est", [DropoutLatentSVC, DropoutLatentLogisticRegression])
def test_latent_models_sample_at_their_defaults(Est):
    """``max_iter=None`` (the default) used to reach the output layer's solver; the
    conditional posterior's mode is the fitted output layer's (same J to 1e-8)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 4))
    y = np.where(X[:, 0] > 0, 1, -1)
    est = Est(random_state=0, n_hidden=5).fit(X, y)
    idata = est.sample_posterior(X, y, draws=20, tune=10, chains=1, progressbar=False,
                                 random_state=0)
    assert idata.posterior["coef"].shape == (1, 20, 5)
    assert np.all(np.isfinite(idata.sample_stats["lp"].values))
    mode_lp = float(idata.mode["lp"].values)
    fitted_J = float(np.ravel(est.objective_)[-1])
    assert mode_lp >= -fitted_J - 1e-8 * abs(fitted_J)
