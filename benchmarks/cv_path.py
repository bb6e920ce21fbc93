"""The CV estimators against ``GridSearchCV`` over the same grid and folds (issue 43, item 3).

Run:  python benchmarks/cv_path.py [--quick]

Each row: one data set and estimator; the grid ``noise_levels x Cs`` with the CV
estimators' defaults (``Cs=10``: ``logspace(-4, 4, 10)``; ``noise_levels`` =
``DEFAULT_NOISE_LEVELS``, 6 values), or ``Cs=30`` in the "fine" rows; 5-fold CV (stratified
for the classifiers, as both sides choose it), default scoring, ``refit=True``.

* **ours** -- ``DropoutXxxCV(...).fit(X, y)``, the whole call (the search and the refit).
* **peer** -- ``GridSearchCV(DropoutXxx(), {"C": Cs, "noise_level": levels}, cv=5)
  .fit(X, y)``, the same call a user makes today, with the same base-estimator defaults
  (``tol=1e-8``, ``solver="auto"``).
* Both after ``python -m bayesdrop compile``'s kernels and one warm-up search in this
  process; wall clock, each side's best of ``R`` rounds that run ours and the peer in
  turn, 0.3 s apart (:func:`plain_fit.best_times`); numpy's BLAS at its default (2
  threads here) on both sides. ``n_jobs=1`` on both sides, then ``n_jobs=2`` on both (ours: folds in joblib processes;
  ``GridSearchCV``: joblib's loky processes, their start-up paid in the warm-up search).
* ``same`` -- the two chose the same ``(noise_level, C)``; ``max |d score|`` -- the
  largest difference of the mean held-out scores over the grid.

Results: ``benchmarks/results/cv_path.txt``.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

os.environ.setdefault("CI", "1")

import numpy as np
from sklearn.datasets import load_breast_cancer, load_diabetes
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV
from sklearn.preprocessing import StandardScaler

from bayesdrop import (DropoutLogisticRegression, DropoutLogisticRegressionCV, DropoutSVC,
                       DropoutSVCCV, DropoutSVR, DropoutSVRCV)
from bayesdrop.estimators.cv import DEFAULT_NOISE_LEVELS
from bayesdrop.studies.datasets import load_newsgroups

sys.path.insert(0, str(Path(__file__).parent))
from plain_fit import best_times  # noqa: E402  (the same timing as the plain-fit rows)


def problems(quick):
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    Xd, yd = load_diabetes(return_X_y=True)
    Xd = StandardScaler().fit_transform(Xd)
    yd = (yd - yd.mean()) / yd.std()
    rows = [("breast cancer 569 x 30", "LR", DropoutLogisticRegression,
             DropoutLogisticRegressionCV, X, y),
            ("breast cancer 569 x 30", "SVC", DropoutSVC, DropoutSVCCV, X, y),
            ("diabetes 442 x 10", "SVR", DropoutSVR, DropoutSVRCV, Xd, yd)]
    if not quick:
        Xn, yn = load_newsgroups()[:2]
        rows.append((f"newsgroups {Xn.shape[0]} x {Xn.shape[1]} (CSR)", "LR",
                     DropoutLogisticRegression, DropoutLogisticRegressionCV, Xn, yn))
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    warnings.simplefilter("ignore", ConvergenceWarning)
    repeat = 1 if args.quick else 3
    levels = list(DEFAULT_NOISE_LEVELS)
    lines = ["| data | model | grid | n_jobs | ours s | GridSearchCV s | ratio | same | "
             "max abs d score |", "|---|---|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    for name, model, base, cv_cls, X, y in problems(args.quick):
        grids = [("10 x 6", 10)] if "newsgroups" in name else [("10 x 6", 10),
                                                                  ("30 x 6", 30)]
        for grid_name, n_C in grids:
            Cs = np.logspace(-4, 4, n_C)
            for n_jobs in (1, 2):
                def ours():
                    return cv_cls(Cs=Cs, noise_levels=levels, n_jobs=n_jobs)

                def peer():
                    return GridSearchCV(base(), {"C": list(Cs), "noise_level": levels},
                                        cv=5, n_jobs=n_jobs)
                ours().fit(X, y)  # warm-up: kernels loaded, loky workers started
                peer().fit(X, y)
                (t_ours, t_peer), (a, b) = best_times([(ours, X, y), (peer, X, y)], repeat)
                same = (a.C_, a.noise_level_) == (b.best_params_["C"],
                                                   b.best_params_["noise_level"])
                diff = np.max(np.abs(a.cv_results_["mean_test_score"]
                                     - b.cv_results_["mean_test_score"]))
                lines.append(f"| {name} | {model} | {grid_name} | {n_jobs} | {t_ours:.2f} "
                             f"| {t_peer:.2f} | **{t_peer / t_ours:.2f}** | "
                             f"{'yes' if same else 'NO'} | {diff:.1e} |")
                print(lines[-1], flush=True)
    lines += ["", f"Machine: {os.cpu_count()} cores; Python {sys.version.split()[0]}; "
              f"best of {repeat}; ratio = GridSearchCV s / ours s (issue goal: >= 5)."]
    if not args.quick:
        out = Path(__file__).parent / "results" / "cv_path.txt"
        out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines[-1:]))


if __name__ == "__main__":
    main()
