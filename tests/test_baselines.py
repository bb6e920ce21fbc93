"""Baselines against independent references and limiting cases."""

import itertools
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import brentq, minimize
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression, RidgeClassifier
from sklearn.svm import LinearSVC

from bayesdrop.baselines import (
    ExplicitCorruptionClassifier,
    InvariantSVC,
    MCFLogisticRegression,
    MCFQuadraticClassifier,
    TLogisticRegression,
    WagerDropoutLogisticRegression,
    exp_t,
    log_t,
    t_partition,
    worst_case_margin,
)
from bayesdrop.studies.datasets import flip_labels, make_long_servedio
from bayesdrop.model.noise import Dropout


@pytest.fixture
def binary():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(120, 4)) * np.array([1.0, 0.5, 2.0, 1.0])
    X[rng.random(X.shape) < 0.3] = 0.0
    y = np.sign(X[:, 0] - X[:, 1] + 0.8 * rng.normal(size=120))
    return X, y


@pytest.fixture
def multiclass():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(150, 3))
    y = np.argmax(X @ rng.normal(size=(3, 3)) + 0.5 * rng.normal(size=(150, 3)), axis=1)
    return X, y


def _fd_grad(f, x, h=1e-6):
    g = np.zeros_like(x)
    for i in range(x.size):
        e = np.zeros_like(x)
        e[i] = h
        g[i] = (f(x + e) - f(x - e)) / (2 * h)
    return g


# -- MCF-quadratic ----------------------------------------------------------------------
def test_mcf_quadratic_zero_noise_is_ridge(binary, multiclass):
    for X, y in (binary, multiclass):
        ours = MCFQuadraticClassifier(C=0.7, noise_level=0.0).fit(X, y)
        ref = RidgeClassifier(alpha=1 / 0.7).fit(X, y)
        np.testing.assert_allclose(ours.coef_, np.atleast_2d(ref.coef_), atol=1e-10)
        np.testing.assert_allclose(ours.intercept_, np.atleast_1d(ref.intercept_), atol=1e-10)


def test_mcf_quadratic_dropout_closed_form(binary):
    X, y = binary
    C, q = 0.7, 0.4
    ours = MCFQuadraticClassifier(C=C, noise_level=q).fit(X, y)
    # independent normal equations of 1/2||w||^2 + C/2 sum ((y - m)^2 + sum_d v_nd w_d^2)
    Xb = np.column_stack([X, np.ones(len(X))])
    v = (q / (1 - q) * X**2).sum(axis=0)
    A = np.diag(np.r_[np.ones(4), 0.0]) + C * (Xb.T @ Xb + np.diag(np.r_[v, 0.0]))
    theta = np.linalg.solve(A, C * Xb.T @ y)
    np.testing.assert_allclose(ours.coef_[0], theta[:4], rtol=1e-10)
    np.testing.assert_allclose(ours.intercept_[0], theta[4], rtol=1e-10)


# -- MCF-logistic -----------------------------------------------------------------------
def _mcf_reference_objective(theta, X, y, C, q):
    w, b = theta[:-1], theta[-1]
    Z = -(y[:, None] * X * w) / (1 - q)
    mgf = np.prod(q + (1 - q) * np.exp(Z), axis=1) * np.exp(-y * b)
    return 0.5 * w @ w + C * np.sum(np.log1p(mgf))


def test_mcf_logistic_zero_noise_is_logistic_regression(binary, multiclass):
    X, y = binary
    ref = LogisticRegression(C=0.8, tol=1e-12, max_iter=10000).fit(X, y)
    for noise in ("dropout", "gaussian"):
        ours = MCFLogisticRegression(C=0.8, noise=noise, noise_level=0.0, tol=1e-10).fit(X, y)
        np.testing.assert_allclose(ours.coef_, ref.coef_, atol=2e-6)
    Xm, ym = multiclass
    ours = MCFLogisticRegression(C=0.8, noise_level=0.0, tol=1e-10).fit(Xm, ym)
    for k, c in enumerate(ours.classes_):
        ref = LogisticRegression(C=0.8, tol=1e-12).fit(Xm, np.where(ym == c, 1, -1))
        np.testing.assert_allclose(ours.coef_[k], ref.coef_[0], atol=2e-6)


