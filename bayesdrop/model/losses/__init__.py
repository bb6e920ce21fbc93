"""Expected-noise losses: each in its own module, defined once as a parameter tuple and
four compiled per-example kernels (:mod:`.kernels`) with a :class:`Loss` subclass over
them (:mod:`.base`).

* :mod:`.hinge` -- :class:`HingeLoss`; :mod:`.logistic` -- :class:`LogisticLoss`;
  :mod:`.epsilon_insensitive` -- :class:`EpsilonInsensitiveLoss`; :mod:`.squared` --
  :class:`SquaredLoss`;
* :mod:`.kernels` -- the kernel contract, the registry and the generic calls the
  engines compile against.
"""

from __future__ import annotations

from .base import Loss
from .epsilon_insensitive import EpsilonInsensitiveLoss
from .hinge import HingeLoss
from .kernels import ROOT_FLOOR
from .logistic import LogisticLoss
from .squared import SquaredLoss

__all__ = ["ROOT_FLOOR", "Loss", "HingeLoss", "LogisticLoss", "EpsilonInsensitiveLoss",
           "SquaredLoss", "make_loss"]


def make_loss(name, **params):
    """Build a loss by name: ``"hinge"``, ``"logistic"``, ``"epsilon_insensitive"``, ``"squared"``.

    Examples
    --------
    >>> make_loss("hinge", C=2.0, margin=0.5)
    HingeLoss(C=2.0, margin=0.5)
    """
    table = {
        "hinge": HingeLoss,
        "logistic": LogisticLoss,
        "epsilon_insensitive": EpsilonInsensitiveLoss,
        "squared": SquaredLoss,
    }
    if name not in table:
        raise ValueError(f"loss must be one of {sorted(table)}, got {name!r}")
    return table[name](**params)
