"""GridSearchCV over DropoutSVC with n_jobs=1 and n_jobs=2 (issue 16, item 7).

Breast cancer (569 x 30, standardised), C x noise_level = 4 x 6, 5-fold CV: 120 fits per
search. Each search is timed with ``time.perf_counter`` around ``GridSearchCV.fit``; the
n_jobs=2 search is run twice -- the first pays joblib's (loky) worker start-up, the second
reuses the workers. Writes benchmarks/results/gridsearch.txt.
"""

import time
from pathlib import Path

from sklearn.model_selection import GridSearchCV

from bayesdrop import DropoutSVC
from bayesdrop.studies.datasets import load_breast_cancer


def main():
    X, y = load_breast_cancer()
    grid = {"C": [0.01, 0.1, 1.0, 10.0], "noise_level": [0.0, 0.1, 0.3, 0.5, 0.7, 0.9]}
    lines = ["| search | n_jobs | seconds (120 fits) |", "|---|---|---|"]
    for label, n_jobs in [("first (this process warm)", 1), ("first with workers", 2),
                          ("second with workers (reused)", 2), ("again", 1)]:
        t = time.perf_counter()
        GridSearchCV(DropoutSVC(), grid, cv=5, n_jobs=n_jobs).fit(X, y)
        lines.append(f"| {label} | {n_jobs} | {time.perf_counter() - t:.2f} |")
        print(lines[-1], flush=True)
    out = Path(__file__).parent / "results" / "gridsearch.txt"
    out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
