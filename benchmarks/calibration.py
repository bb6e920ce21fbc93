"""Do the intervals and probabilities mean what they say? (issue 43, item 2)

Run:  python benchmarks/calibration.py [--quick]

**Regression: coverage of 90 % predictive intervals.** ``DropoutSVR`` at its defaults
(``C=1``, ``noise_level=0.1``, ``epsilon=0.1``), posterior 2 chains x 500 draws; each data
set split at random into train 50 % / calibration 25 % / test 25 %, ``S`` splits:

* diabetes, raw target (std 77) and standardised target, ``X`` standardised;
* heavy-tailed synthetic: ``y = 3 x.beta + 3 t_3`` noise, 800 x 5.

Columns: the coverage of the test targets by the model's own predictive intervals
(``predict_interval``), by the calibrated ones (``calibrate=(X_cal, y_cal)``, split
conformal; issue goal 0.85-0.95) and by the split conformal interval of scikit-learn's
``LinearSVR`` (absolute residuals on the same calibration rows, a constant width -- the
usual conformal baseline), and the mean widths.

**Classification: calibration of the probabilities**, breast cancer and digits (10
classes), train 60 % / test 40 %, ``S`` splits, expected calibration error (15 bins of the
top-class probability) and Brier score on the test rows of: ``DropoutLogisticRegression``
(``C=1``, ``noise_level=0.1``) point ``predict_proba``; its posterior predictive
(``posterior_predictive_proba``, 2 x 500 draws); ``DropoutSVC``'s posterior predictive;
``CalibratedClassifierCV(LogisticRegression())`` and
``CalibratedClassifierCV(LinearSVC())`` (sigmoid, 5-fold, scikit-learn's defaults).

Results: ``benchmarks/results/calibration.txt`` and the reliability diagrams of the
classifiers' test rows pooled over the splits, ``robustness_calibration.png``.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

os.environ.setdefault("CI", "1")

import numpy as np
from sklearn.calibration import CalibratedClassifierCV
from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVC, LinearSVR

from bayesdrop import DropoutLogisticRegression, DropoutSVC, DropoutSVR
from bayesdrop.predictive import posterior_predictive_proba
from bayesdrop.studies import classification_metrics

PROB = 0.9


def regression_sets():
    X, y = load_diabetes(return_X_y=True)
    rng = np.random.default_rng(0)
    Xs = rng.normal(size=(800, 5))
    ys = 3.0 * Xs @ np.array([1.0, -1.0, 0.5, 0.0, 2.0]) + 3.0 * rng.standard_t(3, size=800)
    return [("diabetes, raw y", X, y, False), ("diabetes, standardised y", X, y, True),
            ("synthetic t3 noise, 800 x 5", Xs, ys, False)]


def covers(iv, y):
    return float(np.mean((iv[:, 0] <= y) & (y <= iv[:, 1])))


def regression(S, draws):
    rows = []
    for name, X, y, standardise in regression_sets():
        res = []
        for s in range(S):
            rng = np.random.default_rng(100 + s)
            perm = rng.permutation(X.shape[0])
            n = X.shape[0]
            tr, cal, te = perm[: n // 2], perm[n // 2: 3 * n // 4], perm[3 * n // 4:]
            sx = StandardScaler().fit(X[tr])
            Xtr, Xcal, Xte = sx.transform(X[tr]), sx.transform(X[cal]), sx.transform(X[te])
            mu, sd = (y[tr].mean(), y[tr].std()) if standardise else (0.0, 1.0)
            ytr, ycal, yte = (y[tr] - mu) / sd, (y[cal] - mu) / sd, (y[te] - mu) / sd
            reg = DropoutSVR().fit(Xtr, ytr)
            idata = reg.sample_posterior(Xtr, ytr, draws=draws, tune=draws // 2, chains=2,
                                         random_state=s, progressbar=False)
            _, own = reg.predict_interval(Xte, idata, prob=PROB)
            _, cal_iv = reg.predict_interval(Xte, idata, prob=PROB, calibrate=(Xcal, ycal))
            peer = LinearSVR(random_state=0, max_iter=100_000).fit(Xtr, ytr)
            r = np.abs(ycal - peer.predict(Xcal))
            q = np.sort(r)[int(np.ceil((r.size + 1) * PROB)) - 1]
            p = peer.predict(Xte)
            conf = np.column_stack([p - q, p + q])
            res.append([covers(own, yte), covers(cal_iv, yte), covers(conf, yte),
                        np.mean(own[:, 1] - own[:, 0]) * sd,
                        np.mean(cal_iv[:, 1] - cal_iv[:, 0]) * sd,
                        np.mean(conf[:, 1] - conf[:, 0]) * sd])
        m = np.mean(res, axis=0)
        lo = np.min(res, axis=0)
        hi = np.max(res, axis=0)
        rows.append(f"| {name} | {m[0]:.3f} ({lo[0]:.2f}-{hi[0]:.2f}) | **{m[1]:.3f}** "
                    f"({lo[1]:.2f}-{hi[1]:.2f}) | {m[2]:.3f} ({lo[2]:.2f}-{hi[2]:.2f}) | "
                    f"{m[3]:.3g} | {m[4]:.3g} | {m[5]:.3g} |")
        print(rows[-1], flush=True)
    return rows


def classification(S, draws, figure=None):
    X1, y1 = load_breast_cancer(return_X_y=True)
    X2, y2 = load_digits(return_X_y=True)
    rows, pooled = [], {}
    for name, X, y in (("breast cancer", X1, y1), ("digits, 10 classes", X2, y2)):
        res = {}
        pooled[name] = ({}, [])
        for s in range(S):
            rng = np.random.default_rng(200 + s)
            perm = rng.permutation(X.shape[0])
            k = int(0.6 * X.shape[0])
            tr, te = perm[:k], perm[k:]
            sx = StandardScaler().fit(X[tr])
            Xtr, Xte = sx.transform(X[tr]), sx.transform(X[te])
            classes = np.unique(y[tr])
            yte = np.searchsorted(classes, y[te])
            lr = DropoutLogisticRegression().fit(Xtr, y[tr])
            lr_post = lr.sample_posterior(Xtr, y[tr], draws=draws, tune=draws // 2, chains=2,
                                          random_state=s, progressbar=False)
            svc = DropoutSVC().fit(Xtr, y[tr])
            svc_post = svc.sample_posterior(Xtr, y[tr], draws=draws, tune=draws // 2,
                                            chains=2, random_state=s, progressbar=False)
            probas = {
                "DropoutLogisticRegression predict_proba": lr.predict_proba(Xte),
                "DropoutLogisticRegression posterior predictive":
                    posterior_predictive_proba(lr_post, Xte),
                "DropoutSVC posterior predictive": posterior_predictive_proba(svc_post, Xte),
                "CalibratedClassifierCV(LogisticRegression())": CalibratedClassifierCV(
                    LogisticRegression(max_iter=1000)).fit(Xtr, y[tr]).predict_proba(Xte),
                "CalibratedClassifierCV(LinearSVC())": CalibratedClassifierCV(
                    LinearSVC()).fit(Xtr, y[tr]).predict_proba(Xte),
            }
            for key, p in probas.items():
                met = classification_metrics(p, yte)
                res.setdefault(key, []).append([met["error"], met["ece"], met["brier"]])
                pooled[name][0].setdefault(key, []).append(p)
            pooled[name][1].append(yte)
        for key, vals in res.items():
            m = np.mean(vals, axis=0)
            rows.append(f"| {name} | {key} | {m[0]:.3f} | **{m[1]:.3f}** | {m[2]:.4f} |")
            print(rows[-1], flush=True)
    if figure is not None:
        reliability_figure(pooled, figure)
    return rows


def reliability_figure(pooled, path):
    """Reliability diagrams of the test rows pooled over the splits, one panel per data
    set (:func:`bayesdrop.studies.plots.reliability_diagram`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bayesdrop.studies.plots import reliability_diagram

    fig, axes = plt.subplots(1, len(pooled), figsize=(6 * len(pooled), 5.5))
    for ax, (name, (probas, ys)) in zip(np.atleast_1d(axes), pooled.items()):
        short = {key.replace("DropoutLogisticRegression", "Dropout-LR")
                 .replace("DropoutSVC", "Dropout-SVM")
                 .replace("CalibratedClassifierCV", "Calibrated"): np.vstack(p)
                 for key, p in probas.items()}
        reliability_diagram(short, np.concatenate(ys), 10, ax=ax,
                            title=f"{name} (test rows of all splits)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    warnings.simplefilter("ignore", ConvergenceWarning)
    warnings.filterwarnings("ignore", message=".*R-hat")  # the quick run's short chains
    S, draws = (2, 100) if args.quick else (10, 500)
    lines = [f"Regression: coverage of {PROB:.0%} intervals on the test rows, mean over {S} "
             "random splits (min-max); widths in the units of the raw target", "",
             "| data | model's own | calibrated (ours) | conformal LinearSVR | "
             "width own | width calibrated | width conformal |",
             "|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    lines += regression(S, draws)
    lines += ["", f"Classification: mean over {S} random splits, test rows", "",
              "| data | probabilities | error | ECE (15 bins) | Brier |", "|---|---|---|---|---|"]
    print("\n".join(lines[-4:]), flush=True)
    figure = None if args.quick else Path(__file__).parent / "results" / \
        "robustness_calibration.png"
    lines += classification(S, draws, figure)
    lines += ["", f"Machine: {os.cpu_count()} cores; Python {sys.version.split()[0]}."]
    if not args.quick:
        out = Path(__file__).parent / "results" / "calibration.txt"
        out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
