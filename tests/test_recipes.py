"""The architecture's recipes, each followed in this test module alone (docs/architecture.md):
a noise model and a row back-end defined here run through the engines that exist, with
no edit anywhere else. (The loss recipe: tests/test_new_loss.py.)"""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from bayesdrop import (DropoutLogisticRegression, DropoutSVC, HingeLoss, LogisticLoss,
                       MultiplicativeGaussian, Problem)
from bayesdrop.linalg.backend import InMemoryRows, RowBackend, sum_terms
from bayesdrop.model.noise import FeatureVariance, NoiseModel
from bayesdrop.model.problem import subsample_rows
from bayesdrop.samplers import sample
from bayesdrop.solvers import fit_problem, irls, newton


# ---------------------------------------------------------------- recipe: a noise model
class MultiplicativeUniform(NoiseModel):
    """``x~_d = x_d (1 + u)``, ``u ~ U(-a, a)``: unbiased, ``Var = a^2 / 3 x_d^2``."""

    name = "multiplicative uniform"
    level_name = "half-width a"

    def _variance(self, X):
        return FeatureVariance(X.multiply(X) if sp.issparse(X) else np.asarray(X) ** 2,
                               self.level ** 2 / 3.0, X.shape)

    def _corrupt_values(self, x, rng):
        return x * (1.0 + rng.uniform(-self.level, self.level, np.shape(x)))


def _data(n=120, D=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, D))
    y = np.where(X @ rng.normal(size=D) + 0.5 * rng.normal(size=n) > 0, 1.0, -1.0)
    return X, y


def test_a_new_noise_models_draws_have_its_declared_mean_and_variance():
    """Monte Carlo over 40000 draws of one entry: mean ``x`` and variance ``a^2 x^2 / 3``
    within 4 standard errors (the sample variance's standard error from the uniform's
    fourth moment)."""
    a, x, n = 0.8, 1.7, 40_000
    draws = MultiplicativeUniform(a).corrupt(np.full((n, 1), x), random_state=1).ravel()
    var = a * a * x * x / 3.0
    assert abs(draws.mean() - x) <= 4.0 * np.sqrt(var / n)
    mu4 = (a * x) ** 4 / 5.0  # E (x u)^4 for u ~ U(-a, a)
    assert abs(draws.var() - var) <= 4.0 * np.sqrt((mu4 - var * var) / n)
    assert MultiplicativeUniform(a).feature_variance_values(np.array([x]))[0] == \
        pytest.approx(var)


@pytest.mark.parametrize("kind", ["dense", "sparse"])
@pytest.mark.parametrize("loss", [LogisticLoss(0.7), HingeLoss(0.7)], ids=["logistic", "hinge"])
def test_a_new_noise_model_runs_through_every_solver(loss, kind):
    """``J`` depends on the noise through its variances only, so the fit under
    ``MultiplicativeUniform(a)`` equals the fit under the built-in
    ``MultiplicativeGaussian(a^2 / 3)`` (the same ``V``) -- Newton compiled, Newton in
    Python, Newton-CG and IRLS alike, to their tolerances."""
    X, y = _data()
    X = sp.csr_matrix(X) if kind == "sparse" else X
    a = 0.9
    ours = Problem.create(X, y, loss, MultiplicativeUniform(a))
    ref = Problem.create(X, y, loss, MultiplicativeGaussian(a * a / 3.0))
    theta = np.linspace(-0.5, 0.5, ours.design.n_params)
    assert ours.objective(theta) == pytest.approx(ref.objective(theta), rel=1e-14)
    J_ref = newton.fit(ref, tol=1e-14, warn=False).objective[-1]
    runs = [newton.fit(ours, compiled=False), newton.fit(ours, linalg="cg"),
            irls.fit(ours, tol=1e-12)]
    if kind == "dense":
        runs.append(newton.fit(ours, compiled=True))
    for res in runs:
        assert res.converged
        assert res.objective[-1] - J_ref <= 1e-9 * J_ref


