"""bayesdrop: SVMs, SV regression and logistic regression under expected feature noise.

Two kinds of inference share one weighted least-squares core (:mod:`bayesdrop.wls`):
variational IRLS (:mod:`bayesdrop.irls`) returns the point estimate, and a Gibbs sampler
draws from the pseudo-posterior ``exp(-J(w, b))``.
"""

from importlib.metadata import PackageNotFoundError, version

from .design import Design
from .estimators import (
    DropoutLatentLogisticRegression,
    DropoutLatentSVC,
    DropoutLogisticRegression,
    DropoutSVC,
    DropoutSVR,
)
from .losses import (
    EpsilonInsensitiveLoss,
    HingeLoss,
    LogisticLoss,
    SquaredLoss,
    make_loss,
    objective,
)
from .noise import (
    AdditiveGaussian,
    AdditiveLaplace,
    Dropout,
    MultiplicativeGaussian,
    NoiseModel,
    NoNoise,
    Poisson,
    make_noise,
)
from .posterior import sample_posterior
from .problem import Problem
from . import diagnostics, gibbs, posterior  # noqa: E402  (submodules as attributes)

try:
    __version__ = version("bayesdrop")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.1.0"

__all__ = [
    "DropoutSVC",
    "DropoutLogisticRegression",
    "DropoutSVR",
    "DropoutLatentSVC",
    "DropoutLatentLogisticRegression",
    "Design",
    "Problem",
    "HingeLoss",
    "LogisticLoss",
    "EpsilonInsensitiveLoss",
    "SquaredLoss",
    "make_loss",
    "objective",
    "NoiseModel",
    "NoNoise",
    "Dropout",
    "MultiplicativeGaussian",
    "AdditiveGaussian",
    "AdditiveLaplace",
    "Poisson",
    "make_noise",
    "sample_posterior",
    "gibbs",
    "diagnostics",
    "posterior",
    "__version__",
]
