"""The generic MCMC driver: chains, burn-in, thinning, progress and interrupts.

:func:`sample` is the one driver of every kernel of the Gibbs sweep (MATH.md sections
3-4); three runners advance the chains:

* the compiled sweeps of :mod:`bayesdrop.samplers._gibbs_dense` (dense designs with the
  hinge, logistic or epsilon-insensitive loss and a Cholesky back-end) and
  :mod:`bayesdrop.samplers._gibbs_sparse` (CSR designs with many features): the chains
  run in **threads** (the compiled loop releases the GIL), block by block so that
  progress, Ctrl-C and ``stop`` are handled between blocks;
* the Python kernel of :mod:`bayesdrop.samplers.gibbs` (``init``, ``step``,
  ``log_density``) for everything else (latent designs, the other back-ends): the chains
  run in parallel **processes**;
* a row back-end (:mod:`bayesdrop.samplers.rows`, e.g. a dask array): every chain in each
  pass over the rows.

Every chain draws from its own child of one :class:`numpy.random.SeedSequence`, so the
draws do not depend on whether the chains run in parallel or in sequence.
"""
from __future__ import annotations

import os
import time

import numpy as np

from .._progress import ProgressBar
from .._validation import check_fits_in_memory, check_scalar, seed_sequence
from ..linalg import wls
from ..model.objective import check_theta
from ..model.problem import check_problem
from . import gibbs
from .chain import run_chain
from .compiled import CompiledKernel, compiled_setup, intercept_line
from .gibbs import OVERRELAX
from .result import LastState, SamplerResult, assemble, generators_from_states
from .runners import CtrlC, python_kernel, run_processes, run_threads
from .schedule import laplace_proposal, slice_directions
from .start import initial_points

__all__ = ["LastState", "SamplerResult", "sample"]


def _check_result_fits(source, loss, chains, draws, per_example):
    """A ``ValueError`` naming ``draws`` and ``chains`` if the kept draws (``chains x
    draws x n_params`` float64 values, and ``x n_samples`` more per augmentation variable
    or pointwise term where they are kept) exceed this machine's physical memory -- a
    clear error before any sweep instead of numpy's ``MemoryError`` (or a process that
    swaps) after the tuning. ``source``: the design, or the row back-end."""
    per_draw = source.n_params + (source.n_samples * max(loss.n_augmentation, 1)
                                  if per_example else 0)
    check_fits_in_memory(8.0 * chains * draws * per_draw, "draws, chains",
                         f"{chains} chains x {draws} draws x {per_draw} values per draw "
                         "of float64", "ask for fewer draws or chains")