def test_mcf_logistic_dropout_matches_independent_optimum(binary):
    X, y = binary
    C, q = 0.8, 0.35
    ours = MCFLogisticRegression(C=C, noise_level=q, tol=1e-10).fit(X, y)
    ref = minimize(_mcf_reference_objective, np.zeros(5), args=(X, y, C, q), method="BFGS",
                   options={"gtol": 1e-9})
    np.testing.assert_allclose(ours.coef_[0], ref.x[:4], atol=1e-5)
    np.testing.assert_allclose(ours.objective_[0], ref.fun, rtol=1e-9)
    sparse = MCFLogisticRegression(C=C, noise_level=q, tol=1e-10).fit(sp.csr_matrix(X), y)
    np.testing.assert_allclose(sparse.coef_, ours.coef_, atol=1e-12)


def test_mcf_logistic_dropout_pass_is_exact_and_thread_independent():
    # the chunked parallel pass equals the direct product-form formula, and gives the same
    # bits with one thread and with all threads (fixed chunks, ordered sum)
    import numba

    from bayesdrop.baselines.mcf import _mcf_dropout_pass

    rng = np.random.default_rng(3)
    X = sp.random(300, 7, density=0.6, random_state=4, format="csr")
    y = np.where(rng.random(300) < 0.5, -1.0, 1.0)
    w, b, q, C = rng.normal(size=7), 0.2, 0.3, 0.7
    mgf = np.exp(-y * b) * np.prod(q + (1 - q) * np.exp(-(y[:, None] * X.toarray() * w)
                                                         / (1 - q)), axis=1)
    expected = np.sum(np.log1p(mgf))
    grad_fd = np.array([(np.sum(np.log1p(np.exp(-y * (b + e[-1] * 1e-6)) * np.prod(
        q + (1 - q) * np.exp(-(y[:, None] * X.toarray() * (w + e[:-1] * 1e-6)) / (1 - q)),
        axis=1))) - expected) / 1e-6 for e in np.eye(8)])
    results = []
    threads = numba.get_num_threads()
    try:
        for n_threads in (1, threads):
            numba.set_num_threads(n_threads)
            grad = np.zeros(8)
            value = _mcf_dropout_pass(X.indptr, X.indices, X.data, w, b, y, q, C, True, grad)
            results.append((value, grad))
    finally:
        numba.set_num_threads(threads)
    assert results[0][0] == results[1][0]
    np.testing.assert_array_equal(results[0][1], results[1][1])
    np.testing.assert_allclose(results[0][0], expected, rtol=1e-13)
    np.testing.assert_allclose(results[0][1], C * grad_fd, rtol=1e-4, atol=1e-6)


def test_mcf_logistic_moment_generating_function_by_monte_carlo(binary):
    X, y = binary
    q, w, b = 0.35, np.array([0.5, -0.4, 0.2, 0.3]), 0.1
    exact = np.exp(-y * b) * np.prod(q + (1 - q) * np.exp(-(y[:, None] * X * w) / (1 - q)),
                                     axis=1)
    rng = np.random.default_rng(0)
    draws = np.array([np.exp(-y * (Dropout(q).corrupt(X, rng) @ w + b)) for _ in range(4000)])
    se = draws.std(axis=0) / np.sqrt(len(draws))
    assert np.all(np.abs(draws.mean(axis=0) - exact) < 4.5 * se + 1e-12)


def test_mcf_logistic_gaussian_gradient(binary):
    X, y = binary
    est = MCFLogisticRegression(C=0.8, noise="gaussian", noise_level=0.7, tol=1e-10).fit(X, y)

    def ref(theta):
        w, b = theta[:-1], theta[-1]
        a = -y * (X @ w + b) + 0.5 * 0.49 * (w @ w)
        return 0.5 * w @ w + 0.8 * np.sum(np.logaddexp(0, a))

    r = minimize(ref, np.zeros(5), method="BFGS", options={"gtol": 1e-9})
    np.testing.assert_allclose(est.coef_[0], r.x[:4], atol=1e-5)


def test_mcf_logistic_rejects_unsupported_noise(binary):
    with pytest.raises(ValueError, match="noise"):
        MCFLogisticRegression(noise="laplace", noise_level=0.3).fit(*binary)


