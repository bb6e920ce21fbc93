"""The compiled latent evaluation and the compiled L-BFGS loop around it."""

import math

import numpy as np
import pytest
from sklearn.datasets import load_digits, make_moons

from bayesdrop import (
    Dropout,
    DropoutLatentLogisticRegression,
    DropoutLatentSVC,
    EpsilonInsensitiveLoss,
    HingeLoss,
    LogisticLoss,
    NoNoise,
)
from bayesdrop.model import _latent_compiled as LC
from bayesdrop.model.latent import latent_gradients, noise_entries
from bayesdrop.solvers import _lbfgs_compiled as LB
from bayesdrop.solvers import lbfgs


def _value_grad(X, entries, y, loss, theta, alpha, pen, fit_intercept):
    lp = loss.kernel_params
    VT = np.ascontiguousarray(entries[3].T) if entries[3] is not None else np.zeros((0, 0))
    sw = np.ones(X.shape[0]) if loss.weights is None else loss.weights
    z = np.concatenate([theta, alpha.ravel()])
    grad = np.full_like(z, np.nan)
    work = LC.LatentWork(X.shape[0], X.shape[1], alpha.shape[1])
    J = LC.latent_value_grad(lp,
                             np.ascontiguousarray(X.T), VT,
                             np.asarray(y, float), sw, z, alpha.shape[1], fit_intercept,
                             pen, *work.arrays(), grad)
    return J, grad


@pytest.mark.parametrize("loss_name", ["logistic", "hinge", "epsilon", "weighted"])
@pytest.mark.parametrize("noise", [Dropout(0.3), NoNoise()], ids=["dropout", "none"])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_compiled_value_and_gradient_equal_latent_gradients(loss_name, noise,
                                                            fit_intercept, monkeypatch):
    """``latent_value_grad`` (one compiled call, scalar C-library functions and the
    polynomial ``exp``) gives the ``J`` and gradients of ``latent_gradients``'s numpy
    formulas (forced by hiding the loss's kernels: with them, dense designs are evaluated by
    ``latent_value_grad`` itself) to rounding, for every built-in loss, with weights,
    without noise and without intercept."""
    from bayesdrop.model import latent as L

    rng = np.random.default_rng(3)
    X = rng.normal(size=(60, 7)) * np.where(rng.random((60, 7)) < 0.3, 0.0, 1.0)
    y = np.sign(rng.normal(size=60))
    loss = {"logistic": LogisticLoss(0.7), "hinge": HingeLoss(1.3),
            "epsilon": EpsilonInsensitiveLoss(1.0, 0.2),
            "weighted": LogisticLoss(0.7).weighted(rng.integers(1, 4, size=60) * 1.0)
            }[loss_name]
    if loss_name == "epsilon":
        y = rng.normal(size=60)
    entries = noise_entries(X, noise)
    # large hidden weights: pre-activations of both signs and far into the tails
    alpha = rng.normal(size=(8, 5)) * 3.0
    theta = rng.normal(size=5 + fit_intercept)
    J, grad = _value_grad(X, entries, y, loss, theta, alpha, 0.3, fit_intercept)
    monkeypatch.setattr(L, "has_kernels", lambda loss: False)
    J0, g_theta, g_alpha = latent_gradients(X, entries, y, loss, theta, alpha, 0.3,
                                            fit_intercept)
    assert J == pytest.approx(J0, rel=1e-13)
    ref = np.concatenate([g_theta, g_alpha.ravel()])
    np.testing.assert_allclose(grad, ref, rtol=1e-11, atol=1e-13 * np.abs(ref).max())


