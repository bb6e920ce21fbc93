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
from .baselines import (
    ExplicitCorruptionClassifier,
    InvariantSVC,
    MCFLogisticRegression,
    MCFQuadraticClassifier,
    TLogisticRegression,
    WagerDropoutLogisticRegression,
)
from . import baselines, datasets, diagnostics, gibbs, posterior, studies  # noqa: E402

try:
    __version__ = version("bayesdrop")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.1.0"

__all__ = [
    "MCFQuadraticClassifier",
    "MCFLogisticRegression",
    "WagerDropoutLogisticRegression",
    "TLogisticRegression",
    "InvariantSVC",
    "ExplicitCorruptionClassifier",
    "baselines",
    "datasets",
    "studies",
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
