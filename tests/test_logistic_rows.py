"""The logistic terms by numpy's SIMD transcendental functions (bayesdrop.model.losses._logistic_rows)
against the scalar compiled path, the numpy formulas and a stable closed form."""

import numpy as np
import pytest

import bayesdrop.model.losses.logistic as losses_module
from bayesdrop import LogisticLoss
from bayesdrop.model.losses._logistic_rows import BLOCK_ROWS, SIMD_MIN_ROWS, logistic_rows
from bayesdrop.model.losses.kernels import terms_curvature
from bayesdrop.model.losses.logistic import LogisticParams


def _points(n, seed=0):
    """Scores covering every branch: psi below both series thresholds, between them, of
    order 1, large (exp(-psi) underflows), m = 0, s = 0."""
    rng = np.random.default_rng(seed)
    scale = 10.0 ** rng.uniform(-7, 2.9, size=n)  # psi from 1e-7 to ~800
    angle = rng.uniform(0, np.pi / 2, size=n)
    m = scale * np.cos(angle) * rng.choice([-1.0, 1.0], size=n)
    s = (scale * np.sin(angle)) ** 2
    m[:7], s[:7] = [0.0, 0.0, 1e-6, 0.0, 3.0, -40.0, 1e-3], [0.0, 1e-9, 0.0, 2.0, 0.0, 0.0, 0.0]
    y = rng.choice([-1.0, 1.0], size=n)
    return m, s, y


def _tolerance(h, m, s, b):
    """What rounding allows between two evaluations that differ by a few ulp in exp /
    log1p / tanh: 1e-13 of the size of the parts (``d_m = lam m - h y / 2`` and
    ``d_mm = lam + m^2 kappa`` cancel), plus the closed-form curvature's own cancellation
    ``eps / psi^2`` relative above ``KAPPA_SERIES = 1e-2`` (below it a series)."""
    psi = np.maximum(np.sqrt(m * m + s), 1e-2)
    scale = h * (1.0 + m * m)
    return 1e-13 * (np.abs(b) + scale) + 8 * np.finfo(float).eps / psi**2 * scale


def _scalar(h, m, s, y, sw):
    out = np.empty((6, m.shape[0]))
    terms_curvature(LogisticParams(0.5 * h), m, s, y, sw, *out)
    return out


@pytest.mark.parametrize("weighted", [False, True])
def test_rows_equal_the_scalar_compiled_path(weighted):
    # crosses block boundaries; the two paths differ only in exp / log1p / tanh (a few ulp)
    n = 2 * BLOCK_ROWS + 17
    m, s, y = _points(n)
    sw = np.random.default_rng(1).uniform(0.1, 3.0, size=n) if weighted else None
    h = 1.7
    fast = logistic_rows(h, m, s, y, sw, order=2)
    ref = _scalar(h, m, s, y, np.ones(n) if sw is None else sw)
    for k in range(6):
        tol = _tolerance(h if sw is None else h * sw, m, s, ref[k])
        np.testing.assert_array_less(np.abs(fast[k] - ref[k]), tol, err_msg=str(k))
    assert np.all(np.isfinite(fast))


def test_value_against_the_stable_closed_form():
    # term = h [log(2 cosh(psi / 2)) - y m / 2], log(2 cosh x) = logaddexp(x, -x)
    m, s, y = _points(5000, seed=2)
    h = 2.0
    psi = np.sqrt(m * m + s)
    ref = h * (np.logaddexp(psi / 2, -psi / 2) - y * m / 2)
    value = logistic_rows(h, m, s, y, order=0)[0]
    np.testing.assert_array_less(np.abs(value - ref), 1e-13 * (np.abs(ref) + h * (1 + np.abs(m))))


def test_derivatives_against_central_differences():
    rng = np.random.default_rng(3)
    m = rng.normal(scale=2.0, size=2000)
    s = rng.uniform(0.05, 3.0, size=2000)
    y = rng.choice([-1.0, 1.0], size=2000)
    h, e = 1.3, 1e-5
    out = logistic_rows(h, m, s, y, order=2)

    def f(mm, ss, k=0, order=0):
        return logistic_rows(h, mm, ss, y, order=order)[k]

    np.testing.assert_allclose(out[1], (f(m + e, s) - f(m - e, s)) / (2 * e), atol=1e-8)
    np.testing.assert_allclose(out[2], (f(m, s + e) - f(m, s - e)) / (2 * e), atol=1e-8)
    np.testing.assert_allclose(out[3], (f(m + e, s, 1, 1) - f(m - e, s, 1, 1)) / (2 * e),
                               atol=1e-8)
    np.testing.assert_allclose(out[4], (f(m, s + e, 1, 1) - f(m, s - e, 1, 1)) / (2 * e),
                               atol=1e-8)
    np.testing.assert_allclose(out[5], (f(m, s + e, 2, 1) - f(m, s - e, 2, 1)) / (2 * e),
                               atol=1e-8)


def test_orders_agree_and_inputs_are_untouched():
    m, s, y = _points(3000, seed=4)
    copies = m.copy(), s.copy(), y.copy()
    o0, o1, o2 = (logistic_rows(0.9, m, s, y, order=k) for k in range(3))
    assert o0.shape == (1, 3000) and o1.shape == (3, 3000) and o2.shape == (6, 3000)
    np.testing.assert_array_equal(o0[0], o2[0])
    np.testing.assert_array_equal(o1, o2[:3])
    for a, b in zip((m, s, y), copies):
        np.testing.assert_array_equal(a, b)


def test_loss_methods_take_the_fast_path_on_many_rows(monkeypatch):
    # LogisticLoss.terms / value / curvature: SIMD rows at SIMD_MIN_ROWS rows or more, the
    # numpy formulas otherwise (here forced by raising the threshold); the same numbers
    n = SIMD_MIN_ROWS + 5
    m, s, y = _points(n, seed=5)
    w = np.random.default_rng(6).uniform(0.5, 2.0, size=n)
    loss = LogisticLoss(0.7).weighted(w)
    fast = loss.terms(m, s, y) + (loss.value(m, s, y),) + tuple(loss.curvature(m, s, y))
    monkeypatch.setattr(losses_module, "SIMD_MIN_ROWS", 10**12)
    slow = loss.terms(m, s, y) + (loss.value(m, s, y),) + tuple(loss.curvature(m, s, y))
    h = 2 * 0.7 * w
    for a, b in zip(fast, slow):
        np.testing.assert_array_less(np.abs(a - b), _tolerance(h, m, s, b))


def test_hessian_terms_use_the_rows_and_match_the_loss():
    n = SIMD_MIN_ROWS * 3
    m, s, y = _points(n, seed=7)
    loss = LogisticLoss(2.0)
    got = loss.terms_curvature(m, s, y)
    want = loss.terms(m, s, y) + tuple(loss.curvature(m, s, y))
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
