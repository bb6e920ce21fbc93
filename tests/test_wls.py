import numpy as np
import pytest
import scipy.sparse as sp

from bayesdrop import Design
from bayesdrop.linalg import wls
from bayesdrop.model.noise import AdditiveGaussian, Dropout, NoNoise, Poisson

from .conftest import sparse_counts


def explicit_system(X, V, rho, t, fit_intercept=True):
    """A and r by the defining sum over examples (MATH.md section 4)."""
    N, D = X.shape
    p = D + fit_intercept
    A = np.zeros((p, p))
    A[np.arange(D), np.arange(D)] = 2.0
    r = np.zeros(p)
    for n in range(N):
        xb = np.append(X[n], 1.0) if fit_intercept else X[n]
        vb = np.append(V[n], 0.0) if fit_intercept else V[n]
        A += rho[n] * (np.outer(xb, xb) + np.diag(vb))
        r += t[n] * xb
    return A, r


@pytest.mark.parametrize("noise", [NoNoise(), Dropout(0.3), AdditiveGaussian(0.4), Poisson()],
                         ids=repr)
@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_normal_equations_match_definition(noise, sparse, fit_intercept):
    Xd = sparse_counts(n=50, d=7, density=0.4, seed=1).toarray()
    X = sp.csr_matrix(Xd) if sparse else Xd
    rng = np.random.default_rng(0)
    rho, t = rng.random(50) + 0.1, rng.normal(size=50)
    design = Design(X, noise, fit_intercept)
    A_ref, r_ref = explicit_system(Xd, noise.feature_variance_values(Xd), rho, t, fit_intercept)
    assert np.allclose(wls.normal_matrix(design, rho), A_ref, rtol=1e-12)
    assert np.allclose(wls.normal_rhs(design, t), r_ref, rtol=1e-12)
    op, diag = wls.normal_operator(design, rho)
    z = rng.normal(size=design.n_params)
    assert np.allclose(op @ z, A_ref @ z, rtol=1e-12)
    assert np.allclose(diag, np.diag(A_ref), rtol=1e-12)
    ref = np.linalg.solve(A_ref, r_ref)
    for solver in ("cholesky", "woodbury", "cg"):
        theta, info = wls.solve(design, rho, t, linalg=solver, cg_tol=1e-12)
        assert info["linalg"] == solver
        assert np.allclose(theta, ref, rtol=1e-8, atol=1e-10)


def test_auto_is_matrix_free_for_large_sparse_designs(monkeypatch):
    """D = 30000 sparse with more examples than the dual factor takes (lowered to 100):
    'auto' solves the dual system by conjugate gradients, forming neither a D x D nor an
    N x N matrix; a tall design (N >= D > MAX_CHOLESKY_PARAMS) goes to the primal
    conjugate gradients, again without a dense matrix. Both to the requested residual."""
    def forbidden(*args, **kwargs):
        raise AssertionError("a dense normal matrix was formed")

    monkeypatch.setattr(wls, "MAX_WOODBURY_SAMPLES", 100)
    monkeypatch.setattr(Design, "gram", forbidden)
    monkeypatch.setattr(Design, "row_gram", forbidden)
    rng = np.random.default_rng(1)
    for n, d, expected in ((300, 30_000, "woodbury"), (3000, 2500, "cg")):
        design = Design(sparse_counts(n=n, d=d, density=0.002, seed=2), Dropout(0.5))
        assert wls.choose_linalg(design) == expected
        rho, t = 10.0 ** rng.uniform(-3, 6, size=n), rng.normal(size=n)  # ill-conditioned
        theta, info = wls.solve(design, rho, t, cg_tol=1e-12)
        assert info["linalg"] == expected and info["cg_converged"]
        op, _ = wls.normal_operator(design, rho)
        r = wls.normal_rhs(design, t)
        assert np.linalg.norm(op @ theta - r) <= 1e-8 * np.linalg.norm(r)


