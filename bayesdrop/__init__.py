"""bayesdrop: SVMs, SV regression and logistic regression under expected feature noise.

Two kinds of inference share one weighted least-squares core (:mod:`bayesdrop.linalg.wls`):
variational IRLS (:mod:`bayesdrop.solvers.irls`) returns the point estimate, and a Gibbs sampler
draws from the pseudo-posterior ``exp(-J(w, b))``.
"""

from ._version import __version__
from .baselines import (
    ExplicitCorruptionClassifier,
    InvariantSVC,
    MCFLogisticRegression,
    MCFQuadraticClassifier,
    TLogisticRegression,
    WagerDropoutLogisticRegression,
)
from .estimators import (
    DropoutLatentLogisticRegression,
    DropoutLatentSVC,
    DropoutLogisticRegression,
    DropoutLogisticRegressionCV,
    DropoutSVC,
    DropoutSVCCV,
    DropoutSVR,
    DropoutSVRCV,
)
from .model import (
    AdditiveGaussian,
    AdditiveLaplace,
    Design,
    Dropout,
    EpsilonInsensitiveLoss,
    HingeLoss,
    LogisticLoss,
    MultiplicativeGaussian,
    NoiseModel,
    NoNoise,
    Poisson,
    Problem,
    SquaredLoss,
    make_loss,
    make_noise,
    objective,
)
from ._arviz import ConvergenceWarning
from .posterior import sample_posterior
from . import baselines, diagnostics, linalg, model, posterior, samplers, solvers, studies  # noqa: E402




__all__ = [
    "ConvergenceWarning",
    "MCFQuadraticClassifier",
    "MCFLogisticRegression",
    "WagerDropoutLogisticRegression",
    "TLogisticRegression",
    "InvariantSVC",
    "ExplicitCorruptionClassifier",
    "baselines",
    "studies",
    "DropoutSVC",
    "DropoutLogisticRegression",
    "DropoutSVR",
    "DropoutLogisticRegressionCV",
    "DropoutSVCCV",
    "DropoutSVRCV",
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
    "model",
    "linalg",
    "solvers",
    "samplers",
    "diagnostics",
    "posterior",
    "__version__",
]
