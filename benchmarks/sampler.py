"""Gibbs sampler benchmark: sweep time against the linear-algebra floor, ESS per second,
and NumPyro NUTS on the same target exp(-J) when the ``bench`` extra is installed.

Run:  python benchmarks/sampler.py [--quick] [--no-nuts]

For each problem, measured in the same run:

* ``sweep_ms``  -- wall-clock time of one Gibbs sweep (augmentation draw + Gaussian draw),
  from the kept part of the chains;
* ``floor_ms``  -- one ``X^T diag(u) X`` plus one Cholesky factorisation of the
  ``(D+1) x (D+1)`` matrix on the same data (best of several), the irreducible cost of an
  exact Gaussian step; ``ratio = sweep / floor`` (goal <= 1.5);
* ``ess/s``     -- minimum bulk ESS over all coefficients and the intercept, divided by the
  sampling time of the kept draws (all chains, one process, chains in sequence);
* ``nuts ess/s`` -- the same for NumPyro NUTS (default adaptation) on ``-J`` written in JAX,
  sampling time of the kept draws only, chains in sequence.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import scipy.linalg as sla
from sklearn.datasets import load_breast_cancer, load_digits, make_classification
from sklearn.preprocessing import StandardScaler

from bayesdrop import Dropout, HingeLoss, LogisticLoss, NoNoise, Problem
from bayesdrop.samplers import sample
from bayesdrop.solvers import irls
from bayesdrop._arviz import ess

os.environ.setdefault("CI", "1")  # no progress bars in benchmark output


def problems(quick):
    Xc, yc = load_breast_cancer(return_X_y=True)
    Xc, yc = StandardScaler().fit_transform(Xc), 2.0 * yc - 1.0
    Xd, yd = load_digits(return_X_y=True)
    Xd, yd = Xd / 16.0, np.where(yd == 8, 1.0, -1.0)
    n_syn = 2000 if quick else 10_000
    Xs, ys = make_classification(n_samples=n_syn, n_features=50, n_informative=20,
                                 random_state=0)
    Xs, ys = StandardScaler().fit_transform(Xs), 2.0 * ys - 1.0
    return [
        ("cancer logistic q=0", Xc, yc, LogisticLoss(1.0), NoNoise()),
        ("cancer logistic q=0.3", Xc, yc, LogisticLoss(1.0), Dropout(0.3)),
        ("cancer hinge q=0", Xc, yc, HingeLoss(1.0), NoNoise()),
        ("cancer hinge q=0.3", Xc, yc, HingeLoss(1.0), Dropout(0.3)),
        ("digits 8-vs-rest hinge q=0.3", Xd, yd, HingeLoss(1.0), Dropout(0.3)),
        (f"synthetic {n_syn}x50 logistic q=0", Xs, ys, LogisticLoss(1.0), NoNoise()),
    ]


def floor_time(X, repeat=7):
    rng = np.random.default_rng(0)
    u = rng.random(X.shape[0]) + 0.5
    best = np.inf
    for _ in range(repeat):
        t = time.perf_counter()
        Xs = X * np.sqrt(u)[:, None]
        G = Xs.T @ Xs
        G[np.diag_indices_from(G)] += 2.0
        sla.cholesky(G, lower=True, check_finite=False)
        best = min(best, time.perf_counter() - t)
    return best


def min_ess(theta):
    return min(ess(theta[..., k]) for k in range(theta.shape[-1]))


def nuts(problem, theta0, draws, tune, chains, seed):
    """NumPyro NUTS on exp(-J); returns (theta (chains, draws, p), sampling seconds)."""
    import jax
    import jax.numpy as jnp
    from numpyro.infer import MCMC, NUTS

    jax.config.update("jax_enable_x64", True)
    d = problem.design
    X = jnp.asarray(d.X)
    V = jnp.asarray(d.variance.rows()) if not d.variance.is_zero else None
    y = jnp.asarray(problem.y)
    loss = problem.loss

    def potential(theta):
        w, b = theta[:-1], theta[-1]
        m = X @ w + b
        s = V @ (w * w) if V is not None else 0.0
        if loss.name == "logistic":
            h = loss.h
            if V is None:
                term = h * jnp.logaddexp(0.0, -y * m)
            else:
                psi = jnp.sqrt(m * m + s)
                term = h * (0.5 * psi + jnp.log1p(jnp.exp(-psi)) - 0.5 * y * m)
        else:
            zeta = loss.margin - y * m
            term = loss.C * (zeta + jnp.sqrt(zeta * zeta + s)) if V is not None \
                else 2 * loss.C * jnp.maximum(zeta, 0.0)
        return w @ w + jnp.sum(term)

    out, seconds = [], 0.0
    for c in range(chains):
        mcmc = MCMC(NUTS(potential_fn=potential), num_warmup=tune, num_samples=draws,
                    progress_bar=False)
        mcmc.warmup(jax.random.PRNGKey(seed + c), init_params=jnp.asarray(theta0),
                    collect_warmup=False)
        t = time.perf_counter()
        mcmc.run(jax.random.PRNGKey(seed + 100 + c), init_params=jnp.asarray(theta0))
        samples = np.asarray(mcmc.get_samples())
        seconds += time.perf_counter() - t
        out.append(samples)
    return np.stack(out), seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer draws, smaller data")
    parser.add_argument("--no-nuts", action="store_true", help="skip NumPyro NUTS")
    args = parser.parse_args()
    draws, tune, chains = (500, 100, 2) if args.quick else (2000, 500, 4)
    try:
        import numpyro  # noqa: F401

        have_nuts = not args.no_nuts
    except ImportError:
        have_nuts = False
        print("NumPyro not installed (pip install -e '.[bench]'): NUTS columns skipped")
    header = (f"{'problem':34s} {'sweep_ms':>9s} {'floor_ms':>9s} {'ratio':>6s} "
              f"{'min_ess':>8s} {'ess/s':>8s}" + (f" {'nuts_ess':>8s} {'nuts ess/s':>10s}"
                                                 f" {'gibbs/nuts':>10s}" if have_nuts else ""))
    print(f"draws={draws} tune={tune} chains={chains} (in sequence, one process)")
    print(header)
    for name, X, y, loss, noise in problems(args.quick):
        problem = Problem.create(X, y, loss, noise, True)
        theta_hat = irls.fit(problem, None).theta
        sample(problem, draws=5, tune=0, chains=1, theta_hat=theta_hat,
                     random_state=0, progressbar=False, cores=1)  # compile / warm caches
        res = sample(problem, draws=draws, tune=tune, chains=chains,
                           theta_hat=theta_hat, random_state=1, progressbar=False, cores=1)
        seconds = float(res.draw_time.sum())
        sweep = seconds / (chains * draws)
        floor = floor_time(X)
        e = min_ess(res.theta)
        line = (f"{name:34s} {1e3 * sweep:9.3f} {1e3 * floor:9.3f} {sweep / floor:6.1f} "
                f"{e:8.0f} {e / seconds:8.0f}")
        if have_nuts:
            theta_n, sec_n = nuts(problem, theta_hat, draws, tune, chains, seed=3)
            e_n = min_ess(theta_n)
            line += f" {e_n:8.0f} {e_n / sec_n:10.0f} {(e / seconds) / (e_n / sec_n):10.2f}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
