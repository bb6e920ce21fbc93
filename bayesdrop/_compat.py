"""Deprecated module paths, kept for one release (removed in 0.3).

Before 0.2 the package was flat (``bayesdrop.irls``, ``bayesdrop.wls``, ...); each old
path is now an alias of the module's new home, so ``from bayesdrop.irls import fit`` keeps
working (private names included) with a :class:`DeprecationWarning` naming the new home.
"""

from __future__ import annotations

import importlib
import sys
import warnings

#: old module -> new home
MOVED = {
    "bayesdrop.augmentation": "bayesdrop.samplers.augmentation",
    "bayesdrop.datasets": "bayesdrop.studies.datasets",
    "bayesdrop.design": "bayesdrop.model.design",
    "bayesdrop.irls": "bayesdrop.solvers.irls",
    "bayesdrop.noise": "bayesdrop.model.noise",
    "bayesdrop.problem": "bayesdrop.model.problem",
    "bayesdrop.wls": "bayesdrop.linalg.wls",
}


def warn_moved(old, new, stacklevel=3):
    """Emit the :class:`DeprecationWarning` of a moved module."""
    warnings.warn(f"{old} is deprecated and will be removed in bayesdrop 0.3; "
                  f"use {new}", DeprecationWarning, stacklevel=stacklevel)


def alias_module(old):
    """Make ``sys.modules[old]`` the module's new home (see :data:`MOVED`)."""
    new = MOVED[old]
    warn_moved(old, new, stacklevel=4)
    module = importlib.import_module(new)
    sys.modules[old] = module
    return module
