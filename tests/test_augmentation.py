import numpy as np
import pytest

from bayesdrop.model.augmentation import gig_half, inverse_gaussian

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


# --------------------------------------------------------------------------- Polya-Gamma
from bayesdrop.model.augmentation import polya_gamma, polya_gamma_moments  # noqa: E402

PG_DRAWS = 100_000


def _pg_series_cumulants(h, z, n_terms=2_000_000):
    """Cumulants 1-4 of PG(h, z) from its series (independent of the closed forms):
    kappa_j = h (j-1)! sum_k c_k^j, c_k = 1 / (2 pi^2 ((k-1/2)^2 + (z / 2 pi)^2))."""
    k = np.arange(1, n_terms + 1) - 0.5
    c = 1.0 / (2 * np.pi**2 * (k * k + (z / (2 * np.pi)) ** 2))
    cum = [h * f * np.sum(c**j) for j, f in zip((1, 2, 3, 4), (1, 1, 2, 6))]
    cum[0] += h / (2 * np.pi**2 * n_terms)  # the mean's remainder, sum_{k > n} ~ 1/n
    return cum


@pytest.mark.parametrize("z", [0.0, 0.5, 3.0, 30.0])
@pytest.mark.parametrize("h", [0.5, 1.0, 1.5, 2.7, 7.3, 20.0])
def test_polya_gamma_moments(h, z):
    """Mean, variance and third cumulant within 4 standard errors of the exact values.

    The standard errors use the exact cumulants: sd of the sample variance is
    sqrt((mu4 - sigma^4) / n) with mu4 = kappa4 + 3 kappa2^2; the third central moment's
    from the sample itself."""
    k1, k2, k3, k4 = _pg_series_cumulants(h, z)
    mean, var = polya_gamma_moments(h, z)
    assert mean == pytest.approx(k1, rel=1e-6) and var == pytest.approx(k2, rel=1e-6)
    x = polya_gamma(h, np.full(PG_DRAWS, z), random_state=2024)
    assert np.all(np.isfinite(x)) and np.all(x > 0)
    assert abs(x.mean() - k1) <= 4 * np.sqrt(k2 / PG_DRAWS)
    d = x - k1
    assert abs(np.mean(d**2) - k2) <= 4 * np.sqrt((k4 + 2 * k2**2) / PG_DRAWS)
    c3 = d**3
    assert abs(c3.mean() - k3) <= 4 * c3.std() / np.sqrt(PG_DRAWS)


@pytest.mark.parametrize("f", [1.0, 1.3, 2.7, 50.0, 2e4])
def test_series_gamma_draw_has_the_gamma_law(f):
    """``gamma_mt`` (Marsaglia and Tsang with the shape's constants from the caller, the
    series head's ``Gamma(f)`` draws for ``f >= 1``): mean, variance and third central
    moment within 4 standard errors of ``Gamma(f)``'s exact ``f``, ``f``, ``2 f`` (the
    variance's from the exact fourth cumulant ``6 f``), and a KS test against scipy's
    CDF."""
    import math

    from scipy import stats

    from bayesdrop import _jit
    from bayesdrop.model.augmentation import gamma_mt

    @_jit.njit
    def draws(rng, n, f):
        b = f - 1.0 / 3.0
        c = 1.0 / math.sqrt(9.0 * b)
        out = np.empty(n)
        for i in range(n):
            out[i] = gamma_mt(rng, b, c)
        return out

    n = PG_DRAWS
    x = draws(np.random.default_rng(7), n, f)
    assert np.all(x > 0)
    assert abs(x.mean() - f) <= 4 * np.sqrt(f / n)
    d = x - f
    assert abs(np.mean(d**2) - f) <= 4 * np.sqrt((6 * f + 2 * f**2) / n)
    c3 = d**3
    assert abs(c3.mean() - 2 * f) <= 4 * c3.std() / np.sqrt(n)
    assert stats.kstest(x, stats.gamma(f).cdf).pvalue > 1e-3


