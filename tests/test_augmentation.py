import numpy as np
import pytest

from bayesdrop.augmentation import gig_half, inverse_gaussian

N_DRAWS = 200_000


@pytest.mark.parametrize("b", [0.0, 1e-12, 1e-6, 1e-2, 1.0, 37.0, 1e4, 1e8, 1e12])
def test_gig_half_moments(b):
    """lambda ~ GIG(1/2, 1, b): E = 1 + sqrt(b), Var = 2 + sqrt(b); 4 standard errors."""
    lam = gig_half(np.full(N_DRAWS, b), random_state=11)
    assert np.all(np.isfinite(lam)) and np.all(lam > 0)
    mean, var = 1 + np.sqrt(b), 2 + np.sqrt(b)
    assert abs(lam.mean() - mean) <= 4 * np.sqrt(var / N_DRAWS)
    dev2 = (lam - mean) ** 2
    assert abs(dev2.mean() - var) <= 4 * dev2.std() / np.sqrt(N_DRAWS)


@pytest.mark.parametrize("mu", [1e-6, 1e-3, 0.1, 1.0, 3.0])
def test_inverse_gaussian_moments(mu):
    """u ~ IG(mu, 1): mean mu, variance mu^3 (sd of the sample variance from the exact
    fourth central moment 15 mu^7 + 3 mu^6)."""
    u = inverse_gaussian(np.full(N_DRAWS, mu), random_state=3)
    assert np.all(u > 0)
    assert abs(u.mean() - mu) <= 4 * np.sqrt(mu**3 / N_DRAWS)
    var_se = np.sqrt((15 * mu**7 + 2 * mu**6) / N_DRAWS)
    assert abs(((u - mu) ** 2).mean() - mu**3) <= 4 * var_se


def test_inverse_gaussian_huge_means_and_levy_limit():
    u = inverse_gaussian(np.array([1e6, 1e12, 1e200, np.inf] * 50_000), random_state=5)
    assert np.all(np.isfinite(u)) and np.all(u > 0)
    # the median of IG(mu, 1) tends to that of the Levy law 1 / chi2_1, 1 / 0.4549...
    levy_median = 1 / 0.454936423119572
    for k in range(4):
        med = np.median(u[k::4])
        assert abs(med - levy_median) / levy_median < 0.03


def test_inverse_gaussian_cdf_matches_scipy():
    from scipy import stats

    mu = 0.7
    u = inverse_gaussian(np.full(N_DRAWS, mu), random_state=9)
    ks = stats.kstest(u, stats.invgauss(mu).cdf)
    assert ks.pvalue > 1e-3


def test_reproducible_from_generator_state_and_validates():
    a = inverse_gaussian(np.ones(10), np.random.default_rng(1))
    b = inverse_gaussian(np.ones(10), np.random.default_rng(1))
    assert np.array_equal(a, b)
    rng = np.random.default_rng(1)
    c1, c2 = inverse_gaussian(np.ones(5), rng), inverse_gaussian(np.ones(5), rng)
    assert not np.array_equal(c1, c2)
    with pytest.raises(ValueError, match="mean must be > 0"):
        inverse_gaussian(np.array([1.0, 0.0]))
    with pytest.raises(ValueError, match="mean must be > 0"):
        inverse_gaussian(np.array([np.nan]))
    with pytest.raises(ValueError, match="b must be finite"):
        gig_half(np.array([-1.0]))
    with pytest.raises(TypeError, match="RandomState"):
        inverse_gaussian(np.ones(2), np.random.RandomState(0))
