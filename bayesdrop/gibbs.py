"""Deprecated: the kernel moved to :mod:`bayesdrop.samplers.gibbs`, the driver to
:func:`bayesdrop.samplers.sample` (this module is removed in 0.3)."""

from ._compat import warn_moved
from ._validation import seed_sequence
from .samplers.driver import SamplerResult, sample
from .samplers.gibbs import OVERRELAX, GibbsInfo, GibbsState, init, log_density, step

warn_moved(__name__, "bayesdrop.samplers.gibbs and bayesdrop.samplers.sample")

__all__ = ["GibbsState", "GibbsInfo", "SamplerResult", "OVERRELAX", "init", "step",
           "log_density", "seed_sequence", "sample"]