def test_series_draw_cumulants_are_within_the_documented_error():
    """The law of the series draw (exact head, shifted-gamma remainder) has cumulants 1-2
    within 1e-12, 3 within 1e-7 and 4-5 within 1e-6 relative of PG(1, z)'s, for |z| from
    0 to the inverse-Gaussian switch (every cumulant scales with h, so does the error).
    Computed from the draw's plan, not sampled: an error in the remainder's S_3 (the
    Euler-Maclaurin sum) or in the head's length fails it."""
    from bayesdrop.model.augmentation import PG_IG_SWITCH, _series_plan

    facts = (1, 1, 2, 6, 24)
    worst = np.zeros(5)
    for z in np.linspace(0.0, PG_IG_SWITCH - 1e-9, 60):
        K, a2, delta, theta, kappa = _series_plan(1.0, z)
        k = np.arange(1, 2_000_001) - 0.5
        c = 1.0 / (2 * np.pi**2 * (k * k + a2))
        exact = _pg_series_cumulants(1.0, z)
        exact.append(24 * np.sum(c**5))
        law = [f * np.sum(c[:K] ** j) + f * kappa * theta**j
               for j, f in zip(range(1, 6), facts)]
        law[0] += delta
        assert kappa > 0 and delta >= 0
        worst = np.maximum(worst, np.abs(np.array(law) - exact) / np.array(exact))
    assert np.all(worst <= [1e-12, 1e-12, 1e-7, 1e-6, 1e-6]), worst


@pytest.mark.parametrize("z", [0.0, 2.0, 30.0])
def test_polya_gamma_fraction_composes_to_devroye(z):
    """PG(0.5) + PG(0.5) (jitted series / inverse-Gaussian branch) has the law of PG(1)
    drawn by polyagamma's exact devroye method: two-sample KS test."""
    from polyagamma import random_polyagamma
    from scipy import stats

    zz = np.full(PG_DRAWS, z)
    ours = polya_gamma(0.5, zz, random_state=1) + polya_gamma(0.5, zz, random_state=2)
    ref = random_polyagamma(1.0, zz, method="devroye", random_state=np.random.default_rng(3))
    assert stats.ks_2samp(ours, ref).pvalue > 1e-3


def test_polya_gamma_reproducible_and_validates():
    z = np.linspace(0, 40, 50)
    assert np.array_equal(polya_gamma(2.7, z, random_state=5), polya_gamma(2.7, z, random_state=5))
    assert np.array_equal(polya_gamma(2.7, -z, random_state=5), polya_gamma(2.7, z, random_state=5))
    out = np.empty(50)
    assert polya_gamma(1.3, z, random_state=5, out=out) is out
    for bad in (0.0, -1.0, np.nan, np.inf, "2"):
        with pytest.raises(ValueError, match="h must be"):
            polya_gamma(bad, z)
    with pytest.raises(ValueError, match="z must be finite"):
        polya_gamma(1.0, np.array([0.0, np.nan]))


# ------------------------------------------------------ fractional PG by table inversion
from bayesdrop.model.pg_inversion import (  # noqa: E402
    U_RESOLUTION,
    fraction_cdf,
    fraction_table,
    tilt_limit,
)


def _table_quantiles(f, u):
    """x(u) of the inversion table (the same cubic as the compiled draw, in numpy)."""
    uk, xk, dk, _ = fraction_table(f)
    i = np.clip(np.searchsorted(uk, u, side="right") - 1, 0, uk.shape[0] - 2)
    du = uk[i + 1] - uk[i]
    t = (u - uk[i]) / du
    s = 1 - t
    return ((1 + 2 * t) * s * s * xk[i] + t * s * s * du * dk[i]
            + t * t * (3 - 2 * t) * xk[i + 1] - t * t * s * du * dk[i + 1])