def test_polynomial_exp_within_one_ulp_and_floored():
    """``_exp_parts``: ``exp(-|x|)`` within 1 ulp of numpy's over the normal range, the
    documented floor ``exp(EXP_FLOOR_ARG)`` below it, the bias added in place, NaN
    propagated."""
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-1, 1, 20000), rng.uniform(-60, 60, 20000),
                        rng.uniform(-708, 708, 20000),
                        [0.0, -0.0, 1e-300, 0.5 * math.log(2), 707.9, -708.0, 708.5,
                         -745.0, 1e4, np.inf, -np.inf, np.nan]])
    pre = x.reshape(4, -1).copy()
    bias = np.array([0.0, 0.0, 0.0, 0.0])
    poly = np.empty_like(pre)
    bits = np.empty(pre.size, dtype=np.int64)
    LC._exp_parts(pre, bias, poly, bits)
    got = (poly.ravel() * bits.view(np.float64))
    t = np.maximum(-np.abs(x), LC.EXP_FLOOR_ARG)
    ref = np.exp(t)
    finite = np.isfinite(x)
    err = np.abs(got[finite] - ref[finite]) / np.spacing(ref[finite])
    assert err.max() <= 1.0
    assert np.all(got[np.abs(x) >= 708.0] == pytest.approx(math.exp(LC.EXP_FLOOR_ARG),
                                                            rel=1e-15))
    assert np.isnan(got[np.isnan(x)]).all()
    pre2 = np.zeros((4, 1))
    LC._exp_parts(pre2, np.array([1.0, -2.0, 0.0, 3.0]), poly[:, :1].copy(), bits[:4])
    np.testing.assert_array_equal(pre2, [[1.0], [-2.0], [0.0], [3.0]])


@pytest.mark.parametrize("written", [3, 5, 7])
def test_two_loop_equals_the_bfgs_inverse_update(written):
    """``-H g`` of the two-loop recursion over a ring buffer (wrapped around, more pairs
    written than kept) equals the explicit BFGS inverse updates
    ``H <- (I - rho s y^T) H (I - rho y s^T) + rho s s^T`` from ``H_0 = gamma I``."""
    rng = np.random.default_rng(1)
    n, mem = 6, 4
    A = rng.normal(size=(n, n))
    A = A @ A.T + n * np.eye(n)  # pairs of a convex quadratic: s^T y > 0
    S = np.zeros((mem, n))
    Y = np.zeros((mem, n))
    rho = np.zeros(mem)
    pairs = []
    for t in range(written):
        s = rng.normal(size=n)
        y = A @ s
        S[t % mem], Y[t % mem], rho[t % mem] = s, y, 1.0 / (s @ y)
        pairs.append((s, y))
    kept = pairs[-mem:]
    s_new, y_new = kept[-1]
    H = (s_new @ y_new) / (y_new @ y_new) * np.eye(n)
    for s, y in kept:
        r = 1.0 / (s @ y)
        V = np.eye(n) - r * np.outer(y, s)
        H = V.T @ H @ V + r * np.outer(s, s)
    g = rng.normal(size=n)
    q = np.empty(n)
    LB.two_loop(g, S, Y, rho, (written - 1) % mem, len(kept), q, np.empty(mem))
    np.testing.assert_allclose(q, -H @ g, rtol=1e-12, atol=1e-14)
    LB.two_loop(g, S, Y, rho, 0, 0, q, np.empty(mem))  # no pairs: steepest descent
    np.testing.assert_array_equal(q, -g)


def test_cubic_step_is_the_minimiser_of_a_cubic():
    """Through two points of ``f(a) = (a - 0.3)^2 (a + 2)`` with their slopes the
    interpolating cubic is ``f`` itself: the step is its local minimiser 0.3; outside
    the middle 80% of the interval, the midpoint."""
    def f(a):
        return (a - 0.3) ** 2 * (a + 2.0), 2 * (a - 0.3) * (a + 2.0) + (a - 0.3) ** 2

    assert LB.cubic_step(0.0, *f(0.0), 1.0, *f(1.0)) == pytest.approx(0.3, abs=1e-14)
    assert LB.cubic_step(1.0, *f(1.0), 0.0, *f(0.0)) == pytest.approx(0.3, abs=1e-14)
    assert LB.cubic_step(0.25, *f(0.25), 4.0, *f(4.0)) == pytest.approx(2.125)


