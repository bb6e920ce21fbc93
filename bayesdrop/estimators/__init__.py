"""scikit-learn estimators: thin layers over the one-vs-rest engine (:mod:`._base`).

* :mod:`bayesdrop.estimators.linear` -- :class:`DropoutSVC`,
  :class:`DropoutLogisticRegression`; :mod:`bayesdrop.estimators.regressor` --
  :class:`DropoutSVR`;
* :mod:`bayesdrop.estimators.cv` -- :class:`DropoutLogisticRegressionCV`,
  :class:`DropoutSVCCV`, :class:`DropoutSVRCV` (``noise_level`` and ``C`` chosen by
  cross-validation on a warm-started path);
* :mod:`bayesdrop.estimators.latent` -- :class:`DropoutLatentSVC`,
  :class:`DropoutLatentLogisticRegression`.
"""

from .cv import DropoutLogisticRegressionCV, DropoutSVCCV, DropoutSVRCV
from .latent import DropoutLatentLogisticRegression, DropoutLatentSVC
from .linear import DropoutLogisticRegression, DropoutSVC
from .regressor import DropoutSVR

__all__ = ["DropoutSVC", "DropoutLogisticRegression", "DropoutSVR", "DropoutLatentSVC",
           "DropoutLatentLogisticRegression", "DropoutLogisticRegressionCV", "DropoutSVCCV",
           "DropoutSVRCV"]