@pytest.mark.parametrize("f", [0.01, 0.2, 0.5, 0.93])
def test_fraction_table_has_the_laplace_transform_of_pg(f):
    """E exp(-t X) = cosh(sqrt(t/2))^{-f} for X ~ PG(f, 0) (the definition of the law),
    integrated over the table's quantile function by Gauss-Legendre on every interval:
    equal to 1e-10 relative (the table's u-error is 1e-12, its tail mass 1e-13)."""
    uk, _, _, _ = fraction_table(f)
    nodes, weights = np.polynomial.legendre.leggauss(8)
    t01, w01 = (nodes + 1) / 2, weights / 2
    du = np.diff(uk)
    u = uk[:-1, None] + du[:, None] * t01[None, :]
    x = _table_quantiles(f, u.ravel()).reshape(u.shape)
    for t in (0.5, 4.0, 50.0, 400.0):
        lt = np.sum(du[:, None] * w01 * np.exp(-t * x))
        exact = np.cosh(np.sqrt(t / 2)) ** (-f)
        assert abs(lt - exact) <= 1e-10 * exact + 2e-13


@pytest.mark.parametrize("f", [0.05, 0.2, 0.7])
def test_fraction_table_u_error_at_random_points(f):
    """|F(x(u)) - u| <= U_RESOLUTION (times 2 for the rounding of F) at 20000 uniforms,
    and x(u) increasing."""
    uk, xk, _, _ = fraction_table(f)
    u = np.sort(np.random.default_rng(1).uniform(uk[0], uk[-1], 20_000))
    x = _table_quantiles(f, u)
    assert np.all(np.diff(x) >= 0)
    assert np.max(np.abs(fraction_cdf(x, f) - u)) <= 2 * U_RESOLUTION


@pytest.mark.parametrize("z", [0.0, 3.0, 10.0, 24.0])
def test_five_tilted_pg_fifths_have_the_law_of_pg1(z):
    """PG(1, z) = sum of five independent PG(0.2, z) (tilted table draws: |z| < the tilt
    limit 25 of f = 0.2, about 10 trials each at z = 24) against polyagamma's exact
    devroye PG(1, z): two-sample KS test."""
    from polyagamma import random_polyagamma
    from scipy import stats

    assert z < tilt_limit(0.2)
    zz = np.full(PG_DRAWS, z)
    ours = sum(polya_gamma(0.2, zz, random_state=10 + k) for k in range(5))
    ref = random_polyagamma(1.0, zz, method="devroye", random_state=np.random.default_rng(3))
    assert stats.ks_2samp(ours, ref).pvalue > 1e-3


def test_tilt_limit_bounds_the_expected_trials():
    """Below the limit, cosh(z/2)^f (the expected number of trials) is at most the
    documented bound: 8, or below |z| = 25 1.5 times the series draw's 4 + 4 |z| / 2pi."""
    for f in (0.01, 0.2, 0.5, 0.9, 0.999):
        lim = tilt_limit(f)
        for z in np.linspace(0, lim, 50)[:-1]:
            trials = np.cosh(z / 2) ** f
            bound = 8.0 if z >= 25 else max(8.0, 1.5 * (4 + 4 * z / (2 * np.pi)))
            assert trials <= bound * (1 + 1e-9)
    with pytest.raises(ValueError, match="f must be in"):
        fraction_table(1.0)


@pytest.mark.parametrize("f", [0.03, 0.2, 0.5, 0.9])
def test_fraction_cdf_equals_polyagammas_cdf(f):
    """The series distribution function against ``polyagamma.polyagamma_cdf`` (an
    independent implementation) from the far left tail to the right one."""
    from polyagamma import polyagamma_cdf

    x = np.geomspace(1e-4, 4.0, 200)
    np.testing.assert_allclose(fraction_cdf(x, f), polyagamma_cdf(x, f), rtol=1e-12,
                               atol=1e-15)
