"""Gibbs sampler vs NumPyro NUTS on the same target exp(-J), and the sweep against its floor.

Run:  python benchmarks/sampler.py [--quick] [--no-nuts] [--small-only] [--chains 1]
      (NUTS needs the bench extra: pip install -e ".[bench]")

How each side is run (the same for every problem, in the same process):

* **ours** -- ``bayesdrop.samplers.sample``: 4 chains, 1000 tuning sweeps, 2000 kept draws,
  started at the mode, chains in 2 threads (the compiled sweep releases the GIL). One
  short run first compiles / loads numba's cache; the timed run is the second, wall clock
  around the call, tuning included.
* **NUTS** -- NumPyro's documented set-up: a model with the data as arguments
  (``numpyro.factor("J", -J(theta; X, V, y))`` under an improper flat prior, so its
  target is exactly ours), ``jax_enable_x64``, ``NUTS`` with its default adaptation of the
  step size, run twice: with NumPyro's default diagonal mass matrix and with
  ``dense_mass=True`` (a full mass matrix adapted in warm-up, what a careful user sets on
  collinear designs); the peer of each problem is the better of the two in ESS per
  second (``--mass`` runs one of them only). 1000 warm-up and 2000 draws, 4 chains with
  ``chain_method="parallel"`` on ``numpyro.set_host_device_count(4)`` (both cores),
  ``jit_model_args=True``, ``init_strategy=init_to_value(mode)`` (the same start as ours,
  moved by 1e-6 so that NUTS's gradient exists there).
  A first ``run`` compiles; the timed run is the second, wall clock around ``run`` plus
  ``block_until_ready``, warm-up included.
* **ESS** -- ArviZ ``ess`` (bulk and tail) of every coefficient and the intercept; the
  table reports the minimum over them, per second of wall time.
* **sweep / floor** -- one chain in one thread, sweeps per second from its kept part;
  the floor is the sum, measured on the same data in the same run (best of 7), of the
  augmentation draws (compiled IG or PG for all N examples), the weighted Gram matrix
  ``Xbar^T diag(rho) Xbar`` (BLAS ``gemm``), the Cholesky factorisation and the two
  triangular solves (LAPACK).

Results: ``benchmarks/results/sampler.txt`` (written by this script).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("CI", "1")  # no progress bars in benchmark output

import numpy as np
import scipy.linalg as sla
from sklearn.datasets import (load_breast_cancer, load_diabetes, load_digits,
                              make_classification)
from sklearn.preprocessing import StandardScaler

from bayesdrop import (Dropout, EpsilonInsensitiveLoss, HingeLoss, LogisticLoss, NoNoise,
                       Problem)
from bayesdrop._arviz import ess
from bayesdrop.samplers import sample
from bayesdrop.model.pg_compiled import polya_gamma_compiled
from bayesdrop.model.augmentation import inverse_gaussian
from bayesdrop.solvers import fit_problem

DRAWS, TUNE, CHAINS, CORES = 2000, 1000, 4, 2


def _cancer():
    """Breast cancer, standardised, labels +-1."""
    X, y = load_breast_cancer(return_X_y=True)
    return StandardScaler().fit_transform(X), 2.0 * y - 1.0


def _diabetes():
    """Diabetes, features and target standardised."""
    X, y = load_diabetes(return_X_y=True)
    return StandardScaler().fit_transform(X), (y - y.mean()) / y.std()


def problems(quick):
    Xc, yc = _cancer()
    Xd, yd = load_digits(return_X_y=True)
    Xd, yd = Xd / 16.0, np.where(yd == 8, 1.0, -1.0)
    Xs, ys = make_classification(n_samples=2000 if quick else 10_000, n_features=50,
                                 n_informative=20, random_state=0)
    Xs, ys = StandardScaler().fit_transform(Xs), 2.0 * ys - 1.0
    return [
        ("cancer logistic q=0", Xc, yc, LogisticLoss(1.0), NoNoise()),
        ("cancer logistic q=0.3", Xc, yc, LogisticLoss(1.0), Dropout(0.3)),
        ("cancer hinge q=0", Xc, yc, HingeLoss(1.0), NoNoise()),
        ("cancer hinge q=0.3", Xc, yc, HingeLoss(1.0), Dropout(0.3)),
        ("digits 8-vs-rest hinge q=0.3", Xd, yd, HingeLoss(1.0), Dropout(0.3)),
        (f"synthetic {Xs.shape[0]}x50 logistic q=0", Xs, ys, LogisticLoss(1.0), NoNoise()),
    ]


def extra_problems():
    """Problems outside the main table (``--extra``): another loss, a correlated design."""
    Xr, yr = _diabetes()
    rng = np.random.default_rng(0)
    n, D, rho = 5000, 40, 0.9
    Z = rng.standard_normal((n, D))
    Xa = np.empty_like(Z)
    Xa[:, 0] = Z[:, 0]
    for d in range(1, D):  # AR(1) features, correlation rho between neighbours
        Xa[:, d] = rho * Xa[:, d - 1] + np.sqrt(1.0 - rho * rho) * Z[:, d]
    ya = np.where(Xa @ rng.normal(size=D) / np.sqrt(D) + 0.5 * rng.normal(size=n) > 0,
                  1.0, -1.0)
    return [
        ("diabetes eps-insensitive q=0.3", Xr, yr, EpsilonInsensitiveLoss(1.0, 0.1),
         Dropout(0.3)),
        ("AR(1) 0.9 5000x40 hinge q=0.2", Xa, ya, HingeLoss(1.0), Dropout(0.2)),
    ]


def large_c_problems():
    """Zero-noise problems at large ``C`` (``--large-C``): piecewise-quadratic ``J``, no
    Laplace approximation, where the slice moves of the compiled sweep may join it."""
    Xc, yc = _cancer()
    Xr, yr = _diabetes()
    return [
        ("cancer hinge q=0 C=10", Xc, yc, HingeLoss(10.0), NoNoise()),
        ("cancer hinge q=0 C=100", Xc, yc, HingeLoss(100.0), NoNoise()),
        ("diabetes eps-insensitive q=0 C=100", Xr, yr, EpsilonInsensitiveLoss(100.0, 0.1),
         NoNoise()),
    ]


def min_ess(theta):
    """Minimum bulk and tail ESS over the parameters of (chain, draw, p) draws."""
    bulk = min(ess(theta[..., k], "bulk") for k in range(theta.shape[-1]))
    tail = min(ess(theta[..., k], "tail") for k in range(theta.shape[-1]))
    return bulk, tail


def floor_seconds(problem, repeat=7):
    """Augmentation draws + weighted Gram + Cholesky + two triangular solves."""
    d, loss = problem.design, problem.loss
    Xb = np.column_stack([d.X, np.ones(d.n_samples)])
    rng = np.random.default_rng(0)
    rho = rng.random(d.n_samples) + 0.5
    z = np.abs(rng.normal(size=d.n_samples)) + 0.1
    best = np.inf
    for _ in range(repeat):
        t = time.perf_counter()
        if loss.name == "logistic":
            polya_gamma_compiled(np.full(d.n_samples, 2.0 * loss.C), z, rng)
        else:
            inverse_gaussian(1.0 / z, rng)
        G = Xb.T @ (Xb * rho[:, None])
        G[np.diag_indices_from(G)] += 2.0
        L = sla.cholesky(G, lower=True, check_finite=False)
        v = sla.solve_triangular(L, z[: G.shape[0]], lower=True, check_finite=False)
        sla.solve_triangular(L, v, lower=True, trans=1, check_finite=False)
        best = min(best, time.perf_counter() - t)
    return best


def numpyro_model(code):
    """The model for one loss (``code`` is static; the data are arguments)."""
    import numpyro
    import numpyro.distributions as dist
    from jax import numpy as jnp

    def model(X, V, y, c, margin):
        p = X.shape[1] + 1
        theta = numpyro.sample("theta", dist.ImproperUniform(dist.constraints.real_vector,
                                                             (), event_shape=(p,)))
        w, b = theta[:-1], theta[-1]
        m = X @ w + b
        s = V @ (w * w)
        if code == "logistic":  # h = c
            psi = jnp.sqrt(m * m + s)
            excess = s / jnp.where(psi + jnp.abs(m) > 0, psi + jnp.abs(m), 1.0)
            term = c * (0.5 * excess + jnp.log1p(jnp.exp(-psi)) + jnp.maximum(-y * m, 0.0))
        elif code == "epsilon_insensitive":  # C = c, epsilon = margin
            r = y - m
            term = c * (jnp.sqrt((r - margin) ** 2 + s) + jnp.sqrt((r + margin) ** 2 + s)
                        - 2.0 * margin)
        else:  # hinge, C = c
            zeta = margin - y * m
            term = c * (zeta + jnp.sqrt(zeta * zeta + s))
        numpyro.factor("J", -(w @ w + jnp.sum(term)))

    return model


def run_nuts(problem, theta_hat, seed, dense_mass=False):
    import jax
    from numpyro.infer import MCMC, NUTS, init_to_value

    d, loss = problem.design, problem.loss
    X = np.asarray(d.X)
    V = d.variance.rows() if not d.variance.is_zero else np.zeros_like(X)
    code = loss.name
    c = 2.0 * loss.C if code == "logistic" else loss.C
    margin = getattr(loss, "margin", getattr(loss, "epsilon", 0.0))
    # the mode, moved by 1e-6: where the mode is the intercept alone (w = 0; digits
    # 8-vs-rest at q = 0.3 is such a problem) J is not differentiable there and NumPyro
    # cannot start from it
    start = theta_hat + 1e-6 * np.random.default_rng(0).standard_normal(theta_hat.shape)
    kernel = NUTS(numpyro_model(code), init_strategy=init_to_value(values={"theta": start}),
                  dense_mass=dense_mass)
    mcmc = MCMC(kernel, num_warmup=TUNE, num_samples=DRAWS, num_chains=CHAINS,
                chain_method="parallel", progress_bar=False, jit_model_args=True)
    args = (X, V, problem.y, c, margin)
    mcmc.run(jax.random.PRNGKey(seed), *args)  # compiles
    t = time.perf_counter()
    mcmc.run(jax.random.PRNGKey(seed + 1), *args)
    theta = mcmc.get_samples(group_by_chain=True)["theta"]
    theta.block_until_ready()
    return np.asarray(theta), time.perf_counter() - t


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller synthetic problem")
    parser.add_argument("--no-nuts", action="store_true", help="skip NumPyro NUTS")
    parser.add_argument("--small-only", action="store_true",
                        help="the five small problems only (no synthetic 10^4 x 50 row, "
                             "whose NUTS run takes about 20 minutes); results to "
                             "results/sampler_small.txt")
    parser.add_argument("--synthetic-only", action="store_true",
                        help="the synthetic 10^4 x 50 row only")
    parser.add_argument("--extra", action="store_true",
                        help="the problems outside the main table only (epsilon-"
                             "insensitive regression, an AR(1) design); results to "
                             "results/sampler_extra.txt")
    parser.add_argument("--large-C", action="store_true",
                        help="zero-noise hinge and epsilon-insensitive problems at C = 10 "
                             "and 100 only; results to results/sampler_large_C.txt")
    parser.add_argument("--chains", type=int, default=4,
                        help="chains on each side (default 4; 1 writes *_1chain.txt)")
    parser.add_argument("--mass", choices=("both", "diagonal", "dense"), default="both",
                        help="NUTS mass matrix: both (default; the peer is the better "
                             "of the two), or one of them")
    args = parser.parse_args()
    global CHAINS
    CHAINS = args.chains
    have_nuts = not args.no_nuts
    if have_nuts:
        try:
            import numpyro

            numpyro.set_host_device_count(max(CHAINS, 2))
            import jax

            jax.config.update("jax_enable_x64", True)
        except ImportError:
            have_nuts = False
            print("NumPyro not installed (pip install -e '.[bench]'): NUTS skipped")
    lines = [f"# {CHAINS} chains, {TUNE} tuning + {DRAWS} draws each; wall seconds incl. "
             "tuning; second (compiled) run of each side; see the docstring for the set-up",
             "",
             "| problem | sweep ms | floor ms | sweep/floor | ours s | ours ESS bulk/tail "
             "| ours ESS/s | NUTS diag s | NUTS diag ESS bulk/tail | NUTS diag ESS/s "
             "| NUTS dense s | NUTS dense ESS bulk/tail | NUTS dense ESS/s "
             "| ours / better NUTS (ESS/s, min of bulk, tail) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    todo = problems(args.quick)
    if args.small_only:
        todo = todo[:5]
    if args.synthetic_only:
        todo = todo[5:]
    if args.extra:
        todo = extra_problems()
    if args.large_C:
        todo = large_c_problems()
    masses = {"both": (False, True), "diagonal": (False,), "dense": (True,)}[args.mass]
    for name, X, y, loss, noise in todo:
        problem = Problem.create(X, y, loss, noise, True)
        theta_hat = fit_problem(problem).theta
        kw = dict(theta_hat=theta_hat, progressbar=False)
        sample(problem, draws=5, tune=5, chains=2, cores=2, random_state=0, **kw)  # compile
        one = sample(problem, draws=500, tune=0, chains=1, cores=1, random_state=0, **kw)
        sweep = float(one.draw_time[0]) / 500
        floor = floor_seconds(problem)
        t = time.perf_counter()
        res = sample(problem, draws=DRAWS, tune=TUNE, chains=CHAINS, cores=CORES,
                     random_state=1, **kw)
        ours_s = time.perf_counter() - t
        bulk, tail = min_ess(res.theta)
        if args.large_C:  # how many chains' kept sweeps ran the slice moves
            used = sum(m is not None and m.slice is not None for m in res.last_state.moves)
            name = f"{name} (slice moves in {used} of {CHAINS} chains)"
        cells = [name, f"{1e3 * sweep:.3f}", f"{1e3 * floor:.3f}", f"{sweep / floor:.2f}",
                 f"{ours_s:.2f}", f"{bulk:.0f}/{tail:.0f}", f"{min(bulk, tail) / ours_s:.0f}"]
        if have_nuts:
            best = 0.0
            for dense in (False, True):
                if dense not in masses:
                    cells += ["-"] * 3
                    continue
                theta_n, nuts_s = run_nuts(problem, theta_hat, seed=3, dense_mass=dense)
                nb, nt = min_ess(theta_n)
                best = max(best, min(nb, nt) / nuts_s)
                cells += [f"{nuts_s:.2f}", f"{nb:.0f}/{nt:.0f}", f"{min(nb, nt) / nuts_s:.0f}"]
            cells.append(f"**{(min(bulk, tail) / ours_s) / best:.2f}**")
        else:
            cells += ["-"] * 7
        lines.append("| " + " | ".join(cells) + " |")
        print(lines[-1], flush=True)
    lines += ["", f"machine: {os.cpu_count()} cores; python {sys.version.split()[0]}"]
    if not args.quick:
        stem = ("sampler_small" if args.small_only else "sampler_synthetic"
                if args.synthetic_only else "sampler_extra" if args.extra
                else "sampler_large_C" if args.large_C else "sampler")
        out = Path(__file__).parent / "results" / (
            stem + ("" if args.mass == "both" else "_" + args.mass)
            + ("" if CHAINS == 4 else f"_{CHAINS}chain") + ".txt")
        out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
