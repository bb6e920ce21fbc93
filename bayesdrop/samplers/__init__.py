"""MCMC for the pseudo-posterior ``exp(-J)``: kernels and one generic driver.

* :mod:`.augmentation` -- inverse-Gaussian / GIG and Polya-Gamma draws;
* :mod:`.gibbs` -- the Gibbs kernel (``init``, ``step`` -> state, info; ``log_density``);
* :mod:`.driver` -- :func:`sample`: chains, tune, thin, progress, interrupts, and
  ``last_state`` to continue sampling.
"""

from .driver import LastState, SamplerResult, sample

__all__ = ["LastState", "SamplerResult", "sample"]
