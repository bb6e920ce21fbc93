"""Deprecated: moved to :mod:`bayesdrop.solvers.irls` (this alias is removed in 0.3)."""

from ._compat import alias_module

alias_module(__name__)
