"""Where chains start: :func:`start_points` (the rules of
:func:`bayesdrop.samplers.sample`'s ``init``, shared by the in-memory and the row
back-end runners) and :func:`initial_points` for an in-memory problem."""

from __future__ import annotations

import numpy as np

from ..linalg import wls

__all__ = ["initial_points", "start_points"]


def start_points(init, theta_hat, chains, p, perturbation):
    """The chains' starting points (shape (chains, p)) for ``init`` (the rules of
    :func:`sample`, shared by the in-memory and the row back-end runners).

    ``"mode"``: ``theta_hat`` (the point estimate) for every chain; ``"overdispersed"``:
    ``theta_hat + 3 perturbation(c)`` for chain ``c`` (``perturbation(c)`` draws
    ``eta ~ N(0, A^{-1})`` of the IRLS system at ``theta_hat``); an array of shape
    ``(p,)`` or ``(chains, p)``: those points.
    """
    if isinstance(init, str):
        if init not in ("mode", "overdispersed"):
            raise ValueError(f"init must be 'mode', 'overdispersed' or an array, got {init!r}")
        if theta_hat is None:
            raise ValueError(f"init={init!r} needs the point estimate (the mode) theta_hat")
        theta_hat = np.asarray(theta_hat, dtype=float)
        if init == "mode":
            return np.tile(theta_hat, (chains, 1))
        return np.array([theta_hat + 3.0 * perturbation(c) for c in range(chains)])
    try:
        arr = np.asarray(init, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError("init must be 'mode', 'overdispersed' or an array of starting "
                        f"points, got {type(init).__name__}") from exc
    if not np.all(np.isfinite(arr)):
        raise ValueError("init contains NaN or infinity")
    if arr.shape == (p,):
        return np.tile(arr, (chains, 1))
    if arr.shape == (chains, p):
        return arr.copy()
    raise ValueError(f"init array must have shape ({p},) or ({chains}, {p}), got {arr.shape}")


def initial_points(problem, init, theta_hat, chains, rng, linalg):
    """:func:`start_points` for a problem: the perturbations from the Gaussian of the IRLS
    system at ``theta_hat``, drawn with ``rng`` chain after chain."""
    weights = []

    def perturbation(c):
        if not weights:
            weights.append(problem.irls_weights(np.asarray(theta_hat, dtype=float))[0])
        zero = np.zeros(problem.design.n_samples)
        return wls.sample(problem.design, weights[0], zero, rng, linalg=linalg)[0]

    return start_points(init, theta_hat, chains, problem.design.n_params, perturbation)
