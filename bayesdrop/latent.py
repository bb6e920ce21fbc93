"""Deprecated: the latent design moved to :mod:`bayesdrop.model.latent`, its solver to
:mod:`bayesdrop.solvers.alternating` (this module is removed in 0.3)."""

from ._compat import warn_moved
from .model.latent import LatentDesign, latent_objective, noise_entries  # noqa: F401
from .solvers.alternating import LatentResult, fit_latent  # noqa: F401

warn_moved(__name__, "bayesdrop.model.latent and bayesdrop.solvers.alternating")