@pytest.mark.parametrize("loss", [LogisticLoss(1.0), HingeLoss(1.0)], ids=repr)
@pytest.mark.parametrize("pen", [0.05, 2.0])
def test_compiled_lbfgs_reaches_scipy_lbfgsb_stationary_point(loss, pen):
    """From the same start the compiled L-BFGS and scipy's L-BFGS-B (the path sparse
    designs take) reach a stationary point of the latent J (gradient small against its
    start; non-increasing history): with a strong hidden-layer penalty the same one (J
    to 1e-9); with a weak one (non-convex) one at least as low."""
    X, y = make_moons(150, noise=0.2, random_state=2)
    yb = np.where(y == 1, 1.0, -1.0)
    entries = noise_entries(X, Dropout(0.2))
    rng = np.random.default_rng(0)
    alpha = rng.normal(size=(3, 4))
    theta = rng.normal(size=5) * 0.1
    z = np.concatenate([theta, alpha.ravel()])
    lp = loss.kernel_params
    work = LC.LatentWork(150, 2, 4)
    history = np.empty(20_001)
    n_iter, status, n_eval = LB.lbfgs_latent(
        lp, np.ascontiguousarray(X.T),
        np.ascontiguousarray(entries[3].T), yb, np.ones(150), z, 4,
        True, pen, 20_000, 1e-14, 20, history, *work.arrays(), 0, LB.lbfgs_state(z.size))
    assert status in (1, 2) and n_eval >= n_iter + 1
    history = history[:n_iter + 1]
    assert np.all(np.diff(history) <= 0.0)
    z_ref, hist_ref, _, _ = lbfgs._scipy_latent(X, entries, yb, loss, theta, alpha, pen,
                                                True, 20_000, 1e-14)
    # scipy's run moves in centred coordinates too; it returns z in those of X
    J_ref = latent_gradients(X, entries, yb, loss, z_ref[:5], z_ref[5:].reshape(3, 4), pen,
                             True)[0]
    assert J_ref == pytest.approx(hist_ref[-1], rel=1e-12)
    if pen > 1:
        assert history[-1] == pytest.approx(hist_ref[-1], rel=1e-9)
    J, grad = _value_grad(X, entries, yb, loss, z[:5], z[5:].reshape(3, 4), pen, True)
    assert J == history[-1]
    _, grad0 = _value_grad(X, entries, yb, loss, theta, alpha, pen, True)
    assert np.linalg.norm(grad) <= 1e-5 * np.linalg.norm(grad0)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("noise", [Dropout(0.3), NoNoise()], ids=["dropout", "none"])
