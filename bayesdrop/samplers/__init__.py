"""MCMC for the pseudo-posterior ``exp(-J)``: kernels and one generic driver.

* the augmentation draws are the model's (:mod:`bayesdrop.model.augmentation`);
* :mod:`.gibbs` -- the Gibbs kernel (``init``, ``step`` -> state, info; ``log_density``);
  :mod:`._gibbs_dense` / :mod:`._gibbs_sparse` -- the same sweep compiled;
  :mod:`.rows` -- the kernel on a row back-end (one pass over the rows per sweep);
* :mod:`.driver` -- :func:`sample`, the one driver of all of them: validation, seeds,
  tune, thin, progress, interrupts, and ``last_state`` to continue sampling; it uses
  :mod:`.start` (where chains start), :mod:`.runners` (chains in sequence, threads or
  processes), :mod:`.compiled` (the compiled chains, block by block, and their MH moves)
  and :mod:`.result` (:class:`SamplerResult`, :class:`LastState`).
"""

from .driver import LastState, SamplerResult, sample

__all__ = ["LastState", "SamplerResult", "sample"]
