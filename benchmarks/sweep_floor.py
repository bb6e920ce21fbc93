"""Compiled Gibbs sweep time against its floor, from N = 569 to N = 10^5 (issue 15 goal:
sweep <= 1.5 x floor).

One chain in one thread (BLAS limited to one thread too), 200 kept sweeps after 20
tuning sweeps, the second of two runs. The floor is measured on the same data in the same
run (best of 7): the augmentation draws for all N examples (compiled IG or PG), the
weighted Gram matrix ``Xbar^T diag(rho) Xbar`` (BLAS), the Cholesky factorisation and two
triangular solves (LAPACK). Writes benchmarks/results/sweep_floor.txt.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("CI", "1")

import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).parent))
from sampler import floor_seconds  # noqa: E402

from bayesdrop import Dropout, HingeLoss, LogisticLoss, NoNoise, Problem  # noqa: E402
from bayesdrop.samplers import sample  # noqa: E402
from bayesdrop.solvers import fit_problem  # noqa: E402


def data():
    X, y = load_breast_cancer(return_X_y=True)
    yield "cancer 569x30", StandardScaler().fit_transform(X), 2.0 * y - 1.0
    rng = np.random.default_rng(0)
    for n in (10_000, 100_000):
        X = rng.normal(size=(n, 50))
        y = np.where(X[:, :5].sum(axis=1) + rng.logistic(size=n) > 0, 1.0, -1.0)
        yield f"synthetic {n}x50", X, y


def main():
    lines = ["| data | loss, noise | sweep ms | floor ms | sweep / floor |", "|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    with threadpool_limits(1):
        for name, X, y in data():
            for loss, noise in [(LogisticLoss(1.0), NoNoise()), (LogisticLoss(1.0), Dropout(0.3)),
                                (HingeLoss(1.0), Dropout(0.3))]:
                problem = Problem.create(X, y, loss, noise)
                theta_hat = fit_problem(problem).theta
                kw = dict(draws=200, tune=20, chains=1, cores=1, theta_hat=theta_hat,
                          progressbar=False, mh=False)
                sample(problem, random_state=0, **kw)
                res = sample(problem, random_state=1, **kw)
                sweep = float(res.draw_time[0]) / 200
                floor = floor_seconds(problem)
                lines.append(f"| {name} | {loss.name}, {noise!r} | {1e3 * sweep:.3f} | "
                             f"{1e3 * floor:.3f} | {sweep / floor:.2f} |")
                print(lines[-1], flush=True)
    lines += ["", "Plain Gibbs sweeps (mh=False; the MH move adds one score pass and one J "
              "evaluation per sweep). One thread."]
    (Path(__file__).parent / "results" / "sweep_floor.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