@pytest.mark.parametrize("fit_intercept", [True, False])
def test_centred_coordinates_give_the_latent_objective(weighted, noise, fit_intercept):
    """``CompiledLatent`` evaluates ``J`` with centred inputs and shifted hidden biases
    (``c' = c + alpha^T mu``, ``mu`` the weighted row mean): an exact change of
    variables, so ``value_grad`` -- value and chain-ruled gradient in the coordinates of
    ``X`` -- equals ``latent_gradients`` on the uncentred ``X`` (inputs far from zero
    mean, where a wrong shift or chain rule shows), with and without example weights."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(80, 6)) * np.where(rng.random((80, 6)) < 0.3, 0.0, 1.0) + 2.5
    y = np.sign(rng.normal(size=80))
    loss = LogisticLoss(0.8)
    if weighted:
        loss = loss.weighted(rng.integers(1, 5, size=80) * 1.0)
    entries = noise_entries(X, noise)
    run = LB.CompiledLatent(X, entries, y, loss, 4, fit_intercept, 0.3)
    sw = np.ones(80) if not weighted else loss.weights
    np.testing.assert_allclose(run.mean, sw @ X / sw.sum(), rtol=1e-14)
    alpha = rng.normal(size=(7, 4))
    theta = rng.normal(size=4 + fit_intercept)
    z = np.concatenate([theta, alpha.ravel()])
    z_before = z.copy()
    J, grad = run.value_grad(z)
    np.testing.assert_array_equal(z, z_before)  # the caller's z untouched
    J0, g_theta, g_alpha = latent_gradients(X, entries, y, loss, theta, alpha, 0.3,
                                            fit_intercept)
    assert J == pytest.approx(J0, rel=1e-12)
    ref = np.concatenate([g_theta, g_alpha.ravel()])
    np.testing.assert_allclose(grad, ref, rtol=1e-10, atol=1e-12 * np.abs(ref).max())


@pytest.mark.parametrize("sparse", [False, True])
def test_centred_objective_is_the_change_of_variables(sparse):
    """``centred_objective`` (the centred coordinates for code that does not centre
    ``X``: sparse designs, scipy's L-BFGS-B): ``J'(z') = J(T z')`` and ``grad' = T^T
    grad(T z')`` with ``T`` the matrix of the map ``z' -> z`` (built column by column from
    ``shift_biases``); ``input_mean`` is the weighted row mean for dense and sparse ``X``."""
    import scipy.sparse as sp_

    rng = np.random.default_rng(8)
    X = rng.random((50, 5)) * (rng.random((50, 5)) < 0.5) + 0.5 * (rng.random((50, 5)) < 0.2)
    Xd = sp_.csr_matrix(X) if sparse else X
    y = np.sign(rng.normal(size=50))
    weights = rng.integers(1, 4, size=50) * 1.0
    loss = LogisticLoss(1.0).weighted(weights)
    mean = LB.input_mean(Xd, weights)
    np.testing.assert_allclose(mean, weights @ X / weights.sum(), rtol=1e-14)
    entries = noise_entries(Xd, Dropout(0.3))
    shape, n_theta = (6, 3), 4

    def fun(z):
        J, gt, ga = latent_gradients(Xd, entries, y, loss, z[:n_theta],
                                     z[n_theta:].reshape(shape), 0.5, True)
        return J, np.concatenate([gt, ga.ravel()])

    def to_x(zc):
        z = zc.copy()
        LB.shift_biases(z[n_theta:].reshape(shape), mean, -1.0)
        return z

    p = n_theta + 18
    T = np.column_stack([to_x(e) for e in np.eye(p)])
    zc = rng.normal(size=p)
    J, grad = LB.centred_objective(fun, mean, n_theta, shape)(zc)
    J_ref, g_ref = fun(T @ zc)
    assert J == J_ref
    np.testing.assert_allclose(grad, T.T @ g_ref, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("n_fixed", [0, 5])
def test_centred_run_returns_a_stationary_point_in_the_coordinates_of_X(n_fixed):
    """``CompiledLatent.run`` moves in centred coordinates but returns ``z`` in those of
    ``X``: its first and last ``J`` are the latent ``J`` at the start and the result, the gradient there (of the free
    components) is small, the fixed output weights are unchanged, and with a strong
    hidden-layer penalty (J convex enough) the minimum is scipy L-BFGS-B's on the
    uncentred ``J`` from the same start."""
    from scipy.optimize import minimize

    X, y = make_moons(150, noise=0.2, random_state=2)
    X = X + np.array([3.0, -2.0])  # far from zero mean
    yb = np.where(y == 1, 1.0, -1.0)
    loss = LogisticLoss(1.0)
    entries = noise_entries(X, Dropout(0.2))
    rng = np.random.default_rng(0)
    alpha = rng.normal(size=(3, 4))
    theta = rng.normal(size=5) * 0.1
    z = np.concatenate([theta, alpha.ravel()])
    run = LB.CompiledLatent(X, entries, yb, loss, 4, True, 2.0)
    history, n_iter, status = run.run(z, 20_000, 1e-15, 20, n_fixed=n_fixed)
    assert status in (1, 2) and np.all(np.diff(history) <= 0.0)
    J0 = latent_gradients(X, entries, yb, loss, theta, alpha, 2.0, True)[0]
    assert history[0] == pytest.approx(J0, rel=1e-12)  # started where it was told
    if n_fixed:
        np.testing.assert_array_equal(z[:5], theta)
    J, g_theta, g_alpha = latent_gradients(X, entries, yb, loss, z[:5],
                                           z[5:].reshape(3, 4), 2.0, True)
    assert history[-1] == pytest.approx(J, rel=1e-12)
    free = np.concatenate([g_theta, g_alpha.ravel()])[n_fixed:]
    _, g0_theta, g0_alpha = latent_gradients(X, entries, yb, loss, theta, alpha, 2.0, True)
    assert np.linalg.norm(free) <= 1e-5 * np.linalg.norm(
        np.concatenate([g0_theta, g0_alpha.ravel()])[n_fixed:])

    def fun(v):
        th, al = (theta, v) if n_fixed else (v[:5], v[5:])
        J, gt, ga = latent_gradients(X, entries, yb, loss, th, al.reshape(3, 4), 2.0,
                                     True)
        return J, (ga.ravel() if n_fixed else np.concatenate([gt, ga.ravel()]))

    start = alpha.ravel() if n_fixed else np.concatenate([theta, alpha.ravel()])
    ref = minimize(fun, start, jac=True, method="L-BFGS-B",
                   options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 20_000})
    assert history[-1] == pytest.approx(ref.fun, rel=1e-9)


@pytest.mark.parametrize("Est", [DropoutLatentLogisticRegression, DropoutLatentSVC])
def test_latent_threads_give_the_same_fit(Est):
    """n_jobs threads: the same (non-convex) fit as sequential, bit for bit."""
    X, y = load_digits(n_class=4, return_X_y=True)
    X = X[:240] / 16.0
    y = y[:240]
    kw = dict(noise_level=0.2, n_hidden=6, random_state=0, max_iter=200)
    a = Est(**kw).fit(X, y)
    b = Est(n_jobs=2, **kw).fit(X, y)
    np.testing.assert_array_equal(a.coef_, b.coef_)
    np.testing.assert_array_equal(a.hidden_weights_, b.hidden_weights_)
    np.testing.assert_array_equal(a.n_iter_, b.n_iter_)


@pytest.mark.parametrize("sparse", [False, True])
def test_noise_matrix_equals_the_sum_of_per_example_covariances(sparse):
    """``LatentDesign.noise_matrix(rho)`` (upper-triangle products, compiled contraction)
    equals ``sum_n rho_n Jac_n^T diag(v_n) Jac_n`` built example by example, and is
    symmetric."""
    import scipy.sparse as sp

    from bayesdrop.model.latent import LatentDesign

    rng = np.random.default_rng(4)
    X = rng.normal(size=(90, 7)) * (rng.random((90, 7)) < 0.6)
    alpha = rng.normal(size=(8, 5))
    Xin = sp.csr_matrix(X) if sparse else X
    design = LatentDesign(Xin, noise_entries(Xin, Dropout(0.3)), alpha)
    rho = rng.random(90)
    M = design.noise_matrix(rho)
    v = 0.3 / 0.7 * X ** 2
    ref = np.zeros((5, 5))
    for n in range(90):
        jac = design.Gp[n][None, :] * alpha[:-1]
        ref += rho[n] * jac.T @ (v[n][:, None] * jac)
    np.testing.assert_allclose(M, ref, rtol=1e-13, atol=1e-15 * np.abs(ref).max())
    np.testing.assert_array_equal(M, M.T)


def test_compiled_lbfgs_with_fixed_output_weights_is_an_alpha_step():
    """``n_fixed = len(theta)``: ``theta`` stays bit for bit, ``J`` falls, and the result
    is scipy L-BFGS-B's minimiser of ``J`` in ``alpha`` alone (strong penalty: one
    minimiser; J to 1e-9, alpha-gradient small)."""
    from scipy.optimize import minimize

    from bayesdrop.model.latent import latent_objective

    X, y = make_moons(150, noise=0.2, random_state=5)
    yb = np.where(y == 1, 1.0, -1.0)
    loss = LogisticLoss(1.0)
    entries = noise_entries(X, Dropout(0.2))
    rng = np.random.default_rng(2)
    alpha = rng.normal(size=(3, 4))
    theta = rng.normal(size=5)
    z = np.concatenate([theta, alpha.ravel()])
    lp = loss.kernel_params
    history = np.empty(5001)
    n_iter, status, _ = LB.lbfgs_latent(
        lp, np.ascontiguousarray(X.T),
        np.ascontiguousarray(entries[3].T), yb, np.ones(150), z, 4,
        True, 2.0, 5000, 1e-15, 20, history, *LC.LatentWork(150, 2, 4).arrays(), 5,
        LB.lbfgs_state(z.size))
    np.testing.assert_array_equal(z[:5], theta)
    assert status in (1, 2) and history[n_iter] < history[0]
    ref = minimize(lambda a: (lambda J, g: (J, g.ravel()))(*latent_objective(
        X, entries, yb, loss, theta, a.reshape(3, 4), 2.0)), alpha.ravel(), jac=True,
        method="L-BFGS-B", options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 5000})
    assert history[n_iter] == pytest.approx(ref.fun, rel=1e-9)
    _, g_alpha = latent_objective(X, entries, yb, loss, theta, z[5:].reshape(3, 4), 2.0)
    assert np.linalg.norm(g_alpha) <= 1e-6 * max(1.0, abs(ref.fun))


_FRESH_OR_CACHED = """
import sys
import numpy as np
from bayesdrop import Dropout, LogisticLoss
from bayesdrop.model.latent import noise_entries
from bayesdrop.solvers._lbfgs_compiled import CompiledLatent
rng = np.random.default_rng(0)
X = rng.random((300, 16)) * (rng.random((300, 16)) < 0.6)
y = np.where(X[:, 0] + X[:, 1] * X[:, 2] > 0.4, 1.0, -1.0)
run = CompiledLatent(X, noise_entries(X, Dropout(0.2)), y, LogisticLoss(1.0), 6, True, 0.01)
z = np.concatenate([rng.normal(size=7), rng.normal(size=17 * 6)])
history, n_iter, status = run.run(z, 40, 0.0, 100)
np.save(sys.argv[1], np.concatenate([z, history]))
"""


def test_compiled_lbfgs_same_path_in_fresh_and_cached_compilations(tmp_path):
    """The same L-BFGS iterates whether numba compiles the loop in this process or loads
    it from its cache (with ``fastmath`` reassociation in the evaluation inlined into the
    loop they differed from the first iteration on); two processes, one numba cache."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"))
    script = tmp_path / "run.py"
    script.write_text(_FRESH_OR_CACHED)
    outs = []
    for k in range(2):  # the first compiles (and writes the cache), the second loads it
        out = tmp_path / f"out{k}.npy"
        subprocess.run([sys.executable, str(script), str(out)], env=env, check=True)
        outs.append(np.load(out))
    assert any((tmp_path / "numba").rglob("*.nbc"))
    np.testing.assert_array_equal(outs[0], outs[1])