def sample(problem, *, draws=1000, tune=500, chains=4, thin=1, init="mode",
           theta_hat=None, random_state=None, progressbar=True, cores=None,
           store_augmentation=False, store_log_likelihood=False, linalg="auto",
           cg_tol=1e-12, overrelax=OVERRELAX,
           compiled="auto", mh="auto", on_running=None):
    """Run Gibbs chains on ``exp(-J(theta))`` for one problem -- the one driver of every
    kernel.

    Three runners share it (validation, seeds, starting points, burn-in, thinning,
    progress, Ctrl-C, ``last_state``, the result):

    * in-memory problems with a dense or CSR design: the compiled sweeps, one chain per
      thread;
    * other in-memory problems: the Python kernel (:mod:`bayesdrop.samplers.gibbs`), one
      chain per process;
    * a row back-end (:class:`bayesdrop.linalg.backend.RowBackend`, e.g. data on a dask
      cluster): :class:`bayesdrop.samplers.rows.RowsKernel` through the same
      :func:`~bayesdrop.samplers.chain.run_chain`, every chain in each pass over
      the rows (their parallelism is the cluster's; ``cores``, ``compiled``, ``mh``,
      ``linalg`` do not apply, and the augmentation stays with its rows).

    A loss without augmentation (the squared loss, ``n_augmentation = 0``) has constant
    system weights, so ``exp(-J)`` is the Gaussian ``N(A^{-1} r, A^{-1})`` of the shared
    system: every sweep is then one exact (over-relaxed) draw from it, by the Python kernel.

    Parameters
    ----------
    problem : Problem or RowBackend
    draws : int >= 1
        Kept draws per chain (after thinning).
    tune : int >= 0
        Burn-in sweeps per chain, discarded.
    chains : int >= 1
    thin : int >= 1
        Keep every ``thin``-th sweep; a chain runs ``tune + draws * thin`` sweeps.
    init : {"mode", "overdispersed"}, array of shape (n_params,) or (chains, n_params), \
or LastState
        ``"mode"`` starts every chain at ``theta_hat``; ``"overdispersed"`` at
        ``theta_hat + 3 eta`` with ``eta ~ N(0, A^{-1})`` of the IRLS system. A
        :class:`LastState` (``result.last_state`` of an earlier call) continues those
        chains: each starts from its ``theta`` with its random generator as it was left
        (``random_state`` is then not used; pass ``tune=0``: the chains keep the MH
        moves their tuning fixed). A run continued this way gives the
        same draws as one longer run.
    theta_hat : ndarray of shape (n_params,), optional
        The mode of ``exp(-J)``, i.e. ``argmin J`` whichever solver found it (needed by
        the two named ``init`` options).
    random_state : None, int, SeedSequence or numpy.random.Generator
        Chain ``c`` uses child ``c`` of one SeedSequence (see :func:`bayesdrop._validation.seed_sequence`).
    progressbar : bool
        Shown on stderr unless False or the ``CI`` environment variable is set.
    cores : int, optional
        Processes running chains at once; default ``min(chains, os.cpu_count())``.
        ``cores=1`` runs the chains in sequence in this process (same draws).
    store_augmentation : bool
        Keep full traces of the augmentation variables (memory ``chains * draws * N``).
    store_log_likelihood : bool
        With the compiled sweeps, keep every kept draw's pointwise log pseudo-likelihood
        ``-term_n(theta)`` (``SamplerResult.log_likelihood``, memory
        ``chains * draws * N``): the dense sweep computes it from the scores it has
        anyway, the sparse one after the chain
        (:func:`bayesdrop.samplers.compiled.kept_log_target`); the Python kernel leaves
        it None.
    linalg : {"auto", "cholesky", "woodbury", "cg"}
    cg_tol : float
    overrelax : float in (-1, 1), default=-0.5
        Over-relaxation of the Gaussian step (see :func:`step`); 0 for plain Gibbs.
    mh : {"auto", False} or int >= 1, default="auto"
        With the compiled dense sweep, independence Metropolis-Hastings moves after every
        Gibbs sweep, each from a multivariate t (30 degrees of freedom) and each exact on
        its own (the chain still targets ``exp(-J)``); one costs an ``O(N D)``
        evaluation of ``J`` against the sweep's ``O(N D^2)``, and gives nearly
        independent draws where the proposal fits the posterior. ``"auto"``: a schedule
        fixed in tuning (:class:`~bayesdrop.samplers.compiled.CompiledKernel`): the first
        half of tuning runs the Laplace approximation at ``theta_hat``
        (:func:`laplace_proposal`, where ``J`` is twice differentiable) once per sweep;
        the next 3/10 are recorded; the proposal is refreshed to the recorded draws'
        mean and covariance (also where there is no Laplace approximation, such as the
        hinge at zero noise) for the rest of tuning; the kept sweeps use the better
        accepted of the two, as many times per sweep as maximises the modelled effective
        draws per unit of modelled cost
        (:func:`bayesdrop.samplers.schedule.mh_moves_per_sweep`: 0 when it accepted less
        than :data:`MH_MIN_ACCEPT`, 2%) -- or, where it accepted at least
        :data:`~bayesdrop.samplers.schedule.MH_ALONE_MIN_ACCEPT` (60%) and that is
        cheaper, iterations of independence moves alone, without the sweep
        (:func:`bayesdrop.samplers.schedule.schedule`). Every choice depends on the data and
        the seed only (a cost model, not a clock), and the kept draws come from one fixed exact
        kernel; ``last_state`` carries it. An integer: that many Laplace proposals per
        sweep, in tuning and kept sweeps alike; ``False``: none. Per chain
        ``SamplerResult.mh_accept`` is the acceptance rate over all proposals and
        ``SamplerResult.mh_moves`` the kept sweeps' number. With an intercept, the
        proposal in use also gives the compiled sweep's intercept move
        (:func:`intercept_line`: a fresh intercept from its marginal, the weights
        shifted along its regression line; exact MH, whatever ``mh``), whose acceptance
        rate is ``SamplerResult.intercept_accept``. A dense design without noise and a
        loss with kinks (hinge, epsilon-insensitive; no Laplace approximation) may add
        slice moves after each sweep, along the directions of
        :func:`bayesdrop.samplers.schedule.slice_directions` (from ``theta_hat``):
        ``"auto"`` keeps them where the recorded tuning sweeps' autocorrelation and
        effective sample size and the cost model say they pay, or where the sweeps
        alone would miss the convergence check's 100 effective draws per chain
        (:func:`~bayesdrop.samplers.schedule.slice_pays`), an integer or ``False``
        always; ``last_state`` carries the choice. The compiled sparse sweep (CSR, ``N <
        D``, no MH move) at zero noise with such a loss always follows each sweep with
        slice moves along the dual basis of all examples' rows (one score each;
        ``schedule._dual_slice_directions``), where ``N^2`` is at
        most :data:`~bayesdrop.samplers.schedule.SLICE_SPARSE_MAX_ENTRIES`.
    on_running : callable, optional
        Called once, with no arguments, when a chain of compiled sweeps has run its
        first block: the sweeps are compiled and the chains now run without the GIL, so
        the caller can do Python work alongside them (the estimators import ArviZ there,
        in the background, for the InferenceData they build next). Never called by the
        Python kernel or a row back-end.
    compiled : {"auto", True, False}, default="auto"
        ``"auto"``: the compiled sweep (chains in threads) wherever it applies (dense
        design, hinge / logistic / epsilon-insensitive loss, Cholesky back-end; see
        :func:`compiled_setup`), the Python kernel (chains in processes) elsewhere.
        ``True``: the compiled sweep, or a ValueError where it does not apply (as
        Newton's ``compiled=True``). ``False``: always the Python kernel. Both sample the
        same distribution; the individual draws differ (the kernels use the random
        numbers in another order).

    Returns
    -------
    SamplerResult

    Notes
    -----
    **Interrupts.** Ctrl-C stops every chain at its next sweep
    (the compiled chains run in blocks of about ``BLOCK_SECONDS`` (0.1 s) of sweeps, sized
    from the measured time per sweep, so it acts within a fraction of a second whatever
    the data and hyper-parameters, unless a single sweep takes longer). In the main
    thread the first Ctrl-C (SIGINT) is only recorded (:class:`~.runners.CtrlC`) and the
    chains poll it, rather than a ``KeyboardInterrupt`` raised wherever the waiting
    thread is (which can leave a lock of the process pool taken: a hang); a second
    Ctrl-C raises ``KeyboardInterrupt`` at once (out of ``sample`` where the chains run in
    threads or processes; in sequence the chain loop catches it and returns the draws). A ``KeyboardInterrupt`` raised by other
    code while waiting (a callback, a progress bar) stops the chains the same way.
    If draws had been kept, they are returned -- the same number for every chain, with
    ``interrupted=True`` and a ``RuntimeWarning`` -- so a long run can be cut short and
    analysed; during tuning (no draw kept yet) the ``KeyboardInterrupt`` propagates and
    nothing is returned. Chain processes also stop when the parent process ends (SIGTERM,
    SIGKILL): none is left running.

    Examples
    --------
    >>> from bayesdrop import Problem, HingeLoss, LogisticLoss, Dropout
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 3)); y = np.sign(X[:, 0] + 0.5 * rng.normal(size=60))
    >>> from bayesdrop.samplers import sample
    >>> from bayesdrop.solvers import irls
    >>> problem = Problem.create(X, y, LogisticLoss(1.0), Dropout(0.3))
    >>> theta_hat = irls.fit(problem).theta
    >>> res = sample(problem, draws=50, tune=20, chains=2, theta_hat=theta_hat,
    ...                    random_state=0, progressbar=False, cores=1)
    >>> res.theta.shape, res.lp.shape, bool(res.lp.max() <= -problem.objective(theta_hat))
    ((2, 50, 4), (2, 50), True)
    """
    draws = check_scalar(draws, "draws", min_val=1, integer=True)
    tune = check_scalar(tune, "tune", min_val=0, integer=True)
    chains = check_scalar(chains, "chains", min_val=1, integer=True)
    thin = check_scalar(thin, "thin", min_val=1, integer=True)
    if cores is None:
        cores = min(chains, os.cpu_count() or 1)
    cores = check_scalar(cores, "cores", min_val=1, integer=True)
    if linalg not in wls.LINALG:
        raise ValueError(f"linalg must be one of {wls.LINALG}, got {linalg!r}")
    overrelax = check_scalar(overrelax, "overrelax", min_val=-1.0, max_val=1.0,
                             include_min=False, include_max=False)
    from ..linalg.backend import RowBackend

    rows = problem if isinstance(problem, RowBackend) else None
    if rows is None:
        check_problem(problem)
    if theta_hat is not None:  # a ValueError naming it, not an error from a sweep
        theta_hat = check_theta(problem if rows is not None else problem.design, theta_hat,
                                "theta_hat")
        if rows is None and not np.isfinite(problem.objective(theta_hat)):
            raise ValueError("theta_hat: J is not finite there (its scores or its penalty "
                             "overflow float64); pass the fitted point estimate")
    _check_result_fits(problem if rows is not None else problem.design, problem.loss,
                       chains, draws, store_augmentation or store_log_likelihood)
    if rows is not None:
        if store_augmentation:
            raise ValueError("store_augmentation is not available on a row back-end: the "
                             "augmentation variables stay where their rows are")
        from . import rows as rows_kernel

        inits, rngs, entropies, first_sweep = rows_kernel.chain_setup(
            rows, init, theta_hat, chains, random_state)
        wall_start = time.perf_counter()
        with ProgressBar(chains * (tune + draws * thin), enabled=progressbar,
                         description=f"Gibbs (rows), {chains} chain(s)") as bar:
            kernel = rows_kernel.RowsKernel(rows, rngs, entropies, first_sweep, overrelax)
            results, last_state = run_chain(kernel, inits, None, tune=tune, draws=draws,
                                            thin=thin, report=lambda k: bar.update(chains * k))
        return assemble(results, inits, chains, tune, thin, wall_start, False, last_state)
    if isinstance(init, LastState):  # continue: each chain from its theta and generator
        if init.entropies is not None:
            raise ValueError("init is the LastState of a row back-end, not of an in-memory "
                             "problem")
        if len(init.rng_states) != chains or np.shape(init.theta)[0] != chains:
            raise ValueError(f"init (a LastState) holds {len(init.rng_states)} chains, but "
                             f"chains={chains}")
        chain_seeds = generators_from_states(init.rng_states)
        inits = np.array(init.theta, dtype=float)
        moves = init.moves if init.moves is not None else (None,) * chains
        mh_moves = (None,) * chains
    else:
        moves = (None,) * chains
        mh_moves = (None if mh in ("auto", False) else mh,) * chains
        ss = seed_sequence(random_state)
        init_seed, *chain_seeds = ss.spawn(chains + 1)
        inits = initial_points(problem, init, theta_hat, chains,
                                np.random.default_rng(init_seed), linalg)
    kwargs = dict(tune=tune, draws=draws, thin=thin, linalg=linalg, cg_tol=cg_tol,
                  overrelax=overrelax, store_augmentation=store_augmentation,
                  store_log_likelihood=store_log_likelihood)
    for c, theta0 in enumerate(inits):  # shape and finiteness, with the kernel's messages
        gibbs.init(problem, theta0)
        if not np.isfinite(problem.objective(theta0)):
            start = "init" if not isinstance(init, str) else "theta_hat"
            raise ValueError(f"{start}: J is not finite at chain {c}'s starting point (its "
                             "scores or its penalty overflow float64); start nearer the mode")
    if compiled not in ("auto", True, False) or not isinstance(compiled, (str, bool)):
        raise ValueError(f"compiled must be 'auto', True or False, got {compiled!r}")
    if mh is not False and mh != "auto":
        if isinstance(mh, str) or isinstance(mh, bool):
            raise ValueError(f"mh must be 'auto', False or an integer >= 1, got {mh!r}")
        mh = check_scalar(mh, "mh", min_val=1, integer=True)
    setup = compiled_setup(problem, linalg) if compiled in ("auto", True) else None
    if compiled is True and setup is None:
        raise ValueError("compiled=True needs an in-memory linear design, a loss with an "
                         "augmentation to draw (hinge, logistic, epsilon-insensitive) and "
                         "the linalg the compiled sweeps use (see compiled_setup)")
    if setup is not None and setup["kind"] == "dense":
        laplace = laplace_proposal(problem, theta_hat)
        if mh is not False:
            setup["proposal"] = laplace
        setup["line"] = intercept_line(setup, laplace)
        setup["slice"] = slice_directions(problem, setup, theta_hat)
        setup["schedule"] = mh == "auto"
    elif setup is not None:  # the sparse sweep: no MH move, its slice moves where they exist
        setup["slice"] = slice_directions(problem, setup, theta_hat)
    total = chains * (tune + draws * thin)
    wall_start = time.perf_counter()
    with CtrlC() as ctrl_c:  # Ctrl-C: the chains stop at their next block
        with ProgressBar(total, enabled=progressbar,
                         description=f"Gibbs {problem.loss.name}, {chains} chain(s)") as bar:
            if cores > 1 and chains > 1:
                if setup is not None:
                    results = run_threads(setup, inits, chain_seeds, kwargs, min(cores, chains),
                                          bar, mh_moves, moves, on_running, ctrl_c)
                else:
                    results = run_processes(problem, inits, chain_seeds, kwargs,
                                            min(cores, chains), bar, ctrl_c)
            else:  # in sequence, in this process; one kernel or the other
                results = []
                calls = [on_running] if setup is not None and on_running is not None else []
                for c in range(chains):
                    def report(k, _base=c * (tune + draws * thin)):
                        bar.update(_base + k)
                        while calls:  # on_running, once
                            calls.pop()()

                    kernel = (CompiledKernel(setup, mh_moves=mh_moves[c], moves=moves[c],
                                              **kwargs)
                              if setup is not None else python_kernel(problem, **kwargs))
                    results.append(run_chain(kernel, inits[c], chain_seeds[c], report=report,
                                             stop=lambda: ctrl_c.pressed, tune=tune,
                                             draws=draws, thin=thin))
                    if results[-1].interrupted:
                        break
        # a Ctrl-C after the last sweep changes nothing: every draw is returned
        return assemble(results, inits, chains, tune, thin, wall_start, store_augmentation)