# -- Wager quadratic penalty ------------------------------------------------------------
def _wager_reference(theta, X, y, C, q, Xu=None, a=0.3):
    w, b = theta[:-1], theta[-1]

    def rq(Z):
        p = 1 / (1 + np.exp(-(Z @ w + b)))
        return 0.5 * np.sum(p * (1 - p) * ((q / (1 - q)) * Z**2 @ (w * w)))

    m = X @ w + b
    pen = rq(X)
    if Xu is not None:
        n, nu = len(X), len(Xu)
        pen = n / (n + a * nu) * (pen + a * rq(Xu))
    return 0.5 * w @ w + C * (np.sum(np.logaddexp(0, -y * m)) + pen)


def test_wager_penalty_against_independent_objective(binary):
    X, y = binary
    Xu = np.random.default_rng(1).normal(size=(40, 4))
    for extra in (None, Xu):
        est = WagerDropoutLogisticRegression(C=0.9, noise_level=0.4, tol=1e-10)
        est.fit(X, y, X_unlabeled=extra)
        theta = np.r_[est.coef_[0], est.intercept_]
        val = _wager_reference(theta, X, y, 0.9, 0.4, extra)
        np.testing.assert_allclose(est.objective_[0], val, rtol=1e-12)
        grad = _fd_grad(lambda t: _wager_reference(t, X, y, 0.9, 0.4, extra), theta)
        assert np.max(np.abs(grad)) < 1e-5  # a stationary point of the reference objective


def test_wager_limits(binary):
    X, y = binary
    lr = LogisticRegression(C=0.9, tol=1e-12).fit(X, y)
    zero = WagerDropoutLogisticRegression(C=0.9, noise_level=0.0, tol=1e-10).fit(X, y)
    np.testing.assert_allclose(zero.coef_, lr.coef_, atol=2e-6)
    # unlabeled copy of the labeled rows with a = 1: kappa (R + R) = R
    sup = WagerDropoutLogisticRegression(C=0.9, noise_level=0.4, tol=1e-10).fit(X, y)
    semi = WagerDropoutLogisticRegression(C=0.9, noise_level=0.4, unlabeled_discount=1.0,
                                          tol=1e-10).fit(X, y, X_unlabeled=X)
    np.testing.assert_allclose(semi.coef_, sup.coef_, atol=1e-6)
    assert np.linalg.norm(sup.coef_) < np.linalg.norm(lr.coef_)


# -- t-logistic -------------------------------------------------------------------------
def test_exp_t_log_t_inverse_and_partition():
    x = np.linspace(-5, 0.5, 23)
    for t in (1.0, 1.3, 1.9):
        np.testing.assert_allclose(log_t(exp_t(x, t), t), x, atol=1e-12)
    U = np.random.default_rng(0).uniform(-10, 10, size=(20, 6))
    for t in (1.0, 1.5, 1.9):
        g, P, Q = t_partition(U, t)
        np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-12)
        for i in range(3):
            root = brentq(lambda gg: exp_t(U[i] - gg, t).sum() - 1, U[i].max(), U[i].max() + 50)
            assert abs(g[i] - root) < 1e-9
        # dg/du_c = escort probabilities
        h = 1e-6
        for c in range(2):
            e = np.zeros(6)
            e[c] = h
            fd = (t_partition(U[:1] + e, t)[0] - t_partition(U[:1] - e, t)[0]) / (2 * h)
            assert abs(fd[0] - Q[0, c]) < 1e-6


def test_t_logistic_at_t1_is_logistic_regression(binary, multiclass):
    X, y = binary
    ours = TLogisticRegression(t=1.0, C=0.6, tol=1e-10).fit(X, y)
    ref = LogisticRegression(C=0.6, tol=1e-12, max_iter=10000).fit(X, y)
    np.testing.assert_allclose(ours.coef_, ref.coef_, atol=2e-6)
    np.testing.assert_allclose(ours.predict_proba(X), ref.predict_proba(X), atol=1e-6)
    Xm, ym = multiclass
    ours = TLogisticRegression(t=1.0, C=0.6, tol=1e-10).fit(Xm, ym)
    ref = LogisticRegression(C=0.6, tol=1e-12, max_iter=10000).fit(Xm, ym)
    np.testing.assert_allclose(ours.predict_proba(Xm), ref.predict_proba(Xm), atol=1e-6)


