"""Figures of the robustness studies."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

__all__ = ["plot_study", "reliability_diagram"]


def _finish(ax, title):
    """The figures' common last touches: title, legend, light grid."""
    if title:
        ax.set_title(title)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return ax


def plot_study(df, x, y="test_error", *, hue="model", style=None, ax=None, title=None):
    """Line plot of a study table: ``y`` against ``x``, one line per ``hue`` value.

    Repeated rows (e.g. label-noise repeats) are averaged, with +-1 standard error bars.

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import pandas as pd
    >>> df = pd.DataFrame({"model": ["a", "a", "b", "b"], "rate": [0, 0.1, 0, 0.1],
    ...                    "test_error": [0.1, 0.2, 0.1, 0.3]})
    >>> ax = plot_study(df, "rate")
    >>> [t.get_text() for t in ax.get_legend().get_texts()]
    ['a', 'b']
    """
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    keys = [hue] + ([style] if style else [])
    for key, sub in df.groupby(keys, sort=False):
        g = sub.groupby(x)[y]
        mean, n = g.mean(), g.count()
        se = (g.std(ddof=1) / np.sqrt(n)).fillna(0.0)
        label = " / ".join(map(str, key)) if isinstance(key, tuple) else str(key)
        ls = "--" if style and isinstance(key, tuple) and key[1] == "posterior" else "-"
        ax.errorbar(mean.index, mean.values, yerr=se.values, label=label, marker="o",
                    ms=3, capsize=2, linestyle=ls)
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    return _finish(ax, title)


def reliability_diagram(probas, y_idx, n_bins=10, *, strategy="uniform", kind="auto",
                        ax=None, title=None):
    """Reliability diagram: mean predicted probability against observed frequency per
    bin (:func:`bayesdrop.studies.robustness.calibration_table`), one line per model,
    with the diagonal of perfect calibration and each model's expected calibration error
    ``sum_b n_b / n |observed_b - predicted_b|`` in its legend entry.

    Parameters
    ----------
    probas : dict of str to ndarray of shape (n_samples, n_classes)
        Predicted probabilities of each model on the same examples.
    y_idx : ndarray of int, shape (n_samples,)
    n_bins, strategy, kind
        As in :func:`~bayesdrop.studies.robustness.calibration_table`.

    Returns
    -------
    matplotlib.axes.Axes

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> p = np.array([0.2, 0.3, 0.7, 0.9])
    >>> ax = reliability_diagram({"model": np.column_stack([1 - p, p])},
    ...                          np.array([0, 1, 1, 1]), n_bins=2)
    >>> [t.get_text() for t in ax.get_legend().get_texts()]
    ['perfectly calibrated', 'model (ECE 0.225)']
    """
    import matplotlib.pyplot as plt

    from .robustness import calibration_table

    if not isinstance(probas, Mapping) or not probas:
        raise TypeError("probas must be a non-empty dict of model name to predicted "
                        f"probabilities, got {type(probas).__name__}")
    if ax is None:
        _, ax = plt.subplots(figsize=(4.5, 4.5))
    ax.plot([0, 1], [0, 1], color="0.6", linestyle=":", label="perfectly calibrated")
    label_kind = None
    for name, proba in probas.items():
        table = calibration_table(proba, y_idx, n_bins, strategy=strategy, kind=kind)
        ece = float(np.sum(table["count"] * np.abs(table["gap"])) / table["count"].sum())
        ax.plot(table["mean_predicted"], table["observed"], marker="o", ms=4,
                label=f"{name} (ECE {ece:.3f})")
        label_kind = kind if kind != "auto" else (
            "positive" if np.shape(proba)[1] == 2 else "confidence")
    if label_kind == "positive":
        ax.set_xlabel("mean predicted probability of the positive class")
        ax.set_ylabel("fraction of positives")
    else:
        ax.set_xlabel("mean confidence (top-class probability)")
        ax.set_ylabel("accuracy")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    return _finish(ax, title)
