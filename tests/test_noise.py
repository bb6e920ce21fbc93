import numpy as np
import pytest
import scipy.sparse as sp

from bayesdrop.model.noise import (
    AdditiveGaussian, AdditiveLaplace, Dropout, MultiplicativeGaussian, NoNoise, Poisson,
    make_noise,
)

from .conftest import sparse_counts

MODELS = [Dropout(0.3), MultiplicativeGaussian(0.4), AdditiveGaussian(0.7),
          AdditiveLaplace(0.5), Poisson(1.0), Poisson(0.5)]


@pytest.mark.parametrize("noise", MODELS, ids=repr)
def test_corruption_is_unbiased_with_the_stated_variance(noise):
    """Draws of x~ have mean x and variance v(x): 4 Monte Carlo standard errors."""
    x = np.array([0.0, 0.5, 1.0, 2.0, 3.0])
    M = 100_000
    X = np.tile(x, (M, 1))
    Xt = noise.corrupt(X, random_state=1)
    v = noise.feature_variance_values(x)
    mean_se = np.sqrt(np.maximum(v, 1e-300) / M)
    assert np.all(np.abs(Xt.mean(0) - x) <= 4 * mean_se + 1e-12)
    dev2 = (Xt - x) ** 2  # unbiased estimator of the variance since the mean is known
    var_se = dev2.std(0) / np.sqrt(M)
    assert np.all(np.abs(dev2.mean(0) - v) <= 4 * var_se + 1e-12)


def test_variance_formulas():
    x = np.array([-2.0, 0.0, 3.0])
    assert np.allclose(Dropout(0.25).feature_variance_values(x), 0.25 / 0.75 * x**2)
    assert np.allclose(MultiplicativeGaussian(0.3).feature_variance_values(x), 0.3 * x**2)
    assert np.allclose(AdditiveGaussian(0.5).feature_variance_values(x), 0.25)
    assert np.allclose(AdditiveLaplace(0.5).feature_variance_values(x), 0.5)
    assert np.allclose(Poisson(2.0).feature_variance_values(np.abs(x)), 2.0 * np.abs(x))
    assert np.all(NoNoise().feature_variance_values(x) == 0)


@pytest.mark.parametrize("noise", MODELS + [NoNoise()], ids=repr)
def test_sparse_and_dense_variance_operators_agree(noise):
    X = sparse_counts()
    rng = np.random.default_rng(3)
    w2 = rng.random(X.shape[1])
    rho = rng.random(X.shape[0])
    Vs, Vd = noise.variance(X), noise.variance(X.toarray())
    assert np.allclose(Vs.score_variance(w2), Vd.score_variance(w2))
    assert np.allclose(Vs.weighted_column_sums(rho), Vd.weighted_column_sums(rho))
    # against the explicit N x D matrix of variances
    Vfull = noise.feature_variance_values(X.toarray())
    assert np.allclose(Vd.score_variance(w2), Vfull @ w2)
    assert np.allclose(Vs.weighted_column_sums(rho), Vfull.T @ rho)
    assert np.allclose(Vs.rows([0, 3]), Vfull[[0, 3]])
    if Vs.matrix is not None:
        assert sp.issparse(Vs.matrix)


def test_sparse_corruption_keeps_sparsity_and_inputs():
    X = sparse_counts()
    X0 = X.copy()
    for noise in (Dropout(0.5), MultiplicativeGaussian(0.2), Poisson(1.0)):
        Xt = noise.corrupt(X, random_state=0)
        assert sp.issparse(Xt) and Xt.shape == X.shape
        assert set(zip(*Xt.nonzero())) <= set(zip(*X.nonzero()))
    assert (X != X0).nnz == 0
    with pytest.raises(TypeError, match="toarray"):
        AdditiveGaussian(0.1).corrupt(X)


def test_corruption_is_seeded_and_leaves_caller_array_alone():
    X = np.arange(12.0).reshape(3, 4)
    X0 = X.copy()
    a = Dropout(0.5).corrupt(X, random_state=7)
    b = Dropout(0.5).corrupt(X, random_state=7)
    c = Dropout(0.5).corrupt(X, random_state=8)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert np.array_equal(X, X0)


@pytest.mark.parametrize(
    "call, err, match",
    [
        (lambda: Dropout(1.0), ValueError, r"\[0, 1\)"),
        (lambda: Dropout(-0.1), ValueError, "noise_level"),
        (lambda: AdditiveGaussian(np.nan), ValueError, "finite"),
        (lambda: AdditiveGaussian("0.1"), TypeError, "real number"),
        (lambda: Dropout(True), TypeError, "real number"),
        (lambda: make_noise("salt"), ValueError, "noise must be one of"),
        (lambda: make_noise(3), TypeError, "noise must be"),
        (lambda: Poisson().variance(np.array([[1.0, -1.0]])), ValueError, "non-negative"),
        (lambda: Poisson().corrupt(sp.csr_matrix([[1.0, -2.0]])), ValueError, "non-negative"),
    ],
)
def test_bad_noise_arguments(call, err, match):
    with pytest.raises(err, match=match):
        call()


def test_make_noise_levels():
    assert make_noise("dropout") == Dropout(0.1)
    assert make_noise("blankout", 0.2) == Dropout(0.2)
    assert make_noise(Dropout(0.2)) == Dropout(0.2)
    assert make_noise(Dropout(0.2), 0.4) == Dropout(0.4)
    assert make_noise("poisson") == Poisson(1.0)
    assert make_noise("dropout", 0).variance(np.ones((2, 2))).is_zero


def test_sparse_variance_keeps_the_pattern_of_X_explicit_zeros_included():
    """Dropout's and the multiplicative noise's ``M = X * X`` of a CSR ``X`` is stored on
    ``X``'s own pattern, explicit zeros included, so the compiled row passes apply
    (``Design.row_kernel_arrays``); a non-canonical ``X`` (duplicate entries) is squared
    after summing them."""
    from bayesdrop import Design, MultiplicativeGaussian

    X = sp.random(40, 30, density=0.2, format="csr", random_state=0)
    X.data[::7] = 0.0  # explicit zeros
    for noise in (Dropout(0.3), MultiplicativeGaussian(0.5)):
        design = Design(X, noise)
        kind, (indptr, indices, xdata, mdata), scale = design.row_kernel_arrays()
        assert kind == "csr" and mdata.shape == X.data.shape
        np.testing.assert_array_equal(mdata, X.data ** 2)
        np.testing.assert_allclose(scale * design.variance.matrix.toarray(),
                                   noise.variance(X.toarray()).scale
                                   * X.toarray() ** 2)
    dup = sp.csr_matrix((np.array([1.0, 2.0, 3.0]), np.array([0, 0, 1]), np.array([0, 3])),
                        shape=(1, 2))  # entry (0, 0) given twice: 1 + 2
    assert not dup.has_canonical_format
    M = Design(dup, Dropout(0.5)).variance.matrix.toarray()
    np.testing.assert_array_equal(M, [[9.0, 9.0]])
