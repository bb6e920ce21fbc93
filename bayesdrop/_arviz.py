"""Every call into ArviZ lives here (the library targets the ArviZ 0.23 line).

Converts :class:`bayesdrop.samplers.gibbs.SamplerResult` objects (one per binary / one-vs-rest
problem) into :class:`arviz.InferenceData` and wraps the few ArviZ statistics the
diagnostics use, so that moving to ArviZ 1.x touches one module.
"""

from __future__ import annotations

import sys
import threading
import warnings

import numpy as np

from .samplers.ess import ESS_PER_CHAIN_MIN, ess_split, split_chains

__all__ = ["az", "prefetch", "to_inference_data", "summary_stats", "ess", "mcse", "rhat",
           "from_netcdf", "rank_diagnostics"]


#: the thread of :func:`prefetch`, once started
_prefetching = None


def prefetch():
    """Start importing ArviZ in a background thread (once; nothing if it is imported).

    The samplers call this when their compiled chains run without the GIL
    (``on_running`` of :func:`bayesdrop.samplers.sample`): the second or so that the
    import takes (matplotlib's pyplot with it), and a one-number InferenceData built
    once (xarray imports its array back-ends on first use: dask's, if installed, about
    0.25 s), then overlap the sampling instead of following it. :func:`_az` waits for
    the thread.
    """
    global _prefetching
    if _prefetching is None and "arviz" not in sys.modules:
        _prefetching = threading.Thread(target=_import_quietly,
                                        name="bayesdrop-arviz-import", daemon=True)
        _prefetching.start()


def _import_quietly():
    """:func:`_import` for the background thread: a failure is left to the foreground
    import of :func:`_az`, which raises it where the caller sees it."""
    try:
        _import(warm=True)
    except Exception:  # noqa: BLE001 - reported by _az's own import
        pass


def _import(warm=False):
    with warnings.catch_warnings():  # ArviZ 0.23 announces its 1.0 refactor on import
        warnings.simplefilter("ignore", FutureWarning)
        import arviz
        if warm:  # xarray imports its array back-ends (dask's, if installed) on first use
            arviz.from_dict(posterior={"x": np.zeros((1, 1))})


def _az():
    """ArviZ, imported on first use (it takes a second or two; ``import bayesdrop``
    does not pay for it), or by :func:`prefetch`'s thread."""
    if _prefetching is not None:
        _prefetching.join()  # never two catch_warnings blocks at once
    _import()
    import arviz

    return arviz


def __getattr__(name):
    """``bayesdrop._arviz.az`` is the ArviZ module, imported lazily."""
    if name == "az":
        return _az()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

AUGMENTATION_NAMES = {
    "hinge": ("u",),
    "epsilon_insensitive": ("u", "u_prime"),
    "logistic": ("lambda",),
}


def _stack_problems(arrays, multiclass):
    """Stack per-problem arrays along a class axis inserted after (chain, draw)."""
    if not multiclass:
        return arrays[0]
    return np.stack(arrays, axis=2)


