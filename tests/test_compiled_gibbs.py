"""The compiled Gibbs sweep (samplers/_gibbs_dense.py): its Polya-Gamma sampler,
its agreement in distribution with the Python kernel, threads == sequence, lp == -J."""

import numpy as np
import pytest
from polyagamma import random_polyagamma
from scipy import stats

from bayesdrop import (
    Dropout,
    EpsilonInsensitiveLoss,
    HingeLoss,
    LogisticLoss,
    Problem,
)
from bayesdrop._arviz import mcse
from bayesdrop.samplers import sample
from bayesdrop.model.pg_compiled import polya_gamma_compiled
from bayesdrop.linalg.kernels import row_chunks
from bayesdrop.samplers._gibbs_sparse import (
    dual_arrays,
    dual_blocks,
    dual_draw,
    dual_work,
    scores_csr,
    singleton_blocks,
)
from bayesdrop.model.augmentation import polya_gamma_moments
from bayesdrop.samplers.compiled import compiled_setup
from bayesdrop.solvers import fit_problem


@pytest.mark.parametrize("h", [1.0, 2.0, 2.7, 0.4])
@pytest.mark.parametrize("z", [0.0, 0.5, 2.0, 10.0, 40.0])
def test_compiled_polya_gamma_has_exact_moments(h, z):
    n = 60_000
    x = polya_gamma_compiled(np.full(n, h), np.full(n, z), random_state=7)
    mean, var = polya_gamma_moments(h, z)
    assert abs(x.mean() - mean) < 4 * np.sqrt(var / n)
    se_var = np.sqrt(np.var((x - x.mean()) ** 2) / n)
    assert abs(x.var() - var) < 4 * se_var


@pytest.mark.parametrize("z", [0.0, 1.5, 6.0])
def test_compiled_pg_of_shape_one_matches_polyagamma_devroye_in_law(z):
    n = 40_000
    ours = polya_gamma_compiled(np.ones(n), np.full(n, z), random_state=1)
    ref = random_polyagamma(1, np.full(n, z), method="devroye",
                            random_state=np.random.default_rng(2))
    assert stats.ks_2samp(ours, ref).pvalue > 1e-3


def _problem(loss, noise, weights=False, n=40):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(n, 2))
    if isinstance(loss, EpsilonInsensitiveLoss):
        y = X @ np.array([1.0, -0.5]) + 0.3 * rng.normal(size=n)
    else:
        y = np.where(X[:, 0] + 0.7 * rng.normal(size=n) > 0, 1.0, -1.0)
    sw = rng.integers(1, 3, size=n).astype(float) if weights else None
    return Problem.create(X, y, loss, noise, sample_weight=sw)


def _wide_sparse_problem(loss, noise, weights=False, n=16, D=24):
    """A small CSR problem with fewer examples than features (the compiled sparse
    sweep's regime once ``MAX_CHOLESKY_PARAMS`` is lowered below ``D``)."""
    import scipy.sparse as sp

    rng = np.random.default_rng(3)
    X = sp.random(n, D, density=0.3, format="csr", random_state=4)
    score = X @ rng.normal(size=D)
    if isinstance(loss, EpsilonInsensitiveLoss):
        y = score + 0.3 * rng.normal(size=n)
    else:
        y = np.where(score + 0.5 * rng.normal(size=n) > 0, 1.0, -1.0)
    sw = rng.integers(1, 3, size=n).astype(float) if weights else None
    return Problem.create(X, y, loss, noise, sample_weight=sw)


CASES = [(HingeLoss(1.0), Dropout(0.3), False), (LogisticLoss(0.5), Dropout(0.3), True),
         (LogisticLoss(1.3), "none", False), (EpsilonInsensitiveLoss(1.0, 0.2), Dropout(0.2), False),
         (HingeLoss(0.7, margin=0.5), "gaussian", True)]


@pytest.mark.parametrize("loss,noise,weights", CASES, ids=lambda v: str(v)[:20])
def test_compiled_sweep_samples_the_python_kernels_distribution(loss, noise, weights):
    problem = _problem(loss, noise, weights)
    assert compiled_setup(problem) is not None
    theta_hat = fit_problem(problem).theta
    _assert_compiled_matches_python_kernel(problem, theta_hat, draws=3000)


def _assert_compiled_matches_python_kernel(problem, theta_hat, draws):
    """The compiled sweep against the Python kernel: means within 4 combined MCSE, sds
    within 10%, and ``lp`` is ``-J`` of the stored draw exactly."""
    kw = dict(draws=draws, tune=200, chains=2, theta_hat=theta_hat, progressbar=False,
              cores=1)
    a = sample(problem, random_state=1, **kw)
    b = sample(problem, random_state=2, compiled=False, **kw)
    for j in range(problem.design.n_params):
        se = np.hypot(mcse(a.theta[..., j]), mcse(b.theta[..., j]))
        assert abs(a.theta[..., j].mean() - b.theta[..., j].mean()) < 4 * se
        np.testing.assert_allclose(a.theta[..., j].std(), b.theta[..., j].std(), rtol=0.1)
    for c, d in [(0, 0), (1, draws - 1)]:
        assert a.lp[c, d] == pytest.approx(-problem.objective(a.theta[c, d]), rel=1e-10)


def test_threads_give_the_same_draws_as_a_sequence_and_keep_augmentation():
    problem = _problem(LogisticLoss(1.0), Dropout(0.3))
    theta_hat = fit_problem(problem).theta
    kw = dict(draws=200, tune=50, chains=3, theta_hat=theta_hat, progressbar=False,
              random_state=5, store_augmentation=True, thin=2)
    a = sample(problem, cores=1, **kw)
    b = sample(problem, cores=2, **kw)
    np.testing.assert_array_equal(a.theta, b.theta)
    np.testing.assert_array_equal(a.augmentation, b.augmentation)
    np.testing.assert_allclose(a.augmentation_mean, a.augmentation.mean(axis=1))
    assert a.theta.shape == (3, 200, 3) and np.all(np.isfinite(a.lp))


def test_compiled_path_does_not_apply_where_it_cannot():
    import scipy.sparse as sp

    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 2))
    y = np.sign(X[:, 0])
    assert compiled_setup(Problem.create(sp.csr_matrix(X), y, HingeLoss(), "none")) is None
    assert compiled_setup(Problem.create(X, y, HingeLoss(), "none"), "cg") is None
    with pytest.raises(ValueError, match="compiled"):
        sample(Problem.create(X, y, HingeLoss(), "none"), theta_hat=np.zeros(3),
               compiled="yes", progressbar=False)
    # compiled=True: the compiled sweep (the same draws as "auto" where it applies), or
    # an error naming the argument where it does not (as Newton's compiled=True)
    kw = dict(theta_hat=np.zeros(3), draws=20, tune=10, chains=1, random_state=4,
              progressbar=False)
    dense = Problem.create(X, y, HingeLoss(), Dropout(0.2))
    np.testing.assert_array_equal(sample(dense, compiled=True, **kw).theta,
                                  sample(dense, compiled="auto", **kw).theta)
    with pytest.raises(ValueError, match="compiled=True"):
        sample(dense, compiled=True, linalg="cg", **kw)


