import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import approx_fprime

from bayesdrop import Problem
from bayesdrop.model.losses import (
    ROOT_FLOOR, EpsilonInsensitiveLoss, HingeLoss, LogisticLoss, SquaredLoss,
)
from bayesdrop.model.noise import AdditiveGaussian, Dropout, MultiplicativeGaussian, NoNoise, Poisson

from .conftest import sparse_counts

LOSSES = [HingeLoss(0.7, margin=1.0), HingeLoss(2.0, margin=0.5), LogisticLoss(0.7),
          EpsilonInsensitiveLoss(1.3, 0.2), SquaredLoss(0.9)]
NOISES = [NoNoise(), Dropout(0.4), AdditiveGaussian(0.5), MultiplicativeGaussian(0.3)]


def _targets(loss, y, yr):
    return yr if not loss.binary else y


@pytest.mark.parametrize("loss", LOSSES, ids=repr)
@pytest.mark.parametrize("noise", NOISES, ids=repr)
def test_gradient_matches_finite_differences(loss, noise, small_problem_data):
    X, y, yr = small_problem_data
    p = Problem.create(X, _targets(loss, y, yr), loss, noise)
    rng = np.random.default_rng(1)
    for _ in range(3):
        theta = rng.normal(scale=0.5, size=p.design.n_params)
        _, g = p.objective(theta, gradient=True)
        fd = approx_fprime(theta, lambda t: p.objective(t), 1e-7)
        assert np.allclose(g, fd, rtol=1e-5, atol=1e-4 * max(1, np.abs(g).max()))


@pytest.mark.parametrize("loss", LOSSES, ids=repr)
@pytest.mark.parametrize("noise", NOISES, ids=repr)
def test_irls_surrogate_touches_J(loss, noise, small_problem_data):
    """The weighted quadratic of the IRLS step is tangent to J at the current point:
    d term/dm = rho m - t and d term/ds = rho / 2 (MATH.md sections 3-4)."""
    X, y, yr = small_problem_data
    p = Problem.create(X, _targets(loss, y, yr), loss, noise)
    theta = np.random.default_rng(2).normal(size=p.design.n_params)
    m, s = p.design.scores(theta)
    _, d_m, d_s = loss.terms(m, s, p.y)
    rho, t = loss.irls_weights(m, s, p.y)
    assert np.allclose(d_m, rho * m - t, rtol=1e-10, atol=1e-12)
    assert np.allclose(d_s, rho / 2, rtol=1e-10, atol=1e-12)


def test_zero_noise_terms_are_the_plain_losses():
    rng = np.random.default_rng(0)
    m = rng.normal(scale=3, size=500)
    y = np.where(rng.random(500) < 0.5, -1.0, 1.0)
    yr = rng.normal(scale=2, size=500)
    s = np.zeros(500)
    C = 1.7
    v, _, _ = HingeLoss(C, margin=1.0).terms(m, s, y)
    assert np.allclose(v, 2 * C * np.maximum(0, 1 - y * m), rtol=1e-14, atol=1e-14)
    v, _, _ = LogisticLoss(C).terms(m, s, y)
    assert np.allclose(v, 2 * C * np.logaddexp(0, -y * m), rtol=1e-13)
    v, _, _ = EpsilonInsensitiveLoss(C, 0.3).terms(m, s, yr)
    assert np.allclose(v, 2 * C * np.maximum(0, np.abs(yr - m) - 0.3), atol=1e-13)


def test_terms_are_stable_at_extremes():
    m = np.array([0.0, 1e-12, 1e4, -1e4, 1e8, 1.0])
    s = np.array([0.0, 0.0, 1e-20, 1e-6, 0.0, 1e10])
    y = np.array([1.0, -1.0, 1.0, 1.0, 1.0, -1.0])
    for loss in (HingeLoss(1.0), LogisticLoss(1.0), EpsilonInsensitiveLoss(1.0, 0.1)):
        v, dm, ds = loss.terms(m, s, y)
        rho, t = loss.irls_weights(m, s, y)
        for a in (v, dm, ds, rho, t):
            assert np.all(np.isfinite(a))
        assert np.all(v >= 0) and np.all(rho > 0)
    # correct tiny values where the naive formula cancels: log(1 + exp(-1e4)) = 0 and
    # the hinge at zeta = 1 - 1e4 with s = 1e-20 is s / (2 |zeta|) to first order
    v, _, _ = LogisticLoss(1.0).terms(np.array([40.0]), np.array([1e-3]), np.array([1.0]))
    exact = 2 * (1e-3 / (2 * (np.sqrt(1600 + 1e-3) + 40)) + np.log1p(np.exp(-np.sqrt(1600.001))))
    assert v[0] == pytest.approx(exact, rel=1e-12)
    v, _, _ = HingeLoss(1.0).terms(np.array([1e4]), np.array([1e-20]), np.array([1.0]))
    assert v[0] == pytest.approx(1e-20 / (2 * (1e4 - 1)), rel=1e-10)


def test_weight_floor_is_documented_value():
    rho, _ = HingeLoss(2.0).irls_weights(np.array([1.0]), np.array([0.0]), np.array([1.0]))
    assert rho[0] == pytest.approx(2.0 / ROOT_FLOOR)


