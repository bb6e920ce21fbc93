"""scikit-learn estimators: thin layers over the one-vs-rest engine (:mod:`._base`).

* :mod:`bayesdrop.estimators.linear` -- :class:`DropoutSVC`,
  :class:`DropoutLogisticRegression`, :class:`DropoutSVR`;
* :mod:`bayesdrop.estimators.latent` -- :class:`DropoutLatentSVC`,
  :class:`DropoutLatentLogisticRegression`.
"""

from .latent import DropoutLatentLogisticRegression, DropoutLatentSVC
from .linear import DropoutLogisticRegression, DropoutSVC, DropoutSVR

__all__ = ["DropoutSVC", "DropoutLogisticRegression", "DropoutSVR", "DropoutLatentSVC",
           "DropoutLatentLogisticRegression"]
