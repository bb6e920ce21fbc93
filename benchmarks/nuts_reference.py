"""Long NumPyro NUTS runs on exp(-J): the reference posterior moments that
``tests/test_nuts_reference.py`` checks the Gibbs sampler against.

Run:  python benchmarks/nuts_reference.py [NAME ...]   (needs the bench extra: NumPyro, JAX;
      with names, only those entries are run and replaced in the file)

Writes ``tests/nuts_reference.json``: for each problem (breast cancer, standardised,
569 x 30, intercept) the posterior mean, standard deviation and their Monte Carlo
standard errors (ArviZ ``mcse``, ``"mean"`` and ``"sd"``) of every parameter, from NUTS
with a dense mass matrix, x64, 4 chains x (2000 warm-up + 25000 draws), the model of
``benchmarks/sampler.py`` (``numpyro.factor("J", -J(theta))`` under a flat prior: the
same target).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sampler import numpyro_model  # noqa: E402

PROBLEMS = {
    "cancer logistic q=0.3": ("logistic", 1.0, 0.3),
    "cancer hinge q=0.3": ("hinge", 1.0, 0.3),
    # zero noise at large C: the compiled sweep's slice moves (the Gibbs sweep alone creeps)
    "cancer hinge q=0 C=100": ("hinge", 100.0, 0.0),
}
WARMUP, DRAWS, CHAINS = 2000, 25_000, 4


def build(loss_name, C, q):
    """The problem of a reference entry (the test builds it the same way)."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.preprocessing import StandardScaler

    from bayesdrop import Dropout, HingeLoss, LogisticLoss, NoNoise, Problem

    X, y = load_breast_cancer(return_X_y=True)
    X, y = StandardScaler().fit_transform(X), 2.0 * y - 1.0
    loss = LogisticLoss(C) if loss_name == "logistic" else HingeLoss(C)
    return Problem.create(X, y, loss, Dropout(q) if q > 0 else NoNoise(), True)


def main():
    import numpyro

    numpyro.set_host_device_count(CHAINS)
    import jax
    from numpyro.infer import MCMC, NUTS, init_to_value

    from bayesdrop._arviz import mcse
    from bayesdrop.solvers import fit_problem

    jax.config.update("jax_enable_x64", True)
    path = Path(__file__).resolve().parents[1] / "tests" / "nuts_reference.json"
    names = sys.argv[1:] or list(PROBLEMS)
    unknown = sorted(set(names) - set(PROBLEMS))
    if unknown:
        raise SystemExit(f"unknown problems {unknown}; known: {sorted(PROBLEMS)}")
    out = {"set-up": __doc__.split("\n\n")[2].replace("\n", " "), "problems": {}}
    if sys.argv[1:] and path.exists():  # replace the named entries only
        out["problems"] = json.loads(path.read_text())["problems"]
    for name in names:
        loss_name, C, q = PROBLEMS[name]
        problem = build(loss_name, C, q)
        d, loss = problem.design, problem.loss
        theta_hat = fit_problem(problem).theta
        start = theta_hat + 1e-6 * np.random.default_rng(0).standard_normal(theta_hat.shape)
        kernel = NUTS(numpyro_model(loss.name), dense_mass=True,
                      init_strategy=init_to_value(values={"theta": start}))
        mcmc = MCMC(kernel, num_warmup=WARMUP, num_samples=DRAWS, num_chains=CHAINS,
                    chain_method="parallel", progress_bar=False)
        c = 2.0 * loss.C if loss.name == "logistic" else loss.C
        X = np.asarray(d.X)
        V = np.zeros_like(X) if d.variance.is_zero else d.variance.rows()
        mcmc.run(jax.random.PRNGKey(0), X, V, problem.y, c, getattr(loss, "margin", 0.0))
        theta = np.asarray(mcmc.get_samples(group_by_chain=True)["theta"])
        p = theta.shape[-1]
        out["problems"][name] = {
            "loss": loss_name, "C": C, "noise_level": q,
            "mean": theta.mean(axis=(0, 1)).tolist(),
            "sd": theta.std(axis=(0, 1)).tolist(),
            "mcse_mean": [float(mcse(theta[..., k])) for k in range(p)],
            "mcse_sd": [float(mcse(theta[..., k], "sd")) for k in range(p)],
        }
        print(name, "max mcse_mean", max(out["problems"][name]["mcse_mean"]), flush=True)
    path.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    os.environ.setdefault("CI", "1")
    main()
