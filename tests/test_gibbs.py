"""Correctness of the Gibbs sampler: its draws must follow exp(-J).

References are independent of the sampler: numerical quadrature of exp(-J) on a grid
(1-D and 2-D problems), importance sampling with a Student-t proposal (multi-D), and a
Geweke joint-distribution test (logistic model with its Gaussian prior).
Tolerances are 4 Monte Carlo standard errors (ArviZ's MCSE of the mean and of the sd).
"""

import time
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import expit, logsumexp

from bayesdrop import (
    Dropout,
    EpsilonInsensitiveLoss,
    HingeLoss,
    LogisticLoss,
    NoNoise,
    Problem,
)
from bayesdrop.samplers import gibbs, sample
from bayesdrop.solvers import irls
from bayesdrop._arviz import mcse, rhat

from .conftest import sparse_counts


def _mcse(draws):
    """MCSE of the mean and of the sd for draws of shape (chain, draw)."""
    return mcse(draws, "mean"), mcse(draws, "sd")


def _grid_J(problem, W, B):
    """J on a grid of (w, b) for a one-feature problem (vectorised over the grid)."""
    x = np.asarray(problem.design.X.todense() if sp.issparse(problem.design.X)
                   else problem.design.X)[:, 0]
    v = problem.design.variance.rows()[:, 0] if not problem.design.variance.is_zero \
        else np.zeros_like(x)
    m = W[..., None] * x + B[..., None]
    s = (W[..., None] ** 2) * v
    value, _, _ = problem.loss.terms(m, s, problem.y)
    return W**2 + value.sum(axis=-1)


def _one_feature_problem(loss, noise, fit_intercept, seed=0, n=25):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n) + 0.5
    if loss.binary:
        y = np.where(x - 0.3 + rng.normal(size=n) > 0, 1.0, -1.0)
    else:
        y = 0.8 * x + 0.3 + 0.4 * rng.normal(size=n)
    return Problem.create(x[:, None], y, loss, noise, fit_intercept)


LOSSES = [
    HingeLoss(0.7),
    LogisticLoss(0.35),  # h = 0.7: the fractional Polya-Gamma draw only
    LogisticLoss(1.35),  # h = 2.7: devroye + fraction
    EpsilonInsensitiveLoss(0.8, epsilon=0.2),
]


@pytest.mark.parametrize("noise", [NoNoise(), Dropout(0.4)], ids=repr)
@pytest.mark.parametrize("loss", LOSSES, ids=repr)
@pytest.mark.parametrize("fit_intercept", [False, True], ids=["1d", "2d"])
def test_moments_match_quadrature(loss, noise, fit_intercept):
    """The default sampler (the compiled sweep with its intercept move and the scheduled
    independence MH moves where they apply) against quadrature of ``exp(-J)``."""
    _check_quadrature(_one_feature_problem(loss, noise, fit_intercept), fit_intercept)


@pytest.mark.parametrize("loss", [LogisticLoss(1.35), HingeLoss(0.7)], ids=repr)
def test_fixed_number_of_mh_moves_matches_quadrature(loss):
    """Four independence MH moves after every Gibbs sweep (``mh=4``, in tuning and kept
    sweeps alike) still sample ``exp(-J)``: moments against quadrature."""
    problem = _one_feature_problem(loss, Dropout(0.4), True)
    res = _check_quadrature(problem, True, mh=4)
    assert np.all(res.mh_moves == 4) and np.all(res.mh_accept > 0.05)


def _check_quadrature(problem, fit_intercept, **kw):
    theta_hat = irls.fit(problem, None).theta
    res = sample(problem, draws=2500, tune=200, chains=2, theta_hat=theta_hat,
                 random_state=123, progressbar=False, cores=1, **kw)
    _match_quadrature(problem, theta_hat, res.theta, fit_intercept)
    return res


