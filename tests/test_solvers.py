"""Solver conformance: every optimiser reaches the same minimum of J as independent references.

References: scipy's L-BFGS-B on ``J`` with its analytic gradient at a tight tolerance, and
scikit-learn at zero noise. Every solver (IRLS, Newton with Cholesky, Newton-CG) must
reach a ``J`` no larger than L-BFGS's plus 1e-9 relative, on every loss x noise model x
dense / sparse x intercept on / off; and the IRLS map must leave Newton's optimum fixed.
"""

import itertools
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import approx_fprime
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

from bayesdrop import (AdditiveGaussian, DropoutLogisticRegression, DropoutSVC, DropoutSVR,
                       Dropout, EpsilonInsensitiveLoss, HingeLoss, LogisticLoss, NoNoise,
                       Poisson, Problem, SquaredLoss)
from bayesdrop.linalg import hessian
from bayesdrop.linalg.backend import InMemoryRows
from bayesdrop.model.problem import subsample_rows
from bayesdrop.solvers import fit_problem, fit_rows, irls, newton

from .conftest import assert_conformance, conformance_data, lbfgs_reference

LOSSES = {
    "hinge": lambda: HingeLoss(0.7),
    "logistic": lambda: LogisticLoss(0.7),
    "epsilon": lambda: EpsilonInsensitiveLoss(0.7, 0.2),
    "squared": lambda: SquaredLoss(0.7, binary=False),
}
NOISES = {
    "dropout": lambda: Dropout(0.3),
    "gaussian": lambda: AdditiveGaussian(0.5),
    "poisson": lambda: Poisson(),
    "none": lambda: NoNoise(),
}


def _data(kind, loss_name, seed=0):
    return conformance_data(kind, loss_name in ("hinge", "logistic"), seed)


_lbfgs = lbfgs_reference


CASES = [c for c in itertools.product(LOSSES, NOISES, ("dense", "sparse"), (True, False))
         if not (c[1] == "none" and c[0] in ("hinge", "epsilon"))]  # non-smooth: IRLS tests


def _ids(case):
    return "-".join(str(c) for c in case)


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_every_solver_reaches_the_lbfgs_minimum(case):
    loss_name, noise_name, kind, intercept = case
    X, y = _data(kind, loss_name)
    problem = Problem.create(X, y, LOSSES[loss_name](), NOISES[noise_name](), intercept)
    theta_ref, J_ref = _lbfgs(problem)
    results = {
        "irls": irls.fit(problem, tol=1e-13, max_iter=5000),
        "newton-cholesky": newton.fit(problem, linalg="cholesky", compiled=False),
        "newton-cg": newton.fit(problem, linalg="cg", compiled=False),
    }
    if kind == "dense":
        results["newton-compiled"] = newton.fit(problem, linalg="cholesky", compiled=True)
    else:
        results["newton-cg-compiled"] = newton.fit(problem, linalg="cg", compiled=True)
    assert_conformance(problem, results, theta_ref, J_ref)


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_newton_cg_reaches_the_lbfgs_minimum_on_a_wide_design(case):
    """The conformance check on ``N < D / 2`` (the wide branch of Newton-CG's
    preconditioner; the hinge's IRLS start solved to ``START_CG_RTOL``)."""
    loss_name, noise_name, kind, intercept = case
    X, y = _data(kind, loss_name, seed=3)
    X, y = X[:3], y[:3]  # 3 x 7: the data part of H has rank <= 6 < 7
    if loss_name in ("hinge", "logistic") and np.all(y == y[0]):
        y = y.copy()
        y[0] = -y[0]
    problem = Problem.create(X, y, LOSSES[loss_name](), NOISES[noise_name](), intercept)
    assert newton.steps.cg_wide(problem.design)
    theta_ref, J_ref = _lbfgs(problem)
    scale = max(abs(J_ref), 1.0)
    for compiled in ([False, True] if kind == "sparse" else [False]):
        res = newton.fit(problem, linalg="cg", compiled=compiled)
        assert res.converged
        assert problem.objective(res.theta) <= J_ref + 1e-9 * scale
        np.testing.assert_allclose(res.theta, theta_ref, rtol=0,
                                   atol=1e-4 * max(1.0, np.max(np.abs(theta_ref))))


@pytest.mark.parametrize("case", [c for c in CASES if c[2] == "dense"], ids=_ids)
def test_irls_fixed_point_is_the_newton_optimum(case):
    """The mission's "validate IRLS fixed points": the IRLS map leaves argmin J fixed."""
    loss_name, noise_name, kind, intercept = case
    X, y = _data(kind, loss_name, seed=1)
    problem = Problem.create(X, y, LOSSES[loss_name](), NOISES[noise_name](), intercept)
    theta = newton.fit(problem, tol=1e-14).theta
    mapped, _ = irls.irls_map(problem, theta)
    np.testing.assert_allclose(mapped, theta, rtol=1e-7, atol=1e-9)
    _, grad = problem.objective(theta, gradient=True)
    assert np.max(np.abs(grad)) <= 1e-7 * max(problem.objective(theta), 1.0)


@pytest.mark.parametrize("blocked", [False, True], ids=["whole", "blocked"])
@pytest.mark.parametrize("case", [c for c in CASES if c[1] != "none"], ids=_ids)
def test_hessian_products_match_finite_differences(case, blocked, monkeypatch):
    """``blocked``: the dense Hessian by the cache-sized stacked blocks of
    ``_dense_hessian_blocked`` (forced, with blocks of 7 rows so that the last is
    partial), which large dense designs use."""
    if blocked:
        monkeypatch.setattr(hessian, "HESSIAN_BLOCKED_MIN", 0)
        monkeypatch.setattr(hessian, "HESSIAN_BLOCK", 7)
    loss_name, noise_name, kind, intercept = case
    X, y = _data(kind, loss_name, seed=2)
    problem = Problem.create(X, y, LOSSES[loss_name](), NOISES[noise_name](), intercept)
    rng = np.random.default_rng(3)
    theta = rng.normal(size=problem.design.n_params) * 0.3
    _, _, curv = hessian.curvature(problem, theta)
    H = hessian.hessian_matrix(problem.design, curv)
    fd = np.array([approx_fprime(theta, lambda t: problem.objective(t, gradient=True)[1][i],
                                 1e-6) for i in range(theta.size)])
    np.testing.assert_allclose(H, fd, rtol=1e-4, atol=1e-4 * np.max(np.abs(H)))
    np.testing.assert_allclose(H, H.T, rtol=1e-12, atol=1e-12 * np.max(np.abs(H)))
    z = rng.normal(size=theta.size)
    np.testing.assert_allclose(hessian.hessian_vector_product(problem.design, curv, z), H @ z,
                               rtol=1e-10, atol=1e-10 * np.max(np.abs(H)))
    np.testing.assert_allclose(hessian.hessian_diagonal(problem.design, curv), np.diag(H),
                               rtol=1e-10, atol=1e-10 * np.max(np.abs(H)))


@pytest.mark.parametrize("kind", ["dense", "sparse"])
def test_newton_at_zero_noise_matches_scikit_learn_logistic(kind):
    X, y = _data(kind, "logistic", seed=4)
    ours = DropoutLogisticRegression(C=0.7, noise="none", solver="newton").fit(X, y)
    ref = LogisticRegression(C=0.7, tol=1e-12, max_iter=10_000).fit(X, y)
    problem = Problem.create(X, y, LogisticLoss(0.7), "none")
    J_ours = problem.objective(problem.design.pack(ours.coef_[0], ours.intercept_[0]))
    J_ref = problem.objective(problem.design.pack(ref.coef_[0], ref.intercept_[0]))
    assert J_ours <= J_ref + 1e-9 * J_ref
    np.testing.assert_allclose(ours.coef_, ref.coef_, atol=1e-5)