@pytest.mark.parametrize("which", ["binary", "multiclass"])
def test_t_logistic_gradient(which, binary, multiclass):
    X, y = binary if which == "binary" else multiclass
    est = TLogisticRegression(t=1.7, C=0.6)
    est._validate_fit(X, y)
    K = 1 if which == "binary" else 3
    y_idx = np.searchsorted(est.classes_, y)
    yk = 1 - y_idx if K == 1 else y_idx
    theta = np.random.default_rng(0).normal(size=K * X.shape[1] + K)
    _, grad = est._objective(theta, X, yk, K, 1.7)
    fd = _fd_grad(lambda th: est._objective(th, X, yk, K, 1.7)[0], theta)
    np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-6)


def test_t_logistic_resists_label_noise_on_long_servedio():
    X, y, _ = make_long_servedio(1000, random_state=0)
    Xt, yt, _ = make_long_servedio(2000, random_state=1)
    y_noisy, flipped = flip_labels(y, 0.1, random_state=2)
    lr = LogisticRegression(C=1.0).fit(X, y_noisy).score(Xt, yt)
    tl = TLogisticRegression(t=1.9, C=1.0).fit(X, y_noisy)
    assert tl.score(Xt, yt) > lr + 0.1
    xi = tl.influence(X, y_noisy)
    assert np.median(xi[flipped]) < 0.5 * np.median(xi[~flipped])


# -- invariant SVM ----------------------------------------------------------------------
def test_worst_case_margin_brute_force():
    rng = np.random.default_rng(0)
    B = rng.normal(size=(6, 6))
    for K, lo, up in ((2, 0.0, 1.0), (2, 0.5, 3.0), (0, 0.0, 1.0), (6, 0.2, 1.5)):
        m, alpha = worst_case_margin(B, K, lo, up)
        np.testing.assert_allclose(np.sum(B * alpha, axis=1), m)
        assert np.all((alpha != 1).sum(axis=1) <= K)
        for i in range(len(B)):
            best = B[i].sum()
            for k in range(1, K + 1):
                for subset in itertools.combinations(range(6), k):
                    for vals in itertools.product((lo, up), repeat=k):
                        a = np.ones(6)
                        a[list(subset)] = vals
                        best = min(best, B[i] @ a)
            assert abs(m[i] - best) < 1e-12


@pytest.mark.parametrize("solver", ["bcfw", "bmrm"])
def test_invariant_svm_zero_changes_is_linear_svc(binary, solver):
    X, y = binary
    ours = InvariantSVC(C=0.5, n_changes=0, tol=1e-5, solver=solver, max_iter=20000,
                        random_state=0).fit(X, y)
    ref = LinearSVC(C=0.5, loss="hinge", tol=1e-10, max_iter=100000).fit(X, y)
    probe = InvariantSVC(C=0.5, n_changes=0).fit(X[:10], y[:10])
    probe.coef_, probe.intercept_ = ref.coef_, ref.intercept_
    ref_obj = probe.objective(X, y)[0]
    assert ours.objective_[0] <= ref_obj * (1 + 1e-4)
    assert ours.objective_[0] - ours.duality_gap_[0] <= ref_obj + 1e-9  # certified bound


@pytest.mark.parametrize("solver, tol", [("bcfw", 1e-5), ("bmrm", 1e-7)])
def test_fdrop_against_quadratic_program(binary, solver, tol):
    """FDROP on a tiny problem against SLSQP on the explicit QP (top-K via its LP dual)."""
    X, y = binary[0][:25, :3], binary[1][:25]
    C, K = 1.0, 1
    n, d = X.shape
    ours = InvariantSVC(C=C, n_changes=K, tol=tol, max_iter=100000, solver=solver,
                        random_state=0).fit(X, y)
    assert ours.duality_gap_[0] <= tol * ours.objective_[0]

    # variables: w (d), wb, xi (n), t (n), pi (n d)
    def unpack(z):
        return z[:d], z[d], z[d + 1:d + 1 + n], z[d + 1 + n:d + 1 + 2 * n], \
            z[d + 1 + 2 * n:].reshape(n, d)

    def obj(z):
        w, wb, xi, _, _ = unpack(z)
        return 0.5 * (w @ w + wb * wb) + C * xi.sum()

    def cons(z):
        w, wb, xi, t, pi = unpack(z)
        B = y[:, None] * X * w
        return np.concatenate([
            xi - (1 - y * wb - B.sum(axis=1) + K * t + pi.sum(axis=1)),
            xi, (pi - (B - t[:, None])).ravel(), pi.ravel()])

    z0 = np.zeros(d + 1 + 2 * n + n * d)
    z0[d + 1:d + 1 + n] = 2.0
    res = minimize(obj, z0, constraints=[{"type": "ineq", "fun": cons}], method="SLSQP",
                   options={"maxiter": 2000, "ftol": 1e-12})
    assert res.success
    # the certified gap bounds the distance to the optimum (tol <= 1e-5)
    assert abs(ours.objective_[0] - res.fun) <= 1e-5 * res.fun
    np.testing.assert_allclose(ours.coef_[0], unpack(res.x)[0], atol=2e-2)


