"""Effective sample size, as ArviZ 0.23 computes it (Vehtari, Gelman, Simpson, Carpenter
and Burkner 2021; Geyer 1992), vectorised over the parameters and without importing ArviZ:
the sampler's schedule reads it off its recorded tuning sweeps
(:func:`bayesdrop.samplers.schedule.slice_pays`), and :mod:`bayesdrop._arviz`'s
rank-normalised diagnostics build on it."""

from __future__ import annotations

import numpy as np

__all__ = ["ESS_PER_CHAIN_MIN", "ess_chain", "ess_split", "split_chains"]

#: the convergence check's least bulk and tail ESS per chain
#: (:func:`bayesdrop._arviz.convergence_warning`)
ESS_PER_CHAIN_MIN = 100


def split_chains(x):
    """Split every chain in halves: (P, chains, draws) -> (P, 2 chains, draws // 2)."""
    half = x.shape[2] // 2
    return np.concatenate([x[:, :, :half], x[:, :, x.shape[2] - half:]], axis=1)


def ess_split(x):
    """Effective sample size of already split chains, per parameter: autocovariances by
    FFT, Geyer's initial positive and initial monotone sequences (as ArviZ's ``_ess``)."""
    from scipy import fft

    n_par, m, n = x.shape
    flat = x.reshape(n_par, -1)
    const = (np.max(flat, axis=1) - np.min(flat, axis=1)) < np.finfo(float).resolution
    centred = x - x.mean(axis=2, keepdims=True)
    size = fft.next_fast_len(2 * n)
    spec = fft.rfft(centred, n=size, axis=2, workers=-1)
    acov = fft.irfft(spec * np.conjugate(spec), n=size, axis=2, workers=-1)[:, :, :n] / n
    mean_acov = np.mean(acov, axis=1)  # (P, n)
    mean_var = mean_acov[:, 0] * n / (n - 1.0)
    var_plus = mean_var * (n - 1.0) / n
    if m > 1:
        var_plus = var_plus + np.var(x.mean(axis=2), axis=1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = 1.0 - (mean_var[:, None] - mean_acov) / var_plus[:, None]  # (P, n)
    rho[:, 0] = 1.0
    # pairs Q_k = rho_{2k} + rho_{2k+1}; the positive sequence stops at the first pair
    # k >= 1 with Q_k <= 0, or at the last pair ArviZ's loop reaches (2k - 1 < n - 3)
    k_max = max((n - 1) // 2 - 1, 0)
    n_pairs = k_max + 1
    even = rho[:, 0:2 * n_pairs:2]
    odd = np.zeros_like(even)
    odd_part = rho[:, 1:2 * n_pairs:2]
    odd[:, :odd_part.shape[1]] = odd_part
    pair = even + odd
    stops = pair[:, 1:] <= 0.0
    if stops.shape[1] == 0:
        first = np.zeros(n_par, dtype=np.int64)
    else:
        first = np.where(stops.any(axis=1), np.argmax(stops, axis=1) + 1, k_max)
    k_last = np.where(pair[:, 0] > 0.0, np.minimum(first, k_max), 0)
    rows = np.arange(n_par)
    last_even = np.where(k_last > 0, even[rows, k_last], 1.0)
    tail_term = np.where((pair[rows, k_last] >= 0.0) | (last_even > 0.0), last_even, 0.0)
    # Geyer's initial monotone sequence over the complete pairs 0 .. k_last - 1
    monotone = np.minimum.accumulate(pair, axis=1)
    within = np.arange(n_pairs)[None, :] < k_last[:, None]
    tau = -1.0 + 2.0 * np.sum(np.where(within, monotone, 0.0), axis=1) + tail_term
    total = m * n
    tau = np.maximum(tau, 1.0 / np.log10(total))
    ess = np.where(np.isnan(rho).any(axis=1), np.nan, total / tau)
    return np.where(const, float(total), ess)


def ess_chain(trace):
    """Effective sample size of every column of one chain's ``trace`` (shape ``(draws,
    n_params)``), the chain not split: :func:`ess_split` of the one chain (as ArviZ's
    internal ``_ess`` of it). The tuning schedule reads it off its recorded sweeps
    (:func:`bayesdrop.samplers.schedule.slice_pays`), where halves of 75 sweeps would be
    too short.

    Examples
    --------
    >>> x = np.random.default_rng(0).normal(size=(400, 2))
    >>> bool(np.all(ess_chain(x) > 300))
    True
    """
    return ess_split(np.ascontiguousarray(np.asarray(trace, dtype=np.float64).T)[:, None, :])
