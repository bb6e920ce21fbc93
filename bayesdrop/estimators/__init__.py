"""scikit-learn estimators: thin layers over the one-vs-rest engine (:mod:`._base`).

* :mod:`bayesdrop.estimators.linear` -- :class:`DropoutSVC`,
  :class:`DropoutLogisticRegression`; :mod:`bayesdrop.estimators.regressor` --
  :class:`DropoutSVR`;
* :mod:`bayesdrop.estimators.latent` -- :class:`DropoutLatentSVC`,
  :class:`DropoutLatentLogisticRegression`.
"""

from .latent import DropoutLatentLogisticRegression, DropoutLatentSVC
from .linear import DropoutLogisticRegression, DropoutSVC
from .regressor import DropoutSVR

__all__ = ["DropoutSVC", "DropoutLogisticRegression", "DropoutSVR", "DropoutLatentSVC",
           "DropoutLatentLogisticRegression"]
