"""Optimisers of the collapsed objective ``J``, one module per optimiser.

* :mod:`.irls` -- variational IRLS (the MM algorithm of the model), SQUAREM-accelerated,
  with the zero-noise active-set polish;
* :mod:`.alternating` -- the latent models' alternation of IRLS and L-BFGS;
* :mod:`.lbfgs` -- L-BFGS-B with scikit-learn's tolerance scaling (smooth baselines).
"""
