"""Evidence for the default noise level: 5-fold cross-validated accuracy of the dropout
classifiers at C = 1 (the default) over a grid of dropout rates q, on the datasets a
new user tries first (standardised features; newsgroups as tf-idf-like counts).

Run: python benchmarks/defaults.py  (a few minutes on 2 cores); the table is written to
benchmarks/results/defaults.txt.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, load_wine
from sklearn.model_selection import StratifiedKFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from bayesdrop import DropoutLogisticRegression, DropoutSVC

LEVELS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5)


def datasets():
    for name, loader in [("breast cancer", load_breast_cancer), ("digits", load_digits),
                         ("iris", load_iris), ("wine", load_wine)]:
        X, y = loader(return_X_y=True)
        yield name, X, y, True
    try:
        from bayesdrop.studies.datasets import load_newsgroups

        X, y = load_newsgroups()
        yield "newsgroups (sparse)", X, y, False
    except Exception as exc:  # pragma: no cover - data missing
        print(f"newsgroups skipped: {exc}", file=sys.stderr)


def main():
    lines = ["5-fold stratified CV accuracy (mean over folds), C = 1, noise='dropout'",
             "", "| data | model | " + " | ".join(f"q={q}" for q in LEVELS) + " | best |",
             "|---|---|" + "---|" * (len(LEVELS) + 1)]
    best_counts = {q: 0 for q in LEVELS}
    regrets = []
    cv = StratifiedKFold(5, shuffle=True, random_state=0)
    start = time.perf_counter()
    for name, X, y, scale in datasets():
        for Est in (DropoutSVC, DropoutLogisticRegression):
            accs = []
            for q in LEVELS:
                est = Est(noise_level=q)
                model = make_pipeline(StandardScaler(), est) if scale else est
                accs.append(cross_val_score(model, X, y, cv=cv).mean())
            best = LEVELS[int(np.argmax(accs))]
            regrets.append(max(accs) - np.array(accs))
            best_counts[best] += 1
            lines.append(f"| {name} | {Est.__name__} | "
                         + " | ".join(f"{a:.3f}" for a in accs) + f" | {best} |")
            print(lines[-1], flush=True)
    regrets = np.array(regrets)
    lines += ["", "regret (best accuracy of the row minus this q's):", "",
              "| | " + " | ".join(f"q={q}" for q in LEVELS) + " |",
              "|---|" + "---|" * len(LEVELS),
              "| mean | " + " | ".join(f"{r:.4f}" for r in regrets.mean(0)) + " |",
              "| worst | " + " | ".join(f"{r:.4f}" for r in regrets.max(0)) + " |",
              "", "times best: " + ", ".join(f"q={q}: {c}" for q, c in best_counts.items()),
              f"total {time.perf_counter() - start:.0f} s"]
    out = Path(__file__).parent / "results" / "defaults.txt"
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines[-10:]))


if __name__ == "__main__":
    main()