def to_inference_data(results, *, loss, noise, fit_intercept, y, feature_names=None,
                      class_names=None, attrs=None, modes=None, mode_lp=None,
                      log_likelihood=None, example_index=None, kept=None):
    """Build the InferenceData of a sampled model.

    Parameters
    ----------
    results : list of SamplerResult
        One per binary problem (one-vs-rest: one per class).
    loss : Loss
    noise : NoiseModel
    fit_intercept : bool
    y : array-like of shape (n_samples,) or None
        Observed targets as the user gave them (class labels or reals); None for rows
        that stay on a cluster (no ``observed_data`` and no per-example groups).
    feature_names : sequence of str, optional
    class_names : sequence, optional
        Names of the one-vs-rest problems; None for a single (binary or regression)
        problem, which then has no ``class`` dimension.
    attrs : dict, optional
        Extra attributes (strings and numbers only, so that netCDF keeps them).
    modes : list of ndarray, optional
        The mode ``argmin J`` of each problem (where the chains started); stored with
        ``mode_lp`` (``-J`` there) as the group ``mode``.
    log_likelihood : ndarray of shape (chains, draws, n_samples), optional
        Pointwise log pseudo-likelihood (:func:`bayesdrop.posterior.pointwise_log_likelihood`),
        stored as ``log_likelihood["y"]`` for ``arviz.loo`` / ``waic`` / ``compare``.
    example_index : sequence of length n_samples, optional
        The ``example`` coordinate (e.g. a pandas index); default ``0 .. n_samples - 1``.
    kept : ndarray of int, optional
        Positions of the examples the sampler saw, when some were dropped (weight 0);
        their per-example results are NaN elsewhere.

    Returns
    -------
    arviz.InferenceData
        ``posterior``: ``coef`` (chain, draw, [class,] feature), ``intercept``
        (chain, draw, [class]) and, if stored, the augmentation traces;
        ``sample_stats``: ``lp = -J``; ``observed_data``: ``y``;
        ``augmentation_mean``: per chain and example, the posterior mean of each
        augmentation variable (``u``, ``u_prime`` or ``lambda``); ``mode`` (with
        ``modes``): ``coef``, ``intercept`` and ``lp`` at the mode of ``J``.
    """
    import xarray as xr

    multiclass = class_names is not None
    n_features = results[0].theta.shape[-1] - int(fit_intercept)
    # y=None: rows that stay on a cluster (dask): no observed_data, no per-example groups
    y = None if y is None else np.asarray(y)
    n_samples = 0 if y is None else y.shape[0]
    if feature_names is None:
        feature_names = [f"x{j}" for j in range(n_features)]
    feature_names = [str(f) for f in feature_names]
    cls = ["class"] if multiclass else []
    if example_index is None:
        example_index = np.arange(n_samples)
    example_index = np.asarray(example_index)
    if example_index.dtype.kind == "O":
        example_index = example_index.astype(str)
    coords = {
        "feature": feature_names,
        "example": example_index,
    }

    def full(arr, fill=np.nan):  # per-example array over the examples sampled -> all
        if kept is None:
            return arr
        out = np.full(arr.shape[:-1] + (n_samples,), fill)
        out[..., kept] = arr
        return out

    if multiclass:
        coords["class"] = [str(c) for c in class_names]
    theta = _stack_problems([r.theta for r in results], multiclass)
    post = {"coef": (("chain", "draw", *cls, "feature"), theta[..., :n_features])}
    if fit_intercept:
        post["intercept"] = (("chain", "draw", *cls), theta[..., n_features])
    names = AUGMENTATION_NAMES.get(loss.name, ())
    if results[0].augmentation is not None:
        for j, name in enumerate(names):
            trace = _stack_problems([r.augmentation[:, :, j] for r in results], multiclass)
            post[name] = (("chain", "draw", *cls, "example"), full(trace))
    n_chains, n_draws = theta.shape[:2]
    coords["chain"] = np.arange(n_chains)
    coords["draw"] = np.arange(n_draws)
    posterior = xr.Dataset(post, coords={k: v for k, v in coords.items() if k != "example"
                                         or results[0].augmentation is not None})
    lp = _stack_problems([r.lp for r in results], multiclass)
    sample_stats = xr.Dataset({"lp": (("chain", "draw", *cls), lp)},
                              coords={k: coords[k] for k in ("chain", "draw", *cls)})
    aug_mean = {}
    for j, name in enumerate(names if results[0].augmentation_mean is not None else ()):
        if multiclass:
            arr = np.stack([r.augmentation_mean[:, j] for r in results], axis=1)
        else:
            arr = results[0].augmentation_mean[:, j]
        aug_mean[name] = (("chain", *cls, "example"), full(arr))
    aug_coords = {k: coords[k] for k in ("chain", *cls, "example")}
    observed = None
    if y is not None:
        if y.dtype.kind == "O":
            y = y.astype(str)
        observed = xr.Dataset({"y": (("example",), y)}, coords={"example": coords["example"]})

    from ._version import __version__

    meta = {
        "inference_library": "bayesdrop",
        "inference_library_version": __version__,
        "created_at_library": "bayesdrop",
        "loss": loss.name,
        "C": float(loss.C),
        # labels in {-1, +1} or real targets (the squared loss serves both)
        "binary": int(bool(loss.binary)),
        "noise": noise.name,
        "noise_level": float(noise.level),
        "fit_intercept": int(bool(fit_intercept)),
        "tuning_steps": int(results[0].tune),
        "thin": int(results[0].thin),
        # wall-clock seconds (problems run one after the other, their chains in parallel)
        "sampling_time": float(sum(r.wall_time for r in results)),
        "tuning_time": float(sum(r.tune_time.max() for r in results)),
        "chain_seconds": float(sum(r.tune_time.sum() + r.draw_time.sum() for r in results)),
        "interrupted": int(any(r.interrupted for r in results)),
    }
    for key in ("margin", "epsilon"):
        if hasattr(loss, key):
            meta[key] = float(getattr(loss, key))
    if attrs:
        meta.update(attrs)
    groups = {
        "posterior": posterior,
        "sample_stats": sample_stats,
    }
    if observed is not None:
        groups["observed_data"] = observed
    if log_likelihood is not None:
        groups["log_likelihood"] = xr.Dataset(
            {"y": (("chain", "draw", "example"), full(np.asarray(log_likelihood), 0.0))},
            coords={k: coords[k] for k in ("chain", "draw", "example")})
    if aug_mean:
        groups["augmentation_mean"] = xr.Dataset(aug_mean, coords=aug_coords)
    if modes is not None:
        mode = np.array(modes) if multiclass else np.asarray(modes[0])
        lp_mode = np.array(mode_lp, dtype=float) if multiclass else float(mode_lp[0])
        mode_vars = {"coef": ((*cls, "feature"), mode[..., :n_features]),
                     "lp": (tuple(cls), lp_mode)}
        if fit_intercept:
            mode_vars["intercept"] = (tuple(cls), mode[..., n_features])
        groups["mode"] = xr.Dataset(mode_vars, coords={k: coords[k] for k in (*cls, "feature")})
    for ds in groups.values():
        ds.attrs.update(meta)
    return _az().InferenceData(**groups)