def test_dual_conjugate_gradients_stay_bounded_as_the_weights_grow(monkeypatch):
    """Wide data without noise (300 x 2500 CSR): as the weights grow with C the primal
    matrix keeps D - N eigenvalues at 2 against the others' growth, and its CG iterations
    grow (here about sqrt(C)); the dual system's stay bounded from C = 1 to 10^6, which is
    why 'auto' takes the dual system (matrix-free beyond MAX_WOODBURY_SAMPLES) wherever
    N < D. The Gaussian draw by the dual CG equals the exact Woodbury draw with the same
    normals."""
    from bayesdrop.linalg.woodbury import DualCG

    X = sparse_counts(n=300, d=2500, density=0.01, seed=3)
    design = Design(X, "none")
    rng = np.random.default_rng(0)
    u, t = rng.uniform(0.05, 0.25, 300), rng.normal(size=300)
    dual, primal = [], []
    for C in (1.0, 1e6):
        rho = C * u
        solver = DualCG(design, rho, tol=1e-10)
        solver.solve(wls.normal_rhs(design, C * t))
        assert solver.converged
        dual.append(solver.iterations)
        primal.append(wls.solve(design, rho, C * t, linalg="cg")[1]["cg_iterations"])
    assert dual[1] < 2 * dual[0] and primal[1] > 5 * primal[0]
    monkeypatch.setattr(wls, "MAX_WOODBURY_SAMPLES", 100)
    a, info = wls.sample(design, u, t, np.random.default_rng(5), linalg="woodbury",
                         cg_tol=1e-13)
    monkeypatch.setattr(wls, "MAX_WOODBURY_SAMPLES", 6000)
    b, _ = wls.sample(design, u, t, np.random.default_rng(5), linalg="woodbury")
    assert "cg_iterations" in info
    np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10 * np.abs(b).max())


def test_auto_uses_woodbury_when_features_outnumber_examples(monkeypatch):
    X = sparse_counts(n=300, d=30_000, density=0.002, seed=2)
    design = Design(X, Dropout(0.5))
    monkeypatch.setattr(wls, "MAX_WOODBURY_SAMPLES", 1000)
    assert wls.choose_linalg(design) == "woodbury"
    monkeypatch.setattr(Design, "gram", lambda *a, **k: (_ for _ in ()).throw(AssertionError))
    rng = np.random.default_rng(1)
    rho, t = 10.0 ** rng.uniform(-3, 9, size=300), rng.normal(size=300)  # ill-conditioned
    theta, info = wls.solve(design, rho, t)
    assert info["linalg"] == "woodbury"
    op, _ = wls.normal_operator(design, rho)
    r = wls.normal_rhs(design, t)
    assert np.linalg.norm(op @ theta - r) <= 1e-8 * np.linalg.norm(r)


def test_unknown_solver():
    with pytest.raises(ValueError, match="linalg must be one of"):
        wls.choose_linalg(Design(np.eye(3)), "qr")


@pytest.mark.parametrize("solver", ["cholesky", "woodbury", "woodbury-cg", "cg"])
@pytest.mark.parametrize("noise", [NoNoise(), Dropout(0.4)], ids=repr)
def test_gaussian_draw_has_mean_inv_A_r_and_covariance_inv_A(solver, noise, monkeypatch):
    """wls.sample: theta ~ N(A^{-1} r, A^{-1}) for every back-end (sparse, D > N so the
    Woodbury dual is valid; "woodbury-cg": the dual system by conjugate gradients, as
    beyond MAX_WOODBURY_SAMPLES examples). Each mean within 4 SE; each covariance entry
    within 4 SE of a sample covariance, sqrt((S_ii S_jj + S_ij^2) / n)."""
    if solver == "woodbury-cg":
        monkeypatch.setattr(wls, "MAX_WOODBURY_SAMPLES", 0)
        solver = "woodbury"
    Xd = sparse_counts(n=6, d=9, density=0.5, seed=3).toarray()
    design = Design(sp.csr_matrix(Xd), noise, True)
    rng = np.random.default_rng(7)
    rho, t = rng.random(6) + 0.2, rng.normal(size=6)
    A, r = explicit_system(Xd, noise.feature_variance_values(Xd), rho, t)
    S = np.linalg.inv(A)
    mu = S @ r
    n = 2_000 if solver == "cg" else 4_000
    draws = np.array([wls.sample(design, rho, t, rng, linalg=solver)[0] for _ in range(n)])
    assert np.all(np.abs(draws.mean(0) - mu) <= 4 * np.sqrt(np.diag(S) / n))
    emp = np.cov(draws.T)
    se = np.sqrt((np.outer(np.diag(S), np.diag(S)) + S**2) / n)
    assert np.all(np.abs(emp - S) <= 4.5 * se)


def test_perturbation_covariance_is_A():
    Xd = sparse_counts(n=8, d=4, density=0.6, seed=5).toarray()
    design = Design(Xd, Dropout(0.3), True)
    rng = np.random.default_rng(1)
    rho = rng.random(8) + 0.5
    A, _ = explicit_system(Xd, Dropout(0.3).feature_variance_values(Xd), rho, np.zeros(8))
    n = 10_000
    eta = np.array([wls.perturbation(design, rho, rng) for _ in range(n)])
    se = np.sqrt((np.outer(np.diag(A), np.diag(A)) + A**2) / n)
    assert np.all(np.abs(np.cov(eta.T) - A) <= 4.5 * se)


