"""The model: noise models, the corrupted design, losses, a problem, the objective ``J``.

* :mod:`.noise` -- corrupting distributions (means, variances, seeded corrupted copies);
* :mod:`.design` -- ``X``, its noise variances ``V`` and the intercept column;
* :mod:`.losses` -- the augmented losses, one module each: ``J``'s terms and the
  per-example weights of the shared weighted least-squares system as compiled kernels
  (:mod:`.losses.kernels`) and the classes over them;
* :mod:`.objective` -- ``J`` itself; :mod:`.problem` -- ``(design, loss, y)``;
* :mod:`.augmentation` -- the augmentation variables' distributions and draws
  (inverse Gaussian / GIG, Polya-Gamma; :mod:`.pg_inversion` its inversion tables);
* :mod:`.pg_compiled` -- the compiled Polya-Gamma draw;
  :mod:`._design_kernels` -- the design's compiled passes;
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