def test_a_new_noise_model_in_the_estimators_and_the_compiled_sampler():
    """Through an estimator's ``noise=``: the same coefficients and, for the same seed, the
    same posterior draws as the built-in noise with the same variances (the compiled sweep
    sees only ``V``)."""
    X, y = _data(seed=3)
    a = 0.6
    kw = dict(draws=60, tune=20, chains=2, random_state=5, progressbar=False)
    ours = DropoutSVC(noise=MultiplicativeUniform(a)).fit(X, y)
    ref = DropoutSVC(noise=MultiplicativeGaussian(a * a / 3.0)).fit(X, y)
    np.testing.assert_allclose(ours.coef_, ref.coef_, rtol=1e-9, atol=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short chains: the convergence warning
        draws = ours.sample_posterior(X, y, **kw).posterior["coef"].values
        ref_draws = ref.sample_posterior(X, y, **kw).posterior["coef"].values
    np.testing.assert_allclose(draws, ref_draws, rtol=1e-9, atol=1e-12)


# ---------------------------------------------------------------- recipe: a row back-end
class BlockRows(RowBackend):
    """The rows of an in-memory problem in ``n_blocks`` consecutive blocks, summed in
    block order: a row back-end defined in a test, as a new storage would be (the
    statistics see one block's :class:`~bayesdrop.model.problem.Problem` at a time)."""

    def __init__(self, problem, n_blocks):
        design = problem.design
        self.loss = problem.loss
        self.n_samples, self.n_features = design.n_samples, design.n_features
        self.n_params, self.fit_intercept = design.n_params, design.fit_intercept
        self.every_row_noisy = design.every_row_noisy
        edges = np.linspace(0, design.n_samples, n_blocks + 1).astype(int)
        self.blocks = [_rows_of(problem, slice(lo, hi)) for lo, hi in zip(edges, edges[1:])]
        self.n_passes = 0

    def reduce(self, statistic, *args):
        self.n_passes += 1
        return sum_terms(statistic(block, b, *args) for b, block in enumerate(self.blocks))

    def subsample(self, step):
        sub = BlockRows.__new__(BlockRows)
        sub.__dict__.update(self.__dict__)
        sub.blocks = [subsample_rows(block, step) for block in self.blocks]
        sub.n_samples = sum(block.design.n_samples for block in sub.blocks)
        return sub


def _rows_of(problem, rows):
    from bayesdrop.model.design import Design

    design, loss, y = problem
    V = design.variance
    X = design.X[rows]
    M = None if V.matrix is None else V.matrix[rows]
    block = Design(X, FeatureVariance(M, V.scale, X.shape), design.fit_intercept)
    weights = None if loss.weights is None else loss.weights[rows]
    return Problem(block, loss if weights is None else loss.weighted(weights), y[rows])


@pytest.mark.parametrize("loss", [LogisticLoss(1.0), HingeLoss(1.0)], ids=["logistic", "hinge"])
def test_a_new_row_backend_fits_as_the_in_memory_solvers(loss):
    """Newton and IRLS through the back-end (``solvers.fit_rows``) reach the in-memory
    optimum; Newton takes the same steps as on one block."""
    from bayesdrop.model.noise import Dropout
    from bayesdrop.solvers import fit_rows

    X, y = _data(n=150, seed=7)
    problem = Problem.create(X, y, loss, Dropout(0.3), sample_weight=np.linspace(0.5, 2, 150))
    J_ref = fit_problem(problem, tol=1e-12).objective[-1]
    blocks, one = BlockRows(problem, 4), InMemoryRows(problem)
    a, b = newton.fit_rows(blocks), newton.fit_rows(one)
    assert a.n_iter == b.n_iter and a.converged
    np.testing.assert_allclose(a.theta, b.theta, rtol=1e-9, atol=1e-12)
    for res in (a, fit_rows(blocks, solver="irls", tol=1e-12)):
        assert res.objective[-1] - J_ref <= 1e-9 * J_ref


def test_a_new_row_backend_samples_the_same_posterior():
    """The sampler on the back-end: with one block, the very draws of ``InMemoryRows``;
    with three (each block draws from its own stream), the posterior mean of the compiled
    in-memory sampler within 5 Monte Carlo standard errors of the difference."""
    import arviz as az

    from bayesdrop.model.noise import Dropout

    X, y = _data(n=80, D=3, seed=11)
    problem = Problem.create(X, y, LogisticLoss(1.0), Dropout(0.2))
    theta_hat = fit_problem(problem).theta
    kw = dict(theta_hat=theta_hat, progressbar=False, random_state=2)
    one = sample(BlockRows(problem, 1), draws=30, tune=5, chains=2, **kw)
    ref_one = sample(InMemoryRows(problem), draws=30, tune=5, chains=2, **kw)
    np.testing.assert_array_equal(one.theta, ref_one.theta)
    ours = sample(BlockRows(problem, 3), draws=2000, tune=200, chains=2, **kw)
    ref = sample(problem, draws=4000, tune=200, chains=2, cores=1, **kw)
    for p in range(problem.design.n_params):
        a, b = ours.theta[:, :, p], ref.theta[:, :, p]
        se = np.sqrt(a.var() / az.ess(a) + b.var() / az.ess(b))
        assert abs(a.mean() - b.mean()) <= 5.0 * se, p


def test_a_new_noise_model_stays_in_its_estimator_string_form():
    """An unknown noise name is refused with the list of names; an instance is kept."""
    with pytest.raises(ValueError, match="noise must be one of"):
        DropoutLogisticRegression(noise="multiplicative uniform").fit(*_data())
    est = DropoutLogisticRegression(noise=MultiplicativeUniform(0.5)).fit(*_data())
    assert est.noise_ == MultiplicativeUniform(0.5)


# ---------------------------------------------------------------- recipe: a sampler move
def random_walk_move(scale, exact=True):
    """A random-walk Metropolis step on ``theta`` targeting ``exp(-J)`` (``exact=False``:
    every proposal accepted -- a broken move, to show that the check below detects one)."""
    from bayesdrop.samplers import gibbs

    def move(rng, problem, state):
        prop = state.theta + scale * rng.standard_normal(state.theta.shape)
        log_ratio = problem.objective(state.theta) - problem.objective(prop)
        if not exact or np.log(rng.random()) < log_ratio:
            return gibbs.init(problem, prop)
        return state
    return move


def _moments_agree(ours, ref, n_se=5.0):
    """Per coordinate, means and variances of two sets of chains within ``n_se`` Monte
    Carlo standard errors (ESS-based) of their difference."""
    import arviz as az

    ok = True
    for p in range(ours.shape[-1]):
        a, b = ours[:, :, p], ref[:, :, p]
        ess_a, ess_b = az.ess(a), az.ess(b)
        se_mean = np.sqrt(a.var() / ess_a + b.var() / ess_b)
        se_var = np.sqrt(2 * a.var() ** 2 / ess_a + 2 * b.var() ** 2 / ess_b)
        ok &= abs(a.mean() - b.mean()) <= n_se * se_mean
        ok &= abs(a.var() - b.var()) <= n_se * se_var
    return bool(ok)


def test_a_new_sampler_move_keeps_the_posterior_and_a_broken_one_is_detected():
    """A move added to the Python kernel (``SweepKernel(moves=...)``, run by the one chain
    loop) leaves the posterior of the compiled sampler in place (means and variances
    within 5 Monte Carlo standard errors); the same check rejects the move that accepts
    every proposal."""
    from bayesdrop.model.noise import Dropout
    from bayesdrop.samplers.chain import run_chain
    from bayesdrop.samplers.gibbs import SweepKernel

    X, y = _data(n=60, D=2, seed=13)
    problem = Problem.create(X, y, LogisticLoss(1.0), Dropout(0.2))
    theta_hat = fit_problem(problem).theta
    ref = sample(problem, draws=4000, tune=200, chains=2, theta_hat=theta_hat, cores=1,
                 progressbar=False, random_state=3).theta

    def chains(move):
        kernel = SweepKernel(problem, moves=(move,))
        seeds = np.random.SeedSequence(4).spawn(2)
        return np.stack([run_chain(kernel, theta_hat, s, tune=200, draws=1500, thin=1).theta
                         for s in seeds])

    assert _moments_agree(chains(random_walk_move(0.3)), ref)
    assert not _moments_agree(chains(random_walk_move(0.3, exact=False)), ref)
