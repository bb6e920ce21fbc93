"""The main job: what the library is for, in well under a minute.

``python -m bayesdrop demo`` fits Dropout-LR at ``q > 0`` on the breast-cancer data (one
solver call), samples its pseudo-posterior with the Gibbs sampler (4 chains), prints the
ArviZ summary (R-hat, bulk/tail ESS) and the mode check, and saves a figure: posteriors of
a few weights with the point estimate marked, and -- on the ten-class digits -- test
accuracy when pixels are deleted at test time, for the dropout model and the clean
(``q = 0``) one: the point estimate's, the posterior predictive's (the class of largest
posterior predictive probability) and the 5-95% range of single posterior draws'.
``python -m bayesdrop table`` prints a table of fits (three estimators, several noise
levels).
"""

from __future__ import annotations

import time
import warnings

import numpy as np
from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from ._arviz import ConvergenceWarning
from .estimators import DropoutLogisticRegression, DropoutSVC, DropoutSVR

__all__ = ["run_main", "run_demo"]

#: test-time deletion fractions of the robustness panel
DELETION = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7)
#: posterior draws per chain (2 chains) of the robustness models
DELETION_DRAWS = 250


def _accuracy_under_deletion(clf, idata, X_test, y_test, random_state):
    """Per deletion fraction (the same deleted copies for every draw): the point
    estimate's accuracy, the posterior predictive's (the class of largest
    :func:`~bayesdrop.predictive.posterior_predictive_proba`), and the 5%/50%/95%
    quantiles of the accuracy of single posterior draws."""
    from .predictive import decision_draws, predictive_proba_of_scores
    from .studies.robustness import delete_features

    rows = []
    rng = np.random.default_rng(random_state)
    for fraction in DELETION:
        Xd = delete_features(X_test, fraction, rng)
        point = clf.score(Xd, y_test)
        scores = decision_draws(idata, Xd)  # (chain, draw, n[, class])
        proba = predictive_proba_of_scores(idata, scores)
        predictive = np.mean(clf.classes_[np.argmax(proba, axis=1)] == y_test)
        if scores.ndim == 3:
            pred = clf.classes_[(scores > 0).astype(int)]
        else:
            pred = clf.classes_[np.argmax(scores, axis=-1)]
        acc = (pred == y_test).mean(axis=-1).ravel()
        rows.append((fraction, point, predictive, *np.quantile(acc, [0.05, 0.5, 0.95])))
    return np.array(rows)