def with_posterior_predictive(idata, y_rep, example_index=None):
    """A copy of ``idata`` with the group ``posterior_predictive`` (``y``: chain, draw,
    example), as ``pymc.sample_posterior_predictive(..., extend_inferencedata=True)``."""
    import xarray as xr

    chains, draws, n = y_rep.shape
    if example_index is None:
        obs = idata.get("observed_data") if "observed_data" in idata.groups() else None
        if obs is not None and obs["y"].shape[0] == n:
            example_index = obs["example"].values
        else:
            example_index = np.arange(n)
    ds = xr.Dataset({"y": (("chain", "draw", "example"), y_rep)},
                    coords={"chain": np.arange(chains), "draw": np.arange(draws),
                            "example": np.asarray(example_index)})
    ds.attrs.update({k: v for k, v in idata.posterior.attrs.items()
                     if k in ("inference_library", "inference_library_version", "loss")})
    out = idata.copy()
    if "posterior_predictive" in out.groups():
        del out.posterior_predictive
    out.add_groups(posterior_predictive=ds)
    return out


class ConvergenceWarning(UserWarning):
    """A posterior whose R-hat or effective sample size is outside ArviZ's guidelines."""


def _average_ranks(flat):
    """Ranks 1..n of every row, ties given their average rank (``scipy.stats.rankdata``'s
    ``"average"``; an unstable sort suffices: tied values share one rank)."""
    n_rows, n = flat.shape
    order = np.argsort(flat, axis=1)
    ordered = np.take_along_axis(flat, order, axis=1)
    new = np.ones((n_rows, n), dtype=bool)
    new[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
    starts = np.flatnonzero(new.ravel())  # first position of every run of ties
    sizes = np.diff(np.append(starts, new.size))
    run_rank = (starts % n) + (sizes + 1) / 2.0  # average of the run's 1-based positions
    ranks = np.empty((n_rows, n))
    np.put_along_axis(ranks, order, run_rank[np.cumsum(new.ravel()) - 1].reshape(n_rows, n),
                      axis=1)
    return ranks


def _z_scale(x):
    """Rank-normalise each parameter over all its values (average ranks, Blom's 3/8)."""
    from scipy import special

    flat = x.reshape(x.shape[0], -1)
    rank = _average_ranks(flat)
    return special.ndtri((rank - 0.375) / (flat.shape[1] + 0.25)).reshape(x.shape)


def _rhat_split(z):
    """Potential scale reduction of already split chains, per parameter."""
    n = z.shape[2]
    between = n * np.var(np.mean(z, axis=2), axis=1, ddof=1)
    within = np.mean(np.var(z, axis=2, ddof=1), axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):  # constant draws: NaN, as ArviZ
        return np.sqrt((between / within + n - 1) / n)


def rank_diagnostics(values):
    """Rank-normalised split R-hat and bulk / tail ESS of every parameter at once.

    The statistics of Vehtari, Gelman, Simpson, Carpenter & Burkner (2021) exactly as
    ArviZ 0.23 computes them (``az.rhat``, ``az.ess(method="bulk" | "tail")``; the tests
    compare with ArviZ), vectorised over the parameters instead of one xarray call per
    parameter (31 parameters: 0.25 s in ArviZ, a few ms here):

    * ``r_hat = max(R(z(split)), R(z(|split - median|)))`` with
      ``R = sqrt(((n B / W) + n - 1) / n)`` over the split chains, ``z`` the normal
      scores of the average ranks ``(r - 3/8) / (S + 1/4)``;
    * ``ess_bulk = ESS(z(split))``; ``ess_tail = min`` of the ESS of the split
      indicators ``x <= q_0.05`` and ``x <= q_0.95`` (type-7 quantiles); ``ESS`` from
      FFT autocovariances with Geyer's initial positive and monotone sequences.

    Parameters
    ----------
    values : ndarray of shape (chains, draws, n_params)

    Returns
    -------
    r_hat, ess_bulk, ess_tail : ndarray of shape (n_params,)

    Examples
    --------
    >>> x = np.random.default_rng(0).normal(size=(4, 500, 3))
    >>> r, bulk, tail = rank_diagnostics(x)
    >>> bool(np.all(r < 1.01) and np.all(bulk > 1000))
    True
    """
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 3 or x.shape[0] < 2 or x.shape[1] < 4:
        raise ValueError("values must have shape (chains >= 2, draws >= 4, n_params), got "
                         f"{x.shape}")
    x = np.ascontiguousarray(x.transpose(2, 0, 1))  # (P, chains, draws): rows contiguous
    n_par = x.shape[0]
    split = split_chains(x)
    z = _z_scale(split)
    r_bulk = _rhat_split(z)
    folded = np.abs(split - np.median(split.reshape(n_par, -1), axis=1)[:, None, None])
    r_tail = _rhat_split(_z_scale(folded))
    ess_bulk = ess_split(z)
    q = np.quantile(x.reshape(n_par, -1), [0.05, 0.95], axis=1)
    ess_tail = np.minimum(ess_split(split_chains((x <= q[0][:, None, None]).astype(float))),
                          ess_split(split_chains((x <= q[1][:, None, None]).astype(float))))
    return np.maximum(r_bulk, r_tail), ess_bulk, ess_tail


#: thresholds of :func:`convergence_warning` (Vehtari et al. 2021, ArviZ's guidelines;
#: ``ESS_PER_CHAIN_MIN`` lives in :mod:`bayesdrop.samplers.ess`, whose tuning reads it)
RHAT_MAX = 1.01
#: parameters above which the check is skipped (its cost grows with their number)
CONVERGENCE_MAX_PARAMS = 5000


def convergence_warning(idata, var_names=("coef", "intercept"), stacklevel=3):
    """Warn (:class:`ConvergenceWarning`) when some parameter has rank-normalised split
    R-hat above 1.01 or bulk / tail ESS below 100 per chain, naming the parameters.

    Returns the list of flagged parameter names (empty when all pass, or when the check
    does not apply: one chain, or more than :data:`CONVERGENCE_MAX_PARAMS` parameters).

    Examples
    --------
    >>> import warnings
    >>> from bayesdrop import DropoutSVC
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 3)); y = np.sign(X[:, 0] + 0.5 * rng.normal(size=60))
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     idata = DropoutSVC().sample_posterior(X, y, draws=30, tune=5, chains=2,
    ...                                           random_state=0, progressbar=False)
    >>> any(issubclass(w.category, ConvergenceWarning) for w in caught)
    True
    """
    post = idata.posterior
    names = [v for v in var_names if v in post]
    n_chains = post.sizes["chain"]
    n_params = sum(int(np.prod([post.sizes[d] for d in post[v].dims[2:]])) for v in names)
    if n_chains < 2 or n_params > CONVERGENCE_MAX_PARAMS or not names:
        return []
    n_draws = post.sizes["draw"]
    if n_draws < 4:
        return []
    floor = ESS_PER_CHAIN_MIN * n_chains
    flagged = []
    for v in names:
        vals = np.asarray(post[v].values, dtype=np.float64).reshape(n_chains, n_draws, -1)
        r, eb, et = rank_diagnostics(vals)
        labels = _flat_labels(post[v])
        for k, label in enumerate(labels):
            if not (r[k] <= RHAT_MAX and eb[k] >= floor and et[k] >= floor):
                flagged.append(f"{label} (r_hat {r[k]:.3f}, ess_bulk {eb[k]:.0f}, "
                               f"ess_tail {et[k]:.0f})")
    if flagged:
        shown = "; ".join(flagged[:8]) + ("; ..." if len(flagged) > 8 else "")
        warnings.warn(f"{len(flagged)} of {n_params} parameters miss R-hat <= {RHAT_MAX} or "
                      f"ESS >= {ESS_PER_CHAIN_MIN} per chain ({floor} for {n_chains} "
                      f"chains): {shown}. Draw more (draws=, tune=) or thin less.",
                      ConvergenceWarning, stacklevel=stacklevel)
    return flagged


def _flat_labels(da):
    """``name[coord, ...]`` of every element of a (chain, draw, ...) variable."""
    dims = da.dims[2:]
    if not dims:
        return [da.name]
    grids = np.meshgrid(*[da[d].values for d in dims], indexing="ij")
    return [f"{da.name}[{', '.join(str(g.ravel()[k]) for g in grids)}]"
            for k in range(grids[0].size)]


def summary_stats(idata, var_names=None, hdi_prob=0.94):
    """``arviz.summary`` of the posterior (mean, sd, HDI, MCSE, ESS, R-hat)."""
    return _az().summary(idata, var_names=var_names, hdi_prob=hdi_prob, kind="all",
                      round_to="none")


def ess(values, method="bulk"):
    """Effective sample size of an array of shape (chain, draw)."""
    return float(np.squeeze(_az().ess(np.asarray(values), method=method)))


def min_ess(idata, var_name="coef", method="bulk"):
    """Smallest ESS over the components of one posterior variable."""
    return float(_az().ess(idata, var_names=[var_name], method=method)[var_name].min())


def mcse(values, method="mean", prob=None):
    """Monte Carlo standard error of an array of shape (chain, draw).

    ArviZ 0.23's numba path of ``mcse(method="sd")`` calls ``float`` on a 1-element
    array, which numpy >= 2.4 refuses; ArviZ's numba acceleration is switched off for the
    duration of the call.
    """
    flag = _az().Numba.numba_flag
    if flag:
        _az().Numba.disable_numba()
    try:
        kwargs = {} if prob is None else {"prob": prob}
        return float(np.squeeze(_az().mcse(np.asarray(values), method=method, **kwargs)))
    finally:
        if flag:
            _az().Numba.enable_numba()


def rhat(values):
    """Rank-normalised split R-hat of an array of shape (chain, draw)."""
    return float(np.squeeze(_az().rhat(np.asarray(values))))


def from_netcdf(path):
    """Load an InferenceData written by ``idata.to_netcdf(path)``."""
    return _az().from_netcdf(path)


def plot_density(idata, var_names, coords, ax):
    """``arviz.plot_posterior`` of selected variables onto the axes ``ax``."""
    return _az().plot_posterior(idata, var_names=var_names, coords=coords, ax=ax,
                             hdi_prob=0.94, point_estimate="mean")
