"""MCMC for the pseudo-posterior ``exp(-J)``: kernels and one generic driver.

* the augmentation draws are the model's (:mod:`bayesdrop.model.augmentation`);
* :mod:`.gibbs` -- the Gibbs kernel (``init``, ``step`` -> state, info; ``log_density``);
  :mod:`._gibbs_dense` / :mod:`._gibbs_sparse` -- the same sweep compiled;
  :mod:`.rows` -- the kernel on a row back-end (one pass over the rows per sweep);
* :mod:`.chain` -- the one chain loop over a chain kernel (``init``, ``run(state, n)``,
  blocks, ``end_tuning``, ``record``): :class:`.gibbs.SweepKernel` (Python) and
  :class:`.compiled.CompiledKernel` (the compiled dense and sparse sweeps) implement it;
* :mod:`.driver` -- :func:`sample`, the one driver of all of them: validation, seeds,
  tune, thin, progress, interrupts, and ``last_state`` to continue sampling; it uses
  :mod:`.start` (where chains start), :mod:`.runners` (chains in threads or processes,
  chosen apart from the kernel), :mod:`.compiled` (the compiled kernel's arrays and its
  MH moves) and :mod:`.result` (:class:`SamplerResult`, :class:`LastState`).
"""

from .driver import LastState, SamplerResult, sample

__all__ = ["LastState", "SamplerResult", "sample"]
