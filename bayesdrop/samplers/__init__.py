"""MCMC for the pseudo-posterior ``exp(-J)``: kernels and one generic driver.

* :mod:`.augmentation` -- inverse-Gaussian / GIG and Polya-Gamma draws
  (:mod:`.pg_inversion`: the fractional Polya-Gamma inversion tables);
* :mod:`.gibbs` -- the Gibbs kernel (``init``, ``step`` -> state, info; ``log_density``);
  :mod:`._gibbs_dense` / :mod:`._gibbs_sparse` -- the same sweep compiled;
  :mod:`.rows` -- the kernel on a row back-end (one pass over the rows per sweep);
* :mod:`.driver` -- :func:`sample`, the one driver of all of them: chains, tune, thin,
  progress, interrupts, and ``last_state`` to continue sampling.
"""

from .driver import LastState, SamplerResult, sample

__all__ = ["LastState", "SamplerResult", "sample"]