def test_invariant_risk_pass_matches_numpy_reference():
    # the jitted, chunk-parallel risk pass equals the numpy worst_case_margin formula, dense
    # and sparse, and gives the same bits with one thread and with all threads
    import numba

    rng = np.random.default_rng(1)
    X = rng.normal(size=(700, 9))
    X[rng.random(X.shape) < 0.4] = 0.0
    y = np.where(rng.random(700) < 0.5, -1.0, 1.0)
    w, b = rng.normal(size=9), 0.3
    threads = numba.get_num_threads()
    for K, lo, up in ((0, 0.0, 1.0), (3, 0.0, 1.0), (4, 0.5, 6.0), (20, 0.0, 1.0)):
        est = InvariantSVC(C=0.7, n_changes=K, lower=lo, upper=up, intercept_scaling=2.0)
        m, alpha = worst_case_margin(y[:, None] * X * w, K, lo, up)
        m = m + y * b
        act = m < 1
        ref = (0.7 * np.sum(1 - m[act]), -0.7 * ((y[act, None] * alpha[act]) * X[act]).sum(0),
               -0.7 * 2.0 * y[act].sum())
        results = []
        try:
            for n_threads, XX in ((1, X), (threads, X), (threads, sp.csr_matrix(X))):
                numba.set_num_threads(n_threads)
                results.append(est._risk(XX, y, w, b))
        finally:
            numba.set_num_threads(threads)
        assert results[0][0] == results[1][0]
        np.testing.assert_array_equal(results[0][1], results[1][1])
        for risk, gw, gb in results:
            np.testing.assert_allclose(risk, ref[0], rtol=1e-13)
            np.testing.assert_allclose(gw, ref[1], rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(gb, ref[2], rtol=1e-13)


def test_bcfw_and_bmrm_agree_and_bcfw_is_reproducible(binary):
    X, y = binary
    kw = dict(C=0.3, n_changes=2, tol=1e-6, max_iter=50000)
    a = InvariantSVC(solver="bcfw", random_state=5, **kw).fit(X, y)
    b = InvariantSVC(solver="bmrm", **kw).fit(X, y)
    again = InvariantSVC(solver="bcfw", random_state=5, **kw).fit(sp.csr_matrix(X), y)
    for est in (a, b):
        assert est.duality_gap_[0] <= 1e-6 * est.objective_[0]
    # both certified to 1e-6, so their objectives agree to 2e-6
    assert abs(a.objective_[0] - b.objective_[0]) <= 2e-6 * b.objective_[0]
    np.testing.assert_allclose(a.objective(X, y), a.objective_, rtol=1e-12)
    np.testing.assert_allclose(again.coef_, a.coef_, rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="solver"):
        InvariantSVC(solver="pegasos").fit(X, y)


def test_bmrm_bundle_is_bounded_and_stays_certified(monkeypatch):
    """BMRM keeps at most ``max(_BMRM_BUNDLE, 4 (D + 2))`` cutting planes: a full bundle
    drops its inactive planes and aggregates the smallest active ones. (1) On a problem
    BMRM cannot finish in ``max_iter`` (C = 1e4, one feature of scale 1e3, labels not
    separable, ``tol`` below rounding) no QP sees more planes than that, whatever the
    iterations -- unbounded, the bundle's QP grew with every iteration (minutes for these
    7 examples at the default ``max_iter``). (2) With compression at work (a 20-plane bundle, 40-55
    iterations) the fit still reaches its certified gap, its lower bound
    ``objective_ - duality_gap_`` stays below ``J*`` of ``LinearSVC`` (``n_changes =
    0`` is the hinge SVM) and its objective within ``tol`` of it."""
    import bayesdrop.baselines.invariant as baselines

    qp = baselines._simplex_qp_active  # few parameters: the active-set QP
    sizes = []

    def spy(H, *args, **kwargs):
        sizes.append(H.shape[0])
        return qp(H, *args, **kwargs)

    monkeypatch.setattr(baselines, "_simplex_qp_active", spy)
    monkeypatch.setattr(baselines, "_BMRM_BUNDLE", 1)
    X = np.array([[1026.9], [-725.8], [-613.0], [1176.6], [766.3], [-217.0], [-761.8]])
    y = np.array([0, 1, 1, 0, 1, 0, 1])
    with pytest.warns(ConvergenceWarning):
        hard = InvariantSVC(C=1e4, n_changes=0, max_iter=300, tol=1e-15).fit(X, y)
    assert hard.n_iter_[0] == 300 and len(sizes) == 300
    assert max(sizes) == 4 * (1 + 2)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = np.sign(X @ [1.0, -1.0, 0.5] + 0.5 * rng.normal(size=200))
    sizes.clear()
    tol = 1e-6
    ours = InvariantSVC(C=10.0, n_changes=0, tol=tol, max_iter=5000).fit(X, y)
    assert max(sizes) == 4 * (3 + 2) < ours.n_iter_[0]  # compressed at least once
    assert ours.duality_gap_[0] <= tol * ours.objective_[0]
    with warnings.catch_warnings():  # liblinear's own stop: J_ref >= J*, which is enough
        warnings.simplefilter("ignore", ConvergenceWarning)
        ref = LinearSVC(C=10.0, loss="hinge", tol=1e-10, max_iter=100_000).fit(X, y)
    probe = InvariantSVC(C=10.0, n_changes=0).fit(X[:10], y[:10])
    probe.coef_, probe.intercept_ = ref.coef_, ref.intercept_
    J_ref = probe.objective(X, y)[0]
    assert ours.objective_[0] - ours.duality_gap_[0] <= J_ref * (1 + 1e-12)
    assert ours.objective_[0] <= J_ref * (1 + tol)


def _simplex_qp_cases(rng, n):
    """Bundle QPs ``(H, c, beta0)``: planes of a few parameters with scales 1e-3..1e5,
    some duplicated or affinely dependent, offsets of scales 1e-2..1e4, starts on a face."""
    for _ in range(n):
        k, p = int(rng.integers(1, 30)), int(rng.integers(1, 6))
        A = rng.normal(size=(k, p)) * 10.0 ** rng.uniform(-3, 5, size=p)
        if k > 3 and rng.random() < 0.5:
            A[1] = A[0]  # a duplicate
            A[2] = 0.5 * (A[0] + A[3])  # affinely dependent
        c = rng.normal(size=k) * 10.0 ** rng.uniform(-2, 4)
        yield A @ A.T, c, rng.random(k) * (rng.random(k) < 0.5)


def test_active_set_bundle_qp_is_optimal():
    """:func:`_simplex_qp_active` returns a point of the simplex; where ``H`` and ``c``
    are below 1e6 no vertex has a lower gradient than the point itself beyond rounding
    (the Frank-Wolfe gap, whose zero is the QP's optimality condition: the problem is
    convex), on ill-conditioned, duplicated and affinely dependent planes; where SLSQP (an independent optimiser)
    converges, its value is no lower than ours beyond its own tolerance and the rounding
    of ``f`` (whose products with ``H`` are of ``H``'s scale)."""
    from bayesdrop.baselines.invariant import _simplex_qp_active

    rng = np.random.default_rng(0)
    eps = np.finfo(float).eps
    compared = certified = 0
    for H, c, beta0 in _simplex_qp_cases(rng, 200):
        beta = _simplex_qp_active(H, c, beta0, tol=0.0)
        assert np.all(beta >= 0.0) and abs(beta.sum() - 1.0) <= 1e-13
        g = H @ beta - c
        scale = np.abs(H).max() + np.abs(c).max()
        if scale <= 1e6:  # above, a step's progress in f can fall below f's rounding
            assert g @ beta - g.min() <= 64 * c.size * eps * scale
            certified += 1
        f = 0.5 * beta @ H @ beta - c @ beta
        ref = minimize(lambda b, H=H, c=c: 0.5 * b @ H @ b - c @ b,
                       np.full(c.size, 1.0 / c.size), jac=lambda b, H=H, c=c: H @ b - c,
                       method="SLSQP", bounds=[(0.0, 1.0)] * c.size,
                       constraints=[{"type": "eq", "fun": lambda b: b.sum() - 1.0}],
                       options={"ftol": 1e-14, "maxiter": 1000})
        if ref.success and abs(ref.x.sum() - 1.0) < 1e-9 and np.all(ref.x >= -1e-12):
            # f's own rounding: its products with H are of H's scale, not of f's
            assert f <= ref.fun + 1e-9 * (1.0 + abs(ref.fun)) + 4 * c.size * eps * scale
            compared += 1
    assert compared >= 80 and certified >= 30


def test_bmrm_certifies_an_ill_conditioned_problem_in_few_iterations():
    """The fuzz suite's case (7 examples, one feature of scale 1e3, ``C = 1e4``): with
    FISTA's inexact bundle QPs BMRM ran its 1000 iterations (12 s) and stopped at a
    relative gap of 0.17 with ``J`` 4 % above the optimum. Now it certifies the optimum
    within ``tol`` in a few iterations, below ``J`` of liblinear's tight fit of the same
    objective (``n_changes = 0``: the hinge SVM with the intercept penalised), with its
    lower bound below it."""
    X = np.array([[1026.86112242], [-725.82433651], [-612.97810292], [1176.63899253],
                  [766.28676448], [-217.04662302], [-761.84494269]])
    y = np.array(["no", "yes", "yes", "yes", "yes", "no", "yes"])
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        ours = InvariantSVC(C=1e4, n_changes=0, random_state=0).fit(X, y)
    assert ours.converged_[0] and ours.n_iter_[0] <= 20
    with warnings.catch_warnings():  # liblinear's own stop: J_ref >= J*, which is enough
        warnings.simplefilter("ignore", ConvergenceWarning)
        ref = LinearSVC(C=1e4, loss="hinge", tol=1e-12, max_iter=1_000_000).fit(X, y)
    probe = InvariantSVC(C=1e4, n_changes=0).fit(X, y)
    probe.coef_, probe.intercept_ = ref.coef_, ref.intercept_
    J_ref = probe.objective(X, y)[0]
    assert ours.objective_[0] - ours.duality_gap_[0] <= J_ref * (1 + 1e-12)
    assert ours.objective_[0] <= J_ref * (1 + ours.tol)


def test_bmrm_storage_growth_does_not_change_the_result(binary, monkeypatch):
    import bayesdrop.baselines.invariant as baselines

    X, y = binary
    kw = dict(C=0.3, n_changes=2, tol=1e-6, solver="bmrm")
    ref = InvariantSVC(**kw).fit(X, y)
    assert ref.n_iter_[0] > 3
    monkeypatch.setattr(baselines, "_BMRM_CAPACITY", 1)  # doubles 1 -> 2 -> 4 -> ...
    grown = InvariantSVC(**kw).fit(X, y)
    np.testing.assert_array_equal(grown.coef_, ref.coef_)
    assert grown.n_iter_[0] == ref.n_iter_[0]


# -- explicit corruption ----------------------------------------------------------------
def test_explicit_corruption_limits(binary):
    X, y = binary
    base = LogisticRegression(C=0.5, tol=1e-12, max_iter=10000)
    ref = base.fit(X, y)
    clean = ExplicitCorruptionClassifier(base, noise_level=0.0, n_copies=4,
                                         random_state=0).fit(X, y)
    np.testing.assert_allclose(clean.coef_, ref.coef_, atol=1e-5)
    a = ExplicitCorruptionClassifier(base, noise_level=0.3, n_copies=3, random_state=5).fit(X, y)
    b = ExplicitCorruptionClassifier(base, noise_level=0.3, n_copies=3, random_state=5).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    assert not np.allclose(a.coef_, ref.coef_)
    sparse = ExplicitCorruptionClassifier(base, noise_level=0.3, n_copies=3,
                                          random_state=5).fit(sp.csr_matrix(X), y)
    assert sparse.predict(sp.csr_matrix(X)).shape == (len(X),)


# -- conventions ------------------------------------------------------------------------
@pytest.mark.parametrize("est, msg", [
    (MCFQuadraticClassifier(C=0.0), "C"),
    (MCFLogisticRegression(C=-1.0), "C"),
    (WagerDropoutLogisticRegression(unlabeled_discount=0.0), "unlabeled_discount"),
    (TLogisticRegression(t=0.5), "t"),
    (TLogisticRegression(init="random"), "init"),
    (InvariantSVC(n_changes=-1), "n_changes"),
    (InvariantSVC(lower=1.5), "lower"),
    (InvariantSVC(upper=0.5), "upper"),
    (ExplicitCorruptionClassifier(LogisticRegression(), n_copies=0), "n_copies"),
])
def test_bad_parameters(est, msg, binary):
    with pytest.raises(ValueError, match=msg):
        est.fit(*binary)


@pytest.mark.parametrize("est", [MCFQuadraticClassifier(), MCFLogisticRegression(),
                                 WagerDropoutLogisticRegression(), TLogisticRegression(),
                                 InvariantSVC(), ExplicitCorruptionClassifier(LogisticRegression())])
def test_one_class_nan_and_no_mutation(est, binary):
    X, y = binary
    X0, y0 = X.copy(), y.copy()
    fitted = est.fit(X, y)
    assert fitted is est
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)
    with pytest.raises(ValueError, match="class"):
        est.fit(X, np.ones_like(y))
    Xn = X.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        est.fit(Xn, y)


