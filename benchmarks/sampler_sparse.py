"""The Gibbs sampler on sparse text: newsgroups (1427 x 22178, CSR), logistic, dropout
q = 0.5, C = 1 (issue 15's large sparse row; goal >= 50 sweeps per second).

Two kernels on the same problem, the same run:

* **compiled** -- the CSR sweep of ``bayesdrop/samplers/_gibbs_sparse.py`` (Polya-Gamma
  draws, the exact Gaussian step through the N x N dual system solved matrix-free by
  conjugate gradients, chains in threads);
* **python** -- the Python kernel (``compiled=False``: the Woodbury back-end, chains in
  processes), as before this kernel existed.

Reported: one chain's sweep time (the compiled chain's dual products on numba's threads,
as a single chain runs them; ``NUMBA_NUM_THREADS=1`` for one thread), the sweeps per
second of 4 chains on both
cores with the default 500 tuning + 1000 kept sweeps (compiled only: the Python kernel's
full run takes about 20 minutes, so its throughput is its single-chain rate times the two
cores), bulk and tail ESS (ArviZ; minimum over the intercept, the 200 most frequent words
and lp) per second and per kept draw. Wall clock (time.perf_counter), second run of each
kernel (the first compiles). Writes benchmarks/results/sampler_sparse.txt.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("CI", "1")

import numpy as np

from bayesdrop import Dropout, LogisticLoss, Problem
from bayesdrop._arviz import ess
from bayesdrop.samplers import sample
from bayesdrop.solvers import fit_problem
from bayesdrop.studies.datasets import load_newsgroups

DRAWS, TUNE, CHAINS, CORES = 1000, 500, 4, 2


def main():
    X, y = load_newsgroups()
    y = np.where(y == 1, 1.0, -1.0)
    problem = Problem.create(X, y, LogisticLoss(1.0), Dropout(0.5))
    theta_hat = fit_problem(problem).theta
    kw = dict(theta_hat=theta_hat, progressbar=False)
    lines = []

    def say(s=""):
        print(s, flush=True)
        lines.append(s)

    say(f"# newsgroups {X.shape[0]}x{X.shape[1]} CSR ({X.nnz} stored entries), logistic "
        "C=1, dropout q=0.5")
    say()
    rates = {}
    for name, compiled in (("compiled", "auto"), ("python", False)):
        n = 200 if compiled else 20
        sample(problem, draws=3, tune=0, chains=1, cores=1, random_state=0,
               compiled=compiled, **kw)
        t = time.perf_counter()
        sample(problem, draws=n, tune=0, chains=1, cores=1, random_state=0,
               compiled=compiled, **kw)
        rates[name] = n / (time.perf_counter() - t)
    say("| kernel | sweep ms (1 chain) | sweeps / s, 1 chain |")
    say("|---|---|---|")
    for name, r in rates.items():
        say(f"| {name} | {1e3 / r:.1f} | {r:.1f} |")
    say()
    t = time.perf_counter()
    res = sample(problem, draws=DRAWS, tune=TUNE, chains=CHAINS, cores=CORES, random_state=1,
                 **kw)
    wall = time.perf_counter() - t
    counts = np.asarray(abs(X).sum(axis=0)).ravel()
    watch = list(np.argsort(-counts)[:200]) + [problem.design.n_params - 1]
    bulk = min([ess(res.theta[..., j], "bulk") for j in watch] + [ess(res.lp, "bulk")])
    tail = min([ess(res.theta[..., j], "tail") for j in watch] + [ess(res.lp, "tail")])
    sweeps = CHAINS * (TUNE + DRAWS)
    say(f"{CHAINS} chains x ({TUNE} tuning + {DRAWS} kept) sweeps, {CORES} threads: "
        f"{wall:.1f} s wall, **{sweeps / wall:.1f} sweeps / s** (goal 50); the Python "
        f"kernel: about {CORES * rates['python']:.1f} sweeps / s on {CORES} processes "
        f"(its 1-chain rate x {CORES})")
    say()
    say("| ESS (min over intercept, 200 most frequent words, lp) | bulk | tail |")
    say("|---|---|---|")
    say(f"| total | {bulk:.0f} | {tail:.0f} |")
    say(f"| per second | {bulk / wall:.1f} | {tail / wall:.1f} |")
    say(f"| per kept draw | {bulk / (CHAINS * DRAWS):.2f} | {tail / (CHAINS * DRAWS):.2f} |")
    say()
    say(f"machine: {os.cpu_count()} cores; python {sys.version.split()[0]}")
    (Path(__file__).parent / "results" / "sampler_sparse.txt").write_text(
        "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
