"""The model: noise models, the corrupted design, losses, a problem, the objective ``J``.

* :mod:`.noise` -- corrupting distributions (means, variances, seeded corrupted copies);
* :mod:`.design` -- ``X``, its noise variances ``V`` and the intercept column;
* :mod:`.losses` -- the augmented losses: ``J``'s terms and the per-example weights of
  the shared weighted least-squares system;
* :mod:`.objective` -- ``J`` itself; :mod:`.problem` -- ``(design, loss, y)``;
* :mod:`.latent` -- the hidden-layer design (full-covariance noise term).
"""

from .design import Design
from .losses import (EpsilonInsensitiveLoss, HingeLoss, LogisticLoss, Loss, SquaredLoss,
                     make_loss)
from .noise import (AdditiveGaussian, AdditiveLaplace, Dropout, MultiplicativeGaussian,
                    NoiseModel, NoNoise, Poisson, make_noise)
from .objective import objective
from .problem import Problem

__all__ = ["Design", "Problem", "objective", "Loss", "HingeLoss", "LogisticLoss",
           "EpsilonInsensitiveLoss", "SquaredLoss", "make_loss", "NoiseModel", "NoNoise",
           "Dropout", "MultiplicativeGaussian", "AdditiveGaussian", "AdditiveLaplace",
           "Poisson", "make_noise"]
