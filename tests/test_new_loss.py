"""Recipe "add a loss" (docs/architecture.md): a loss defined in this module only -- a
parameter tuple, a compiled ``term`` kernel and a :class:`Loss` subclass -- gets the numpy
methods, Newton (the Python loop, the compiled dense loop, Newton-CG on sparse data),
L-BFGS and the solver conformance checks, with no edit anywhere in the package.

The loss is the expected squared hinge under Gaussian score noise: with
``mu = l - y m`` and ``sigma = sqrt(s)``,

    term = C E max(0, mu + sigma eps)^2 = C [(mu^2 + s) Phi(mu / sigma) + mu sigma phi(mu / sigma)]

(``C max(0, mu)^2`` at ``s = 0``). Its derivatives in ``(mu, s)``: ``2C (mu Phi + sigma phi)``,
``C Phi``; second ``2C Phi``, ``C phi / sigma``, ``-C mu phi / (2 sigma^3)``. It has no exact
augmentation, so it registers no ``mean`` / ``draw`` kernels, and IRLS and the sampler
refuse it with a TypeError. Every formula is checked against an independent reference:
Gauss-Hermite quadrature of the expectation and finite differences.
"""

import math
from typing import NamedTuple

import numba
import numpy as np
import pytest
from scipy.integrate import quad
from scipy.optimize import approx_fprime

from bayesdrop import Dropout, Problem
from bayesdrop.model.losses import Loss
from bayesdrop.model.losses.kernels import register
from bayesdrop.solvers import irls, newton

from .conftest import assert_conformance, conformance_data, lbfgs_reference

pytestmark = pytest.mark.heavy  # few long tests: scheduled first (conftest.py)


class SquaredHingeParams(NamedTuple):
    C: float
    margin: float


@numba.njit(cache=False)
def squared_hinge_term(p, m, s, y, derivs):
    mu = p.margin - y * m
    C = p.C
    if s <= 1e-300:  # zero noise: C max(0, mu)^2 (second derivatives one-sided)
        pos = max(mu, 0.0)
        on = 1.0 if mu > 0.0 else 0.0
        # d/dm = -y d/dmu; d/ds = C Phi -> C on the positive side
        return C * pos * pos, -2.0 * C * y * pos, C * on, 2.0 * C * on, 0.0, 0.0
    sigma = math.sqrt(s)
    z = mu / sigma
    Phi = 0.5 * math.erfc(-z / math.sqrt(2.0))
    phi = math.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)
    value = C * ((mu * mu + s) * Phi + mu * sigma * phi)
    d_mu = 2.0 * C * (mu * Phi + sigma * phi)
    d_s = C * Phi
    d_mumu = 2.0 * C * Phi
    d_mus = C * phi / sigma
    d_ss = -C * mu * phi / (2.0 * s * sigma)
    # chain rule through mu = l - y m (y^2 = 1)
    return value, -y * d_mu, d_s, d_mumu, -y * d_mus, d_ss


register(SquaredHingeParams, term=squared_hinge_term)


class SquaredHingeLoss(Loss):
    """Expected squared hinge ``C E max(0, l - y m~)^2`` (module docstring)."""

    name = "squared_hinge"
    n_augmentation = 0
    smooth = True  # C^1 with a bounded, piecewise continuous second derivative

    def __init__(self, C=1.0, margin=1.0):
        self.C, self.margin = float(C), float(margin)

    @property
    def kernel_params(self):
        return SquaredHingeParams(self.C, self.margin)

    def _params(self):
        return {"C": self.C, "margin": self.margin}


def _quadrature(C, margin, m, s, y):
    """``C E max(0, l - y (m + sqrt(s) eps))^2`` by adaptive quadrature from the kink."""
    mu = margin - y * m
    out = []
    for a, b in zip(mu, np.sqrt(s)):
        val, _ = quad(lambda x: (a + b * x) ** 2 * np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi),
                      -a / b, np.inf, epsabs=1e-14, epsrel=1e-12)
        out.append(C * val)
    return np.array(out)