@pytest.mark.parametrize("est", [MCFQuadraticClassifier(), MCFLogisticRegression(),
                                 WagerDropoutLogisticRegression(), TLogisticRegression(),
                                 InvariantSVC(n_changes=0),
                                 ExplicitCorruptionClassifier(LogisticRegression(), n_copies=2,
                                                              random_state=0)],
                         ids=lambda e: type(e).__name__)
def test_scikit_learn_estimator_checks(est):
    """scikit-learn's own conventions checks (InvariantSVC with K > 0 is robust to the
    deletion of one of the two features of the check data, so its training accuracy is
    below the threshold of ``check_classifiers_train`` by design; K = 0 is checked)."""
    from sklearn.utils.estimator_checks import check_estimator

    expected = {}
    if isinstance(est, ExplicitCorruptionClassifier):
        why = ("the corrupted copies are random: a duplicated row gets other corruptions "
               "than a row of weight 2 (tested at zero noise in test_explicit_weights)")
        expected = {"check_sample_weight_equivalence_on_dense_data": why,
                    "check_sample_weight_equivalence_on_sparse_data": why}
    results = check_estimator(est, on_fail=None, expected_failed_checks=expected)
    failed = [(r["check_name"], str(r["exception"])[:200]) for r in results
              if r["status"] == "failed"]
    assert not failed


