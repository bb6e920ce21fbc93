"""Time per Gibbs sweep against the hyper-parameter ``C`` (goal: within 2x between
``C = 0.01`` and ``C = 10^4`` at fixed ``N, D``; no step whose cost grows with a
hyper-parameter without limit).

The logistic loss's Polya-Gamma shapes are ``h = 2 C w_n``; the hinge's inverse-Gaussian
means ``1 / (C |zeta|)``. Besides the ends, ``C = 0.45`` (``h = 0.9``: the largest
fraction drawn from the inversion table, with the most tilting trials) and ``C = 4``
(``h = 8``, where Devroye's exact method, one ``PG(1)`` draw per unit of ``h``, would cost
the most before the series took over at ``h = 9``). Problems: breast cancer (dense,
compiled sweep), a random 2000 x 5000 CSR design (fewer examples than features: the
compiled sweep's dual system) and a random 6000 x 2500 one (more examples than features:
the primal system, solved by the Python kernel's compiled CG; also without noise, where
the dual system's iterations would grow as ``sqrt(C)``). For each problem and ``C``: one
chain (BLAS on one thread; the wide CSR sweep's dual products on numba's threads, as a
single chain runs them -- ``NUMBA_NUM_THREADS=1`` for one thread), from the mode, after one untimed run of the same problem at the same ``C``
(it compiles: the logistic sweep has a variant for shapes ``2C >= 1``, without tables): 30
tuning + 300 kept sweeps on the dense problem, 5 + 20 on the sparse one (its sweeps at
large C take seconds); the time per sweep is the whole chain's wall-clock time over its
sweeps, the best of ``REPEATS`` runs of the same chain (same seed: the same work each
time; on a machine whose speed varies from minute to minute, the least disturbed run). Also
the time per Polya-Gamma draw of the sweep's own sampler at ``h = 2C`` (10^5 draws at
``z = 1``), and, for reference, that of ``polyagamma``'s exact devroye method (integer
``h`` only, ``h`` PG(1) draws per call: the cost the sampler had before) where it takes
under a second. The peer of each row is the same problem at ``C = 0.01`` in the same run.
Writes benchmarks/results/sampler_cost.txt.
"""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

os.environ.setdefault("CI", "1")

import numpy as np
import scipy.sparse as sp
from sklearn.datasets import load_breast_cancer
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from bayesdrop import Dropout, HingeLoss, LogisticLoss, Problem
from bayesdrop.samplers import sample
from bayesdrop.model.pg_compiled import polya_gamma_compiled
from bayesdrop.solvers import fit_problem

CS = (0.01, 0.45, 1.0, 4.0, 100.0, 1e4)
#: timed runs of each chain (the time per sweep is the best run's)
REPEATS = 5


def problems():
    X, y = load_breast_cancer(return_X_y=True)
    yield "cancer 569x30 dense", StandardScaler().fit_transform(X), 2.0 * y - 1.0, (30, 300)
    rng = np.random.default_rng(0)
    Xs = sp.random(2000, 5000, density=0.005, format="csr", random_state=1)
    ys = np.where(Xs @ rng.normal(size=5000) + 0.1 * rng.normal(size=2000) > 0, 1.0, -1.0)
    yield "random 2000x5000 CSR", Xs, ys, (5, 20)
    # more examples than features: the primal system (the Python kernel's compiled CG)
    Xt = sp.random(6000, 2500, density=0.004, format="csr", random_state=1)
    yt = np.where(Xt @ rng.normal(size=2500) + 0.3 * rng.normal(size=6000) > 0, 1.0, -1.0)
    yield "random 6000x2500 CSR (tall)", Xt, yt, (5, 20)


def sweep_seconds(problem, sweeps, warm):
    theta_hat = fit_problem(problem).theta
    tune, draws = sweeps
    kw = dict(chains=1, cores=1, theta_hat=theta_hat, progressbar=False)
    if warm:
        sample(problem, random_state=0, draws=2, tune=1, **kw)
    best = np.inf
    for _ in range(REPEATS):  # the same chain each time: the fastest run is the least disturbed
        res = sample(problem, random_state=1, draws=draws, tune=tune, **kw)
        best = min(best, float(res.tune_time[0] + res.draw_time[0]) / (tune + draws))
    return best


def pg_seconds(h):
    z = np.ones(100_000)
    polya_gamma_compiled(np.full(10, h), z[:10], 0)
    t0 = time.perf_counter()
    polya_gamma_compiled(np.full(z.shape, h), z, 1)
    ours = (time.perf_counter() - t0) / z.size
    ref = float("nan")
    if 1 <= h <= 200 and float(h).is_integer():
        from polyagamma import random_polyagamma

        n = max(10, int(2e4 / h))
        t0 = time.perf_counter()
        random_polyagamma(max(1, int(round(h))), z[:n], method="devroye",
                          random_state=np.random.default_rng(0))
        ref = (time.perf_counter() - t0) / n
    return ours, ref


def main():
    import numba

    lines = [f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
             f"one chain, BLAS on one thread, {numba.get_num_threads()} numba thread(s) (the "
             f"wide CSR sweep's dual products); best of {REPEATS} runs of each chain.", "",
             "| data | loss | " + " | ".join(f"C={c:g} ms/sweep" for c in CS)
             + " | max / min |", "|---|---|" + "---|" * (len(CS) + 1)]
    print("\n".join(lines), flush=True)
    with threadpool_limits(1):
        for name, X, y, sweeps in problems():
            cases = [(lambda c: LogisticLoss(c), Dropout(0.3), "dropout 0.3"),
                     (lambda c: HingeLoss(c), Dropout(0.3), "dropout 0.3")]
            if "tall" in name:
                cases = [(lambda c: LogisticLoss(c), Dropout(0.3), "dropout 0.3"),
                         (lambda c: LogisticLoss(c), "none", "no noise")]
            for make, noise, label in cases:
                times = []
                for C in CS:
                    loss = make(C)
                    # warm at every C: the logistic sweep compiles a variant without the
                    # fractional Polya-Gamma tables where every shape 2C is 1 or more
                    times.append(sweep_seconds(Problem.create(X, y, loss, noise),
                                               sweeps, warm=True))
                lines.append(f"| {name} | {loss.name}, {label} | "
                             + " | ".join(f"{1e3 * t:.3f}" for t in times)
                             + f" | {max(times) / min(times):.2f} |")
                print(lines[-1], flush=True)
        lines += ["", "| PG shape h = 2C | ours ns / draw | polyagamma devroye ns / draw |",
                  "|---|---|---|"]
        for C in CS:
            ours, ref = pg_seconds(2 * C)
            lines.append(f"| {2 * C:g} | {1e9 * ours:.0f} | "
                         + ("-" if np.isnan(ref) else f"{1e9 * ref:.0f}") + " |")
            print(lines[-1], flush=True)
    out = Path(__file__).parent / "results" / "sampler_cost.txt"
    out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