def test_tall_sparse_designs_sample_the_primal_system_at_a_cost_bounded_in_C(monkeypatch):
    """With at least as many examples as features the dual system's matrix
    ``diag(1/rho) + X K X^T`` has ``N - D`` eigenvalues that shrink as ``1/C`` without
    noise (the weights ``rho`` grow with ``C``): its CG iterations per draw grow as
    ``sqrt(C)``. Such designs go to the primal system (the Python kernel's CG
    back-end), whose iterations stay bounded from ``C = 1`` to ``C = 10^6``;
    ``compiled=True`` says that the compiled sweep does not apply. On the old rule the
    compiled dual sweep took them (the first assertion fails)."""
    import scipy.sparse as sp

    from bayesdrop import Design
    from bayesdrop.linalg import wls

    monkeypatch.setattr(wls, "MAX_CHOLESKY_PARAMS", 2)
    rng = np.random.default_rng(0)
    n, D = 300, 40
    X = sp.random(n, D, density=0.2, format="csr", random_state=1)
    y = np.where(X @ rng.normal(size=D) + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    problem = Problem.create(X, y, LogisticLoss(1.0), "none")
    assert compiled_setup(problem) is None and compiled_setup(problem, "woodbury") is None
    with pytest.raises(ValueError, match="compiled=True"):
        sample(problem, theta_hat=np.zeros(D + 1), compiled=True, progressbar=False)
    design = Design(X, "none")
    vkind, scale, mdata, ip, ix = _sparse_noise_arrays(design)
    blocks = singleton_blocks(n)
    u, t = rng.uniform(0.05, 0.25, n), rng.normal(size=n)
    z1, z2, z3 = rng.normal(size=D), rng.normal(size=n), rng.normal(size=D)
    primal, dual = [], []
    for C in (1.0, 1e6):
        rho = C * u  # Polya-Gamma weights scale with C
        _, info = wls.sample(design, rho, C * t, np.random.default_rng(1), linalg="cg")
        assert info["cg_converged"]
        primal.append(info["cg_iterations"])
        dual.append(dual_draw(ip, ix, X.data, mdata, vkind, scale, D, True,
                              dual_arrays(X), rho, C * t, np.zeros(D + 1), np.zeros(n), 0.0,
                              z1, z2, z3,
                              1e-11, np.empty(D + 1), blocks, dual_work(D, blocks),
                              (row_chunks(ip), False)))
    print("ITERS", primal, dual)
    assert primal[1] < 2 * primal[0]
    assert dual[1] > 5 * dual[0] or dual[1] < 0  # what the old rule paid (or failed)
    wide = Problem.create(sp.csr_matrix(X.T), y[:D], LogisticLoss(1.0), "none")
    assert compiled_setup(wide)["kind"] == "csr"


@pytest.mark.parametrize("cores", [1, 2])
def test_interrupt_keeps_the_compiled_draws_so_far(monkeypatch, cores):
    from bayesdrop import _progress

    problem = _problem(LogisticLoss(1.0), Dropout(0.3), n=200)
    theta_hat = fit_problem(problem).theta
    real, fired = _progress.ProgressBar.update, [False]

    def update(self, k):
        if k > 2000 and not fired[0]:
            fired[0] = True
            raise KeyboardInterrupt
        return real(self, k)

    monkeypatch.setattr(_progress.ProgressBar, "update", update)
    with pytest.warns(RuntimeWarning, match="interrupted"):
        res = sample(problem, draws=10**6, tune=10, chains=2, theta_hat=theta_hat,
                     random_state=0, progressbar=False, cores=cores)
    assert fired[0] and res.interrupted and 0 < res.theta.shape[1] < 10**6
    assert np.all(np.isfinite(res.theta))


def _assert_same_law(a, b):
    """Two samplers' draws ``(chains, draws, p)`` from one law: per parameter the means
    within 4 MCSE, the sd within 10%, the 5% and 95% quantiles (the tails) within 4 MCSE
    of a quantile."""
    for j in range(a.shape[-1]):
        x, z = a[..., j], b[..., j]
        assert abs(x.mean() - z.mean()) < 4 * np.hypot(mcse(x), mcse(z))
        np.testing.assert_allclose(x.std(), z.std(), rtol=0.1)
        for q in (0.05, 0.95):
            se_q = np.hypot(mcse(x, "quantile", prob=q), mcse(z, "quantile", prob=q))
            assert abs(np.quantile(x, q) - np.quantile(z, q)) < 4 * se_q


@pytest.mark.parametrize("loss,noise", [(LogisticLoss(1.0), "none"), (HingeLoss(1.0), Dropout(0.3)),
                                        (EpsilonInsensitiveLoss(1.0, 0.2), Dropout(0.2)),
                                        (HingeLoss(1.0), "none")],
                         ids=["logistic", "hinge", "eps", "hinge-zero-noise"])
@pytest.mark.parametrize("mh", ["auto", 3])
def test_independence_mh_move_keeps_the_target(loss, noise, mh):
    """Gibbs + independence MH (scheduled with the refreshed proposal, or three Laplace
    moves per sweep) vs the plain Python Gibbs kernel: same law (4 MCSE). At zero noise
    the hinge has no Laplace approximation: only the proposal refreshed from the tuning
    draws (and its intercept line) moves there."""
    if noise == "none" and isinstance(loss, HingeLoss) and mh != "auto":
        pytest.skip("no Laplace proposal at zero noise")
    problem = _problem(loss, noise, n=60)
    theta_hat = fit_problem(problem).theta
    kw = dict(draws=3000, tune=200, chains=2, theta_hat=theta_hat, progressbar=False, cores=1)
    a = sample(problem, random_state=3, mh=mh, **kw)
    b = sample(problem, random_state=4, compiled=False, **kw)
    assert np.all((a.mh_accept > 0.05) & (a.mh_accept < 1.0))
    assert np.all(np.isnan(b.mh_accept))
    _assert_same_law(a.theta, b.theta)


@pytest.mark.parametrize("loss,noise", [(LogisticLoss(1.0), "none"),
                                        (HingeLoss(1.0), Dropout(0.3))],
                         ids=["logistic", "hinge"])
def test_independence_moves_alone_keep_the_target(loss, noise):
    """Iterations of independence moves without the Gibbs sweep (``Moves(gibbs=False)``,
    as the schedule picks where the proposal is accepted often), continued from a tuned
    chain through ``last_state``, against the plain Python Gibbs kernel: same law (the
    augmentation's running mean, of its conditional means given the kept draws, comes
    back in the same shape)."""
    from bayesdrop.samplers import LastState

    problem = _problem(loss, noise, n=60)
    theta_hat = fit_problem(problem).theta
    kw = dict(theta_hat=theta_hat, progressbar=False, cores=1, chains=2)
    tuned = sample(problem, draws=1, tune=200, random_state=3, **kw)
    alone = tuple(m._replace(mh=2, gibbs=False) for m in tuned.last_state.moves)
    a = sample(problem, draws=3000, tune=0, init=LastState(
        tuned.last_state.theta, tuned.last_state.rng_states, moves=alone), **kw)
    assert np.all(a.mh_accept > 0.2)
    b = sample(problem, draws=3000, tune=200, random_state=4, compiled=False, **kw)
    _assert_same_law(a.theta, b.theta)
    with pytest.raises(AssertionError):  # the sweep-free chain really moved by MH alone
        np.testing.assert_array_equal(a.theta[:, 1:], a.theta[:, :-1])
    assert a.augmentation_mean.shape == b.augmentation_mean.shape


@pytest.mark.parametrize("loss,noise", [(LogisticLoss(1.0), "none"),
                                        (LogisticLoss(0.5), Dropout(0.3)),
                                        (HingeLoss(1.0), Dropout(0.3)),
                                        (EpsilonInsensitiveLoss(1.0, 0.2), Dropout(0.2))],
                         ids=["logistic", "logistic-dropout", "hinge", "eps"])
def test_intercept_line_move_keeps_the_target(loss, noise):
    """Gibbs + the intercept's line move (no independence move) vs the plain Python Gibbs
    kernel on off-centre features, where the intercept and the weights are strongly
    correlated and the move changes the intercept by far more than a Gibbs step: same
    law (means within 4 MCSE, quantiles within 4 quantile MCSE, sd within 10%)."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(60, 2)) + np.array([3.0, -2.0])
    if isinstance(loss, EpsilonInsensitiveLoss):
        y = X @ np.array([1.0, -0.5]) + 0.3 * rng.normal(size=60)
    else:
        y = np.where(X[:, 0] - 3.0 + 0.7 * rng.normal(size=60) > 0, 1.0, -1.0)
    problem = Problem.create(X, y, loss, noise)
    theta_hat = fit_problem(problem).theta
    kw = dict(draws=3000, tune=200, chains=2, theta_hat=theta_hat, progressbar=False, cores=1)
    a = sample(problem, random_state=3, mh=False, **kw)
    b = sample(problem, random_state=4, compiled=False, **kw)
    assert np.all((a.intercept_accept > 0.3) & (a.intercept_accept < 1.0))
    assert np.all(np.isnan(b.intercept_accept))
    _assert_same_law(a.theta, b.theta)


def test_intercept_line_move_mixes_the_intercept_faster():
    """On off-centre features the move raises the intercept's bulk ESS (same seeds, the
    line move switched off by hand for the reference); and it is absent without an
    intercept or a Laplace approximation."""
    from bayesdrop._arviz import ess
    from bayesdrop.samplers import compiled, driver, schedule

    rng = np.random.default_rng(5)
    X = rng.normal(size=(200, 2)) + np.array([3.0, -2.0])
    y = np.where(X[:, 0] - 3.0 + 0.7 * rng.normal(size=200) > 0, 1.0, -1.0)
    problem = Problem.create(X, y, LogisticLoss(1.0), "none")
    theta_hat = fit_problem(problem).theta
    kw = dict(draws=1000, tune=100, chains=2, theta_hat=theta_hat, progressbar=False,
              cores=1, random_state=0, mh=False)
    on = sample(problem, **kw)
    setup = compiled_setup(problem)
    assert compiled.intercept_line(setup, None) is None
    no_b = Problem.create(X, y, LogisticLoss(1.0), "none", fit_intercept=False)
    assert compiled.intercept_line(compiled_setup(no_b),
                                   schedule.laplace_proposal(no_b, theta_hat[:2])) is None
    real = driver.intercept_line
    try:
        driver.intercept_line = lambda setup, laplace: None
        off = sample(problem, **kw)
    finally:
        driver.intercept_line = real
    assert np.all(np.isnan(off.intercept_accept))
    assert ess(on.theta[..., 2], "bulk") > 1.5 * ess(off.theta[..., 2], "bulk")


# ---------------------------------------------------------------- the sparse (CSR) sweep
def _dense_system(design, rho, t, alpha, z1, z2, z3):
    """``(A, (1 - alpha) r + sqrt(1 - alpha^2) eta)``: the over-relaxed Gaussian draw's
    system from the standard normals, with
    ``eta = sqrt(2) I' z1 + Xbar^T (sqrt(rho) z2) + sqrt(V^T rho) z3``."""
    from bayesdrop.linalg.wls import normal_matrix, normal_rhs

    pad = np.zeros(design.n_params - design.n_features)
    eta = (np.sqrt(2.0) * np.append(z1, pad) + design.rmatvec(np.sqrt(rho) * z2)
           + np.sqrt(design.noise_diagonal(rho)) * np.append(z3, pad))
    return (normal_matrix(design, rho),
            (1 - alpha) * normal_rhs(design, t) + np.sqrt(1 - alpha ** 2) * eta)


