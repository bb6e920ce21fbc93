"""The main job: fit the three estimators on bundled real data at several noise levels.

Run with ``python -m bayesdrop demo`` (or the ``bayesdrop demo`` console script).
"""

from __future__ import annotations

import time

import numpy as np
from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from .estimators import DropoutLogisticRegression, DropoutSVC, DropoutSVR

__all__ = ["run_demo"]


def _datasets():
    Xc, yc = load_breast_cancer(return_X_y=True)
    Xd, yd = load_digits(return_X_y=True)
    Xr, yr = load_diabetes(return_X_y=True)
    yield "breast cancer", StandardScaler().fit_transform(Xc), yc, "clf"
    yield "digits (10 cl.)", Xd / 16.0, yd, "clf"
    yield "diabetes", StandardScaler().fit_transform(Xr), (yr - yr.mean()) / yr.std(), "reg"


def run_demo(noise_levels=(0.0, 0.2, 0.5), random_state=0, file=None):
    """Fit Dropout-SVM, Dropout-LR and Dropout-SVR at several dropout rates and print a table.

    Columns: held-out score (accuracy, or R^2 for regression), final objective ``J``
    (summed over one-vs-rest problems), solver iterations (summed) and fit time.

    Returns
    -------
    list of dict
        One row per fit.
    """
    rows = []
    header = f"{'data':<16} {'estimator':<26} {'q':>4} {'score':>7} {'J':>12} {'iter':>6} {'time[s]':>8}"
    print(header, file=file)
    print("-" * len(header), file=file)
    for name, X, y, kind in _datasets():
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=random_state)
        if kind == "clf":
            makers = [("DropoutSVC(C=0.1)", lambda q: DropoutSVC(C=0.1, noise_level=q)),
                      ("DropoutLogisticReg(C=0.1)",
                       lambda q: DropoutLogisticRegression(C=0.1, noise_level=q))]
        else:
            makers = [("DropoutSVR(C=1,eps=0.1)",
                       lambda q: DropoutSVR(C=1.0, epsilon=0.1, noise_level=q))]
        for label, make in makers:
            for q in noise_levels:
                start = time.perf_counter()
                est = make(q).fit(Xtr, ytr)
                elapsed = time.perf_counter() - start
                objective = est.objective_ if kind == "reg" else None
                J = float(objective[-1]) if objective is not None else float(
                    sum(h[-1] for h in est.objective_))
                row = {"data": name, "estimator": label, "q": q,
                       "score": est.score(Xte, yte), "J": J,
                       "n_iter": int(np.sum(est.n_iter_)), "time": elapsed}
                rows.append(row)
                print(f"{name:<16} {label:<26} {q:>4.1f} {row['score']:>7.3f} "
                      f"{J:>12.4f} {row['n_iter']:>6d} {elapsed:>8.3f}", file=file)
    return rows
