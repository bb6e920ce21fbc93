"""Deprecated: moved to :mod:`bayesdrop.model.losses` (``objective`` to
:mod:`bayesdrop.model.objective`); this module is removed in 0.3."""

from ._compat import warn_moved
from .model.losses import *  # noqa: F401,F403
from .model.losses import ROOT_FLOOR, Loss  # noqa: F401
from .model.objective import objective  # noqa: F401

warn_moved(__name__, "bayesdrop.model.losses")