@pytest.mark.parametrize("solver", ["cholesky", "woodbury", "woodbury-cg"])
def test_overrelaxed_draw_preserves_gaussian_with_lag_covariance_alpha_sigma(solver,
                                                                             monkeypatch):
    """theta ~ N(mu, S) in, theta' = alpha theta + (1-alpha) mu + sqrt(1-alpha^2) xi out:
    theta' ~ N(mu, S) and Cov(theta', theta) = alpha S (4 standard errors)."""
    if solver == "woodbury-cg":  # the dual system by conjugate gradients
        monkeypatch.setattr(wls, "MAX_WOODBURY_SAMPLES", 0)
        solver = "woodbury"
    Xd = sparse_counts(n=6, d=9, density=0.5, seed=3).toarray()
    design = Design(Xd, Dropout(0.2), True)
    rng = np.random.default_rng(11)
    rho, t = rng.random(6) + 0.2, rng.normal(size=6)
    A, r = explicit_system(Xd, Dropout(0.2).feature_variance_values(Xd), rho, t)
    S = np.linalg.inv(A)
    mu = S @ r
    n, alpha = 4_000, -0.6
    prev = rng.multivariate_normal(mu, S, size=n)
    new = np.array([wls.sample(design, rho, t, rng, linalg=solver, theta=th,
                               overrelax=alpha)[0] for th in prev])
    assert np.all(np.abs(new.mean(0) - mu) <= 4 * np.sqrt(np.diag(S) / n))
    se = np.sqrt((np.outer(np.diag(S), np.diag(S)) + S**2) / n)
    assert np.all(np.abs(np.cov(new.T) - S) <= 4.5 * se)
    cross = (new - mu).T @ (prev - mu) / n
    assert np.all(np.abs(cross - alpha * S) <= 4.5 * se)
    with pytest.raises(ValueError, match="current theta"):
        wls.sample(design, rho, t, rng, overrelax=0.5)


def test_overrelaxed_cg_draw_is_warm_started_at_a_guess_of_the_draw():
    """``x0`` guesses the draw ``theta'``; with over-relaxation the solve's unknown is
    ``theta' - alpha theta``, so started from the draw itself (the same normals: a second
    call with the same seed) conjugate gradients have nothing left to do -- where a
    start at ``x0`` itself (the rule before) is ``alpha theta`` away and needs
    iterations; the draw is the same either way."""
    Xd = sparse_counts(n=40, d=12, density=0.5, seed=2).toarray()
    design = Design(Xd, Dropout(0.3), True)
    rng = np.random.default_rng(4)
    rho, t = rng.random(40) + 0.2, rng.normal(size=40)
    theta = rng.normal(size=13)
    kw = dict(linalg="cg", theta=theta, overrelax=-0.5, cg_tol=1e-12)
    cold, info = wls.sample(design, rho, t, np.random.default_rng(7), **kw)
    warm, warm_info = wls.sample(design, rho, t, np.random.default_rng(7), x0=cold, **kw)
    assert info["cg_iterations"] >= 5 and warm_info["cg_iterations"] <= 1
    np.testing.assert_allclose(warm, cold, rtol=1e-9, atol=1e-10)