def _match_quadrature(problem, theta_hat, theta, fit_intercept):
    """Means and sds of draws ``theta`` (chain, draw, parameter) within 4 MCSE of
    quadrature of exp(-J) on a grid around the mode wide enough for the tails; returns
    the grid's weights."""
    w0 = theta_hat[0]
    ws = np.linspace(w0 - 4, w0 + 4, 1601)
    if fit_intercept:
        bs = np.linspace(theta_hat[1] - 5, theta_hat[1] + 5, 801)
        W, B = np.meshgrid(ws, bs, indexing="ij")
    else:
        W, B = ws, np.zeros_like(ws)
    logp = -_grid_J(problem, W, B)
    p = np.exp(logp - logsumexp(logp))
    assert p[..., [0, -1]].max() < 1e-12  # the grid holds the mass
    for k, coord in enumerate([W, B][: 1 + fit_intercept]):
        mean = np.sum(p * coord)
        sd = np.sqrt(np.sum(p * (coord - mean) ** 2))
        draws = theta[..., k]
        se_mean, se_sd = _mcse(draws)
        assert abs(draws.mean() - mean) <= 4 * se_mean, (k, draws.mean(), mean, se_mean)
        assert abs(draws.std() - sd) <= 4 * se_sd, (k, draws.std(), sd, se_sd)
    return p


def _batched_J(problem, thetas, V):
    """J for many theta at once (dense X and dense variances V)."""
    design = problem.design
    X = design.X.toarray() if sp.issparse(design.X) else design.X
    W = thetas[:, : design.n_features]
    M = W @ X.T + (thetas[:, -1:] if design.fit_intercept else 0.0)
    S = (W * W) @ V.T
    value, _, _ = problem.loss.terms(M, S, problem.y)
    return np.sum(W * W, axis=1) + value.sum(axis=1)


@pytest.mark.parametrize("loss", [HingeLoss(0.4), LogisticLoss(0.8),
                                  EpsilonInsensitiveLoss(0.6, epsilon=0.3)], ids=repr)
def test_multidimensional_posterior_matches_importance_sampling(loss, small_problem_data):
    """Posterior means and sds of all 6 parameters against self-normalised importance
    sampling from a Student-t(5) proposal centred at the IRLS mode."""
    X, y, yr = small_problem_data
    X, y, yr = X[:60], y[:60], yr[:60]
    noise = Dropout(0.3)
    problem = Problem.create(X, y if loss.binary else yr, loss, noise, True)
    theta_hat = irls.fit(problem, None).theta
    # plain Gibbs here (the other tests run the default over-relaxed Gaussian step)
    res = sample(problem, draws=3000, tune=200, chains=2, theta_hat=theta_hat,
                       random_state=5, progressbar=False, cores=1, overrelax=0.0)
    # proposal: t(5) with the covariance of the IRLS system at the mode, inflated
    rho, _ = problem.irls_weights(theta_hat)
    from bayesdrop.linalg.wls import normal_matrix

    cov = 2.0 * np.linalg.inv(normal_matrix(problem.design, rho))
    rng = np.random.default_rng(99)
    n_is, df, p = 200_000, 5.0, theta_hat.shape[0]
    L = np.linalg.cholesky(cov)
    z = rng.standard_normal((n_is, p))
    g = rng.chisquare(df, size=n_is) / df
    thetas = theta_hat + (z @ L.T) / np.sqrt(g)[:, None]
    maha = np.sum(np.linalg.solve(L, (thetas - theta_hat).T) ** 2, axis=0)
    log_q = -0.5 * (df + p) * np.log1p(maha / df)
    V = noise.feature_variance_values(X)
    log_w = -_batched_J(problem, thetas, V) - log_q
    wts = np.exp(log_w - logsumexp(log_w))
    assert 1.0 / np.sum(wts**2) > 0.2 * n_is  # a good proposal
    mean_is = wts @ thetas
    var_is = wts @ (thetas - mean_is) ** 2
    # delta-method standard errors of the self-normalised estimates
    w2 = (wts**2)[:, None]
    se_mean_is = np.sqrt(np.sum(w2 * (thetas - mean_is) ** 2, axis=0))
    se_var_is = np.sqrt(np.sum(w2 * ((thetas - mean_is) ** 2 - var_is) ** 2, axis=0))
    for k in range(p):
        draws = res.theta[..., k]
        se_mean, se_sd = _mcse(draws)
        tol_mean = 4 * np.hypot(se_mean, se_mean_is[k])
        sd_is = np.sqrt(var_is[k])
        tol_sd = 4 * np.hypot(se_sd, se_var_is[k] / (2 * sd_is))
        assert abs(draws.mean() - mean_is[k]) <= tol_mean, k
        assert abs(draws.std() - sd_is) <= tol_sd, k


