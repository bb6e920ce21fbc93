"""Wall time of ``sample_posterior`` on the README example (issue 15: under a second after
compilation).

The README call exactly (``DropoutLogisticRegression(C=0.1, noise_level=0.3)`` on breast
cancer 569 x 30, ``draws=1000, chains=4`` and the default ``tune=500``: 4 x 1500 sweeps
on the 2 cores, the pointwise log-likelihood and the R-hat / ESS check included), timed
with ``time.perf_counter`` around the call, ``REPEATS`` times after one call that compiles
and builds the Polya-Gamma table (``C = 0.1`` makes the shapes ``h = 0.2`` fractional).
Reported: min, median and max, and the split of the median run into sampling
(``idata.posterior.attrs["sampling_time"]``) and the rest. Writes
benchmarks/results/readme_posterior.txt.
"""

from __future__ import annotations

import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from bayesdrop import DropoutLogisticRegression
from bayesdrop.studies.datasets import load_breast_cancer

REPEATS = 10


def main():
    X, y = load_breast_cancer()
    clf = DropoutLogisticRegression(C=0.1, noise_level=0.3).fit(X, y)
    kw = dict(draws=1000, chains=4, random_state=0, progressbar=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf.sample_posterior(X, y, **kw)  # compile; build the PG(0.2, .) table
        runs = []
        for _ in range(REPEATS):
            t = time.perf_counter()
            idata = clf.sample_posterior(X, y, **kw)
            wall = time.perf_counter() - t
            runs.append((wall, float(idata.posterior.attrs["sampling_time"])))
    total = np.array([r[0] for r in runs])
    median = runs[int(np.argsort(total)[len(total) // 2])]
    lines = [
        ("# README example: DropoutLogisticRegression(C=0.1, noise_level=0.3) on breast "
        "cancer, sample_posterior(draws=1000, chains=4) (tune=500): 4 x 1500 sweeps"),
        "",
        "| wall seconds | min | median | max |",
        "|---|---|---|---|",
        (f"| sample_posterior | {total.min():.3f} | {np.median(total):.3f} | "
        f"{total.max():.3f} |"),
        "",
        (f"median run: sampling {median[1]:.3f} s, the rest (mode, log-likelihood, "
        f"InferenceData, R-hat / ESS check) {median[0] - median[1]:.3f} s"),
        f"{REPEATS} runs after one compiling call; goal: under 1 s",
        f"machine: {os.cpu_count()} cores; python {sys.version.split()[0]}",
    ]
    print("\n".join(lines))
    (Path(__file__).parent / "results" / "readme_posterior.txt").write_text(
        "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
