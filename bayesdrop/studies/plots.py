"""Figures of the robustness studies."""

from __future__ import annotations

import numpy as np

__all__ = ["plot_study"]


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
    if title:
        ax.set_title(title)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return ax