def test_numpy_methods_wrap_the_kernel_and_match_quadrature_and_differences():
    rng = np.random.default_rng(1)
    m, s = rng.normal(size=40) * 2, rng.uniform(0.01, 3.0, size=40)
    y = np.where(rng.random(40) < 0.5, -1.0, 1.0)
    loss = SquaredHingeLoss(0.7, 1.0)
    value, d_m, d_s = loss.terms(m, s, y)
    np.testing.assert_allclose(value, _quadrature(0.7, 1.0, m, s, y), rtol=1e-9, atol=1e-12)
    d_mm, d_ms, d_ss = loss.curvature(m, s, y)
    for i in range(40):
        def f(v, i=i):
            return loss.value(np.array([v[0]]), np.array([v[1]]), y[i:i + 1])[0]

        def g(v, i=i):
            return np.array(loss.terms(np.array([v[0]]), np.array([v[1]]), y[i:i + 1])[1:]).ravel()

        point = np.array([m[i], s[i]])
        np.testing.assert_allclose([d_m[i], d_s[i]], approx_fprime(point, f, 1e-7),
                                   rtol=1e-5, atol=1e-6)
        jac = np.array([approx_fprime(point, lambda v, k=k: g(v)[k], 1e-7) for k in range(2)])
        np.testing.assert_allclose([[d_mm[i], d_ms[i]], [d_ms[i], d_ss[i]]], jac,
                                   rtol=1e-5, atol=1e-5)
    # weights scale the terms
    w = rng.uniform(0.5, 2.0, size=40)
    np.testing.assert_allclose(loss.weighted(w).value(m, s, y), w * value, rtol=1e-15)


@pytest.mark.parametrize("kind", ["dense", "sparse"])
@pytest.mark.parametrize("intercept", [True, False])
def test_newton_engines_reach_the_lbfgs_minimum(kind, intercept):
    """The conformance check of tests/test_solvers.py for the new loss."""
    X, y = conformance_data(kind, binary=True)
    problem = Problem.create(X, y, SquaredHingeLoss(0.7), Dropout(0.3), intercept)
    theta_ref, J_ref = lbfgs_reference(problem)
    results = {"newton-cholesky": newton.fit(problem, linalg="cholesky", compiled=False),
               "newton-cg": newton.fit(problem, linalg="cg")}
    if kind == "dense":
        results["newton-compiled"] = newton.fit(problem, linalg="cholesky", compiled=True)
    assert_conformance(problem, results, theta_ref, J_ref)
    if kind == "dense":  # one algorithm: the compiled loop takes the Python loop's steps
        a, b = results["newton-compiled"], results["newton-cholesky"]
        assert a.n_iter == b.n_iter
        np.testing.assert_allclose(a.objective, b.objective, rtol=1e-12)


def test_engines_that_need_an_augmentation_refuse_it_by_name():
    X, y = conformance_data("dense", binary=True)
    problem = Problem.create(X, y, SquaredHingeLoss(0.7), Dropout(0.3))
    with pytest.raises(TypeError, match="SquaredHingeLoss has no compiled 'mean' kernel"):
        irls.fit(problem)
    with pytest.raises(TypeError, match="SquaredHingeLoss has no compiled 'draw' kernel"):
        problem.loss.draw_augmentation(np.zeros(3), np.ones(3), np.ones(3),
                                       np.random.default_rng(0))


def test_engines_compiled_for_a_foreign_loss_stay_out_of_the_disk_cache(tmp_path):
    """numba unpickles every key of a function's cache index when it loads it: a key
    naming this test module's parameter class would break every later process that
    cannot import it. The engines compiled for it are therefore kept in memory only --
    no index names it, and a fresh process elsewhere loads the cached engines."""
    import pathlib
    import subprocess
    import sys

    import bayesdrop

    X, y = conformance_data("dense", binary=True)
    newton.fit(Problem.create(X, y, SquaredHingeLoss(0.7), Dropout(0.3)), compiled=True,
               linalg="cholesky")
    root = pathlib.Path(bayesdrop.__file__).parent
    for index in root.rglob("*.nbi"):
        assert b"SquaredHingeParams" not in index.read_bytes(), index
    code = ("import numpy as np; from bayesdrop import Problem, Dropout, HingeLoss;"
            "from bayesdrop.solvers import newton;"
            "rng = np.random.default_rng(0); X = rng.normal(size=(40, 3));"
            "y = np.where(X[:, 0] > 0, 1.0, -1.0);"
            "r = newton.fit(Problem.create(X, y, HingeLoss(1.0), Dropout(0.3)),"
            " compiled=True, linalg='cholesky'); print(r.converged)")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"