def test_explicit_weights_pass_to_every_copy(binary):
    X, y = binary
    w = np.random.default_rng(0).integers(0, 3, size=len(y)).astype(float)
    dup = np.repeat(np.arange(len(y)), w.astype(int))
    kw = dict(noise_level=0.0, n_copies=3, random_state=0, scale_C=False)
    a = ExplicitCorruptionClassifier(LogisticRegression(tol=1e-10), **kw).fit(X, y,
                                                                              sample_weight=w)
    b = ExplicitCorruptionClassifier(LogisticRegression(tol=1e-10), **kw).fit(X[dup], y[dup])
    np.testing.assert_allclose(a.coef_, b.coef_, rtol=1e-5)


def test_bmrm_with_fistas_qp_reaches_the_same_certified_optimum(binary, monkeypatch):
    """Above :data:`_QP_ACTIVE_MAX_PARAMS` parameters BMRM's bundle QP is FISTA's
    (:func:`_simplex_qp`): forced here on a small problem, the fit is certified within
    ``tol`` and its ``J`` within ``tol`` of the active-set QP's fit, each below the
    other's upper end."""
    import bayesdrop.baselines.invariant as baselines

    X, y = binary
    kw = {"C": 0.3, "n_changes": 2, "tol": 1e-6, "solver": "bmrm"}
    exact = InvariantSVC(**kw).fit(X, y)
    monkeypatch.setattr(baselines, "_QP_ACTIVE_MAX_PARAMS", 0)
    fista = InvariantSVC(**kw).fit(X, y)
    for a, b in ((exact, fista), (fista, exact)):
        assert a.converged_[0]
        assert a.objective_[0] - a.duality_gap_[0] <= b.objective_[0] * (1 + 1e-12)