def run_main(out="bayesdrop_demo.png", *, noise_level=0.2, C=0.1, draws=1000, chains=4,
             random_state=0, file=None, progressbar=False):
    """Fit, sample, summarise and draw (see the module docstring).

    Parameters
    ----------
    out : str or None, default="bayesdrop_demo.png"
        Where to save the figure (None: no figure).
    noise_level : float, default=0.2
        Dropout rate of the model.
    C : float, default=0.1
    draws, chains : int
    random_state : int
    file : file-like, optional
        Where to print (default stdout).
    progressbar : bool, default=False

    Returns
    -------
    dict
        ``estimator``, ``idata``, ``summary`` (ArviZ), ``mode_check``, ``deletion``
        (rows: fraction, point accuracy, 5%/50%/95% posterior accuracy) for the dropout
        and the clean model, ``seconds``.
    """
    from . import diagnostics
    from ._arviz import summary_stats
    from .studies.datasets import load_breast_cancer as load

    start = time.perf_counter()
    X, y = load()
    names = [str(n) for n in load_breast_cancer().feature_names]
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, stratify=y,
                                                        random_state=random_state)
    label = f"Dropout-LR (q={noise_level})"
    clf = DropoutLogisticRegression(C=C, noise_level=noise_level).fit(
        _frame(X_train, names), y_train)
    t0 = time.perf_counter()
    idata = clf.sample_posterior(_frame(X_train, names), y_train, draws=draws, chains=chains,
                                 random_state=random_state, progressbar=progressbar)
    t_sample = time.perf_counter() - t0
    # robustness: ten digits, features deleted at test time (OvR: ten posteriors per model)
    from .studies.datasets import load_digits as load_d

    Xd, yd = load_d()
    Xd_train, Xd_test, yd_train, yd_test = train_test_split(
        Xd, yd, test_size=0.3, stratify=yd, random_state=random_state)
    out_rows = {}
    for name, q in ((f"Dropout-LR (q={noise_level})", noise_level), ("LR (q=0)", 0.0)):
        model = DropoutLogisticRegression(C=1.0, noise_level=q).fit(Xd_train, yd_train)
        with warnings.catch_warnings():
            # short chains on purpose: they only draw the accuracy bands (640 weights,
            # some with ESS below ArviZ's 100 per chain)
            warnings.simplefilter("ignore", ConvergenceWarning)
            post = model.sample_posterior(Xd_train, yd_train, draws=DELETION_DRAWS, tune=100,
                                          chains=2, random_state=random_state,
                                          progressbar=progressbar, log_likelihood=False)
        out_rows[name] = _accuracy_under_deletion(model, post, Xd_test, yd_test,
                                                  random_state)
    print(f"breast cancer: {X_train.shape[0]} training / {X_test.shape[0]} test examples, "
          f"{X.shape[1]} features", file=file)
    print(f"{label}, C={C}: fitted by {clf.solver_[0]} in {clf.n_iter_[0]} steps "
          f"({1e3 * clf.fit_time_:.0f} ms); test accuracy {clf.score(_frame(X_test, names), y_test):.3f}",
          file=file)
    print(f"Gibbs sampler: {chains} chains x {draws} draws in {t_sample:.1f} s "
          f"(wall, {idata.posterior.attrs['tuning_steps']} tuning sweeps per chain)\n",
          file=file)
    summary = summary_stats(idata, var_names=["intercept", "coef"])
    biggest = np.argsort(-np.abs(clf.coef_[0]))[:6]
    rows = ["intercept"] + [f"coef[{names[j]}]" for j in biggest]
    cols = ["mean", "sd", "hdi_3%", "hdi_97%", "ess_bulk", "ess_tail", "r_hat"]
    print("ArviZ summary (intercept and the six largest weights):", file=file)
    print(summary.loc[rows, cols].round(3).to_string(), file=file)
    print(f"all {len(summary)} parameters: max r_hat {summary['r_hat'].max():.3f}, "
          f"min ess_bulk {summary['ess_bulk'].min():.0f}, "
          f"min ess_tail {summary['ess_tail'].min():.0f}\n", file=file)
    mode_check = diagnostics.check_mode(idata, clf)
    print("Mode check (no draw above the point estimate's -J):", file=file)
    print(mode_check.round(3).to_string(), "\n", file=file)
    print("Digits (10 classes, C=1), test accuracy when a fraction of the pixels is deleted "
          "at test time\n(point estimate; posterior predictive; single posterior draws: "
          f"median [5%, 95%] over {2 * DELETION_DRAWS} draws):", file=file)
    header = f"{'deleted':>8} " + " ".join(f"{k:>39}" for k in out_rows)
    print(header, file=file)
    for i, fraction in enumerate(DELETION):
        cells = []
        for rows_k in out_rows.values():
            _, point, predictive, lo, med, hi = rows_k[i]
            cells.append(f"{point:.3f}; {predictive:.3f}; {med:.3f} [{lo:.3f}, {hi:.3f}]"
                         .rjust(39))
        print(f"{fraction:>8.1f} " + " ".join(cells), file=file)
    if out is not None:
        _figure(out, idata, clf, names, biggest[:4], out_rows)
        print(f"\nfigure: {out}", file=file)
    seconds = time.perf_counter() - start
    print(f"total {seconds:.1f} s", file=file)
    return {"estimator": clf, "idata": idata, "summary": summary, "mode_check": mode_check,
            "deletion": out_rows, "seconds": seconds}


def _frame(X, names):
    import pandas as pd

    return pd.DataFrame(X, columns=list(names))


def _figure(path, idata, clf, names, features, deletion):
    import matplotlib

    if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline"):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(12, 6.5), layout="constrained")
    grid = fig.add_gridspec(2, 4)
    coef = idata.posterior["coef"]
    for i, j in enumerate(features):
        ax = fig.add_subplot(grid[0, i])
        values = coef.sel(feature=names[j]).values.ravel()
        ax.hist(values, bins=40, density=True, color="C0", alpha=0.7)
        ax.axvline(clf.coef_[0, j], color="C3", linestyle="--", label="point estimate")
        lo, hi = np.quantile(values, [0.05, 0.95])
        ax.axvspan(lo, hi, color="C0", alpha=0.1, label="90% interval")
        ax.set_title(str(names[j]), fontsize="medium")
        ax.set_yticks([])
        if i == 0:
            ax.legend(fontsize="small", loc="upper left")
    ax = fig.add_subplot(grid[1, :])
    for k, (label, rows) in enumerate(deletion.items()):
        ax.fill_between(rows[:, 0], rows[:, 3], rows[:, 5], color=f"C{k}", alpha=0.15,
                        label=f"{label}: single posterior draws, 5-95%")
        ax.plot(rows[:, 0], rows[:, 1], "o-", color=f"C{k}", label=f"{label}: point estimate")
        ax.plot(rows[:, 0], rows[:, 2], "s--", color=f"C{k}", alpha=0.8,
                label=f"{label}: posterior predictive")
    ax.set_xlabel("fraction of pixels deleted at test time (digits, 10 classes)")
    ax.set_ylabel("test accuracy")
    ax.legend(fontsize="small", loc="lower left")
    ax.grid(alpha=0.3)
    fig.suptitle("bayesdrop: posteriors of the largest Dropout-LR weights on breast cancer "
                 "(top); accuracy on digits with deleted pixels (bottom)")
    fig.savefig(path, dpi=100)
    plt.close(fig)


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
