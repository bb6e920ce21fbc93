"""Robustness studies (issue 5): nightmare at test time, label noise, newsgroups, uncertainty.

Usage::

    python benchmarks/robustness.py nightmare   [--n-train 60000] [--quick]
    python benchmarks/robustness.py labelnoise  [--quick]
    python benchmarks/robustness.py newsgroups  [--quick]
    python benchmarks/robustness.py uncertainty [--quick]
    python benchmarks/robustness.py rarefeatures [--quick]
    python benchmarks/robustness.py combine --inputs a.csv b.csv --tag _60k

``combine`` joins nightmare tables of runs over different ``--models`` (the splits and
deletion masks depend only on the seed, not on the models).

Each study writes ``benchmarks/results/robustness_<study>.csv`` and ``.png`` (``--quick``
writes ``..._quick`` files to a temporary directory unless ``--out`` is given) and prints
its table. The hyper-parameters are chosen on a validation split of the training data
under the same condition as the test (the papers' protocol); see
:mod:`bayesdrop.studies`.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.svm import LinearSVC  # noqa: E402

from bayesdrop import (  # noqa: E402
    DropoutLogisticRegression,
    DropoutSVC,
    InvariantSVC,
    MCFLogisticRegression,
    MCFQuadraticClassifier,
    TLogisticRegression,
    WagerDropoutLogisticRegression,
)
from bayesdrop.studies.datasets import (  # noqa: E402
    load_digits,
    load_fashion_mnist,
    load_newsgroups,
    make_long_servedio,
    make_mease_wyner,
)
from bayesdrop.studies import (  # noqa: E402
    grid,
    label_noise_study,
    nightmare_at_test_time,
    plot_study,
    uncertainty_study,
)

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def _save(df, fig, name, out):
    os.makedirs(out, exist_ok=True)
    csv = os.path.join(out, f"robustness_{name}.csv")
    df.to_csv(csv, index=False)
    fig.tight_layout()
    fig.savefig(os.path.join(out, f"robustness_{name}.png"), dpi=120)
    plt.close(fig)
    print(f"wrote {csv} (+ .png)")


def nightmare(args):
    """Fashion-MNIST, linear one-vs-rest models, test features deleted at random."""
    try:
        Xtr, ytr, Xte, yte = load_fashion_mnist()
        data = "fashion"
    except FileNotFoundError as err:
        print(f"Fashion-MNIST unavailable ({err}); using scikit-learn digits instead")
        X, y = load_digits()
        Xtr, ytr, Xte, yte = X[:1200], y[:1200], X[1200:], y[1200:]
        data = "digits"
    rng = np.random.default_rng(0)
    n_train = min(args.n_train, Xtr.shape[0])
    if args.quick:
        n_train = min(n_train, 600)
        Xte, yte = Xte[:500], yte[:500]
    if n_train < Xtr.shape[0]:
        idx = np.sort(rng.choice(Xtr.shape[0], size=n_train, replace=False))
        Xtr, ytr = Xtr[idx], ytr[idx]
    qs = args.q or [0.2, 0.5, 0.8]
    tol = 1e-5
    models = {
        "Dropout-SVM": grid(DropoutSVC(C=args.C, tol=tol), {"noise_level": qs}),
        "Dropout-LR": grid(DropoutLogisticRegression(C=args.C, tol=tol), {"noise_level": qs}),
        "SVM (q=0)": DropoutSVC(C=args.C, noise_level=0.0, tol=tol),
        # the same hinge-loss SVM by liblinear's dual coordinate descent (intercept
        # penalised): IRLS needs hundreds of iterations per class without noise at 60k
        "SVM (liblinear)": LinearSVC(C=args.C, loss="hinge", tol=1e-4, max_iter=10000,
                                     random_state=0),
        "MCF-quadratic": grid(MCFQuadraticClassifier(C=args.C), {"noise_level": qs}),
        "MCF-logistic": grid(MCFLogisticRegression(C=args.C, tol=1e-4), {"noise_level": qs}),
        "FDROP": grid(InvariantSVC(C=args.C, tol=1e-2, max_iter=args.fdrop_iter,
                                   solver=args.fdrop_solver, random_state=0),
                      {"n_changes": [20, 100] if data == "fashion" else [4, 12]}),
    }
    if args.models:
        models = {k: v for k, v in models.items() if k in args.models}
    print(f"nightmare at test time on {data}: {Xtr.shape[0]} train, {Xte.shape[0]} test, "
          f"C = {args.C}")
    t0 = time.perf_counter()
    df = nightmare_at_test_time(models, Xtr, ytr, Xte, yte, refit=False, random_state=0,
                                verbose=True)
    df.insert(0, "data", data)
    df["n_train"] = Xtr.shape[0]
    print(df.pivot(index="deletion", columns="model", values="test_error").round(3).to_string())
    print(f"total {time.perf_counter() - t0:.0f} s")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    plot_study(df, "deletion", ax=ax,
               title=f"Nightmare at test time ({data}, {Xtr.shape[0]} training images)")
    _save(df, fig, "nightmare" + args.tag + ("_quick" if args.quick else ""), args.out)


def combine(args):
    """Join nightmare tables of runs with different ``--models`` (same data, size, seed)."""
    df = pd.concat([pd.read_csv(path) for path in args.inputs], ignore_index=True)
    for col in ("data", "n_train"):
        if df[col].nunique() != 1:
            raise SystemExit(f"the inputs differ in {col}: {sorted(df[col].unique())}")
    if df.duplicated(["model", "deletion"]).any():
        raise SystemExit("a model appears in more than one input")
    print(df.pivot(index="deletion", columns="model", values="test_error").round(3).to_string())
    fig, ax = plt.subplots(figsize=(7, 4.5))
    plot_study(df, "deletion", ax=ax, title=f"Nightmare at test time ({df.data[0]}, "
               f"{df.n_train[0]} training images)")
    _save(df, fig, "nightmare" + args.tag, args.out)


def labelnoise(args):
    """Long-Servedio and Mease-Wyner with 0 / 10 / 20% flipped training labels."""
    n_train, n_test, reps = (200, 500, 2) if args.quick else (1000, 5000, 5)
    Cs = [0.1, 1.0, 10.0]
    models = {
        "LR": grid(LogisticRegression(max_iter=5000), {"C": Cs}),
        "t-logistic (t=1.9)": grid(TLogisticRegression(t=1.9), {"C": Cs}),
        "Dropout-SVM": grid(DropoutSVC(tol=1e-6), {"C": Cs, "noise_level": [0.1, 0.3, 0.5]}),
        "Dropout-LR": grid(DropoutLogisticRegression(tol=1e-6),
                           {"C": Cs, "noise_level": [0.1, 0.3, 0.5]}),
    }
    frames = []
    for name, make in (("Long-Servedio", lambda n, s: make_long_servedio(n, random_state=s)[:2]),
                       ("Mease-Wyner", lambda n, s: make_mease_wyner(n, random_state=s))):
        X, y = make(n_train, 0)
        Xt, yt = make(n_test, 1)
        t0 = time.perf_counter()
        df = label_noise_study(models, X, y, Xt, yt, rates=(0.0, 0.1, 0.2), n_repeats=reps,
                               random_state=0)
        df.insert(0, "data", name)
        frames.append(df)
        print(f"\n{name} ({n_train} train, {n_test} test, {reps} repeats, "
              f"{time.perf_counter() - t0:.0f} s): mean test error")
        print(df.groupby(["rate", "model"]).test_error.agg(["mean", "sem"]).unstack()
              .round(3).to_string())
    df = pd.concat(frames, ignore_index=True)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, (name, sub) in zip(axes, df.groupby("data", sort=False)):
        plot_study(sub, "rate", ax=ax, title=f"{name}: label noise")
    _save(df, fig, "labelnoise" + ("_quick" if args.quick else ""), args.out)


def newsgroups(args):
    """Atheism vs christian, 2-fold split, hyper-parameters chosen within each fold."""
    X, y = load_newsgroups()
    rng = np.random.default_rng(0)
    perm = rng.permutation(X.shape[0])
    if args.quick:
        perm = perm[:300]
    half = len(perm) // 2
    folds = [(perm[:half], perm[half:]), (perm[half:], perm[:half])]
    Cs = [0.1, 1.0] if args.quick else [0.03, 0.3, 3.0]
    qs = [0.5, 0.8]
    models = {
        "Dropout-LR": grid(DropoutLogisticRegression(tol=1e-5), {"C": Cs, "noise_level": qs}),
        "Dropout-SVM": grid(DropoutSVC(tol=1e-5), {"C": Cs, "noise_level": qs}),
        "Wager quadratic": grid(WagerDropoutLogisticRegression(tol=1e-5),
                                {"C": Cs, "noise_level": qs}),
        "LR (L2)": grid(LogisticRegression(max_iter=10000), {"C": Cs + [30.0]}),
    }
    frames = []
    for k, (tr, te) in enumerate(folds):
        t0 = time.perf_counter()
        df = nightmare_at_test_time(models, X[tr], y[tr], X[te], y[te], deletion=[0.0],
                                    refit=True, random_state=k)
        df["fold"] = k
        df["seconds"] = time.perf_counter() - t0
        frames.append(df)
    df = pd.concat(frames, ignore_index=True)
    df["accuracy"] = 1 - df.test_error
    print(df[["fold", "model", "selected", "accuracy"]].to_string(index=False))
    summary = df.groupby("model", sort=False).accuracy.mean()
    print("\nmean accuracy over the 2 folds:\n" + summary.round(4).to_string())
    fig, ax = plt.subplots(figsize=(6, 3.5))
    summary.plot.barh(ax=ax, xlim=(0.7, 1.0), color="C0")
    ax.set_xlabel("accuracy (2-fold mean)")
    ax.set_title("20 newsgroups: atheism vs christian")
    _save(df, fig, "newsgroups" + ("_quick" if args.quick else ""), args.out)


def uncertainty(args):
    """Digits: IRLS point estimate vs posterior predictive under deletion and label noise."""
    X, y = load_digits()
    Xtr, ytr, Xte, yte = X[:1200], y[:1200], X[1200:], y[1200:]
    draws, tune = (100, 50) if args.quick else (1000, 300)
    if args.quick:
        sel_tr, sel_te = ytr < 3, yte < 3
        Xtr, ytr, Xte, yte = Xtr[sel_tr], ytr[sel_tr], Xte[sel_te], yte[sel_te]
    models = {"Dropout-LR (q=0.3)": DropoutLogisticRegression(C=0.3, noise_level=0.3),
              "Dropout-SVM (q=0.3)": DropoutSVC(C=0.3, noise_level=0.3),
              "LR (q=0)": DropoutLogisticRegression(C=0.3, noise_level=0.0)}
    frames = []
    for noise in (0.0, 0.2):
        t0 = time.perf_counter()
        frames.append(uncertainty_study(models, Xtr, ytr, Xte, yte, label_noise=noise,
                                        deletion=[0.0, 0.2, 0.4, 0.6, 0.8], draws=draws,
                                        tune=tune, chains=2, random_state=0))
        print(f"label noise {noise}: {time.perf_counter() - t0:.0f} s")
    df = pd.concat(frames, ignore_index=True)
    print(df.round(3).to_string(index=False))
    fig, axes = plt.subplots(2, 3, figsize=(14, 7))
    for row, (noise, sub) in zip(axes, df.groupby("label_noise")):
        for ax, metric in zip(row, ("error", "brier", "ece")):
            plot_study(sub, "deletion", metric, style="kind", ax=ax,
                       title=f"{metric}, label noise {noise:.0%}")
    _save(df, fig, "uncertainty" + ("_quick" if args.quick else ""), args.out)


def rarefeatures(args):
    """Wager et al.'s rare-but-useful features: accuracy where the signal is active / absent."""
    from sklearn.base import clone
    from sklearn.model_selection import train_test_split

    from bayesdrop.studies.datasets import make_rare_features

    n_train, n_test, reps = (200, 1000, 1) if args.quick else (1000, 10000, 3)
    Cs = [0.01, 0.1, 1.0]
    models = {
        "LR (L2)": grid(LogisticRegression(max_iter=5000), {"C": Cs}),
        "Dropout-LR": grid(DropoutLogisticRegression(tol=1e-6),
                           {"C": Cs, "noise_level": [0.3, 0.5, 0.8]}),
        "Wager quadratic": grid(WagerDropoutLogisticRegression(tol=1e-6),
                                {"C": Cs, "noise_level": [0.3, 0.5, 0.8]}),
        "Dropout-SVM": grid(DropoutSVC(tol=1e-6), {"C": Cs, "noise_level": [0.3, 0.5, 0.8]}),
    }
    rows = []
    for r in range(reps):
        X, y, _ = make_rare_features(n_train, random_state=2 * r)
        Xt, yt, signal = make_rare_features(n_test, random_state=2 * r + 1)
        fit_idx, val_idx = train_test_split(np.arange(n_train), test_size=0.25, stratify=y,
                                            random_state=r)
        for name, cands in models.items():
            errs = [np.mean(clone(c).fit(X[fit_idx], y[fit_idx]).predict(X[val_idx]) != y[val_idx])
                    for c in cands]
            best = clone(cands[int(np.argmin(errs))]).fit(X, y)
            correct = best.predict(Xt) == yt
            rows.append({"model": name, "repeat": r,
                         "selected": str({k: v for k, v in best.get_params().items()
                                          if k in ("C", "noise_level")}),
                         "acc_signal": correct[signal].mean(),
                         "acc_no_signal": correct[~signal].mean(),
                         "acc_all": correct.mean()})
    df = pd.DataFrame(rows)
    print(f"rare features ({n_train} train, {n_test} test, {reps} repeats): mean accuracy")
    print(df.groupby("model", sort=False)[["acc_signal", "acc_no_signal", "acc_all"]].mean()
          .round(3).to_string())
    fig, ax = plt.subplots(figsize=(6, 3.5))
    df.groupby("model", sort=False)[["acc_signal", "acc_no_signal"]].mean().plot.barh(
        ax=ax, xlim=(0.4, 1.0))
    ax.set_xlabel("test accuracy")
    ax.set_title("Rare but useful features (Wager et al. section 4.1)")
    _save(df, fig, "rarefeatures" + ("_quick" if args.quick else ""), args.out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("study", choices=["nightmare", "labelnoise", "newsgroups", "uncertainty",
                                          "rarefeatures", "combine"])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (as in CI)")
    parser.add_argument("--n-train", type=int, default=60000,
                        help="Fashion-MNIST training images (nightmare study)")
    parser.add_argument("--C", type=float, default=1.0, help="C of the nightmare study")
    parser.add_argument("--models", nargs="*", help="subset of the nightmare models")
    parser.add_argument("--q", type=float, nargs="+", help="dropout grid (nightmare study)")
    parser.add_argument("--tag", default="", help="suffix of the nightmare output names")
    parser.add_argument("--fdrop-iter", type=int, default=100,
                        help="BMRM iterations of FDROP (nightmare study)")
    parser.add_argument("--fdrop-solver", choices=["bmrm", "bcfw"], default="bmrm",
                        help="InvariantSVC solver (bcfw: faster to a coarse gap at large n)")
    parser.add_argument("--inputs", nargs="+", help="nightmare CSVs to join (combine)")
    parser.add_argument("--out", default=None, help="output directory")
    args = parser.parse_args(argv)
    if args.out is None:
        args.out = tempfile.mkdtemp() if args.quick else RESULTS
    {"nightmare": nightmare, "labelnoise": labelnoise, "newsgroups": newsgroups,
     "uncertainty": uncertainty, "rarefeatures": rarefeatures,
     "combine": combine}[args.study](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