def test_logistic_weight_series_is_continuous():
    loss = LogisticLoss(1.5)
    psi = np.array([0.0, 0.99e-4, 1.01e-4, 1e-3])
    (lam,) = loss.expected_augmentation(psi, np.zeros(4), np.ones(4))
    exact = np.where(psi > 0, loss.h / (2 * np.where(psi > 0, psi, 1)) * np.tanh(psi / 2), loss.h / 4)
    assert np.allclose(lam, exact, rtol=1e-14)


@pytest.mark.parametrize("loss", [HingeLoss(1.0), LogisticLoss(1.0),
                                  EpsilonInsensitiveLoss(1.0, 0.2)], ids=repr)
@pytest.mark.parametrize("noise", [Dropout(0.5), AdditiveGaussian(0.8), Poisson(1.0)], ids=repr)
def test_monte_carlo_expected_loss_approaches_bound_from_below(loss, noise):
    """Explicit corruption with M copies: the Monte Carlo objective converges, as M grows,
    to E[loss] <= the bound used by J (Jensen), and is never far above it."""
    X = sparse_counts(n=60, d=8, density=0.5, seed=4).toarray()
    rng = np.random.default_rng(5)
    w, b = rng.normal(scale=0.6, size=8), 0.2
    y = np.where(rng.random(60) < 0.5, -1.0, 1.0) if loss.binary else X @ w + rng.normal(size=60)
    p = Problem.create(X, y, loss, noise)
    theta = np.append(w, b)
    bound = p.objective(theta) - w @ w
    exact_loss = {
        "hinge": lambda mt: 2 * loss.C * np.maximum(0, 1 - y * mt),
        "logistic": lambda mt: 2 * loss.C * np.logaddexp(0, -y * mt),
        "epsilon_insensitive": lambda mt: 2 * loss.C * np.maximum(0, np.abs(y - mt) - 0.2),
    }[loss.name]
    estimates = []
    for M in (4, 16, 64, 256, 2048):
        vals = np.array([exact_loss(noise.corrupt(X, rng) @ w + b).sum() for _ in range(M)])
        estimates.append((M, vals.mean()))
    sd = vals.std(ddof=1)  # per-copy sd of the loss, from the largest run
    M_max, mean = estimates[-1]
    assert mean <= bound + 4 * sd / np.sqrt(M_max)  # the bound is an upper bound of E[loss]
    assert mean >= 0.5 * bound  # and not a vacuous one
    # each smaller-M estimate is within 4 standard errors of the M_max one: the Monte
    # Carlo objective approaches E[loss] (below the bound) at rate 1/sqrt(M)
    for M, est in estimates[:-1]:
        assert abs(est - mean) <= 4 * sd * np.sqrt(1 / M + 1 / M_max)


def test_bad_loss_parameters():
    with pytest.raises(ValueError, match="C must be > 0"):
        HingeLoss(0.0)
    with pytest.raises(ValueError, match="C must be > 0"):
        LogisticLoss(-1)
    with pytest.raises(ValueError, match="epsilon must be >= 0"):
        EpsilonInsensitiveLoss(1.0, -0.1)
    with pytest.raises(ValueError, match="margin must be >= 0"):
        HingeLoss(1.0, margin=-1)
    with pytest.raises(TypeError, match="C must be a real number"):
        HingeLoss("1")
    with pytest.raises(ValueError, match="-1 and \\+1"):
        Problem.create(np.eye(3), [0, 1, 1], HingeLoss())
    with pytest.raises(ValueError, match="y has 2 entries but X has 3 rows"):
        Problem.create(np.eye(3), [1, -1], HingeLoss())
    with pytest.raises(ValueError, match="X contains NaN"):
        Problem.create(np.array([[np.nan, 1.0]]), [1], HingeLoss())
    with pytest.raises(ValueError, match="X contains NaN"):
        Problem.create(sp.csr_matrix(np.array([[np.inf, 1.0]])), [1], HingeLoss())
    with pytest.raises(ValueError, match="y contains NaN"):
        Problem.create(np.eye(2), [np.nan, 1.0], EpsilonInsensitiveLoss())


@pytest.mark.parametrize("y, match", [
    ([1.0, -1.0, 0.0], "-1 and \\+1"), ([1.0, -1.0, np.nan], "y contains NaN"),
    ([1.0, np.inf, 1.0], "y contains NaN"), ([1.0, -1.0, 1e300], "magnitude 1e\\+300"),
    ([[1.0], [-1.0], [1.0]], "1-dimensional"), ([1.0, -1.0], "2 entries but X has 3"),
    ([1.0, -1.0, 1.0 + 1e-15], "-1 and \\+1"), (["1", "-1", "x"], "could not convert"),
])
@pytest.mark.parametrize("loss", [HingeLoss(1.0), LogisticLoss(1.0)], ids=repr)
def test_binary_targets_checked_whatever_the_path(loss, y, match):
    """The binary losses' shortcut for targets of +-1 only lets exact +-1 through; every
    other target gets the error of the general checks."""
    with pytest.raises(ValueError, match=match):
        Problem.create(np.ones((3, 2)), y, loss)
    ok = np.array([1, -1, 1], dtype=np.int8)
    got = Problem.create(np.ones((3, 2)), ok, loss).y
    assert got.dtype == np.float64 and got.tolist() == [1.0, -1.0, 1.0]