def _dense_draw(design, rho, t, theta, alpha, z1, z2, z3):
    """The over-relaxed Gaussian draw from the same standard normals by a dense solve:
    ``A^{-1}((1 - alpha) r + sqrt(1 - alpha^2) eta) + alpha theta``."""
    return np.linalg.solve(*_dense_system(design, rho, t, alpha, z1, z2, z3)) + alpha * theta


def _sparse_noise_arrays(design):
    """``(vkind, scale, mdata, indptr, indices)`` of the compiled sparse sweep."""
    a = design.sweep_arrays()
    return a["vkind"], a["scale"], a["mdata"], a["indptr"], a["indices"]


@pytest.mark.parametrize("weight", [1.0, 1e4])
@pytest.mark.parametrize("blocky", [False, True])
@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("noise", ["none", Dropout(0.4), "gaussian", "poisson"])
def test_sparse_dual_draw_is_the_exact_gaussian_step(noise, fit_intercept, blocky, weight):
    """With the standard normals fixed, the matrix-free dual CG draw equals
    ``alpha theta + A^{-1}((1 - alpha) r + sqrt(1 - alpha^2) eta)`` by dense algebra, with
    the Jacobi preconditioner and with the block-Jacobi one (``blocky``: rows repeated with
    small changes, so that near-duplicate blocks form; it then needs fewer iterations);
    also with weights ``rho`` and targets ``t`` scaled as a large ``C`` scales them
    (``weight``), where the intercept's multiplier and the start from the current scores
    carry most of the draw."""
    import scipy.sparse as sp

    from bayesdrop import Design
    rng = np.random.default_rng(0)
    n, D = 30, 80
    X = sp.random(n, D, density=0.2, format="csr", random_state=1)
    if blocky:  # every row three times, perturbed: groups of near-duplicates
        base = sp.random(n // 3, D, density=0.2, format="csr", random_state=1)
        X = sp.vstack([base, base * 1.01, base * 0.99], format="csr")
        X = X + sp.random(n, D, density=0.01, format="csr", random_state=2) * 0.1
        X = sp.csr_matrix(X)
    design = Design(X, noise, fit_intercept)
    vkind, scale, mdata, ip, ix = _sparse_noise_arrays(design)
    rho, t = weight * rng.uniform(0.05, 3.0, n), weight * rng.normal(size=n)
    theta = rng.normal(size=design.n_params)
    z1, z2, z3 = rng.normal(size=D), rng.normal(size=n), rng.normal(size=D)
    alpha = -0.5
    out = np.empty(design.n_params)
    blocks = dual_blocks(X)
    assert (np.diff(blocks[0]).max() > 1) == blocky
    dual = dual_arrays(X)  # columns renumbered by frequency inside the dual solve
    m = design.matvec(theta)  # the current scores: the dual solve's start
    iters = dual_draw(ip, ix, X.data, mdata, vkind, scale, D, fit_intercept,
                      dual, rho, t, theta, m, alpha, z1, z2, z3, 1e-12, out, blocks,
                      dual_work(D, blocks), (row_chunks(ip), False))
    assert iters > 0
    # the products' row chunks on numba's threads: the same draw, bit for bit
    chunks = np.array([0, n // 3, n], dtype=np.int64)
    one, threaded = np.empty(design.n_params), np.empty(design.n_params)
    for par, res in (((chunks, None), one), ((chunks, True), threaded)):
        dual_draw(ip, ix, X.data, mdata, vkind, scale, D, fit_intercept, dual, rho, t, theta,
                  m, alpha, z1, z2, z3, 1e-12, res, blocks, dual_work(D, blocks), par)
    assert np.array_equal(one, threaded)
    np.testing.assert_allclose(one, out, rtol=1e-9, atol=1e-9 * np.abs(out).max())
    if blocky:
        jacobi = np.empty(design.n_params)
        iters_jacobi = dual_draw(ip, ix, X.data, mdata, vkind, scale, D,
                                 fit_intercept, dual, rho, t, theta, m, alpha, z1, z2, z3,
                                 1e-12, jacobi, singleton_blocks(n),
                                 dual_work(D, singleton_blocks(n)), (row_chunks(ip), False))
        assert iters < iters_jacobi
    ref = _dense_draw(design, rho, t, theta, alpha, z1, z2, z3)
    draws = [out] + ([jacobi] if blocky else [])
    if weight == 1.0:
        for draw in draws:
            np.testing.assert_allclose(draw, ref, rtol=1e-9, atol=1e-9 * np.abs(ref).max())
    # the stopping rule's guarantee in the posterior's metric (module docstring of
    # _gibbs_sparse): ||draw - ref||_A <= ||R^{1/2} e||, ||e|| <= tol (||v|| + |b| sqrt N),
    # v = X K r_w and b the solve's intercept; twice that for the reference's rounding
    A, rhs = _dense_system(design, rho, t, alpha, z1, z2, z3)
    v = X @ (rhs[:D] / (2.0 + design.noise_diagonal(rho)[:D]))
    b = ref[D] - alpha * theta[D] if fit_intercept else 0.0
    bound = np.sqrt(rho.max()) * 1e-12 * (np.linalg.norm(v) + abs(b) * np.sqrt(n))
    for draw in draws:
        e = draw - ref
        assert np.sqrt(e @ A @ e) <= 2.0 * bound
    m, s = np.empty(n), np.empty(n)
    scores_csr(ip, ix, X.data, mdata, vkind, scale, D, fit_intercept, theta,
               m, s)
    m_ref, s_ref = design.scores(theta)
    np.testing.assert_allclose(m, m_ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(s, s_ref, rtol=1e-12, atol=1e-12)


def test_dual_blocks_group_near_duplicates_and_respect_the_size_cap():
    """Blocks are the components of the cosine-similarity graph: every row once, rows of
    one near-duplicate group together, unrelated rows alone, and a group above
    ``max_block`` split into blocks of at most that size."""
    import scipy.sparse as sp

    rng = np.random.default_rng(0)
    base = rng.random(50)
    dup = np.array([base * (1 + 0.01 * k) + 0.001 * rng.random(50) for k in range(40)])
    lone = np.eye(50)[:5] * 3.0
    X = sp.csr_matrix(np.vstack([dup, lone]))
    bptr, brows, boff = dual_blocks(X, max_block=64)
    groups = [set(brows[bptr[j]:bptr[j + 1]].tolist()) for j in range(len(bptr) - 1)]
    assert sorted(brows.tolist()) == list(range(45))
    assert set(range(40)) in groups and all({40 + k} in groups for k in range(5))
    assert np.array_equal(np.diff(boff), np.diff(bptr) ** 2)
    bptr, brows, _ = dual_blocks(X, max_block=16)
    assert np.diff(bptr).max() <= 16 and sorted(brows.tolist()) == list(range(45))


SPARSE_CASES = [(LogisticLoss(1.0), Dropout(0.5), False), (HingeLoss(1.0), Dropout(0.3), True),
                (EpsilonInsensitiveLoss(1.0, 0.2), "none", False), (HingeLoss(3.0), "none", True)]


@pytest.mark.parametrize("loss,noise,weights", SPARSE_CASES, ids=lambda v: str(v)[:20])
def test_compiled_sparse_sweep_samples_the_python_kernels_distribution(loss, noise, weights,
                                                                       monkeypatch):
    """The CSR sweep (dual CG draw; at zero noise with a kinked loss followed by its
    slice moves) against the Python kernel's Woodbury draw; the
    Cholesky limit is lowered so that a small sparse problem (fewer examples than
    features: the dual system's regime) takes the sparse path."""

    from bayesdrop.linalg import wls

    monkeypatch.setattr(wls, "MAX_CHOLESKY_PARAMS", 2)
    problem = _wide_sparse_problem(loss, noise, weights)
    setup = compiled_setup(problem)
    assert setup is not None and setup["kind"] == "csr"
    theta_hat = fit_problem(problem, linalg="cg").theta
    _assert_compiled_matches_python_kernel(problem, theta_hat, draws=2000)


@pytest.mark.parametrize("compiled,cores", [("auto", 1), ("auto", 2), (False, 1), (False, 2)])
def test_last_state_continues_the_chains_exactly(compiled, cores):
    """Sampling 60 + 40 draws through ``last_state`` gives the draws of one run of 100
    (compiled chains in threads and the Python kernel in processes alike)."""
    from bayesdrop.samplers import LastState

    problem = _problem(LogisticLoss(1.0), Dropout(0.3))
    theta_hat = fit_problem(problem).theta
    kw = dict(chains=2, theta_hat=theta_hat, progressbar=False, cores=cores,
              compiled=compiled)
    whole = sample(problem, draws=100, tune=30, random_state=4, **kw)
    first = sample(problem, draws=60, tune=30, random_state=4, **kw)
    assert isinstance(first.last_state, LastState)
    np.testing.assert_array_equal(first.last_state.theta, first.theta[:, -1])
    rest = sample(problem, draws=40, tune=0, init=first.last_state, **kw)
    np.testing.assert_array_equal(np.concatenate([first.theta, rest.theta], axis=1),
                                  whole.theta)
    np.testing.assert_array_equal(np.concatenate([first.lp, rest.lp], axis=1), whole.lp)
    with pytest.raises(ValueError, match="LastState"):
        sample(problem, draws=5, tune=0, init=first.last_state, chains=3,
               theta_hat=theta_hat, progressbar=False)


@pytest.mark.parametrize("data,noise,C,expected,slice_on", [
    ("one feature", Dropout(0.4), 0.7, "laplace", False),
    ("one feature", "none", 0.7, "refreshed", False),
    ("breast cancer", "none", 100.0, "refreshed", True)])
def test_mh_schedule_is_the_documented_choice_and_carried_by_last_state(
        data, noise, C, expected, slice_on, monkeypatch):
    """``mh="auto"`` with ``tune=200``: sweeps 0-99 run the Laplace proposal once per
    sweep, 100-159 are recorded, 160-199 run the proposal refreshed from the recorded
    mean and covariance (shrunk towards the diagonal by ``p / (T + p)``), and the kept
    sweeps make ``mh_moves_per_sweep`` proposals of the better accepted one. Rebuilt here
    by hand from chains with fixed moves (``mh=1``, and ``LastState`` continuations with
    the refreshed and the chosen moves), which draw the same values: the kept draws are
    equal. 60 + 40 draws through ``last_state`` equal one run of 100. With dropout the
    Laplace proposal is kept here; at zero noise (no Laplace approximation: ``J`` is
    not twice differentiable) the refreshed one is the only one, and the slice moves of
    ``slice_directions`` join the sweeps from sweep 160 on where ``slice_pays`` says so
    from the recorded sweeps' autocorrelation and effective sample size and the 100 kept
    sweeps (the schedule's effective sample size checked against ArviZ's estimator of
    the recorded trace): not on one feature at ``C = 0.7``, but on breast cancer
    (standardised, 31 parameters) at ``C = 100``, where the Gibbs sweeps creep."""
    from bayesdrop.samplers import LastState, compiled, driver, schedule

    if data == "one feature":
        rng = np.random.default_rng(0)
        x = rng.normal(size=60) + 2.0
        y = np.where(x - 2.0 + 0.8 * rng.normal(size=60) > 0, 1.0, -1.0)
        X = x[:, None]
    else:
        from sklearn.datasets import load_breast_cancer
        from sklearn.preprocessing import StandardScaler

        X, y = load_breast_cancer(return_X_y=True)
        X, y = StandardScaler().fit_transform(X), 2.0 * y - 1.0
    problem = Problem.create(X, y, HingeLoss(C), noise)
    theta_hat = fit_problem(problem).theta
    kw = dict(chains=1, theta_hat=theta_hat, progressbar=False, cores=1)
    asked = []

    def pays(*args, **kwargs):
        asked.append(kwargs)
        return schedule.slice_pays(*args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(compiled, "slice_pays", pays)
        auto = sample(problem, draws=100, tune=200, random_state=4, **kw)
    with monkeypatch.context() as patch:  # sweeps 0-159: no slice moves
        patch.setattr(driver, "slice_directions", lambda *args: None)
        burn = sample(problem, draws=100, tune=0, random_state=4, mh=1, **kw)
        recorded = sample(problem, draws=160, tune=0, random_state=4, mh=1, **kw)
    np.testing.assert_array_equal(recorded.theta[0, :100], burn.theta[0])
    laplace_moves = recorded.last_state.moves[0]
    accept_recorded = (np.nan_to_num(recorded.mh_accept[0]) * 160
                       - np.nan_to_num(burn.mh_accept[0]) * 100) / 60
    trace = recorded.theta[0, 100:]
    xc = trace - trace.mean(axis=0)
    p, T = trace.shape[1], 60
    rho = max((xc[1:, j] @ xc[:-1, j]) / (xc[:, j] @ xc[:, j]) for j in range(p))
    cov = np.cov(trace.T) * (1 - p / (T + p))
    cov[np.diag_indices(p)] += p / (T + p) * np.diag(np.cov(trace.T))
    Lq = np.linalg.cholesky(np.linalg.inv(cov))
    setup = compiled_setup(problem)
    gibbs_rho = rho / (1 - accept_recorded) ** laplace_moves.mh
    directions = schedule.slice_directions(problem, setup, theta_hat)
    assert (directions is not None) == (noise == "none")
    if directions is not None:
        from arviz.stats.diagnostics import _ess

        # the recorded sweeps' least effective sample size per sweep (ArviZ's estimator
        # of one unsplit chain)
        ess = min(float(_ess(trace[None, :, j])) for j in range(p)) / T
        (got_args,) = asked
        assert got_args["ess_per_sweep"] == pytest.approx(ess, rel=1e-9)
        assert (got_args["recorded"], got_args["kept"], got_args["thin"]) == (T, 100, 1)
        if not schedule.slice_pays(
                gibbs_rho, schedule.move_costs(setup)[0],
                schedule.slice_cost(setup, directions[0].shape[1]), recorded=T,
                ess_per_sweep=ess, kept=100):
            directions = None
    assert (directions is not None) == slice_on
    laplace_moves = laplace_moves._replace(slice=directions)
    proposal = (trace.mean(axis=0), Lq)
    got = auto.last_state.moves[0]
    if p > 2:  # the kernel's proposal, equal to the one built here up to rounding (below),
        # which 31 parameters amplify through the 140 sweeps that follow
        proposal = got.proposal
    refreshed_moves = compiled.Moves(1, proposal, compiled.intercept_line(setup, proposal),
                                     slice=directions)
    at = recorded.last_state
    refreshed = sample(problem, draws=40, tune=0, init=LastState(
        at.theta, at.rng_states, moves=(refreshed_moves,)), **kw)
    accept_refreshed = refreshed.mh_accept[0]
    chosen, accept = ((refreshed_moves, accept_refreshed)
                      if accept_refreshed >= accept_recorded
                      else (laplace_moves, accept_recorded))
    assert chosen is (refreshed_moves if expected == "refreshed" else laplace_moves)
    gibbs, k = schedule.schedule(accept, gibbs_rho, *schedule.move_costs(setup))
    assert got.mh == k and got.gibbs == gibbs and auto.mh_moves.tolist() == [k]
    assert (got.slice is not None) == slice_on
    np.testing.assert_allclose(got.proposal[0], trace.mean(axis=0) if expected ==
                               "refreshed" else chosen.proposal[0], rtol=1e-12)
    np.testing.assert_allclose(got.proposal[1], Lq if expected == "refreshed"
                               else chosen.proposal[1], rtol=1e-9)
    at = refreshed.last_state
    kept = sample(problem, draws=100, tune=0, init=LastState(
        at.theta, at.rng_states, moves=(got,)), **kw)
    np.testing.assert_allclose(kept.theta, auto.theta, rtol=1e-9)
    first = sample(problem, draws=60, tune=200, random_state=4, **kw)
    rest = sample(problem, draws=40, tune=0, init=first.last_state, **kw)
    np.testing.assert_array_equal(np.concatenate([first.theta, rest.theta], axis=1),
                                  auto.theta)
    with pytest.raises(ValueError, match="mh"):
        sample(problem, draws=5, tune=0, random_state=0, mh=0, **kw)
    with pytest.raises(ValueError, match="mh"):
        sample(problem, draws=5, tune=0, random_state=0, mh=True, **kw)


def test_slice_moves_join_where_the_sweep_alone_would_miss_the_ess_floor(cancer):
    """Breast cancer's hinge at zero noise, ``C = 3``: the recorded Gibbs sweeps make
    about 0.07 effective draws per sweep, above the efficiency rule's break-even point
    (0.055), so 100 kept draws run without the slice moves; 1000 kept draws would have
    about 70 effective draws without them, below the convergence check's 100 per chain,
    and 300 with them: they run the slice moves."""
    problem = Problem.create(*cancer, HingeLoss(3.0), "none")
    theta_hat = fit_problem(problem).theta
    kw = {"tune": 200, "chains": 1, "theta_hat": theta_hat, "progressbar": False,
          "cores": 1, "random_state": 4}
    short = sample(problem, draws=100, **kw)
    long = sample(problem, draws=1000, **kw)
    assert short.last_state.moves[0].slice is None
    assert long.last_state.moves[0].slice is not None


def test_mh_schedule_does_not_depend_on_the_blocks_or_the_threads(monkeypatch):
    """The blocks of compiled sweeps are sized by the clock; the schedule's recorded
    moments are summed in fixed chunks and on one BLAS thread, so the draws are the same
    with blocks of at most 7 sweeps, with the default blocks, and with the chains in
    threads or in sequence (digits, 65 parameters: a tuning of 400 sweeps whose refreshed
    proposal is built from 120 recorded draws)."""
    from sklearn.datasets import load_digits

    from bayesdrop.samplers import compiled

    X, y = load_digits(return_X_y=True)
    X, y = X[:600] / 16.0, np.where(y[:600] == 8, 1.0, -1.0)
    problem = Problem.create(X, y, HingeLoss(1.0), Dropout(0.3))
    theta_hat = fit_problem(problem).theta
    kw = dict(draws=20, tune=400, chains=2, theta_hat=theta_hat, progressbar=False,
              random_state=1)
    threads = sample(problem, cores=2, **kw)
    serial = sample(problem, cores=1, **kw)
    monkeypatch.setattr(compiled, "_BLOCK_MAX", 7)
    small = sample(problem, cores=1, **kw)
    np.testing.assert_array_equal(threads.theta, serial.theta)
    np.testing.assert_array_equal(small.theta, serial.theta)
    assert all(m.proposal is not None for m in serial.last_state.moves)


@pytest.mark.parametrize("threshold,kept_on", [(0.0, True), (1.01, False)])
def test_mh_move_is_switched_off_after_tuning_when_it_hardly_accepts(threshold, kept_on,
                                                                     monkeypatch):
    """A chain whose MH move accepts less than ``MH_MIN_ACCEPT`` of its tuning proposals
    keeps its sweeps without the move (threshold forced to 0 / above 1 here): the kept
    sweeps make no proposals then, ``last_state`` carries the choice, and 60 + 40 draws
    through it still equal one run of 100."""
    from bayesdrop.samplers import compiled, schedule

    monkeypatch.setattr(compiled, "MH_MIN_ACCEPT", threshold)
    problem = _problem(LogisticLoss(1.0), Dropout(0.3))
    theta_hat = fit_problem(problem).theta
    kw = dict(chains=2, theta_hat=theta_hat, progressbar=False, cores=2)
    whole = sample(problem, draws=100, tune=30, random_state=4, **kw)
    # tuning too short to schedule: the Laplace proposal once per sweep, or none
    assert [m.mh for m in whole.last_state.moves] == [int(kept_on)] * 2
    assert whole.mh_moves.tolist() == [int(kept_on)] * 2
    first = sample(problem, draws=60, tune=30, random_state=4, **kw)
    rest = sample(problem, draws=40, tune=0, init=first.last_state, **kw)
    np.testing.assert_array_equal(np.concatenate([first.theta, rest.theta], axis=1),
                                  whole.theta)
    setup = compiled_setup(problem)
    setup["proposal"] = schedule.laplace_proposal(problem, theta_hat)
    setup["schedule"] = True  # mh="auto"
    from bayesdrop.samplers.chain import run_chain

    kernel = compiled.CompiledKernel(setup, overrelax=-0.5, store_augmentation=False)
    chain = run_chain(kernel, theta_hat, np.random.SeedSequence(1), tune=30, draws=50, thin=1)
    assert chain.mh_stats[1] == (80 if kept_on else 30)  # proposals: every sweep / tuning


@pytest.mark.parametrize("split", [13, 46, 64])
def test_continued_dense_chains_equal_one_run_at_any_split(split):
    """The compiled dense chain's state between sweeps is ``theta`` alone: the scores are
    recomputed from it after an accepted intercept-line move too (they once followed the
    move incrementally, which a continued run could not reproduce to the bit)."""
    problem = _problem(HingeLoss(1.0), Dropout(0.3))
    theta_hat = fit_problem(problem).theta
    kw = dict(chains=2, theta_hat=theta_hat, progressbar=False, cores=1)
    whole = sample(problem, draws=100, tune=20, random_state=11, **kw)
    first = sample(problem, draws=split, tune=20, random_state=11, **kw)
    rest = sample(problem, draws=100 - split, tune=0, init=first.last_state, **kw)
    np.testing.assert_array_equal(np.concatenate([first.theta, rest.theta], axis=1),
                                  whole.theta)


def test_row_sampler_last_state_continues_exactly():
    """The row-backend sampler (the dask path; here on one in-memory block) continues from
    ``last_state`` to the draws of one longer run, chunk seeds and client draws alike."""
    from bayesdrop.linalg.backend import InMemoryRows
    from bayesdrop.samplers import LastState

    problem = _problem(HingeLoss(1.0), Dropout(0.3))
    theta_hat = fit_problem(problem).theta
    rows = InMemoryRows(problem)
    kw = dict(chains=2, progressbar=False, thin=2)
    kw["theta_hat"] = theta_hat
    whole = sample(rows, draws=50, tune=10, random_state=3, **kw)
    first = sample(rows, draws=30, tune=10, random_state=3, **kw)
    assert isinstance(first.last_state, LastState) and first.last_state.sweep == 70
    rest = sample(rows, draws=20, tune=0, init=first.last_state, **kw)
    np.testing.assert_array_equal(np.concatenate([first.theta, rest.theta], axis=1),
                                  whole.theta)
    np.testing.assert_array_equal(np.concatenate([first.lp, rest.lp], axis=1), whole.lp)


def test_one_driver_runs_row_backends_with_the_same_checks_and_interrupts(monkeypatch):
    """``sample`` takes a row back-end: its draws are those of the row kernel's ``step``
    run by hand with the documented seeds, the same
    argument checks as for a problem, a mismatched ``LastState`` named, and Ctrl-C
    keeping the draws made so far with a warning."""
    from bayesdrop.linalg.backend import InMemoryRows
    from bayesdrop.samplers import rows as rows_kernel

    problem = _problem(LogisticLoss(1.0), Dropout(0.3))
    theta_hat = fit_problem(problem).theta
    rows = InMemoryRows(problem)
    kw = dict(theta_hat=theta_hat, chains=2, progressbar=False, random_state=4)
    res = sample(rows, draws=20, tune=5, **kw)
    assert res.theta.shape == (2, 20, 3) and res.augmentation_mean is None
    # reference: the row kernel's step by hand, seeded as documented (chain c: child c of
    # SeedSequence(4), its client draws from default_rng(child), its chunk seed
    # child.generate_state(1)), 5 sweeps discarded, then 20 kept
    children = np.random.SeedSequence(4).spawn(2)
    rngs = [np.random.default_rng(ch) for ch in children]
    entropies = [int(ch.generate_state(1)[0]) for ch in children]
    state = rows_kernel.init(rows, np.tile(theta_hat, (2, 1)))
    by_hand = []
    for sweep in range(25):
        state, _ = rows_kernel.step(rngs, rows, state, entropies)
        if sweep >= 5:
            by_hand.append(state.theta.copy())
    np.testing.assert_array_equal(res.theta, np.stack(by_hand, axis=1))
    for bad, match in ((dict(draws=0), "draws"), (dict(chains=0), "chains"),
                       (dict(thin=0), "thin"), (dict(overrelax=1.0), "overrelax"),
                       (dict(store_augmentation=True), "store_augmentation"),
                       (dict(init="nope"), "init must be")):
        with pytest.raises(ValueError, match=match):
            sample(rows, **{**dict(draws=5, tune=0), **kw, **bad})
    in_memory = sample(problem, draws=5, tune=0, cores=1, **kw).last_state
    with pytest.raises(ValueError, match="in-memory run"):
        sample(rows, draws=5, tune=0, init=in_memory, **kw)
    with pytest.raises(ValueError, match="row back-end, not"):
        sample(problem, draws=5, tune=0, init=res.last_state, **kw)
    calls = {"n": 0}
    real_step = rows_kernel.step

    def interrupting_step(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 18:  # after 5 tuning sweeps and 12 kept draws
            raise KeyboardInterrupt
        return real_step(*args, **kwargs)

    monkeypatch.setattr(rows_kernel, "step", interrupting_step)
    with pytest.warns(RuntimeWarning, match="interrupted"):
        cut = sample(rows, draws=20, tune=5, **kw)
    assert cut.interrupted and cut.theta.shape == (2, 12, 3)
    np.testing.assert_array_equal(cut.theta, res.theta[:, :12])


# ------------------------------------------------- pointwise log-likelihood in the sweep
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("loss,noise,weights", CASES, ids=lambda v: str(v)[:20])
def test_sweep_keeps_the_pointwise_log_likelihood_of_its_draws(loss, noise, weights, sparse,
                                                               monkeypatch):
    """``store_log_likelihood=True``: the terms kept by the compiled sweep (dense with and
    without the MH move, and CSR) equal ``pointwise_log_likelihood`` of the same draws
    (computed afresh by the loss objects) to rounding; their sum plus ``||w||^2`` is
    ``-lp``. The Python kernel keeps none."""

    from bayesdrop.linalg import wls
    from bayesdrop.posterior import pointwise_log_likelihood

    problem = _problem(loss, noise, weights)
    if sparse:
        monkeypatch.setattr(wls, "MAX_CHOLESKY_PARAMS", 2)
        problem = _wide_sparse_problem(loss, noise, weights)
    theta_hat = fit_problem(problem).theta
    for mh in (("auto", False) if not sparse else ("auto",)):
        res = sample(problem, draws=40, tune=10, chains=2, theta_hat=theta_hat,
                     random_state=1, progressbar=False, cores=1, mh=mh,
                     store_log_likelihood=True)
        ref = pointwise_log_likelihood([problem], [res.theta])
        assert res.log_likelihood.shape == ref.shape
        np.testing.assert_allclose(res.log_likelihood, ref, rtol=1e-12,
                                   atol=1e-12 * np.abs(ref).max())
        D = problem.design.n_features
        w2 = np.sum(res.theta[..., :D] ** 2, axis=-1)
        np.testing.assert_allclose(res.log_likelihood.sum(-1) - w2, res.lp, rtol=1e-12)
        J = [problem.objective(t) for t in res.theta.reshape(-1, res.theta.shape[-1])]
        np.testing.assert_allclose(-res.lp.ravel(), J, rtol=1e-12)  # J's own path
    plain = sample(problem, draws=5, tune=0, chains=1, theta_hat=theta_hat, random_state=1,
                   progressbar=False, compiled=False, store_log_likelihood=True)
    assert plain.log_likelihood is None


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_dual_draw_on_binary_features_skips_the_values_and_draws_the_same(fit_intercept):
    """Binary X (every stored value 1, as bag-of-words indicators): ``dual_arrays`` flags
    it and the dual product skips the values; the draw is bit-for-bit the one of the
    general product (multiplying by 1 is exact) and equals the dense solve."""
    import scipy.sparse as sp

    from bayesdrop import Design
    rng = np.random.default_rng(2)
    n, D = 40, 90
    X = sp.random(n, D, density=0.15, format="csr", random_state=3)
    X.data[:] = 1.0
    design = Design(X, Dropout(0.4), fit_intercept)
    vkind, scale, mdata, ip, ix = _sparse_noise_arrays(design)
    rho, t = rng.uniform(0.05, 3.0, n), rng.normal(size=n)
    theta = rng.normal(size=design.n_params)
    z1, z2, z3 = rng.normal(size=D), rng.normal(size=n), rng.normal(size=D)
    blocks = dual_blocks(X)
    dual = dual_arrays(X)
    assert dual[2] is None and dual_arrays(X * 2.0)[2] is not None
    outs = []
    for d in (dual, dual_arrays(X, detect_unit=False)):
        out = np.empty(design.n_params)
        dual_draw(ip, ix, X.data, mdata, vkind, scale, D, fit_intercept, d, rho, t, theta,
                  design.matvec(theta), -0.5, z1, z2, z3, 1e-12, out, blocks,
                  dual_work(D, blocks), (row_chunks(ip), False))
        outs.append(out)
    np.testing.assert_array_equal(outs[0], outs[1])
    ref = _dense_draw(design, rho, t, theta, -0.5, z1, z2, z3)
    np.testing.assert_allclose(outs[0], ref, rtol=1e-9, atol=1e-9 * np.abs(ref).max())


@pytest.mark.parametrize("gibbs", [True, False], ids=["sweep+mh", "mh-alone"])
def test_geweke_joint_distribution_of_the_compiled_moves(gibbs):
    """Geweke (2004) for the compiled kernel's moves: alternating one iteration (a Gibbs
    sweep and two independence MH moves, or the two MH moves alone) with a fresh
    ``y ~ p(y | w)`` leaves the prior of ``w`` invariant. With ``C = 1/2`` (``h = 1``)
    ``exp(-J)`` is the prior ``N(0, I/2)`` times the Bernoulli likelihood
    ``sigmoid(y x.w)``, a proper model: ``E w = 0``, ``E w^2 = 1/2`` within 4 MCSE. The
    proposal is fixed (a t centred at 0 with precision ``2 I``), the data change every
    iteration: each move must be exact for every ``y`` on its own."""
    from scipy.special import expit

    from bayesdrop.samplers.compiled import CompiledKernel, Moves

    rng = np.random.default_rng(2)
    X = rng.normal(size=(8, 2))
    problem = Problem.create(X, np.ones(8), LogisticLoss(0.5), "none", fit_intercept=False)
    setup = compiled_setup(problem)
    proposal = (np.zeros(2), np.linalg.cholesky(2.0 * np.eye(2)))
    kernel = CompiledKernel(setup, overrelax=-0.5, store_augmentation=False,
                            moves=Moves(2, proposal, None, gibbs))
    w = rng.normal(scale=np.sqrt(0.5), size=2)
    state = kernel.init(w, rng, 1)
    n = 20_000
    trace = np.empty((n, 2))
    for i in range(n):
        kernel.run(state, rng, 1, 0, 10**9, 1, 0)  # one (tuning) iteration: nothing kept
        setup["y"][:] = np.where(rng.random(8) < expit(X @ state.theta), 1.0, -1.0)
        trace[i] = state.theta
    assert state.mh_stats[1] == 2 * n and 0.1 < state.mh_stats[0] / state.mh_stats[1] < 1
    for k in range(2):
        draws = trace[None, :, k]
        assert abs(draws.mean()) <= 4 * mcse(draws)
        sq = draws ** 2
        assert abs(sq.mean() - 0.5) <= 4 * mcse(sq)


# ------------------------------------------------------------- on_running / ArviZ prefetch
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("cores", [1, 2])
def test_on_running_is_called_once_when_the_compiled_chains_run(sparse, cores, monkeypatch):
    """``sample(on_running=f)`` calls ``f`` exactly once with the compiled sweeps (dense
    or CSR, chains in threads or in sequence), after sweeps were done; never with the
    Python kernel. When it runs, the sweep function has been compiled."""
    from bayesdrop.linalg import wls
    from bayesdrop.samplers._gibbs_dense import run_sweeps
    from bayesdrop.samplers._gibbs_sparse import run_sweeps_csr

    loss, noise = LogisticLoss(0.5), Dropout(0.3)
    problem = _problem(loss, noise)
    if sparse:
        monkeypatch.setattr(wls, "MAX_CHOLESKY_PARAMS", 2)
        problem = _wide_sparse_problem(loss, noise)
    theta_hat = fit_problem(problem).theta
    calls = []
    kw = dict(draws=30, tune=10, chains=2, theta_hat=theta_hat, random_state=0,
              progressbar=False, cores=cores)
    sweeps = run_sweeps_csr if sparse else run_sweeps
    sample(problem, on_running=lambda: calls.append(len(sweeps.signatures)), **kw)
    assert len(calls) == 1 and calls[0] >= 1
    calls.clear()
    sample(problem, compiled=False, on_running=lambda: calls.append(1), draws=3, tune=0,
           chains=1, theta_hat=theta_hat, random_state=0, progressbar=False)
    assert calls == []


def _fresh_python(code):
    """Run ``code`` in a fresh interpreter (ArviZ not imported yet); its output."""
    import subprocess
    import sys
    import textwrap

    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr
    return out


def test_arviz_prefetch_imports_in_the_background_and_restores_the_warning_filters():
    """``_arviz.prefetch()`` imports ArviZ in a thread (a fresh process: not imported
    before), ``_az()`` waits for it, and the warning filters are as before."""
    _fresh_python("""
        import sys, warnings
        import bayesdrop._arviz as a
        assert 'arviz' not in sys.modules
        warnings.simplefilter('default', UserWarning)
        before = list(warnings.filters)
        a.prefetch()
        thread = a._prefetching
        az = a._az()
        assert thread is not None and not thread.is_alive()
        assert sys.modules['arviz'] is az and hasattr(az, 'InferenceData')
        assert warnings.filters == before, 'warning filters changed'
        a.prefetch()
        assert a._prefetching is thread  # once
    """)


# ----------------------------------------------- Polya-Gamma draws without their tables
@pytest.mark.parametrize("shapes", ["whole", "many fractions", "tiny"])
def test_logistic_draws_without_tables_equal_the_table_path(shapes):
    """Where no example has a fractional table (every shape ``h = 2 C w_n >= 1``; more
    distinct fractions than ``MAX_TABLES``; a shape below 1e-12), ``draw_tables`` gives
    ``()`` and the sweep's draw loop compiles without the tables' code: the same draws,
    bit for bit, as the loop with the (empty) table arrays, from the same generator."""
    from bayesdrop.model.losses.kernels import draws_loop
    from bayesdrop.model.pg_inversion import MAX_TABLES, PGTables

    rng = np.random.default_rng(2)
    n = 3 * MAX_TABLES + 10
    if shapes == "whole":
        C, sw = 1.0, rng.integers(1, 4, size=n).astype(float)
    elif shapes == "many fractions":
        C, sw = 0.4, rng.uniform(0.1, 3.0, size=n)  # h = 0.08 ... 2.4, all distinct
    else:
        C, sw = 1e-13, np.ones(n)
    loss = LogisticLoss(C).weighted(sw)
    assert loss.draw_tables(C * sw) == ()
    arrays = PGTables.for_shapes(2.0 * C * sw).arrays()
    m, s = rng.normal(size=n) * 3.0, rng.uniform(0.0, 2.0, size=n)
    y = np.sign(rng.normal(size=n))
    out = []
    for tables in ((), arrays):
        a = [np.empty(n) for _ in range(4)]
        draws_loop(loss.kernel_params, m, s, y, sw, np.random.default_rng(9), tables, *a)
        out.append(a)
    for got, ref in zip(*out):
        np.testing.assert_array_equal(got, ref)
    assert (shapes == "tiny") == bool(np.all(out[0][0] == 0.0))


def test_a_failed_background_import_is_raised_by_the_foreground_one():
    """If ArviZ cannot be imported, the prefetch thread stays silent (no traceback of its
    own on stderr) and ``_az`` raises the ImportError where the caller sees it."""
    out = _fresh_python("""
        import builtins
        import bayesdrop._arviz as a
        real = builtins.__import__
        def fake(name, *args, **kw):
            if name == 'arviz':
                raise ImportError('no arviz here')
            return real(name, *args, **kw)
        builtins.__import__ = fake
        a.prefetch()
        a._prefetching.join()
        try:
            a._az()
        except ImportError as exc:
            print('raised:', exc)
    """)
    assert "raised: no arviz here" in out.stdout
    assert "Exception in thread" not in out.stderr