def test_auto_picks_newton_for_smooth_J_and_irls_at_zero_noise_hinge():
    X, y = _data("dense", "hinge")
    est = DropoutSVC(C=0.7, noise_level=0.3).fit(X, y)
    prob = Problem.create(X, y, HingeLoss(0.7), Dropout(0.3))
    assert fit_problem(prob).solver == "newton"
    assert fit_problem(Problem.create(X, y, HingeLoss(0.7), "none")).solver.startswith("dual")
    ref = DropoutSVC(C=0.7, noise_level=0.3, solver="irls", tol=1e-13).fit(X, y)
    np.testing.assert_allclose(est.coef_, ref.coef_, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("Est, target", [(DropoutSVC, "binary"), (DropoutLogisticRegression, "binary"),
                                         (DropoutSVR, "real")])
def test_estimators_give_the_same_fit_with_every_solver(Est, target):
    X, y = _data("sparse", "hinge" if target == "binary" else "epsilon", seed=5)
    fits = [Est(C=0.7, noise_level=0.3, solver=s, linalg=b, tol=1e-12).fit(X, y)
            for s, b in [("irls", "auto"), ("newton", "cholesky"), ("newton", "cg")]]
    for other in fits[1:]:
        np.testing.assert_allclose(other.coef_, fits[0].coef_, rtol=1e-6, atol=1e-8)


def test_solver_picks_the_optimiser_and_linalg_the_back_end():
    X, y = _data("dense", "logistic")
    with pytest.raises(ValueError, match="pass linalg='cg'"):
        DropoutLogisticRegression(C=0.7, noise_level=0.3, solver="cg").fit(X, y)
    with pytest.raises(ValueError, match="solver must be one of"):
        DropoutSVC(solver="lbfgs").fit(X, y)
    with pytest.raises(ValueError, match="linalg must be one of"):
        DropoutSVC(linalg="qr").fit(X, y)
    with pytest.raises(ValueError, match="woodbury"):
        DropoutSVC(solver="newton", linalg="woodbury").fit(X, y)


def test_newton_refuses_a_non_smooth_objective():
    X, y = _data("dense", "hinge")
    with pytest.raises(ValueError, match="IRLS"):
        newton.fit(Problem.create(X, y, HingeLoss(1.0), "none"))


def test_newton_warm_start_converges_at_once():
    X, y = _data("dense", "logistic")
    problem = Problem.create(X, y, LogisticLoss(1.0), Dropout(0.3))
    first = newton.fit(problem)
    again = newton.fit(problem, first.theta)
    assert again.n_iter <= 1 and again.objective[-1] <= first.objective[-1] * (1 + 1e-14)


def test_newton_result_is_finite_for_huge_C_and_tiny_C():
    X, y = _data("dense", "logistic")
    for C in (1e-8, 1e6):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            res = newton.fit(Problem.create(X, y, LogisticLoss(C), Dropout(0.3)))
        assert res.converged and np.all(np.isfinite(res.theta))


def test_sparse_input_is_never_densified_by_newton_cg(monkeypatch):
    X, y = _data("sparse", "logistic")
    problem = Problem.create(sp.csr_matrix(X), y, LogisticLoss(1.0), Dropout(0.3))

    def boom(*args, **kwargs):
        raise AssertionError("densified")

    monkeypatch.setattr(sp.csr_matrix, "toarray", boom)
    monkeypatch.setattr(sp.csr_matrix, "todense", boom)
    res = newton.fit(problem, linalg="cg")
    assert res.converged and res.linalg == "cg"


@pytest.mark.parametrize("loss_name", ["logistic", "hinge"])
def test_newton_cg_tolerance_is_floored_and_reaches_the_optimum(loss_name, monkeypatch):
    """Newton-CG never asks CG for a relative residual below ``CG_FORCING_FLOOR`` (the
    forcing term shrinks below it near the optimum), and at the default ``tol`` still
    ends within 1e-10 of the minimum of ``J`` (L-BFGS-B's at a tight tolerance)."""
    from bayesdrop.linalg import kernels

    rng = np.random.default_rng(11)
    X = sp.random(300, 400, density=0.05, random_state=12, format="csr")
    X.data = np.abs(rng.normal(size=X.nnz)) + 0.1
    y = np.where(X @ rng.normal(size=400) + 0.1 * rng.normal(size=300) > 0, 1.0, -1.0)
    problem = Problem.create(X, y, LOSSES[loss_name](), Dropout(0.3))
    asked = []
    solve = kernels.csr_pcg_blocks

    def spy(*args):
        asked.append(args[10])  # rtol
        return solve(*args)

    monkeypatch.setattr(kernels, "csr_pcg_blocks", spy)
    res = newton.fit(problem, linalg="cg", compiled=False)  # the Python loop: spied on
    if loss_name == "hinge":  # first the IRLS start's solve, to its own tolerance
        assert asked.pop(0) == newton.START_CG_RTOL
    assert res.converged and len(asked) >= 3
    assert min(asked) == newton.CG_FORCING_FLOOR  # reached, never undercut
    J_ref = _lbfgs(problem)[1]
    assert res.objective[-1] <= J_ref * (1 + 1e-10)


@pytest.mark.parametrize("shape", [(150, 1500), (1500, 150)])
@pytest.mark.parametrize("loss_name", ["logistic", "hinge"])
def test_cg_preconditioner_saves_products_over_jacobi(loss_name, shape, monkeypatch):
    """Newton-CG's preconditioner (penalty and noise diagonal on a wide design, Jacobi on a
    tall one; the intercept at its mean curvature) needs fewer Hessian-vector products
    than the plain Jacobi diagonal of ``H``, and both reach the same optimum."""
    from bayesdrop.linalg import kernels

    n, d = shape
    rng = np.random.default_rng(21)
    X = sp.random(n, d, density=0.02, random_state=22, format="lil")
    for i in range(n):  # every example noisy: the hinge's J is smooth
        X[i, i % d] = 1.0
    X = X.tocsr()
    X.data = np.abs(rng.normal(size=X.nnz)) + 0.1
    y = np.where(X @ rng.normal(size=d) + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    problem = Problem.create(X, y, LOSSES[loss_name](), Dropout(0.3))
    assert newton.steps.cg_wide(problem.design) == (n < d)
    products = []
    solve = kernels.csr_pcg_blocks

    def spy(*args):
        p, k = solve(*args)
        products.append(k)
        return p, k

    monkeypatch.setattr(kernels, "csr_pcg_blocks", spy)
    ours = newton.fit(problem, linalg="cg", compiled=False)  # the Python loop: spied on
    n_ours, products[:] = sum(products), []
    monkeypatch.setattr(newton.steps, "cg_preconditioner",
                        lambda design, curv, ridge, diagonal=None:
                        hessian.hessian_diagonal(design, curv))
    jacobi = newton.fit(problem, linalg="cg", compiled=False)
    n_jacobi = sum(products)
    assert ours.converged and jacobi.converged
    assert n_ours < n_jacobi
    J_ref = _lbfgs(problem)[1]
    assert ours.objective[-1] <= J_ref * (1 + 1e-10)
    assert jacobi.objective[-1] <= J_ref * (1 + 1e-8)  # the default tol


def test_an_all_zero_row_under_dropout_keeps_newton_a_quiet_non_empty_row_does_not():
    """An all-zero row under dropout has zero noise variance: its hinge term keeps a kink,
    in ``b`` alone -- Newton still applies (:mod:`bayesdrop.solvers.newton.empty_rows`).
    A row without noise whose ``x`` is not zero (a variance operator with a zero row)
    has a kink in ``w``: IRLS."""
    from bayesdrop import Design
    from bayesdrop.model.noise import FeatureVariance

    X, y = _data("dense", "hinge")
    X[0] = 0.0
    problem = Problem.create(X, y, HingeLoss(0.7), Dropout(0.3))
    assert newton.applicable(problem)
    assert fit_problem(problem).solver == "newton"
    X[0] = 1.0
    M = X ** 2
    M[0] = 0.0
    design = Design(X, FeatureVariance(M, 0.3 / 0.7, X.shape))
    quiet = Problem(design, HingeLoss(0.7), problem.y)
    assert not newton.applicable(quiet)
    assert fit_problem(quiet).solver == "irls"
    assert newton.applicable(Problem.create(X, y, LogisticLoss(0.7), Dropout(0.3)))


def test_auto_hands_over_to_irls_where_the_optimum_is_not_smooth():
    """No signal: the optimum is w = 0 with examples on the margin, where the noise term
    sqrt(zeta^2 + s) is not differentiable in w although every row is noisy ("auto"
    certifies the bare model before Newton or after its trap check, or hands over to
    IRLS)."""
    rng = np.random.default_rng(0)
    X = rng.normal(100.0, 1.0, size=(100, 2))
    y = np.where(rng.random(100) < 0.57, 1.0, -1.0)
    problem = Problem.create(X, y, HingeLoss(1.0), Dropout(0.5))
    assert newton.applicable(problem)
    res = fit_problem(problem)
    ref = irls.fit(problem, tol=1e-13, max_iter=10_000)
    assert res.converged and res.solver in ("newton", "newton+irls", "newton+bare", "bare")
    assert res.objective[-1] <= ref.objective[-1] + 1e-9 * ref.objective[-1]
    assert np.all(np.diff(res.objective) <= 1e-12 * res.objective[0])


@pytest.mark.parametrize("kind", ["dense", "sparse"])
@pytest.mark.parametrize("noise", ["dropout", "poisson", "none"])
def test_compiled_row_passes_equal_the_generic_products(kind, noise):
    X, y = _data(kind, "logistic", seed=6)
    problem = Problem.create(X, y, LogisticLoss(0.7), NOISES[noise](), True)
    design = problem.design
    assert design.row_kernel_arrays() is not None
    rng = np.random.default_rng(7)
    _, _, curv = hessian.curvature(problem, rng.normal(size=design.n_params))
    z = rng.normal(size=design.n_params)
    compiled = (hessian.hessian_vector_product(design, curv, z),
                hessian.hessian_diagonal(design, curv))
    design._row_kernel = None  # force the generic scipy / numpy products
    generic = (hessian.hessian_vector_product(design, curv, z),
               hessian.hessian_diagonal(design, curv))
    for a, b in zip(compiled, generic):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12 * np.max(np.abs(b)))


@pytest.mark.parametrize("noise", ["dropout", "poisson"])
def test_sparse_hessian_products_do_not_depend_on_the_index_type(noise):
    """CSR with int64 indices (what scipy stores past 2^31 entries) takes the compiled
    products too, and gives the same bits as int32 indices (read through an unsigned
    view); both equal the dense Hessian."""
    X, y = _data("sparse", "logistic", seed=8)
    X64 = X.copy()
    X64.indices = X64.indices.astype(np.int64)
    X64.indptr = X64.indptr.astype(np.int64)
    rng = np.random.default_rng(9)
    theta = rng.normal(size=X.shape[1] + 1)
    z = rng.normal(size=theta.size)
    out = []
    for Xk in (X, X64):
        problem = Problem.create(Xk, y, LogisticLoss(0.7), NOISES[noise](), True)
        assert problem.design.row_kernel_arrays()[0] == "csr"
        curv = hessian.curvature(problem, theta)[2]
        op = hessian.hessian_operator(problem.design, curv, diagonal=True)
        out.append((op(z), op.diagonal))
    assert X64.indices.dtype == np.int64 and X.indices.dtype == np.int32
    np.testing.assert_array_equal(out[0][0], out[1][0])
    np.testing.assert_array_equal(out[0][1], out[1][1])
    H = hessian.hessian_matrix(problem.design, curv)
    np.testing.assert_allclose(out[0][0], H @ z, rtol=1e-12, atol=1e-12 * np.max(np.abs(H)))
    np.testing.assert_allclose(out[0][1], np.diag(H), rtol=1e-12,
                               atol=1e-12 * np.max(np.abs(H)))


@pytest.mark.parametrize("intercept", [True, False])
@pytest.mark.parametrize("noise", ["dropout", "multiplicative"])
@pytest.mark.parametrize("n", [4001, 7])
def test_gradient_pair_from_one_pass_equals_the_two_products(noise, intercept, n):
    """With ``V = scale X * X`` on a dense design, ``(Xbar^T a, V^T rho)`` come from one
    pass over ``X`` (``Design.rmatvec_pair``); they equal the two separate products to
    rounding (row counts not a multiple of the four-row unrolling included), and other
    designs take the separate products."""
    from bayesdrop import MultiplicativeGaussian

    rng = np.random.default_rng(9)
    X = rng.normal(size=(n, 13)) * rng.uniform(0.1, 10.0, size=13)
    y = np.where(rng.normal(size=n) > 0, 1.0, -1.0)
    model = Dropout(0.3) if noise == "dropout" else MultiplicativeGaussian(0.4)
    design = Problem.create(X, y, LogisticLoss(0.7), model, intercept).design
    assert design._squares
    a, rho = rng.normal(size=n), rng.normal(size=n)
    g, nd = design.rmatvec_pair(a, rho)
    g_ref = np.asarray(design.X.T @ a)
    if intercept:
        g_ref = np.append(g_ref, np.sum(a))
    nd_ref = design.variance.scale * ((X * X).T @ rho)
    bound = 8 * n * np.finfo(float).eps
    np.testing.assert_allclose(g, g_ref, rtol=0,
                               atol=bound * np.max(np.abs(np.c_[X, np.ones(n)].T) @ np.abs(a)))
    np.testing.assert_allclose(nd, nd_ref, rtol=0,
                               atol=bound * design.variance.scale * np.max((X * X).T @ np.abs(rho)))
    # Fortran-ordered, sparse and Poisson designs: the two products
    for other in (Problem.create(np.asfortranarray(X), y, LogisticLoss(0.7), model).design,
                  Problem.create(sp.csr_matrix(X), y, LogisticLoss(0.7), model).design,
                  Problem.create(np.abs(X), y, LogisticLoss(0.7), Poisson()).design):
        assert not other._squares


@pytest.mark.parametrize("noise", ["dropout", "poisson"])
@pytest.mark.parametrize("intercept", [True, False])
def test_curvature_entries_from_the_gradients_pass_equal_the_separate_passes(noise,
                                                                             intercept):
    """On a CSR design ``curvature(..., entries=True)`` takes the gradient, the noise
    diagonal and the CG products' entries from one pass: the same bits as the gradient's
    pass (``Design.rmatvec_pair``) and the Hessian's set-up pass
    (``kernels.csr_hessian_entries``) apart, and the same Hessian products."""
    from bayesdrop.linalg import kernels

    rng = np.random.default_rng(11)
    X = sp.random(60, 200, density=0.05, format="csr", random_state=3)
    y = np.where(rng.normal(size=60) > 0, 1.0, -1.0)
    problem = Problem.create(X, y, LogisticLoss(0.7), NOISES[noise](), intercept)
    theta = 0.3 * rng.normal(size=problem.design.n_params)
    J, g, curv = hessian.curvature(problem, theta, entries=True)
    J0, g0, curv0 = hessian.curvature(problem, theta)
    assert curv0.entries is None and J == J0
    np.testing.assert_array_equal(g, g0)
    np.testing.assert_array_equal(curv.noise_diag, curv0.noise_diag)
    indptr, indices, xdata, mdata = problem.design.row_kernel_arrays()[1]
    xg = kernels.csr_hessian_entries(indptr, indices, xdata, mdata,
                                     float(problem.design.variance.scale), intercept,
                                     curv0.w, curv0.d_mm, curv0.d_ms, curv0.d_ss,
                                     curv0.noise_diag, np.empty(2 * xdata.size),
                                     np.empty(0))[0]
    np.testing.assert_array_equal(curv.entries, xg)
    z = rng.normal(size=problem.design.n_params)
    np.testing.assert_array_equal(hessian.hessian_operator(problem.design, curv)(z),
                                  hessian.hessian_operator(problem.design, curv0)(z))


@pytest.mark.parametrize("intercept", [True, False])
def test_compiled_sparse_cg_equals_the_python_loop_and_solves_the_system(intercept):
    """The compiled PCG of a CSR Hessian: the same iterates as the Python loop on the
    generic products, and at a tight tolerance the dense solution ``-H^{-1} g``.

    An intermediate CG iterate is sensitive to rounding (here a 1-ulp change of ``g``
    moves the 5th iterate by ~1e-9 relative), so the two loops, whose products round
    differently on different CPUs and BLAS builds, are compared within 20 times the
    Python loop's own measured sensitivity to 1-ulp perturbations of ``g`` (a different
    algorithm would differ at order 1)."""
    X, y = _data("sparse", "logistic", seed=9)
    problem = Problem.create(X, y, LogisticLoss(0.7), Dropout(0.4), intercept)
    design = problem.design
    rng = np.random.default_rng(10)
    _, g, curv = hessian.curvature(problem, rng.normal(size=design.n_params))
    H = hessian.hessian_matrix(design, curv)
    eps = np.finfo(float).eps
    for rtol in (0.3, 1e-3, 1e-12):
        p, k = newton.steps.direction_cg(design, curv, g, rtol, 500, newton.RIDGE)
        assert np.linalg.norm(H @ p + g) <= rtol * np.linalg.norm(g) * (1 + 1e-9)
        saved, design._row_kernel = design.row_kernel_arrays(), None
        p_py, k_py = newton.steps.direction_cg(design, curv, g, rtol, 500, newton.RIDGE)  # Python loop, scipy
        spread = max(np.linalg.norm(newton.steps.direction_cg(
            design, curv, g * (1 + eps * rng.choice([-1.0, 1.0], size=g.shape)), rtol,
            500, newton.RIDGE)[0] - p_py) for _ in range(8))
        design._row_kernel = saved
        assert k == k_py and spread <= 1e-6 * np.linalg.norm(p_py)
        assert np.linalg.norm(p - p_py) <= 20 * max(spread, 10 * eps * np.linalg.norm(p_py))
    np.testing.assert_allclose(p, -np.linalg.solve(H, g), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("case", [c for c in CASES if c[2] == "dense"], ids=_ids)
def test_compiled_newton_takes_the_same_steps(case):
    """The compiled dense loop and the Python loop are one algorithm: same iterates."""
    loss_name, noise_name, kind, intercept = case
    X, y = _data(kind, loss_name, seed=8)
    problem = Problem.create(X, y, LOSSES[loss_name](), NOISES[noise_name](), intercept)
    a = newton.fit(problem, compiled=True, linalg="cholesky")
    b = newton.fit(problem, compiled=False, linalg="cholesky")
    assert a.n_iter == b.n_iter
    np.testing.assert_allclose(a.objective, b.objective, rtol=1e-12)
    np.testing.assert_allclose(a.theta, b.theta, rtol=1e-9, atol=1e-12)
    # at the optimum the gradient is rounding noise: equal to its size only
    assert a.grad_norm == pytest.approx(b.grad_norm, rel=1e-6, abs=1e-6)


@pytest.mark.parametrize("shape, compiled", [((1800, 64), True), ((1500, 100), True),
                                             ((2100, 20), False), ((1500, 150), False),
                                             ((150, 400), False)])
@pytest.mark.parametrize("loss", [HingeLoss(0.1), LogisticLoss(1.0)], ids=["hinge", "lr"])
def test_auto_runs_the_compiled_dense_loop_up_to_its_size(shape, compiled, loss, monkeypatch):
    """``compiled="auto"`` runs the compiled dense loop (once at hand) on designs of at
    most ``newton.MAX_COMPILED_ROWS`` rows, ``newton.MAX_COMPILED_FEATURES`` features and
    ``newton.MAX_COMPILED_ENTRIES`` entries -- digits' size, 1797 x 64, and 1500 x 100,
    where it is faster than the Python loop (see the constants' measurements) -- and the
    Python loop beyond (150 x 400: few entries, but wide); both reach the same optimum."""
    rng = np.random.default_rng(5)
    X = rng.uniform(size=shape) * (rng.uniform(size=shape) < 0.6)
    z = X @ rng.normal(size=shape[1])
    y = np.where(z - np.median(z) + 0.3 * rng.normal(size=shape[0]) > 0, 1.0, -1.0)
    problem = Problem.create(X, y, loss, Dropout(0.2))
    newton.fit(problem, compiled=True)  # at hand
    runs = []
    real = newton._run_compiled
    monkeypatch.setattr(newton, "_run_compiled", lambda *a: runs.append(1) or real(*a))
    auto = newton.fit(problem)
    python = newton.fit(problem, compiled=False)
    assert len(runs) == int(compiled)
    assert auto.converged and python.converged
    assert auto.objective[-1] == pytest.approx(python.objective[-1], rel=1e-10)


@pytest.mark.parametrize("wide", [False, True])
@pytest.mark.parametrize("case", [c for c in CASES if c[2] == "sparse"], ids=_ids)
def test_compiled_newton_cg_takes_the_same_steps(case, wide, monkeypatch):
    """Newton-CG's compiled CSR loop and the Python loop are one algorithm: the same
    steps, so the same iterates to rounding (the compiled line's sums run in another
    order than scipy's products), on a tall design (CG with ``H``'s diagonal) and a wide
    one (the entries from the gradient's pass)."""
    loss_name, noise_name, kind, intercept = case
    X, y = _data(kind, loss_name, seed=8)
    if wide:
        X = sp.hstack([X] * 8, format="csr")
        X = X[: X.shape[1] // 3]
        y = y[: X.shape[0]]
    problem = Problem.create(X, y, LOSSES[loss_name](), NOISES[noise_name](), intercept)
    assert newton.steps.cg_wide(problem.design) == wide
    python_loop = newton.loop.newton_loop
    if problem.design.row_kernel_arrays() is not None:  # the compiled loop only
        import bayesdrop.solvers.newton.compiled_csr  # noqa: F401 (compiled from the loop)

        def python_loop_called(*args):
            raise AssertionError("the Python loop ran")

        monkeypatch.setattr(newton.loop, "newton_loop", python_loop_called)
    a = newton.fit(problem, compiled=True, linalg="cg")
    # every iterate, not only the optimum both reach: the first steps, stopped early
    early = [newton.fit(problem, compiled=True, linalg="cg", max_iter=k, warn=False).theta
             for k in (1, 2)]
    monkeypatch.setattr(newton.loop, "newton_loop", python_loop)
    b = newton.fit(problem, compiled=False, linalg="cg")
    assert a.n_iter == b.n_iter and a.n_solves == b.n_solves
    np.testing.assert_allclose(a.objective, b.objective, rtol=1e-12)
    np.testing.assert_allclose(a.theta, b.theta, rtol=1e-8, atol=1e-11)
    for k, theta in zip((1, 2), early):
        ref = newton.fit(problem, compiled=False, linalg="cg", max_iter=k, warn=False).theta
        np.testing.assert_allclose(theta, ref, rtol=1e-9, atol=1e-12)


def test_compiled_newton_cg_needs_compiled_row_passes():
    """``compiled=True`` on a CSR design without compiled row passes (a variance of
    another sparsity pattern) runs the Python loop: the same fit as ``compiled=False``."""
    X, y = _data("sparse", "logistic")
    problem = Problem.create(X, y, LogisticLoss(1.0), AdditiveGaussian(0.5))
    assert problem.design.row_kernel_arrays() is None
    a = newton.fit(problem, compiled=True, linalg="cg")
    b = newton.fit(problem, compiled=False, linalg="cg")
    assert np.array_equal(a.theta, b.theta)


@pytest.mark.parametrize("intercept", [True, False])
def test_compiled_scores_equal_the_products_and_propagate_inf_and_nan(intercept):
    """The compiled loop's row sums (reassociated: SIMD lanes, fused multiply-adds) are
    ``Xbar theta`` and ``scale M w^2`` to rounding, and inf / NaN reach the scores as in
    numpy's products (``fastmath`` without the no-inf / no-NaN assumptions)."""
    from bayesdrop.solvers.newton.compiled import _scores

    rng = np.random.default_rng(4)
    n, D = 37, 29
    X = rng.normal(size=(n, D))
    M = rng.uniform(size=(n, D))
    theta = rng.normal(size=D + 1)
    X[3, 5] = np.inf
    X[7, 2] = np.nan
    M[11, 4] = np.inf
    m, s = np.empty(n), np.empty(n)
    _scores(X, M, 0.3, intercept, theta, m, s)
    w = theta[:D]
    with np.errstate(invalid="ignore"):
        m_ref = X @ w + (theta[D] if intercept else 0.0)
        s_ref = 0.3 * (M @ (w * w))
    np.testing.assert_array_equal(np.isnan(m), np.isnan(m_ref))
    np.testing.assert_array_equal(np.isinf(m), np.isinf(m_ref))
    np.testing.assert_array_equal(np.isinf(s), np.isinf(s_ref))
    ok = np.isfinite(m_ref)
    bound = 8 * D * np.finfo(float).eps * (np.abs(X[ok]) @ np.abs(w) + 1.0)
    assert np.all(np.abs(m[ok] - m_ref[ok]) <= bound)
    ok = np.isfinite(s_ref)
    np.testing.assert_allclose(s[ok], s_ref[ok], rtol=8 * D * np.finfo(float).eps)


@pytest.mark.parametrize("Est", [DropoutSVC, DropoutLogisticRegression, DropoutSVR])
@pytest.mark.parametrize("kind", ["dense", "sparse"])
def test_overflow_scale_features_get_a_clear_error(Est, kind):
    X, y = _data(kind, "logistic")
    X = X * 1.0
    if kind == "sparse":
        X = X.tolil()
        X[3, 5] = 1e200
        X = X.tocsr()
    else:
        X[3, 5] = 1e200
    with pytest.raises(ValueError, match=r"magnitude 1e\+200 \(feature 5\)"):
        Est(noise_level=0.3).fit(X, y)
    Xs = X * 1e-150  # tiny scale is fine: a finite result
    assert np.all(np.isfinite(Est(noise_level=0.3).fit(Xs, y).coef_))


def test_overflow_scale_regression_targets_get_a_clear_error():
    X, y = _data("dense", "epsilon")
    with pytest.raises(ValueError, match="y has an entry of magnitude"):
        DropoutSVR(noise_level=0.3).fit(X, y * 1e200)


def test_estimators_report_the_optimiser_they_used():
    X, y = _data("dense", "hinge")
    assert DropoutSVC(C=0.7, noise_level=0.3).fit(X, y).solver_.tolist() == ["newton"]
    assert DropoutSVC(C=0.7, noise="none").fit(X, y).solver_[0].startswith("dual")
    assert DropoutSVC(C=0.7, noise="none", solver="smoothing").fit(X, y).solver_.tolist() == [
        "smoothing"]
    assert DropoutSVC(C=0.7, noise_level=0.3, solver="irls").fit(X, y).solver_.tolist() == ["irls"]
    Xr, yr = _data("dense", "epsilon")
    assert DropoutSVR(C=0.7, noise_level=0.3).fit(Xr, yr).solver_ == "newton"


@pytest.mark.parametrize("kind", ["dense", "sparse"])
@pytest.mark.parametrize("C", [0.05, 1.0, 20.0])
def test_dual_solver_is_exact_at_zero_noise(kind, C):
    """SMO + polish: J no larger than IRLS's tight optimum or libsvm at tol 1e-12."""
    from sklearn.svm import SVC

    from bayesdrop.solvers import dual

    X, y = _data(kind, "hinge", seed=9)
    problem = Problem.create(X, y, HingeLoss(C), "none")
    res = dual.fit(problem)
    ref = irls.fit(problem, tol=1e-14, max_iter=20_000, warn=False)
    svc = SVC(kernel="linear", C=C, tol=1e-12).fit(X, y)
    coef = svc.coef_.toarray().ravel() if sp.issparse(svc.coef_) else svc.coef_.ravel()
    J_svc = problem.objective(np.append(coef, svc.intercept_[0]))
    J = problem.objective(res.theta)
    assert res.converged
    assert J <= min(ref.objective[-1], J_svc) * (1 + 1e-10)
    np.testing.assert_allclose(res.theta[:-1], coef, atol=1e-5 * max(1.0, np.abs(coef).max()))


def test_auto_uses_the_dual_for_the_zero_noise_hinge():
    X, y = _data("dense", "hinge")
    est = DropoutSVC(C=0.7, noise="none").fit(X, y)
    assert est.solver_[0] in ("dual", "dual+smoothing")
    # without an intercept there is no dual equality constraint to keep: the smoothing
    # solver takes the problem
    assert DropoutSVC(C=0.7, noise="none", fit_intercept=False).fit(X, y).solver_[0] == (
        "smoothing")
    with pytest.raises(ValueError, match="zero noise"):
        DropoutSVC(C=0.7, noise_level=0.3, solver="dual").fit(X, y)


def test_dual_warm_start_at_the_optimum_needs_no_smo():
    from bayesdrop.solvers import dual

    X, y = _data("dense", "hinge", seed=9)
    problem = Problem.create(X, y, HingeLoss(1.0), "none")
    cold = dual.fit(problem)
    warm = dual.fit(problem, cold.theta)
    assert warm.solver == "dual" and warm.n_iter == 0 and cold.n_iter > 0
    np.testing.assert_allclose(warm.theta, cold.theta, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("kind", ["dense", "sparse"])
@pytest.mark.parametrize("loss_name", ["logistic", "hinge"])
@pytest.mark.parametrize("noise", ["dropout", "gaussian"])
def test_subsample_start_reaches_the_same_optimum(kind, loss_name, noise, monkeypatch):
    """Newton from the optimum of every 8th example (weighted 8): the subsample's J is the
    weighted J of those rows, and the fit reaches the full fit's optimum (Newton and IRLS
    without the subsample start) with no more Hessians of the full data (fewer at 10^6
    rows: benchmarks/results/solvers.txt; ``n_solves`` counts them, ``n_iter`` also the
    steps that reuse a factor). The module's step (every 32nd row) leaves 11 rows for 8
    parameters here, a start too rough to save Hessians but still the same optimum; its
    saving is measured at 10^6 rows (benchmarks/results/solvers.txt)."""
    X, y = _data(kind, loss_name, seed=11)
    X = sp.vstack([X] * 4).tocsr() if kind == "sparse" else np.vstack([X] * 4)
    y = np.tile(y, 4)
    w = np.random.default_rng(12).uniform(0.5, 2.0, size=y.size)
    problem = Problem.create(X, y, LOSSES[loss_name](), NOISES[noise](), True, w)
    sub = subsample_rows(problem, 8)
    ref_sub = Problem.create(X[::8], y[::8], LOSSES[loss_name](), NOISES[noise](), True,
                             8 * w[::8])
    theta = np.random.default_rng(13).normal(size=problem.design.n_params)
    assert sub.objective(theta) == pytest.approx(ref_sub.objective(theta), rel=1e-12)
    full = newton.fit(problem, tol=1e-12)
    monkeypatch.setattr(newton, "SUBSAMPLE_MIN_ROWS", 100)
    assert newton._subsample_applies(problem)
    rough = newton.fit(problem, tol=1e-12)  # from every 32nd row
    monkeypatch.setattr(newton, "SUBSAMPLE_STEP", 8)
    fast = newton.fit(problem, tol=1e-12)
    ref = irls.fit(problem, tol=1e-13, max_iter=5000)
    assert fast.converged and fast.n_solves <= full.n_solves
    J = ref.objective[-1]
    for res in (fast, rough):
        assert res.converged and abs(res.objective[-1] - J) <= 1e-10 * J
        np.testing.assert_allclose(res.theta, full.theta, rtol=1e-6, atol=1e-8)


# ------------------------------------------------------- empty rows: kinks in b alone
def _with_empty_rows(sparse, n_pos, n_neg, loss, seed=0, n=120, D=6):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, D)) * (rng.random((n, D)) < 0.6)
    X[np.all(X == 0, axis=1), 0] = 1.0  # only the appended rows are empty
    y = np.where(X @ rng.normal(size=D) + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    if not loss.binary:
        y = X @ rng.normal(size=D) + 0.2 * rng.normal(size=n)
    X = np.vstack([X, np.zeros((n_pos + n_neg, D))])
    extra = [1.0] * n_pos + [-1.0] * n_neg if loss.binary else (
        [1.5] * n_pos + [-1.5] * n_neg)
    y = np.concatenate([y, extra])
    if sparse:
        X = sp.csr_matrix(X)
    return Problem.create(X, y, loss, Dropout(0.4))


@pytest.mark.parametrize("sparse,linalg", [(False, "auto"), (True, "auto"), (True, "cg")])
@pytest.mark.parametrize("loss,n_pos,n_neg,at_kink", [
    (HingeLoss(1.0), 150, 0, True),   # the y = +1 empty rows pin b to +margin
    (HingeLoss(1.0), 30, 0, False),   # they pull b up, into the middle piece
    (HingeLoss(1.0), 1, 1, False),    # two empty rows: b inside the middle piece
    (HingeLoss(0.5), 0, 40, True),    # pinned to -margin
    (EpsilonInsensitiveLoss(1.0, 0.2), 200, 0, True),  # pinned to 1.5 - epsilon
    (EpsilonInsensitiveLoss(1.0, 0.2), 60, 0, False),
], ids=["hinge-pinned+", "hinge-pulled", "hinge-free", "hinge-pinned-", "eps-pinned",
        "eps-free"])
def test_empty_rows_stay_on_newton_and_reach_the_exact_optimum(sparse, linalg, loss, n_pos,
                                                               n_neg, at_kink):
    """Rows with x_n = 0 have zero noise variance for every w under dropout: their hinge /
    epsilon-insensitive terms keep their kinks, in b alone. ``solver="auto"`` stays on
    Newton (no IRLS fallback), converges, and reaches J* of IRLS at tol 1e-14 (an
    independent solver) to 1e-10; where the empty rows pin b to a kink, b equals it."""
    from bayesdrop.solvers.newton import empty_rows

    problem = _with_empty_rows(sparse, n_pos, n_neg, loss)
    assert empty_rows.empty_rows(problem) is not None and newton.applicable(problem)
    res = fit_problem(problem, linalg=linalg)
    ref = irls.fit(problem, tol=1e-14, max_iter=20000, warn=False)
    assert res.solver == "newton" and res.converged
    J, J_ref = problem.objective(res.theta), problem.objective(ref.theta)
    assert J <= J_ref + 1e-10 * abs(J_ref)
    kinks = np.unique(loss.kinks(problem.y)[0][empty_rows.empty_rows(problem)])
    on_kink = np.min(np.abs(kinks - res.theta[-1])) < 1e-12
    assert on_kink == at_kink


# ------------------------------------------- near w = 0: a trap of tiny Newton steps
def test_newton_stalled_near_w_zero_is_not_converged_and_auto_finds_the_optimum():
    """Near ``w = 0`` every score variance vanishes: the examples on their kinks give a
    curvature ~ C / sqrt(s_n), Newton's decrement reaches the tolerance while the
    gradient stays large, and J stays near its value at ``w = 0``. Started there (a
    warm start on imbalanced data), Newton must report a stall, not convergence, and
    ``solver="auto"`` must still reach J* (IRLS at tol 1e-13 from zero) to 1e-9."""
    for seed in (0, 1):
        rng = np.random.default_rng(seed)
        X = rng.random((400, 10)) * (rng.random((400, 10)) < 0.5)
        y = np.where(X[:, 0] + 0.2 * rng.normal(size=400) > 0.6, 1.0, -1.0)
        problem = Problem.create(X, y, HingeLoss(0.1), Dropout(0.5))
        trap = np.r_[1e-9 * rng.normal(size=10), -1.0]
        with pytest.warns(ConvergenceWarning, match="stalled"):
            stuck = newton.fit(problem, trap)
        assert stuck.stalled and not stuck.converged
        ref = irls.fit(problem, tol=1e-13, max_iter=20000, warn=False)
        J_ref = problem.objective(ref.theta)
        assert problem.objective(stuck.theta) > J_ref * (1 + 1e-3)  # the trap is real
        res = fit_problem(problem, trap, warn=False)
        assert problem.objective(res.theta) <= J_ref * (1 + 1e-9)
        # the row back-end's (dask's) path handles the trap the same way (it returned J
        # 4-6 % above J*: IRLS from the stall stays in the trap)
        rows = fit_rows(InMemoryRows(problem), trap, warn=False)
        assert problem.objective(rows.theta) <= J_ref * (1 + 1e-9)
        # (Newton's early trap check leaves by IRLS and finishes by Newton, in memory
        # and through the rows)
        assert rows.solver.startswith("newton+irls") and res.solver.startswith("newton+irls")


def test_newton_crawling_in_the_trap_stops_early():
    """Digits 8-vs-rest, hinge q = 0.2, C = 0.1 (its optimum is w = 0): from zero Newton
    walks into the trap and then lowers J by about 1e-7 of itself per step; it must
    report a stall once J fell by less than STAGNATION_RTOL over STAGNATION_STEPS steps
    (it ran to max_iter = 40), and solver="auto" must still return the optimum."""
    from sklearn.datasets import load_digits

    from bayesdrop.solvers.newton import loop

    X, labels = load_digits(return_X_y=True)
    problem = Problem.create(X / 16.0, np.where(labels == 8, 1.0, -1.0), HingeLoss(0.1),
                             Dropout(0.2))
    stuck = newton.fit(problem, max_iter=40, warn=False)
    assert stuck.stalled and stuck.n_iter < 25
    h = np.asarray(stuck.objective)
    k = loop.STAGNATION_STEPS
    assert h[-1 - k] - h[-1] <= loop.STAGNATION_RTOL * abs(h[-1])
    res = fit_problem(problem, warn=False)
    ref = irls.fit(problem, tol=1e-13, max_iter=20000, warn=False)
    assert problem.objective(res.theta) <= problem.objective(ref.theta) * (1 + 1e-10)


def test_newton_stops_once_no_better_than_the_bare_model():
    """The same class with the best bare model's ``J`` given: Newton stops as a stall
    after ``TRAP_STEPS`` steps (15 by the stagnation rule without it); IRLS's end point
    from Newton's 6th step has its own intercept off the kink (the bare model there is worse than
    IRLS's point: ``_trapped`` must look at the kinks); ``fit_problem`` certifies
    ``w = 0`` before Newton's steps (:func:`~bayesdrop.solvers.bare.bare_newton`: the
    start is no lower than the bare model and ``J`` does not fall towards it) and, with
    that switched off, right after the stall; a class whose optimum is not ``w = 0`` is
    unaffected."""
    from sklearn.datasets import load_digits

    from bayesdrop.solvers import _trapped
    from bayesdrop.solvers.bare import bare_points, bare_value

    X, labels = load_digits(return_X_y=True)

    def problem(k):
        return Problem.create(X / 16.0, np.where(labels == k, 1.0, -1.0), HingeLoss(0.1),
                              Dropout(0.2))

    p8 = problem(8)
    bare_J = bare_value(p8, None)
    early = newton.fit(p8, max_iter=40, warn=False, bare_J=bare_J)
    late = newton.fit(p8, max_iter=40, warn=False)
    assert early.stalled and early.n_iter == newton.TRAP_STEPS < late.n_iter
    assert early.objective[-1] > bare_J
    # with check_start: stopped before its first step (its start is above the bare model)
    at_start = newton.fit(p8, max_iter=40, warn=False, bare_J=bare_J, check_start=True)
    assert at_start.stalled and at_start.n_iter == 0 and at_start.objective[0] > bare_J
    np.testing.assert_array_equal(at_start.objective, early.objective[:1])
    np.testing.assert_array_equal(early.theta, newton.fit(p8, max_iter=newton.TRAP_STEPS,
                                                          warn=False).theta)
    # IRLS from Newton's 6th step (where the trap check stopped before bare_newton)
    second = irls.fit(p8, newton.fit(p8, max_iter=6, warn=False).theta, warn=False)

    def values(thetas):
        return [p8.objective(t) for t in thetas]

    kinks = p8.loss.kinks(p8.y)[0]
    assert not _trapped(values, second.theta, True)  # its own intercept only
    assert _trapped(values, second.theta, True, kinks)
    assert min(values(bare_points(second.theta, True, kinks))) == bare_J
    res = fit_problem(p8, warn=False)
    assert res.converged and res.objective[-1] == bare_J
    np.testing.assert_array_equal(res.theta[:-1], 0.0)
    # certified by Newton on the bound's problem before Newton's steps: no IRLS map
    from bayesdrop import solvers
    from bayesdrop.solvers.bare import bare_newton

    steps = bare_newton(p8, res.theta, 1e-8 * bare_J)[1]
    assert res.solver == "bare" and res.n_iter == steps
    with pytest.MonkeyPatch.context() as mp:  # without the test at the start: after the stall
        mp.setattr(solvers, "_bare_at_start", lambda *a: (None, 0))
        after = fit_problem(p8, warn=False)
    assert after.solver == "newton+bare" and after.n_iter == newton.TRAP_STEPS + steps
    np.testing.assert_array_equal(after.theta, res.theta)
    p0 = problem(0)
    with_check = newton.fit(p0, warn=False, bare_J=bare_value(p0, None))
    assert with_check.converged and not with_check.stalled
    np.testing.assert_array_equal(with_check.theta, newton.fit(p0, warn=False).theta)
    from_start = newton.fit(p0, warn=False, bare_J=bare_value(p0, None), check_start=True)
    np.testing.assert_array_equal(from_start.theta, with_check.theta)


def test_newton_finishes_where_irls_leaves_the_trap_below_the_bare_model():
    """Digits 2-vs-rest, hinge q = 0.5, C = 0.02: the optimum (``|w| = 0.034``) has ``J``
    5e-4 below the bare model's; Newton from zero is still above the bare model after
    ``TRAP_STEPS`` steps (and alone stalls in the trap, 5e-4 above ``J*``). IRLS leaves
    the trap, and Newton from there converges: ``J`` at most IRLS's at
    ``tol=1e-14`` (IRLS's own end at the default tol, which it returned before, is 1e-7
    higher)."""
    from sklearn.datasets import load_digits

    from bayesdrop.solvers.bare import bare_value

    X, labels = load_digits(return_X_y=True)
    problem = Problem.create(X / 16.0, np.where(labels == 2, 1.0, -1.0), HingeLoss(0.02),
                             Dropout(0.5))
    bare_J = bare_value(problem, None)
    early = newton.fit(problem, max_iter=40, warn=False, bare_J=bare_J)
    assert early.stalled and early.n_iter == newton.TRAP_STEPS
    alone = newton.fit(problem, max_iter=100, warn=False)
    ref = irls.fit(problem, tol=1e-14, max_iter=50_000, warn=False)
    assert alone.stalled and alone.objective[-1] > ref.objective[-1] * (1 + 1e-4)
    res = fit_problem(problem, warn=False)
    assert res.solver == "newton+irls+newton" and res.converged
    assert res.objective[-1] <= ref.objective[-1] * (1 + 1e-14)
    # non-increasing, up to the rounding of J that Newton's line search lets a full step
    # with a decrement below it raise J by (newton.loop.ROUNDING_RTOL)
    from bayesdrop.solvers.newton.loop import ROUNDING_RTOL

    rounding = ROUNDING_RTOL * np.maximum(np.abs(res.objective[:-1]), 1.0)
    assert np.all(np.diff(res.objective) <= rounding)
    irls_end = irls.fit(problem, early.theta, warn=False)
    assert res.objective[-1] < irls_end.objective[-1] < bare_J


def test_escape_maps_below_the_bare_model_hand_back_to_newton(monkeypatch):
    """The same problem with the trap check from 2 steps on: ``ESCAPE_MAPS`` IRLS maps get
    below the bare model's ``J`` and Newton converges from there -- the optimum to
    rounding in a tenth of the systems of IRLS's long run from the 6th step (14 against
    139 solves)."""
    from sklearn.datasets import load_digits

    from bayesdrop.solvers import ESCAPE_MAPS
    from bayesdrop.solvers.bare import bare_value

    X, labels = load_digits(return_X_y=True)
    problem = Problem.create(X / 16.0, np.where(labels == 2, 1.0, -1.0), HingeLoss(0.02),
                             Dropout(0.5))
    monkeypatch.setattr(newton, "TRAP_STEPS", 2)
    bare_J = bare_value(problem, None)
    early = newton.fit(problem, max_iter=40, warn=False, bare_J=bare_J)
    assert early.stalled and early.n_iter < 6 and early.objective[-1] > bare_J
    escape = irls.fit(problem, early.theta, max_iter=ESCAPE_MAPS, warn=False)
    assert escape.objective[-1] < bare_J
    res = fit_problem(problem, warn=False)
    ref = irls.fit(problem, tol=1e-14, max_iter=50_000, warn=False)
    assert res.solver == "newton+irls+newton" and res.converged
    assert res.objective[-1] <= ref.objective[-1] * (1 + 1e-14)
    assert res.n_solves < 30


def test_optimum_at_w_zero_is_found_exactly():
    """Digits one-vs-rest with q = 0.5, C = 0.1: for some classes the optimum is the
    intercept alone (``w = 0``, ``J`` piecewise linear in ``b``), where Newton cannot
    converge; ``solver="auto"`` returns a ``J`` no larger than IRLS's at tol 1e-13 (the
    bare model with the best kink intercept where it is lower)."""
    from sklearn.datasets import load_digits

    X, labels = load_digits(return_X_y=True)
    X = X / 16.0
    hits = 0
    for k in (1, 3, 5):
        y = np.where(labels == k, 1.0, -1.0)
        problem = Problem.create(X, y, HingeLoss(0.1), Dropout(0.5))
        res = fit_problem(problem, warn=False)
        ref = irls.fit(problem, tol=1e-13, max_iter=20000, warn=False)
        J, J_ref = problem.objective(res.theta), problem.objective(ref.theta)
        assert J <= J_ref * (1 + 1e-10)
        rows = fit_rows(InMemoryRows(problem), warn=False)  # the row back-ends' path
        assert problem.objective(rows.theta) <= J_ref * (1 + 1e-10)
        assert np.all(rows.theta[:-1] == 0.0) == np.all(res.theta[:-1] == 0.0)
        hits += bool(np.all(res.theta[:-1] == 0.0))
    assert hits >= 1  # at least one class's optimum is the bare intercept


def _bare_cases():
    """Small problems whose best bare model has examples on a kink: hinge (with a margin,
    weights), epsilon-insensitive, dropout and constant noise, and two tiny ones where a
    single example's element matters."""
    cases = [(HingeLoss(0.3), Dropout(0.5), False, 120, 4),
             (HingeLoss(1.0, margin=0.5), "gaussian", True, 120, 4),
             (HingeLoss(0.2), Dropout(0.3), True, 120, 4),
             (EpsilonInsensitiveLoss(0.5, 0.3), Dropout(0.4), False, 120, 4),
             (HingeLoss(0.5), Dropout(0.3), False, 7, 2),
             (HingeLoss(0.5), "gaussian", True, 7, 2)]
    for seed, (loss, noise, weighted, n, D) in enumerate(cases):
        rng = np.random.default_rng(seed)
        X = rng.normal(size=(n, D))
        if loss.binary:
            y = np.where(X[:, 0] + rng.normal(size=n) > 1.2, 1.0, -1.0)
        else:  # two target values 0.6 apart: their kinks meet at 0.3
            y = np.where(0.3 * X[:, 0] + rng.normal(size=n) > 0.2, 0.6, 0.0)
        sw = rng.integers(1, 4, n).astype(float) if weighted else None
        problem = Problem.create(X, y, loss, noise, sample_weight=sw)
        kinks = np.unique(loss.kinks(problem.y)[0])
        b = kinks[np.argmin([problem.objective(np.r_[np.zeros(D), k]) for k in kinks])]
        yield problem, np.r_[np.zeros(D), b], rng


def test_bare_subgradient_is_a_subgradient_of_J_at_the_bare_model():
    """The element ``g`` that :func:`bayesdrop.solvers.bare.bare_subgradient` builds from a
    point near the bare model -- IRLS's fifth iterate, a point 1e-2 away and one 1 away,
    where its examples' elements leave the unit ball and are scaled back -- is a
    subgradient of ``F = J - ||w||^2`` there: ``g_b = 0`` to rounding and
    ``F'(bare; d) >= g . d`` for every direction, with the directional derivative taken
    from ``J`` alone (a forward difference at ``t = 1e-6``; exact to ``O(t)``: the kink
    examples' terms are homogeneous about the bare point, the others linear there) and
    the worst unit direction sought by SLSQP from 6 random starts."""
    from scipy.optimize import minimize

    from bayesdrop.solvers.bare import bare_subgradient

    for problem, bare, rng in _bare_cases():
        D = problem.design.n_features
        J0, t = problem.objective(bare), 1e-6

        def excess(d, g):  # F'(bare; d) - g . d
            return (problem.objective(bare + t * d) - t * t * (d[:D] @ d[:D]) - J0) / t \
                - g @ d

        for near in (irls.fit(problem, max_iter=5, warn=False).theta,
                     bare + 1e-2 * rng.normal(size=D + 1), bare + rng.normal(size=D + 1)):
            g = bare_subgradient(problem, bare, near)
            assert g is not None and abs(g[-1]) <= 1e-12 * (J0 + 1.0)
            worst = min(minimize(excess, d0 / np.linalg.norm(d0), args=(g,), method="SLSQP",
                                 constraints=[{"type": "ineq",
                                               "fun": lambda d: 1.0 - d @ d}]).fun
                        for d0 in rng.normal(size=(6, D + 1)))
            assert worst >= -1e-5 * (np.abs(g).max() + 1.0)


def test_shift_into_is_a_common_shift_clipped_to_the_ranges_with_the_target_sum():
    """``bare._shift_into`` (the kink examples' slopes moved so that ``g_b = 0``): the
    result is ``clip(values + tau, lo, hi)`` for one ``tau`` -- every element strictly
    inside its range moved by the same amount, every other one at the end its shift
    reaches -- and sums to ``target`` to rounding; checked against bisection on the sum,
    on ranges of zero width, ties and targets at the ends."""
    from bayesdrop.solvers.bare import _shift_into

    rng = np.random.default_rng(7)
    for case in range(400):
        k = int(rng.integers(1, 300))
        mid = rng.normal(size=k)
        half = rng.random(k) * (rng.random(k) > 0.2)  # some ranges of zero width
        lo, hi = mid - half, mid + half
        values = mid + rng.normal(size=k) * 10.0 ** rng.integers(-2, 3)
        if case % 10 == 0:
            values[: k // 2] = values[0]  # ties
        ends = (lo.sum(), hi.sum())
        target = ends[case % 2] if case % 7 == 0 else rng.uniform(*ends)
        out = _shift_into(values, lo, hi, target)
        scale = np.abs(lo).sum() + np.abs(hi).sum() + 1.0
        assert np.all((out >= lo) & (out <= hi))
        assert abs(out.sum() - target) <= 1e-12 * scale
        a, c = np.min(lo - values), np.max(hi - values)  # bisection, independently
        for _ in range(200):
            tau = 0.5 * (a + c)
            if np.clip(values + tau, lo, hi).sum() < target:
                a = tau
            else:
                c = tau
        ref = np.clip(values + 0.5 * (a + c), lo, hi)
        assert np.max(np.abs(out - ref)) <= 1e-9 * scale


@pytest.mark.parametrize("through", ["memory", "rows"])
def test_bare_gap_bounds_the_distance_to_the_optimum(through):
    """The bound -- in memory (:func:`bayesdrop.solvers.bare.bare_gap`) and through a row
    back-end (:func:`bayesdrop.solvers.bare.bare_gap_rows`: elements scaled onto the unit
    ball, ``g_b`` zeroed by one common fraction of the slopes' ranges) -- is at least
    ``J(bare) - J*`` (``J*`` of IRLS at tol 1e-14, an independent run) on problems where
    ``w = 0`` is optimal and where it is not (signal of 1 to 2, C = 0.1 to 1: gaps 0.08 to
    40), from IRLS's optimum and from points 1e-3 and 0.3 away; and where ``w = 0`` is
    the optimum it certifies it from IRLS's last iterate (bound below 1e-8 of ``J``).
    (Over several dask chunks: ``test_dask``.)"""
    from bayesdrop.solvers.bare import bare_gap, bare_gap_rows

    def gap_bound(problem, bare, near, **kw):
        if through == "rows":
            return bare_gap_rows(InMemoryRows(problem), bare, near, **kw)
        return bare_gap(problem, bare, near, **kw)

    n, D = 150, 4
    certified = 0
    for C in (0.1, 0.3, 1.0):
        for signal in (0.5, 1.0, 2.0):
            for noise in (Dropout(0.5), "gaussian"):
                rng = np.random.default_rng(1)
                X = rng.normal(size=(n, D))
                y = np.where(signal * X[:, 0] + rng.normal(size=n) > 1.2, 1.0, -1.0)
                problem = Problem.create(X, y, HingeLoss(C), noise)
                ref = irls.fit(problem, tol=1e-14, max_iter=50000, warn=False)
                bare = np.r_[np.zeros(D), -1.0]
                J_bare = problem.objective(bare)
                gap = J_bare - problem.objective(ref.theta)
                for near in (ref.theta, bare + 1e-3 * rng.normal(size=D + 1),
                             bare + 0.3 * rng.normal(size=D + 1)):
                    bound, maps = gap_bound(problem, bare, near, maps=4)
                    assert bound >= gap - 1e-9 * J_bare and 1 <= maps <= 5
                bound, _ = gap_bound(problem, bare, ref.theta, maps=32, target=1e-8 * J_bare)
                certified += bound <= 1e-8 * J_bare
                if bound <= 1e-8 * J_bare:
                    assert np.linalg.norm(ref.theta[:-1]) < 1e-6  # IRLS agrees: w = 0
    assert certified >= 3


@pytest.mark.parametrize("sparse", [False, True])
def test_bare_optimum_is_certified_without_a_second_irls_run(monkeypatch, sparse):
    """Digits 8-vs-rest, hinge, dropout 0.2, C = 0.1 (the optimum is ``w = 0``): after
    Newton stalls and IRLS from there nears ``w = 0``, the duality-gap bound's maps
    certify the bare model (with :func:`~bayesdrop.solvers.bare.bare_newton` switched
    off, which certifies it in fewer solves before any IRLS map), and ``solver="auto"``
    returns it exactly (``w = 0``, converged) without the run of IRLS from the start
    that it needs when the bound is not tried (180 of its 219 solves dense, 231 as CSR,
    where Newton and IRLS end elsewhere and the bound needs about 25 maps)."""
    from sklearn.datasets import load_digits

    import bayesdrop.solvers as solvers
    from bayesdrop.solvers import bare

    X, labels = load_digits(return_X_y=True)
    problem = Problem.create(sp.csr_matrix(X) if sparse else X,
                             np.where(labels == 8, 1.0, -1.0), HingeLoss(0.1), Dropout(0.2))
    first = fit_problem(problem, warn=False)  # bare_newton before Newton's steps
    assert first.solver == "bare" and first.converged
    # the maps' certificate, as before bare_newton came first (from the 6th step: the
    # maps need IRLS's point near w = 0, which the 3rd step's IRLS maps do not reach)
    monkeypatch.setattr(newton, "TRAP_STEPS", 6)
    monkeypatch.setattr(bare, "BARE_NEWTON_ITER", 0)
    monkeypatch.setattr(solvers, "_bare_at_start", lambda *a: (None, 0))
    res = fit_problem(problem, warn=False)
    assert res.solver == "newton+irls" and res.converged
    assert np.all(res.theta[:-1] == 0.0) and res.theta[-1] == -1.0
    np.testing.assert_array_equal(first.theta, res.theta)
    assert first.n_solves < res.n_solves
    monkeypatch.setattr(solvers, "BARE_MAPS", 0)
    old = fit_problem(problem, warn=False)
    np.testing.assert_array_equal(old.theta, res.theta)
    assert res.n_solves < old.n_solves / 2
    if not sparse:  # the row back-ends' path (dask's), in passes over the data
        monkeypatch.setattr(solvers, "BARE_MAPS", 32)
        rows = fit_rows(InMemoryRows(problem), warn=False)
        monkeypatch.setattr(solvers, "BARE_MAPS", 0)
        rows_old = fit_rows(InMemoryRows(problem), warn=False)
        np.testing.assert_array_equal(rows.theta, res.theta)
        np.testing.assert_array_equal(rows_old.theta, res.theta)
        assert rows.converged and rows.n_passes < rows_old.n_passes / 2


def test_result_counts_mean_the_same_for_every_solver():
    """``n_solves`` counts linear systems in the parameters (IRLS maps, Newton Hessians,
    the polish's one system; SMO's steps none) and ``n_passes`` passes over the data of a
    row back-end (0 in memory), whichever solver produced the result."""
    from bayesdrop.solvers import dual

    rng = np.random.default_rng(5)
    X = rng.normal(size=(120, 4))
    y = np.where(X[:, 0] + 0.5 * rng.normal(size=120) > 0, 1.0, -1.0)
    hinge = Problem.create(X, y, HingeLoss(1.0), Dropout(0.3))
    res = irls.fit(hinge, accelerate=False, polish=False)
    assert res.n_solves == res.n_iter and res.n_passes == 0
    rows = InMemoryRows(hinge)
    res = irls.fit_rows(rows, accelerate=False)
    assert res.n_solves == res.n_iter and res.n_passes == rows.n_passes > res.n_iter
    logistic = Problem.create(X, y, LogisticLoss(1.0), Dropout(0.3))
    res = newton.fit(logistic)
    assert 1 <= res.n_solves <= res.n_iter and res.n_passes == 0
    rows = InMemoryRows(logistic)
    res = newton.fit_rows(rows)
    assert 1 <= res.n_solves <= res.n_iter and res.n_passes == rows.n_passes > 0
    res = dual.fit(Problem.create(X, y, HingeLoss(1.0), NoNoise()))
    assert res.solver == "dual" and res.n_solves == 1 and res.n_iter > 1


@pytest.mark.parametrize("case", ["hinge_margin", "hinge_weighted", "epsilon_weighted",
                                  "no_intercept"])
def test_bare_value_is_J_at_the_best_bare_point(case):
    """``bare_value`` sums the piecewise-linear terms at ``b`` without ``X``: it must be
    ``J`` itself (``Problem.objective``) at the best of the bare points."""
    from bayesdrop.solvers.bare import bare_points, bare_value

    rng = np.random.default_rng(3)
    X = rng.normal(size=(120, 4))
    y = np.sign(X[:, 0] + rng.normal(size=120))
    w = rng.uniform(0.5, 2.0, size=120)
    problem = {
        "hinge_margin": Problem.create(X, y, HingeLoss(0.5, margin=1.3), Dropout(0.3)),
        "hinge_weighted": Problem.create(X, y, HingeLoss(0.5), Dropout(0.3), sample_weight=w),
        "epsilon_weighted": Problem.create(X, X @ [1.0, -1.0, 0.5, 0.0],
                                           EpsilonInsensitiveLoss(0.5, 0.2), Dropout(0.3),
                                           sample_weight=w),
        "no_intercept": Problem.create(X, y, HingeLoss(0.5), Dropout(0.3),
                                       fit_intercept=False),
    }[case]
    theta0 = np.r_[np.zeros(4), 0.37][: problem.design.n_params]
    points = bare_points(theta0, problem.design.fit_intercept, problem.loss.kinks(problem.y)[0])
    expected = min(problem.objective(p) for p in points)
    assert bare_value(problem, theta0) == pytest.approx(expected, rel=1e-13)
    assert bare_value(Problem.create(X, y, LogisticLoss(1.0), Dropout(0.3)), None) is None


def test_newton_takes_full_steps_whose_decrease_is_below_the_rounding_of_J():
    """Near the optimum the predicted decrease of a full step falls below the rounding of
    ``J`` and the Armijo test cannot see it; the step is taken unless ``J`` rose by more
    than rounding (``loop.ROUNDING_RTOL``). On scikit-learn's sample-weight check (15 x 30,
    3 classes, integer weights against repeated rows) every class's fit then ends with
    a gradient at rounding level and the weighted and repeated fits agree to rounding
    (refusing such steps left one class's gradient at 6e-8 whatever ``tol``, and the two
    fits' coefficients 1e-8 apart: the check failed on some CPUs)."""
    from sklearn.utils import shuffle

    rng = np.random.RandomState(42)
    X = rng.rand(15, 30)
    y = rng.randint(0, 3, size=15)
    sw = rng.randint(0, 5, size=15)
    Xw, yw, sww = shuffle(X, y, sw, random_state=0)
    for tol in (1e-8, 1e-15):
        weighted = DropoutLogisticRegression(tol=tol).fit(Xw, yw, sample_weight=sww)
        repeated = DropoutLogisticRegression(tol=tol).fit(X.repeat(sw, axis=0),
                                                           y.repeat(sw))
        np.testing.assert_allclose(weighted.coef_, repeated.coef_, rtol=0, atol=1e-12)
        np.testing.assert_allclose(weighted.intercept_, repeated.intercept_, rtol=0,
                                   atol=1e-12)
        if tol == 1e-15:
            problems, thetas = repeated._problems(X.repeat(sw, axis=0), y.repeat(sw))
            for problem, theta in zip(problems, thetas):
                assert np.abs(problem.objective(theta, True)[1]).max() <= 1e-9


# ------------------------------------------------------------------ the path over C
PATH_CASES = [("logistic", "dropout"), ("hinge", "dropout"), ("hinge", "none"),
              ("epsilon", "dropout")]


def _documented_start(path, i, theta0, previous, Cs):
    """``(theta0, theta0_scale)`` of the ``i``-th fit as ``fit_path`` documents it."""
    if i == 0:
        return theta0, None
    if previous is not None:
        return path[i - 1].theta + previous[i] - previous[i - 1], None
    return path[i - 1].theta, Cs[i - 1] / Cs[i]


@pytest.mark.parametrize("loss_name, noise_name", PATH_CASES)
@pytest.mark.parametrize("with_previous", [False, True])
def test_path_fits_are_fit_problems_from_the_documented_starts(loss_name, noise_name,
                                                               with_previous, monkeypatch):
    """``fit_path``'s ``i``-th fit is ``fit_problem``'s at ``C_i`` from the documented start
    (``theta0``; the previous fit, moved by the difference of ``previous``'s rows where
    given), bit for bit -- also where Newton's fits ran in one compiled call (forced here:
    ``compiled=True``), which the smooth cases must use."""
    from bayesdrop import _jit
    from bayesdrop.solvers import fit_path

    _jit.load()  # no interpreted first fit in this process (it rounds differently)
    lanes = []
    real = newton.fit_path

    def compiled_path(*args, **kwargs):
        runs = real(*args, **dict(kwargs, compiled=True))
        lanes.append(len(runs))
        return runs

    monkeypatch.setattr(newton, "fit_path", compiled_path)
    X, y = _data("dense", loss_name, seed=3)
    problem = Problem.create(X, y, LOSSES[loss_name](), NOISES[noise_name]())
    Cs = np.array([0.05, 0.4, 3.0, 20.0])
    previous = theta0 = None
    if with_previous:  # a neighbouring path: the fits of another noise level, say
        other = Problem.create(X, y, LOSSES[loss_name](), Dropout(0.1))
        previous = np.array([r.theta for r in fit_path(other, Cs)])
        theta0 = previous[0]
        lanes.clear()
    path = fit_path(problem, Cs, theta0, previous)
    for i, C in enumerate(Cs):
        start, scale = _documented_start(path, i, theta0, previous, Cs)
        alone = fit_problem(problem._replace(loss=problem.loss.with_C(C)), start,
                            theta0_scale=scale)
        np.testing.assert_array_equal(path[i].theta, alone.theta)
        assert (path[i].solver, path[i].n_iter) == (alone.solver, alone.n_iter)
    # the lane: Newton's problems whose bare models' J does not depend on the start (every
    # kink a candidate: at most 64 of them -- not the tube's edges at many targets)
    kinks = problem.loss.kinks(problem.y)
    lane = noise_name != "none" and (kinks is None or np.unique(kinks[0]).size <= 64)
    assert lane == ((noise_name, loss_name) in (("dropout", "logistic"), ("dropout", "hinge")))
    assert bool(lanes) == lane and sum(lanes) >= (3 if lane else 0)


def test_path_hands_a_run_newton_did_not_finish_to_fit_problem(monkeypatch):
    """A compiled run that does not converge (here: ``max_iter`` too small) is fitted again
    by ``fit_problem`` (its warning included), and the path goes on from its result: the
    same fits as ``fit_problem`` at every ``C``."""
    from bayesdrop import _jit
    from bayesdrop.solvers import fit_path

    _jit.load()
    calls = []
    real = newton.fit_path
    monkeypatch.setattr(newton, "fit_path", lambda *a, **k: calls.append(len(a[1])) or real(
        *a, **dict(k, compiled=True)))
    X, y = _data("dense", "logistic", seed=4)
    problem = Problem.create(X, y, LogisticLoss(1.0), Dropout(0.3))
    Cs = np.array([0.1, 1.0, 10.0])
    with pytest.warns(ConvergenceWarning):
        path = fit_path(problem, Cs, np.zeros(problem.design.n_params), max_iter=1)
    assert calls == [3, 2, 1]  # each run stopped at once, each C fitted again
    for i, C in enumerate(Cs):
        start, _ = _documented_start(path, i, np.zeros(problem.design.n_params), None, Cs)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            alone = fit_problem(problem._replace(loss=LogisticLoss(C)), start, max_iter=1)
        np.testing.assert_array_equal(path[i].theta, alone.theta)
        assert not path[i].converged


def test_path_follows_the_zero_noise_solution_path_whatever_previous():
    """At zero noise the hinge's fits follow the exact solution path from each optimum to
    the next (:mod:`bayesdrop.solvers.homotopy`), so ``fit_path`` leaves ``previous``
    aside there: the same fits with it as without, the first from ``theta0``."""
    from bayesdrop.solvers import fit_path

    X, y = _data("dense", "hinge", seed=5)
    problem = Problem.create(X, y, HingeLoss(1.0), NoNoise())
    Cs = np.array([0.05, 0.4, 3.0])
    noisy = fit_path(Problem.create(X, y, HingeLoss(1.0), Dropout(0.1)), Cs)
    previous = np.array([r.theta for r in noisy])
    with_previous = fit_path(problem, Cs, previous[0], previous)
    without = fit_path(problem, Cs, previous[0])
    for a, b in zip(with_previous, without):
        np.testing.assert_array_equal(a.theta, b.theta)
    assert [r.solver for r in with_previous[1:]] == ["homotopy", "homotopy"]


@pytest.mark.parametrize("compiled", [False, True])
def test_bare_newton_bounds_the_distance_and_certifies_without_a_near_point(compiled):
    """:func:`bayesdrop.solvers.bare.bare_newton` -- Newton on the Huber smoothing of the
    bound's own problem, from ``phi = 0`` -- gives a bound at least ``J(bare) - J*``
    (``J*`` of IRLS at tol 1e-14, an independent run) on the problems of
    :func:`test_bare_gap_bounds_the_distance_to_the_optimum`, certifies ``w = 0`` (bound
    below 1e-8 of ``J``) exactly where IRLS ends at ``w = 0``, and returns ``inf`` (a
    direction in which ``J`` falls) where the gap is above the tolerance; dense designs
    (their steps in Python, or compiled) and CSR ones (Python) give the same steps."""
    from bayesdrop.solvers.bare import BARE_NEWTON_ITER, bare_newton

    n, D = 150, 4
    certified = refused = 0
    for C in (0.1, 0.3, 1.0):
        for signal in (0.5, 1.0, 2.0):
            rng = np.random.default_rng(1)
            X = rng.normal(size=(n, D))
            y = np.where(signal * X[:, 0] + rng.normal(size=n) > 1.2, 1.0, -1.0)
            problem = Problem.create(X, y, HingeLoss(C), Dropout(0.5))
            ref = irls.fit(problem, tol=1e-14, max_iter=50000, warn=False)
            bare = np.r_[np.zeros(D), -1.0]
            J_bare = problem.objective(bare)
            gap = J_bare - problem.objective(ref.theta)
            target = 1e-8 * J_bare
            bound, steps = bare_newton(problem, bare, target, compiled=compiled)
            assert bound >= gap - 1e-9 * J_bare and 1 <= steps <= BARE_NEWTON_ITER
            sparse = bare_newton(Problem.create(sp.csr_matrix(X), y, HingeLoss(C),
                                                Dropout(0.5)), bare, target)
            assert sparse[1] == steps and (sparse[0] == bound
                                           or abs(sparse[0] - bound) <= 1e-12 * J_bare)
            if gap > 1e-6 * J_bare:
                assert bound == np.inf
                refused += 1
            else:
                assert bound <= target and np.linalg.norm(ref.theta[:-1]) < 1e-6
                certified += 1
    assert certified >= 2 and refused >= 2


def test_bare_newton_compiled_steps_are_the_python_loops():
    """:func:`~bayesdrop.solvers.bare.bare_newton` with its steps compiled
    (:mod:`bayesdrop.solvers._bare_compiled`) against its Python loop on a digits
    one-vs-rest grid (hinge, dropout 0.2 / 0.5, ``C`` 0.02 / 0.1, the best bare model of
    each class; with and without the float32 Hessians of large designs) and on
    epsilon-insensitive problems with additive-noise-free dropout: the same number of
    steps, the same verdict (``inf`` where ``J`` falls, a bound at most the target where
    ``w = 0`` is certified, the bounds equal to rounding), also when the step limit
    ends the run before the bound reaches its target (``max_iter`` 3)."""
    from sklearn.datasets import load_digits

    from bayesdrop.solvers.bare import bare_newton, bare_value

    X, labels = load_digits(return_X_y=True)
    X = X / 16.0
    cases = [(X, np.where(labels == k, 1.0, -1.0), HingeLoss(C), Dropout(q))
             for k in (1, 5, 8) for q in (0.2, 0.5) for C in (0.02, 0.1)]
    cases += [(X[:300], np.where(labels[:300] == 8, 1.0, -1.0), HingeLoss(0.1),
               Dropout(0.2))]  # 300 x 64: below the float32 Hessians' size
    rng = np.random.default_rng(3)
    for noise in (0.3, 0.6):
        Xr = rng.normal(size=(60, 5))
        cases.append((Xr, 0.2 * Xr[:, 0] + rng.normal(size=60),
                      EpsilonInsensitiveLoss(0.3, epsilon=0.5), Dropout(noise)))
    verdicts = {"certified": 0, "refused": 0, "limited": 0}
    for X_, y, loss, noise in cases:
        problem = Problem.create(X_, y, loss, noise)
        J, b = bare_value(problem, None, with_intercept=True)
        bare = np.append(np.zeros(X_.shape[1]), b)
        target = 1e-8 * J
        for max_iter in (None, 3):
            python = bare_newton(problem, bare, target, max_iter, compiled=False)
            compiled = bare_newton(problem, bare, target, max_iter, compiled=True)
            assert compiled[1] == python[1]
            if np.isinf(python[0]):
                assert np.isinf(compiled[0])
                verdicts["refused"] += max_iter is None
            elif python[0] <= target:
                assert compiled[0] <= target
                verdicts["certified"] += max_iter is None
            else:  # the bound from the same iterates: equal up to the directions'
                # rounding (float32 Hessian products far from the end: ~1e-7 cond)
                single = hessian.single_applies(problem.design)
                assert compiled[0] == pytest.approx(python[0], rel=1e-4 if single else 1e-9)
                verdicts["limited"] += 1
    assert min(verdicts.values()) >= 2, verdicts


def test_bare_newton_kept_factor_saves_hessians_with_the_same_verdicts(monkeypatch):
    """:func:`~bayesdrop.solvers.bare.bare_newton` keeps its Hessian's factor, BFGS-updated,
    while the directions' decrements contract (Newton's own rule for the design): on a
    digits one-vs-rest grid (hinge, dropout 0.2 / 0.5, ``C`` 0.02 / 0.1, the best bare
    model of each class) every verdict equals the one with a new Hessian at every step
    (contraction 0: the steps before the kept factor), each certified bound is at most
    its target, the steps stay within the limit, and the Hessians in all fall by at least
    a third -- counted by wrapping the Hessian of the Python loop."""
    from sklearn.datasets import load_digits

    from bayesdrop.solvers import bare as bare_mod
    from bayesdrop.solvers.bare import BARE_NEWTON_ITER, bare_newton, bare_value

    X, labels = load_digits(return_X_y=True)
    X = X / 16.0
    counted = [0]
    real = hessian.hessian_matrix

    def counting(*args, **kwargs):
        counted[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(hessian, "hessian_matrix", counting)
    rule = bare_mod._kept_factor_rule
    runs = {}
    for contraction in (None, 0.0):
        if contraction is not None:
            monkeypatch.setattr(bare_mod, "_kept_factor_rule",
                                lambda design, c=contraction: (c, rule(design)[1]))
        counted[0] = 0
        verdicts = []
        for k in range(10):
            for q, C in ((0.2, 0.1), (0.5, 0.02)):
                problem = Problem.create(X, np.where(labels == k, 1.0, -1.0), HingeLoss(C),
                                         Dropout(q))
                J, b = bare_value(problem, None, with_intercept=True)
                target = 1e-8 * J
                bound, steps = bare_newton(problem, np.append(np.zeros(64), b), target,
                                           compiled=False)
                assert 1 <= steps <= BARE_NEWTON_ITER
                verdicts.append("refused" if np.isinf(bound) else bool(bound <= target))
        runs[contraction] = (verdicts, counted[0])
    kept, every = runs[None], runs[0.0]
    assert kept[0] == every[0] and {True, "refused"} <= set(kept[0])
    assert kept[1] <= 2 * every[1] / 3, (kept[1], every[1])


@pytest.mark.parametrize("loss", ["hinge", "eps"])
def test_descends_from_is_the_sign_of_the_directional_derivative_of_J(loss):
    """:func:`~bayesdrop.solvers.bare.descends_from` against finite differences of ``J``
    itself at the bare model (forward, step 1e-7): in every random direction whose
    difference quotient is clearly negative it reports a descent, and in none whose
    quotient is clearly positive (hinge and epsilon-insensitive, sample weights, dropout
    and additive noise)."""
    from bayesdrop.solvers.bare import bare_value, descends_from

    rng = np.random.default_rng(7)
    seen = [0, 0]
    for trial in range(6):
        # epsilon-insensitive: 30 examples, so that the bare models tried include the
        # kinks (at most 64 positions) and the best one has an example on its kink
        n = 120 if loss == "hinge" else 30
        X = rng.normal(size=(n, 4))
        if loss == "hinge":
            # no signal (the bare model optimal) or a weak one (J falls somewhere)
            signal = 0.0 if trial < 2 else 0.5
            y = np.where(signal * X[:, 0] + rng.normal(size=n) > 0.5, 1.0, -1.0)
            base = HingeLoss(0.5).weighted(rng.uniform(0.5, 2.0, n))
        else:
            y = 0.3 * X[:, 0] + rng.normal(size=n)
            base = EpsilonInsensitiveLoss(0.5, epsilon=0.2)
        noise = Dropout(0.4) if trial % 2 else AdditiveGaussian(0.3)
        problem = Problem.create(X, y, base, noise)
        J0, b = bare_value(problem, None, with_intercept=True)
        bare = np.append(np.zeros(4), b)
        assert problem.objective(bare) == pytest.approx(J0, rel=1e-12)
        # random directions, and directions near the optimum's (where J falls, if
        # anywhere: J is convex)
        towards = fit_problem(problem, warn=False).theta - bare
        for j in range(40):
            phi = rng.normal(size=5) * rng.choice([1e-3, 1.0], size=5)
            if j % 2:
                phi = towards + 0.3 * np.linalg.norm(towards) * phi
            eps = 1e-7
            slope = (problem.objective(bare + eps * phi) - J0) / eps
            scale = 1e-4 * max(abs(J0), 1.0) * np.linalg.norm(phi)
            says = descends_from(problem, bare, *problem.design.scores(phi))
            if slope < -scale:
                assert says
                seen[0] += 1
            elif slope > scale:
                assert not says
                seen[1] += 1
    assert min(seen) >= 20  # both signs met


def test_bare_model_is_tried_before_newton_only_where_the_start_cannot_rule_it_out(
        monkeypatch):
    """The test before Newton's run (:func:`bayesdrop.solvers._bare_at_start`) is sound
    and cheap: on a digits one-vs-rest grid (hinge, dropout 0.2 / 0.5, C 0.02 / 0.1)
    every class whose optimum is ``w = 0`` reaches the certificate from it (``"bare"``,
    ``w = 0`` exactly), and most of the others never run
    :func:`~bayesdrop.solvers.bare.bare_newton`: their fits are Newton's own run from
    the same start, bit for bit."""
    from sklearn.datasets import load_digits

    from bayesdrop import solvers
    from bayesdrop.solvers.bare import bare_value

    X, labels = load_digits(return_X_y=True)
    calls = []
    real = solvers.bare_newton
    monkeypatch.setattr(solvers, "bare_newton",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    trap = other = tried = 0
    for q, C in itertools.product((0.2, 0.5), (0.02, 0.1)):
        for k in range(10):
            problem = Problem.create(X / 16.0, np.where(labels == k, 1.0, -1.0),
                                     HingeLoss(C), Dropout(q))
            calls.clear()
            res = fit_problem(problem, warn=False)
            if res.solver == "bare":
                trap += 1
                assert np.all(res.theta[:-1] == 0.0) and res.converged
                assert res.objective[-1] == bare_value(problem, None)
                continue
            # no certificate: the optimum is not w = 0 (IRLS far below the bare model)
            assert not np.all(res.theta[:-1] == 0.0)
            other += 1
            tried += bool(calls)
            if not calls:  # ruled out at the start: Newton's own run
                alone = newton.fit(problem, max_iter=solvers.AUTO_NEWTON_ITER, warn=False,
                                   bare_J=bare_value(problem, None))
                if alone.converged:
                    np.testing.assert_array_equal(res.theta, alone.theta)
    assert trap >= 5 and other >= 25 and tried <= other // 4


def test_bare_newton_removes_the_cliff_where_the_maps_stall(monkeypatch):
    """Digits 5-vs-rest, hinge, dropout 0.5, C = 0.02: the optimum is ``w = 0`` (IRLS at
    tol 1e-15 ends at ``|w| = 1e-9``, ``J`` not below the bare model's), but the bare
    maps from IRLS's end stall at a bound of about 2e-6 above the tolerance's 1.5e-7, and
    ``solver="auto"`` ran IRLS to its tolerance and again from the start (187 solves).
    With :func:`~bayesdrop.solvers.bare.bare_newton` -- before Newton's steps, and
    after stalled maps where the maps run first -- the bare model is certified:
    ``w = 0`` exactly, in under 60 solves."""
    from sklearn.datasets import load_digits

    from bayesdrop.solvers.bare import bare_value

    X, labels = load_digits(return_X_y=True)
    problem = Problem.create(X, np.where(labels == 5, 1.0, -1.0), HingeLoss(0.02),
                             Dropout(0.5))
    res = fit_problem(problem, warn=False)
    assert res.converged and res.objective[-1] == bare_value(problem, None)
    assert np.all(res.theta[:-1] == 0.0) and res.n_solves < 60
    assert res.solver == "bare"
    from bayesdrop import solvers

    # the maps first (bare_newton only where they stall): as it ran before
    monkeypatch.setattr(newton, "TRAP_STEPS", 6)
    monkeypatch.setattr(solvers, "_bare_at_start", lambda *a: (None, 0))
    monkeypatch.setattr(solvers, "_bare_first", lambda problem, first, *a: (None, first))
    late = fit_problem(problem, warn=False)
    assert late.converged and np.all(late.theta[:-1] == 0.0) and late.n_solves < 60
    assert late.solver == "newton+irls"


def test_row_backend_certifies_w_zero_in_few_passes_and_still_leaves_a_near_kink_trap():
    """Through a row back-end (dask's path), ``fit_rows`` checks Newton against the best
    bare model as ``fit_problem`` does and certifies ``w = 0`` by
    :func:`~bayesdrop.solvers.bare.bare_newton_rows`: digits 5-vs-rest, hinge, dropout
    0.5, C = 0.02 (optimum ``w = 0``) in under 40 passes (397 with IRLS and the maps'
    bound), the bare model exactly as in memory; digits/16 2-vs-rest at the same setting,
    whose optimum lies 5e-4 below the bare model's ``J``, is not certified and Newton goes
    on to ``J`` within 1e-12 of the in-memory fit."""
    from sklearn.datasets import load_digits

    X, labels = load_digits(return_X_y=True)
    p5 = Problem.create(X, np.where(labels == 5, 1.0, -1.0), HingeLoss(0.02), Dropout(0.5))
    rows = fit_rows(InMemoryRows(p5), warn=False)
    mem = fit_problem(p5, warn=False)
    assert rows.solver == "newton+bare" and rows.converged and rows.n_passes < 40
    np.testing.assert_array_equal(rows.theta, mem.theta)
    p2 = Problem.create(X / 16.0, np.where(labels == 2, 1.0, -1.0), HingeLoss(0.02),
                        Dropout(0.5))
    rows = fit_rows(InMemoryRows(p2), warn=False)
    mem = fit_problem(p2, warn=False)
    assert rows.converged and np.any(rows.theta[:-1] != 0.0)
    assert rows.objective[-1] <= mem.objective[-1] * (1 + 1e-12)


def test_bare_newton_scratch_arrays_live_with_the_users_array():
    """:func:`~bayesdrop.solvers.bare.bare_newton`'s Hessian block arrays are kept with
    the design's ``X`` -- the user's array, the same object in every fit of an estimator
    -- so that the next fit on it reuses them, and dropped with it; a design too large
    for them (``BARE_WORK_MAX``) gets a new dict each time."""
    import gc

    from bayesdrop import Design
    from bayesdrop.solvers import bare

    X = np.random.default_rng(0).normal(size=(50, 3))
    work = bare._bare_work(Design(X, "dropout"))
    assert bare._bare_work(Design(X, "dropout")) is work  # another design, the same X
    assert bare._bare_work(Design(X.copy(), "dropout")) is not work
    key = id(X)
    del X
    gc.collect()
    assert key not in bare._BARE_WORK
    big = Design(np.zeros((2048, bare.BARE_WORK_MAX // 4096 + 1)), "dropout")
    assert bare._bare_work(big) is not bare._bare_work(big)


@pytest.mark.parametrize("loss", ["hinge", "logistic"])
def test_first_newton_runs_of_one_vs_rest_problems_leave_every_fit_unchanged(loss,
                                                                            monkeypatch):
    """``first_newton_runs``: the first Newton runs of a classifier's one-vs-rest problems
    in one compiled call (``newton.fit_problems``); ``fit_problem`` going on from each
    equals ``fit_problem`` alone bit for bit -- digits 10 classes, dropout 0.2, ``C =
    0.1``, the hinge loss's IRLS starts sharing one factor and its 8-vs-rest class, whose
    optimum is ``w = 0``, certified after a run stopped at its start -- and the
    estimator's fit, which takes that way, equals the problems fitted one by one; in
    calls of three problems (``PROBLEMS_CALL_ENTRIES``) the runs are the same."""
    from sklearn.datasets import load_digits

    from bayesdrop.solvers import first_newton_runs

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    made = (DropoutSVC if loss == "hinge" else DropoutLogisticRegression)(0.1,
                                                                          noise_level=0.2)
    first = Problem.create(X, np.where(y == 0, 1.0, -1.0), made._make_loss(), Dropout(0.2))
    problems = [first._replace(y=np.where(y == k, 1.0, -1.0)) for k in range(10)]
    newton.fit_problems(problems[:2], compiled=True)  # its machine code at hand
    firsts = first_newton_runs(problems)
    assert firsts is not None
    monkeypatch.setattr(newton, "PROBLEMS_CALL_ENTRIES", 3 * X.size)
    for (_, _, a), b in zip(firsts, newton.fit_problems(problems, bare_Js=[
            f[1][0] for f in firsts] if loss == "hinge" else None,
            check_start=loss == "hinge", max_iter=40)):
        np.testing.assert_array_equal(a.theta, b.theta)
    monkeypatch.undo()
    alone = [fit_problem(pr) for pr in problems]
    together = [fit_problem(pr, first=f) for pr, f in zip(problems, firsts)]
    for a, b in zip(alone, together):
        np.testing.assert_array_equal(a.theta, b.theta)
        assert (a.solver, a.n_iter, a.converged) == (b.solver, b.n_iter, b.converged)
    if loss == "hinge":
        assert together[8].solver == "bare" and firsts[8][2].n_iter == 0
    fitted = made.fit(X, y)
    np.testing.assert_array_equal(fitted.coef_, [a.theta[:-1] for a in alone])
    np.testing.assert_array_equal(fitted.intercept_, [a.theta[-1] for a in alone])
    with pytest.raises(ValueError, match="first"):
        fit_problem(problems[0], np.zeros(65), first=firsts[0])