def test_lbfgs_cut_into_calls_takes_the_same_steps():
    """:meth:`CompiledLatent.run` returns to Python between blocks of iterations (so that
    Ctrl-C acts): a run cut into calls of 1, 3 and 7 iterations carries its state
    (:func:`lbfgs_state`) and gives the same iterates, bit for bit, as one call."""
    X, y = make_moons(150, noise=0.2, random_state=2)
    yb = np.where(y == 1, 1.0, -1.0)
    entries = noise_entries(X, Dropout(0.2))
    rng = np.random.default_rng(0)
    z0 = np.concatenate([rng.normal(size=5) * 0.1, rng.normal(size=12)])
    args = (LogisticLoss(1.0).kernel_params, np.ascontiguousarray(X.T),
            np.ascontiguousarray(entries[3].T), yb, np.ones(150))

    def run(cut):
        z, history = z0.copy(), np.empty(301)
        work, state = LC.LatentWork(150, 2, 4).arrays(), LB.lbfgs_state(z.size)
        done = 0
        while True:
            done, status, n_eval = LB.lbfgs_latent(
                *args, z, 4, True, 0.5, min(300, done + cut), 1e-14, 20, history, *work,
                0, state)
            if status != 0 or done >= 300:
                return z, history[:done + 1], status, n_eval

    one = run(300)
    assert one[2] in (1, 2) or len(one[1]) == 301
    for cut in (1, 3, 7):
        got = run(cut)
        np.testing.assert_array_equal(got[0], one[0])
        np.testing.assert_array_equal(got[1], one[1])
        assert got[2:] == one[2:]