def test_geweke_joint_distribution_logistic():
    """Geweke (2004): alternating the Gibbs sweep with y ~ p(y | w) leaves the prior of
    w invariant. With C = 1/2 (h = 1) exp(-J) is prior N(0, I/2) times the Bernoulli
    likelihood sigmoid(y x.w), a proper generative model. Test E w = 0 and E w^2 = 1/2."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(8, 2))
    loss = LogisticLoss(0.5)
    y = np.ones(8)
    problem = Problem.create(X, y, loss, NoNoise(), fit_intercept=False)
    w = rng.normal(scale=np.sqrt(0.5), size=2)
    state = gibbs.init(problem, w)
    n = 20_000
    trace = np.empty((n, 2))
    for i in range(n):
        state, _ = gibbs.step(rng, problem, state)
        y = np.where(rng.random(8) < expit(X @ state.theta), 1.0, -1.0)
        problem = problem._replace(y=y)
        state = gibbs.init(problem, state.theta)
        trace[i] = state.theta
    for k in range(2):
        draws = trace[None, :, k]
        se_mean, _ = _mcse(draws)
        assert abs(draws.mean()) <= 4 * se_mean
        sq = draws**2
        se_sq, _ = _mcse(sq)
        assert abs(sq.mean() - 0.5) <= 4 * se_sq


def test_sparse_woodbury_and_cg_chains_agree_with_dense_cholesky():
    X = sparse_counts(n=30, d=45, density=0.2, seed=4)
    y = np.where(np.asarray(X[:, :5].sum(axis=1)).ravel() > 3, 1.0, -1.0)
    means, ses = {}, {}
    for solver, Xin in [("cholesky", X.toarray()), ("woodbury", X), ("cg", X)]:
        problem = Problem.create(Xin, y, LogisticLoss(1.0), Dropout(0.2), True)
        theta_hat = irls.fit(problem, None).theta
        res = sample(problem, draws=800, tune=100, chains=2, theta_hat=theta_hat,
                           random_state=1, progressbar=False, cores=1, linalg=solver)
        means[solver] = res.theta.mean(axis=(0, 1))
        ses[solver] = np.array([_mcse(res.theta[..., k])[0] for k in range(46)])
    for solver in ("woodbury", "cg"):
        z = (means[solver] - means["cholesky"]) / np.hypot(ses[solver], ses["cholesky"])
        assert np.max(np.abs(z)) < 4.5  # 46 comparisons


def test_mode_and_rhat_on_breast_cancer(cancer):
    X, y = cancer
    problem = Problem.create(X, y, LogisticLoss(1.0), Dropout(0.3), True)
    fit = irls.fit(problem, None)
    res = sample(problem, draws=500, tune=100, chains=4, init="overdispersed",
                       theta_hat=fit.theta, random_state=0, progressbar=False, cores=1)
    assert np.max(res.lp) <= -fit.objective[-1]  # IRLS is the mode
    rhats = np.array([rhat(res.theta[..., k]) for k in range(31)])
    assert rhats.max() < 1.01
    # overdispersed starts differ from each other and from the mode
    assert np.all(np.std(res.theta_init, axis=0) > 0)


def test_reproducible_parallel_equals_sequential_and_chains_differ(small_problem_data):
    X, y, _ = small_problem_data
    problem = Problem.create(X, y, HingeLoss(1.0), Dropout(0.2), True)
    theta_hat = irls.fit(problem, None).theta
    kw = dict(draws=50, tune=10, chains=2, theta_hat=theta_hat, progressbar=False)
    a = sample(problem, random_state=7, cores=1, **kw)
    b = sample(problem, random_state=7, cores=2, **kw)
    c = sample(problem, random_state=np.random.SeedSequence(7), cores=1, **kw)
    assert np.array_equal(a.theta, b.theta) and np.array_equal(a.theta, c.theta)
    assert np.array_equal(a.augmentation_mean, b.augmentation_mean)
    assert not np.allclose(a.theta[0], a.theta[1])
    d = sample(problem, random_state=8, cores=1, **kw)
    assert not np.allclose(a.theta, d.theta)


def test_thinning_and_augmentation_traces(small_problem_data):
    X, y, yr = small_problem_data
    problem = Problem.create(X, yr, EpsilonInsensitiveLoss(1.0, 0.1), Dropout(0.2), True)
    theta_hat = irls.fit(problem, None).theta
    kw = dict(tune=5, chains=1, theta_hat=theta_hat, progressbar=False, random_state=3)
    full = sample(problem, draws=20, thin=1, store_augmentation=True, **kw)
    thin = sample(problem, draws=10, thin=2, **kw)
    assert np.array_equal(thin.theta[0], full.theta[0, 1::2])
    assert full.augmentation.shape == (1, 20, 2, 120)
    assert np.allclose(full.augmentation_mean[0], full.augmentation[0].mean(axis=0))
    assert thin.augmentation is None


def test_keyboard_interrupt_returns_draws_so_far(small_problem_data, monkeypatch):
    X, y, _ = small_problem_data
    problem = Problem.create(X, y, LogisticLoss(1.0), NoNoise(), True)
    theta_hat = irls.fit(problem, None).theta
    real_step, calls = gibbs.step, [0]

    def interrupted_step(*args, **kwargs):
        calls[0] += 1
        if calls[0] > 30:
            raise KeyboardInterrupt
        return real_step(*args, **kwargs)

    monkeypatch.setattr(gibbs, "step", interrupted_step)
    with pytest.warns(RuntimeWarning, match="interrupted"):
        res = sample(problem, draws=100, tune=10, chains=3, theta_hat=theta_hat,
                           random_state=0, progressbar=False, cores=1, compiled=False)
    assert res.interrupted and res.theta.shape == (1, 20, 6)


def test_bad_arguments(small_problem_data):
    X, y, _ = small_problem_data
    problem = Problem.create(X, y, LogisticLoss(1.0), NoNoise(), True)
    th = np.zeros(6)
    for kw, err, msg in [
        (dict(draws=0), ValueError, "draws"),
        (dict(tune=-1), ValueError, "tune"),
        (dict(chains=0), ValueError, "chains"),
        (dict(thin=0), ValueError, "thin"),
        (dict(draws=1.5), TypeError, "draws"),
        (dict(cores=0), ValueError, "cores"),
        (dict(init="random"), ValueError, "init"),
        (dict(init=np.zeros(3)), ValueError, "init array"),
        (dict(init=np.full(6, np.nan)), ValueError, "init contains NaN"),
        (dict(linalg="lu"), ValueError, "linalg"),
        (dict(overrelax=-1.0), ValueError, "overrelax"),
        (dict(random_state=np.random.RandomState(0)), TypeError, "random_state"),
        (dict(random_state=-3), ValueError, "random_state"),
    ]:
        with pytest.raises(err, match=msg):
            sample(problem, **{"theta_hat": th, "progressbar": False, "cores": 1, **kw})
    with pytest.raises(ValueError, match="needs the point estimate"):
        sample(problem, progressbar=False)


def test_progress_bar_quiet_under_ci(monkeypatch, capsys):
    from bayesdrop._progress import ProgressBar, progress_enabled

    monkeypatch.setenv("CI", "true")
    assert not progress_enabled(True)
    monkeypatch.delenv("CI")
    assert progress_enabled(True) and not progress_enabled(False)
    with ProgressBar(10, enabled=True, description="t") as bar:
        bar.update(10)
    err = capsys.readouterr().err
    assert "10/10" in err and err.count("10/10") == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with ProgressBar(5, enabled=False) as bar:
            bar.update(5)
    assert capsys.readouterr().err == ""


def test_keyboard_interrupt_in_parallel_stops_every_chain(small_problem_data, monkeypatch):
    """Ctrl-C in the parent (simulated in the progress-bar update of the polling loop)
    sets the stop event; every worker returns its draws so far, trimmed to a common length."""
    from bayesdrop import _progress

    X, y, _ = small_problem_data
    problem = Problem.create(X, y, LogisticLoss(1.0), NoNoise(), True)
    theta_hat = irls.fit(problem, None).theta
    real_update, fired = _progress.ProgressBar.update, [False]

    def update(self, n):
        if n > 200 and not fired[0]:
            fired[0] = True
            raise KeyboardInterrupt
        return real_update(self, n)

    monkeypatch.setattr(_progress.ProgressBar, "update", update)
    t0 = time.perf_counter()
    with pytest.warns(RuntimeWarning, match="interrupted"):
        res = sample(problem, draws=10**6, tune=10, chains=2, theta_hat=theta_hat,
                           random_state=0, progressbar=False, cores=2)
    assert fired[0] and res.interrupted
    assert time.perf_counter() - t0 < 60  # the workers stopped long before 10**6 draws
    assert res.theta.shape[0] == 2 and 0 < res.theta.shape[1] < 10**6
    assert np.all(np.isfinite(res.theta))


@pytest.mark.parametrize("loss", [HingeLoss(3.0), EpsilonInsensitiveLoss(3.0, epsilon=0.2)],
                         ids=repr)
def test_slice_moves_alone_sample_exp_minus_J(loss):
    """The compiled dense sweep's slice moves at zero noise
    (:func:`bayesdrop.samplers._gibbs_dense._slice_moves` along
    :func:`bayesdrop.samplers.schedule.slice_directions`), run alone -- no Gibbs step --
    from the mode: moments against quadrature of ``exp(-J)`` (4 MCSE), on a problem
    whose kinks shape the posterior (``C = 3``)."""
    from bayesdrop.samplers._gibbs_dense import _slice_moves
    from bayesdrop.samplers.compiled import compiled_setup
    from bayesdrop.samplers.schedule import slice_directions

    problem = _one_feature_problem(loss, NoNoise(), True)
    theta_hat = irls.fit(problem, None).theta
    setup = compiled_setup(problem)
    V, U, widths = slice_directions(problem, setup, theta_hat)
    n = problem.design.n_samples
    draws = np.empty((2, 4000, 2))
    for c in range(2):
        rng = np.random.default_rng(40 + c)
        theta = theta_hat.copy()
        m, s = setup["Xb"] @ theta, np.zeros(n)
        stats = np.zeros(2)
        for k in range(draws.shape[1]):
            _slice_moves(setup["lp"], setup["D"], setup["y"], setup["sw"], theta, m, s, V,
                         U, widths, rng, stats, np.empty(n), np.zeros(n))
            m = setup["Xb"] @ theta
            draws[c, k] = theta
        assert stats[1] == draws.shape[1] * V.shape[1]  # every direction, every iteration
    p = _match_quadrature(problem, theta_hat, draws, True)
    assert p[[0, -1], :].max() < 1e-12  # the grid holds the mass in w too


@pytest.mark.parametrize("loss", [HingeLoss(3.0), EpsilonInsensitiveLoss(3.0, epsilon=0.2)],
                         ids=repr)
def test_sparse_slice_moves_alone_sample_exp_minus_J(loss, monkeypatch):
    """The compiled sparse sweep's slice moves at zero noise
    (:func:`bayesdrop.samplers._gibbs_sparse.dual_slice_moves` along the dual directions
    of :func:`bayesdrop.samplers.schedule.slice_directions`), run alone -- no Gibbs step
    -- on a wide CSR problem of two examples (one repeated with another label or target, so
    that ``K`` is singular and a direction moves both scores) and one other: the moves
    stay on the plane ``theta_0 + row space of Xbar``, where ``exp(-J)`` is a law of the
    two independent scores; their means and sds against quadrature of ``J``
    (``Problem.objective``) on that plane, 4 MCSE, and each example's ``theta`` change
    must lie in the row space."""
    from bayesdrop.linalg import wls
    from bayesdrop.samplers._gibbs_sparse import dual_slice_moves
    from bayesdrop.samplers.compiled import compiled_setup
    from bayesdrop.samplers.schedule import slice_directions

    monkeypatch.setattr(wls, "MAX_CHOLESKY_PARAMS", 2)
    rng = np.random.default_rng(5)
    x1 = np.array([0.9, 0.0, -0.6, 0.4, 0.0])
    x2 = np.array([0.0, 0.7, 0.5, 0.0, -0.8])
    X = sp.csr_matrix(np.vstack([x1, x1, x2]))
    y = np.array([1.0, -1.0, -1.0]) if isinstance(loss, HingeLoss) else np.array(
        [0.5, 1.5, -0.4])
    problem = Problem.create(X, y, loss, NoNoise(), sample_weight=[1.0, 2.0, 1.0])
    setup = compiled_setup(problem)
    assert setup is not None and setup["kind"] == "csr"
    Ct, ones, pen2, widths, uptr, uidx, uval = slice_directions(problem, setup, None)
    assert Ct.shape[0] == 3 and np.diff(uptr).max() == 2  # the duplicates move together
    theta0 = np.concatenate([rng.normal(size=5), [0.3]])
    Xb = np.hstack([X.toarray(), np.ones((3, 1))])
    basis = np.linalg.svd(Xb)[2][:2]  # the row space of Xbar (rank 2)
    n_draws = 6000
    scores = np.empty((2, n_draws, 2))
    for c in range(2):
        g = np.random.default_rng(60 + c)
        theta = theta0.copy()
        stats = np.zeros(2)
        for k in range(n_draws):
            m = Xb @ theta
            dual_slice_moves(setup["lp"], setup["y"], setup["sw"], setup["indptr"],
                             setup["indices"], setup["xdata"], 5, True, theta, m, Ct,
                             ones, pen2, widths, uptr, uidx, uval, g, stats, np.empty(3),
                             np.empty(3), np.empty((5, 2)))
            scores[c, k] = (Xb @ theta)[[0, 2]]
        moved = theta - theta0
        assert np.allclose(moved - basis.T @ (basis @ moved), 0.0, atol=1e-9)
        assert stats[1] == 3 * n_draws
    # quadrature on the plane theta = theta0 + Xbar^T a, in the scores (m_1, m_3)
    A = Xb[[0, 2]]
    m0 = A @ theta0
    G = A @ A.T
    grid = [np.linspace(m0[j] - 8.0, m0[j] + 8.0, 321) for j in range(2)]
    M1, M3 = np.meshgrid(*grid, indexing="ij")
    diff = np.stack([M1.ravel(), M3.ravel()], axis=1) - m0
    thetas = theta0 + np.linalg.solve(G, diff.T).T @ A
    logp = -np.array([problem.objective(t) for t in thetas]).reshape(M1.shape)
    prob = np.exp(logp - logsumexp(logp))
    assert max(prob[[0, -1]].max(), prob[:, [0, -1]].max()) < 1e-10  # the mass is held
    for j, coord in enumerate([M1, M3]):
        mean = np.sum(prob * coord)
        sd = np.sqrt(np.sum(prob * (coord - mean) ** 2))
        se_mean, se_sd = _mcse(scores[..., j])
        assert abs(scores[..., j].mean() - mean) <= 4 * se_mean, (j, mean)
        assert abs(scores[..., j].std() - sd) <= 4 * se_sd, (j, sd)


def test_wide_sparse_zero_noise_hinge_mixes_at_large_C():
    """A wide CSR problem (120 x 3000, the compiled sparse sweep), hinge at zero noise,
    ``C = 100``: the Gibbs sweep alone gave a least ESS of 88 of 2 x 1000 (R-hat 1.019,
    41 parameters below 400); with the slice moves along the rows' dual basis every
    parameter has R-hat <= 1.01 and at least 400 effective draws (2591 measured)."""
    from bayesdrop._arviz import ess
    from bayesdrop.solvers import fit_problem

    rng = np.random.default_rng(0)
    X = sp.random(120, 3000, density=0.02, format="csr", random_state=1)
    y = np.where(X @ rng.normal(size=3000) + 0.3 * rng.normal(size=120) > 0, 1.0, -1.0)
    problem = Problem.create(X, y, HingeLoss(100.0), NoNoise())
    theta_hat = fit_problem(problem).theta
    res = sample(problem, draws=1000, tune=500, chains=2, theta_hat=theta_hat,
                 random_state=0, progressbar=False, cores=1)
    assert all(moves.slice is not None and moves.slice[0].shape[0] == 120
               for moves in res.last_state.moves)
    for k in range(res.theta.shape[-1]):
        assert rhat(res.theta[..., k]) <= 1.01, k
        assert ess(res.theta[..., k]) >= 400, k


def test_zero_noise_hinge_mixes_at_large_C():
    """Breast cancer (standardised), hinge at zero noise, ``C = 100``: the augmented Gibbs
    sweep alone gave 5 effective draws of 4000 (R-hat 1.33); the schedule adds the slice
    moves along the kink examples' dual basis, and every coefficient has R-hat <= 1.01
    and at least 400 effective draws of 2 x 1000."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.preprocessing import StandardScaler

    from bayesdrop._arviz import ess

    X, y = load_breast_cancer(return_X_y=True)
    problem = Problem.create(StandardScaler().fit_transform(X), 2.0 * y - 1.0,
                             HingeLoss(100.0), NoNoise())
    from bayesdrop.solvers import fit_problem

    theta_hat = fit_problem(problem).theta
    res = sample(problem, draws=1000, tune=500, chains=2, theta_hat=theta_hat,
                 random_state=0, progressbar=False, cores=1)
    assert all(moves.slice is not None for moves in res.last_state.moves)
    for k in range(res.theta.shape[-1]):
        assert rhat(res.theta[..., k]) <= 1.01, k
        assert ess(res.theta[..., k]) >= 400, k