def test_compiled_syrk_sums_row_blocks_of_the_weighted_gram_matrix():
    """``bayesdrop._blas.syrk_rows`` (BLAS dsyrk called from numba, upper triangle)
    accumulated over row blocks and mirrored equals ``W^T W``; only the first ``rows``
    rows of the block count."""
    from bayesdrop._blas import dsyrk_address, mirror_upper, syrk_rows, syrk_work

    rng = np.random.default_rng(0)
    W = rng.normal(size=(23, 5))
    A = np.zeros((5, 5))
    work, addr = syrk_work(), dsyrk_address()
    block = np.full((8, 5), np.nan)
    for lo in range(0, 23, 8):
        rows = min(23, lo + 8) - lo
        block[:rows] = W[lo:lo + rows]
        syrk_rows(addr, block, rows, A, work)
    mirror_upper(A)
    np.testing.assert_allclose(A, W.T @ W, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("single", [False, True])
@pytest.mark.parametrize("width", [5, 400])
def test_gram_rows_sums_w_t_w_by_gemm_on_small_products_and_by_syrk_on_large(single, width):
    """``bayesdrop._blas.gram_rows``: the upper triangle of ``W[:rows]^T W[:rows]`` added
    (float64 work: ``beta = 1``) or written (float32: ``beta = 0``), by ``gemm`` -- the
    whole square -- while ``p^2 rows <= GEMM_SMALL_MNK`` and by ``syrk`` -- the lower
    triangle left as it was -- above; only the first ``rows`` rows count."""
    from bayesdrop._blas import (
        GEMM_SMALL_MNK,
        gram_pair,
        gram_pair_single,
        gram_rows,
        syrk_work,
        syrk_work_single,
    )

    rng = np.random.default_rng(3)
    dtype = np.float32 if single else np.float64
    rows = 9
    W = np.full((rows + 4, width), np.nan, dtype=dtype)
    W[:rows] = rng.normal(size=(rows, width))
    A = np.full((width, width), 2.0, dtype=dtype)
    gram_rows(gram_pair_single() if single else gram_pair(), W, rows, A,
              syrk_work_single() if single else syrk_work())
    base = 0.0 if single else 2.0  # float32 work overwrites, float64 work adds
    exact = W[:rows].astype(np.float64).T @ W[:rows].astype(np.float64) + base
    rtol = 1e-5 if single else 1e-12
    upper = np.triu_indices(width)
    np.testing.assert_allclose(A[upper], exact[upper], rtol=rtol, atol=rtol * rows)
    lower = np.tril_indices(width, -1)
    if width * width * rows <= GEMM_SMALL_MNK:  # gemm: the whole square
        np.testing.assert_allclose(A[lower], exact[lower], rtol=rtol, atol=rtol * rows)
    else:  # syrk: the lower triangle untouched
        assert width * width * rows > GEMM_SMALL_MNK
        np.testing.assert_array_equal(A[lower], 2.0)


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_compiled_csr_cg_is_scipys_iteration_on_threads_or_not(fit_intercept, monkeypatch):
    """A CSR design's primal CG runs compiled (``kernels.csr_pcg`` on the weighted
    normal system, ``d_mm = rho`` and no ``G``): from the same
    start it reaches scipy's ``cg`` on the matrix-free operator (both to the relative
    residual 1e-12 of ``r``: the true residual stays below 1e-10 of it), in about its
    number of iterations; the row chunks on numba's threads or one after the other give
    the same bits; started at its own answer it has nothing left to do."""
    from bayesdrop.linalg.cg import jacobi_cg

    X = sparse_counts(n=2000, d=60, density=0.5, seed=4)  # 6e4 entries: two row chunks
    design = Design(X, Dropout(0.3), fit_intercept)
    rng = np.random.default_rng(5)
    rho, t = 10.0 ** rng.uniform(-2, 3, size=2000), rng.normal(size=2000)
    r = wls.normal_rhs(design, t)
    x0 = rng.normal(size=design.n_params)
    op, diag = wls.normal_operator(design, rho)
    ref, ref_its, ok = jacobi_cg(op, diag, r, x0, 1e-12)
    from bayesdrop import _threads

    out = {}
    for threads in (True, False):  # (the solve's set-up decides)
        monkeypatch.setattr(_threads, "numba_threads", lambda t=threads: t)
        out[threads] = wls._csr_cg_solve(design, rho, r, x0, 1e-12, None)
    (theta, info), (other, _) = out[True], out[False]
    assert np.array_equal(theta, other)
    assert ok and info["linalg"] == "cg" and info["cg_converged"]
    assert abs(info["cg_iterations"] - ref_its) <= 2
    assert np.linalg.norm(op @ theta - r) <= 1e-10 * np.linalg.norm(r)
    np.testing.assert_allclose(theta, ref, rtol=1e-8, atol=1e-10 * np.abs(ref).max())
    again, info = wls._csr_cg_solve(design, rho, r, theta, 1e-10, None)
    assert info["cg_iterations"] == 0 and np.array_equal(again, theta)
    # the solves of wls.solve / wls.sample on this design are these
    assert np.array_equal(wls.solve(design, rho, t, linalg="cg", cg_tol=1e-12)[0],
                          wls._csr_cg_solve(design, rho, r, None, 1e-12, None)[0])


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_weighted_normal_product_reads_x_alone_with_newtons_sums(fit_intercept):
    """``csr_hvp`` with ``d_ms = d_ss = None`` (the weighted normal system, ``X``'s entries
    alone) gives the bits of Newton's product with ``G``'s zero entries interleaved
    (``csr_hessian_entries`` at ``w = 0``, ``d_ms = d_ss = 0``), on threads or not, and
    ``base z + Xbar^T (rho * (Xbar z))`` to rounding (scipy's products); its diagonal
    ``csr_normal_diagonal`` is that pass's diagonal bit for bit and
    ``base + Xbar^T rho Xbar``'s diagonal (``Design.gram_diagonal``) to rounding."""
    from bayesdrop.linalg import kernels

    X = sparse_counts(n=2000, d=60, density=0.5, seed=7)  # two row chunks
    design = Design(X, Dropout(0.3), fit_intercept)
    rng = np.random.default_rng(8)
    rho, z = 10.0 ** rng.uniform(-2, 3, size=2000), rng.normal(size=design.n_params)
    D, n_p = design.n_features, design.n_params
    indptr, indices, data = X.indptr, X.indices.astype(np.uint32), X.data.astype(float)
    base = 2.0 + design.noise_diagonal(rho)[:D]
    zeros = np.zeros(2000)
    xg, diag = kernels.csr_hessian_entries(indptr, indices, data, data, 0.0, fit_intercept,
                                           np.zeros(D), rho, zeros, zeros, base - 2.0,
                                           np.empty(2 * data.size), np.empty(n_p))
    chunks = kernels.row_chunks(indptr)
    assert chunks.size == 3
    newton = kernels.csr_hvp(indptr, indices, xg, fit_intercept, rho, zeros, zeros, base, z,
                             np.empty(n_p), chunks, np.empty((1, D)), True)
    for threads in (True, False, None):
        out = kernels.csr_hvp(indptr, indices, data, fit_intercept, rho, None, None, base, z,
                              np.empty(n_p), chunks, np.empty((1, D)), threads)
        assert np.array_equal(out, newton)
    Xb = sp.hstack([X, np.ones((2000, 1))]).tocsr() if fit_intercept else X
    ref = Xb.T @ (rho * (Xb @ z))
    ref[:D] += base * z[:D]
    np.testing.assert_allclose(out, ref, rtol=1e-11, atol=1e-12 * np.abs(ref).max())
    normal = kernels.csr_normal_diagonal(indptr, indices, data, fit_intercept, rho, base,
                                         np.empty(n_p))
    assert np.array_equal(normal, diag)
    gram = design.gram_diagonal(rho)
    gram[:D] += base
    np.testing.assert_allclose(normal, gram, rtol=1e-12)


def test_compiled_csr_cg_checks_the_shapes_it_indexes():
    """The compiled CG reads ``rho`` and ``x0`` without bounds checks: a wrong length is a
    ValueError naming the argument, as scipy's operator products raised one before."""
    design = Design(sparse_counts(n=30, d=5, density=0.5, seed=1), Dropout(0.3))
    rho, t = np.ones(30), np.ones(30)
    with pytest.raises(ValueError, match="rho has shape"):
        wls.solve(design, np.ones(29), t, linalg="cg")
    with pytest.raises(ValueError, match="x0 has shape"):
        wls.solve(design, rho, t, linalg="cg", x0=np.zeros(5))


@pytest.mark.parametrize("block", [1, 3])
def test_csr_cg_in_blocks_takes_the_same_steps_as_one_call(block, monkeypatch):
    """``kernels.csr_pcg_blocks`` (the Python callers' CG: IRLS, the sampler's primal
    system, Newton-CG's Python loop) returns to Python between blocks of products so that
    Ctrl-C acts; cut into blocks of 1 or 3 products it gives the one call's ``p`` and
    iteration count, bit for bit."""
    from bayesdrop import _blocks
    from bayesdrop.linalg import kernels
    from bayesdrop.model.design import unsigned_indices

    X = sparse_counts(n=400, d=80, density=0.2, seed=7)
    rng = np.random.default_rng(8)
    rho = 10.0 ** rng.uniform(-2, 2, size=400)
    indptr, indices = X.indptr, unsigned_indices(X.indices)
    data = np.ascontiguousarray(X.data, dtype=np.float64)
    base = 2.0 + rng.uniform(0, 1, size=80)
    diag = kernels.csr_normal_diagonal(indptr, indices, data, True, rho, base, np.empty(81))
    g = rng.normal(size=81)
    chunks = kernels.row_chunks(indptr)
    args = (indptr, indices, data, True, rho, None, None, base, 1.0 / diag, g, 1e-12, 500,
            chunks, None)
    p_one, k_one = kernels.csr_pcg(*args)
    monkeypatch.setattr(_blocks, "next_block", lambda n, seconds, most=1000: block)
    p_blocks, k_blocks = kernels.csr_pcg_blocks(*args)
    assert 20 < k_one < 500 and k_blocks == k_one
    np.testing.assert_array_equal(p_blocks, p_one)
