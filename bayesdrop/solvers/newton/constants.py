"""The constants of Newton's method on ``J`` (:mod:`bayesdrop.solvers.newton` imports them
and reads them, as its own module attributes, each time a fit starts)."""

import numpy as np

__all__ = [
    "ARMIJO", "CG_FORCING_FLOOR", "CHORD_STOP", "CONTRACTION", "EXPAND_RATIO",
    "EXPAND_STEPS", "INTERPRET_MAX_ENTRIES", "MAX_COMPILED_ENTRIES", "MAX_COMPILED_FEATURES",
    "MAX_COMPILED_ROWS",
    "MIN_STEP",
    "QN_CONTRACTION", "QN_MEMORY", "QN_REUSE_DECREMENT", "RAY_LOG_RANGE", "RAY_LOG_TOL",
    "RAY_MIN_PARAMS",
    "REFINE_MAXITER", "REFINE_MIN_FEATURES", "REFINE_REFRESH", "REFINE_RTOL",
    "REUSE_DECREMENT",
    "RIDGE",
    "ROWS_SUBSAMPLE_STEP", "ROW_SHORT_STEPS", "ROW_TRIAL_STEPS", "SINGLE_MAX_COND",
    "START_CG_RTOL", "START_GRAM_ROWS", "START_GRAM_ROWS_PER_PARAM",
    "SUBSAMPLE_MAX_ITER", "SUBSAMPLE_MIN_ROWS", "SUBSAMPLE_STEP"]

#: Armijo sufficient-decrease constant of the line search
ARMIJO = 1e-4

#: Newton-CG solves ``H p = -g`` to a relative residual of at least this much (the
#: constant CG tolerance of liblinear's TRON): the shrinking forcing term alone asks the
#: last steps for residuals of 2e-3 and below, CG iterations that buy little once ``J``
#: is within rounding of its minimum. Measured on newsgroups at q = 0.5 (logistic /
#: hinge, half and all rows): the same number of Newton steps or one more, 5-23% less
#: time, ``J`` at the default ``tol`` 3e-11 or closer to its minimum (1e-15 without it)
CG_FORCING_FLOOR = 0.1

#: relative residual to which the CG solve of the IRLS start (:func:`_irls_start`) is
#: taken: only a starting point. Measured on newsgroups, hinge at q = 0.5 (1427 / 714
#: rows; fit to the default ``tol``): 1e-10 (an exact IRLS map) 127 / 64 ms, 1e-3
#: 74 / 38, 1e-2 64 / 32, 1e-1 61 / 35 ms (one and two more Newton steps), 0.3 88 / 37;
#: scipy's CG to 1e-10 (the IRLS solver's) 142 / 88 ms
START_CG_RTOL = 1e-2

#: smallest step length tried by the line search
MIN_STEP = 1e-12

#: Hessian reuse (a chord step, Shamanskii's variant of Newton's method): after a full
#: step whose decrement was at most ``REUSE_DECREMENT * max(|J|, 1)`` -- close to the
#: optimum, where ``H`` changes little from step to step -- the next direction is solved
#: with the same Cholesky factor, and so on while every such direction's decrement is at
#: most :data:`CONTRACTION` times the previous one; otherwise (or if its line search
#: fails) the step is recomputed with a new ``H``. A reused step costs one pass over the
#: data instead of a Hessian. Measured on 10^4 x 50 logistic at q = 0.3: 2 Hessians and 7
#: steps instead of 4 and 4; hinge 1 and 7 instead of 3 and 3 (5.5-8 ms instead of 10-13).
#: A chord direction that does not contract enough costs only its triangular solves (the
#: factor is then recomputed before the line search), so the threshold is generous:
#: 1e-1 rather than 1e-2 saved a Hessian on breast cancer (logistic 4 -> 3 for 5 -> 7
#: steps to 1e-8, 0.52 -> 0.45 ms; hinge the same) and on 20000 x 200 logistic; 1 and
#: beyond cost Hessians again (directions that fail the contraction test).
REUSE_DECREMENT = 1e-1

#: see :data:`REUSE_DECREMENT`
CONTRACTION = 0.1

#: Far from the optimum (a decrement above ``REUSE_DECREMENT * max(|J|, 1)``) a full step
#: that passes the Armijo test is doubled, up to this many times, while ``J`` keeps
#: falling: there the logistic and hinge terms flatten beyond the current point and the
#: Newton step is too short (measured on breast cancer at q = 0.3, with factor reuse:
#: logistic 3 Hessians and 11 steps instead of 5 and 13, hinge 3 Hessians instead of 4;
#: no change on 10^4 x 50, where the first step lands close).
#: Exact (Cholesky) steps only: the truncated CG directions of the first steps are not
#: the Newton step, and doubling them cost newsgroups logistic 8 -> 11 steps. One
#: doubling: on the benchmark problems a second was never accepted (each try costs an
#: evaluation of ``J``; 0.52 -> 0.48 ms on breast cancer logistic to 1e-8).
EXPAND_STEPS = 1

#: ... and only when the full step lowered ``J`` by more than ``EXPAND_RATIO`` times the
#: quadratic model's ``lambda^2 / 2``: if the curvature along the line falls linearly,
#: ``phi''(t) = lambda^2 (1 - kappa t)``, the full step gains ``lambda^2 (1/2 + kappa/6)``
#: (ratio ``1 + kappa / 3``) and the doubled one beats it exactly when ``kappa > 3/7``,
#: a ratio above ``8/7``. Measured first-step ratios: 1.16-1.26 where the doubling was
#: taken (breast cancer logistic and hinge), 0.48-1.06 where it was not (diabetes,
#: 10^4 x 50 logistic, where the trial cost an evaluation of ``J``: 3.10 -> 3.01 ms).
#: A little below 8/7, as the model is rough.
EXPAND_RATIO = 1.1

#: A step with a kept factor converges linearly (by about its contraction), not
#: quadratically: it ends the iteration only when its decrement is below ``CHORD_STOP``
#: times the Newton threshold ``2 tol max(|J|, 1)``, so that the result is as close to
#: the optimum as after a final Newton step (``J`` within about ``tol^2`` relative).
CHORD_STOP = 1e-4

#: Newton from zeros on at least this many examples (a dense or sparse ``Design``) starts
#: from the optimum of every :data:`SUBSAMPLE_STEP`-th example, each weighted
#: ``SUBSAMPLE_STEP`` -- recursively, so 10^7 rows go through 3.1 x 10^5 and 9.8 x 10^3.
#: From there a few steps on all the data remain (measured at 10^6 x 20 logistic,
#: q = 0.3: 0.40 s with every 32nd row, 0.49 s with every 8th, 0.67 s from zeros; 1
#: Hessian and 4 steps). Those steps start as chord steps with the subsample's last
#: Cholesky factor (the Hessian of the subsample, weighted ``SUBSAMPLE_STEP``: an estimate
#: of ``H`` on all rows), kept while they contract (:data:`CONTRACTION`): at 10^6 x 20 no
#: Hessian of all the rows is then needed (to ``J`` within 1e-8 of ``J*``: 183 -> 128 ms;
#: the whole fit 259 -> 217 ms, 4 chord steps).
SUBSAMPLE_MIN_ROWS = 200_000

#: see :data:`SUBSAMPLE_MIN_ROWS`
SUBSAMPLE_STEP = 32

#: steps of the subsample start at least (see ``max_iter`` of :func:`fit`)
SUBSAMPLE_MAX_ITER = 100

#: the subsample of :func:`fit_rows` (every 8th row of each block): without factor reuse
#: each further step there costs a pass over the (cluster's) data, so it starts closer
ROWS_SUBSAMPLE_STEP = 8

#: relative ridge added to a Hessian that is singular to working precision (the intercept
#: direction when every example sits on a kink of its piecewise-linear term)
RIDGE = 1e-10

#: the Hessian of a large dense design (:data:`bayesdrop.linalg.hessian.HESSIAN_BLOCKED_MIN`
#: entries or more) is multiplied in float32 (``hessian_matrix(single=True)``: 1.4 -> 0.9 ms
#: at 10^4 x 50) when its Cholesky factor shows a condition number of at most this
#: (``(max L_ii / min L_ii)^2``, a lower estimate); otherwise, or when a step with such a
#: factor fails its line search, it is recomputed in float64. The direction then carries
#: a relative error of about ``cond * 1e-7``: Newton's local contraction factor, far below
#: the :data:`CONTRACTION` that a chord step must reach; the gradient, ``J`` and the
#: stopping rule stay float64, so the optimum is the same to the last digit.
SINGLE_MAX_COND = 1e4

#: On a large dense design (``hessian.single_applies``) the first Cholesky factor -- the
#: Hessian at ``w = 0`` of a fit from zeros, where it is the Gram matrix
#: ``2 I' + Xbar^T diag(d_mm) Xbar + diag(noise)``, and the hinge's IRLS start -- is
#: estimated from every ``k``-th row weighted ``k`` (``Design.gram(row_step=k)``), with
#: ``k`` such that at least :data:`START_GRAM_ROWS` rows and
#: :data:`START_GRAM_ROWS_PER_PARAM` rows per parameter remain. It only directs the first
#: step, which the line search checks; every later factor is exact. Measured at
#: 10^4 x 50, q = 0.3 (k = 4): the first factor 0.84 -> ~0.2 ms, the same number of
#: steps to 1e-8.
START_GRAM_ROWS = 2000

#: see :data:`START_GRAM_ROWS`
START_GRAM_ROWS_PER_PARAM = 40

#: A kept Cholesky factor is **updated by BFGS** with the pairs
#: ``(s_k, y_k) = (theta_{k+1} - theta_k, g_{k+1} - g_k)`` of the steps taken since it
#: was computed, at most this many (:func:`.loop.qn_direction`, Python and compiled):
#: the steps with a kept factor converge superlinearly instead of linearly (the
#: Dennis-More condition; Nocedal & Wright 2006, section 6.1), and are still kept only
#: while their decrements contract (:data:`CONTRACTION`). Measured at q = 0.3 (to 1e-8 /
#: the whole fit at the default ``tol``): breast cancer logistic 7 -> 5 / 11 -> 8 steps
#: (0.60 -> 0.52 ms / 0.77 -> 0.65 ms), hinge 0.59 -> 0.57 / 0.66 -> 0.63 ms; 10^4 x 50
#: the whole fit 7 -> 5 steps for logistic and hinge, ``J`` closer to ``J*``; logistic at
#: zero noise 3 -> 2 Hessians (8.6 -> 6.3 ms).
QN_MEMORY = 8

#: On a large dense design (``hessian.single_applies``: a Hessian costs several passes
#: over the data, 1.8 ms against 0.45 ms at 10^4 x 50) a kept factor with its BFGS pairs
#: directs every step after a full one, not only near the optimum
#: (:data:`REUSE_DECREMENT`): a logistic fit from zeros then keeps its first, subsampled
#: factor (:data:`START_GRAM_ROWS`) -- at 10^4 x 50, q = 0.3, 1 factor and 5 steps to
#: 1e-8 instead of 2 and 4 (5.5 -> 4.0 ms). On small designs, where a Hessian costs about
#: one evaluation of ``J``, this took more steps and Hessians (breast cancer logistic
#: 5 -> 7 steps, 3 -> 5 Hessians; the far steps are no longer doubled).
QN_REUSE_DECREMENT = np.inf

#: On the same large dense designs a kept factor's direction is kept while its decrement
#: is at most this times the previous one (:data:`CONTRACTION` elsewhere): a Hessian there
#: costs many steps' passes over the data (digits 1797 x 64: about 0.5 ms in float32
#: against 0.06 ms a step), so slower contraction still costs less than a new factor.
#: Measured (estimators' fits at q = 0.2-0.5, best of 2-9, 0.1 -> 0.5): digits 10 classes
#: hinge 25.3 -> 22.5 ms (Hessians per class 2 -> 1), logistic 33.9 -> 29.4 ms, SVR 5.9 ->
#: 4.5 ms; Fashion-MNIST 4000 x 784 hinge 1.38 -> 1.30 s, logistic 1.67 -> 1.54 s;
#: 10^4 x 50 logistic 9.7 -> 8.8 ms, hinge 9.6 -> 9.5 ms; 10^6 x 20 logistic 335 ->
#: 343 ms (within its run-to-run spread). 0.7 was no better; on breast cancer (below
#: ``single_applies``, a Hessian about a step's cost) 0.5 cost its hinge fit 19 %.
QN_CONTRACTION = 0.5

#: ``compiled="auto"`` runs the compiled dense loop up to this many rows ``N`` and
#: :data:`MAX_COMPILED_ENTRIES` entries ``N x D``. Beyond, the Python loop is faster: its
#: logistic terms take numpy's SIMD ``exp`` / ``log1p`` / ``tanh``
#: (:mod:`bayesdrop.model.losses._logistic_rows`; numba's are scalar, 5-10x slower per
#: row), its products numpy's threaded BLAS and, from ``hessian.HESSIAN_BLOCKED_MIN``
#: entries, its Hessian float32 products (measured while the compiled loop's were float64;
#: they are float32 too since, under the same rule). Measured on
#: 2 cores (logistic / hinge at q = 0.3, Python loop time over compiled): 569 x 30
#: 2.2 / 2.3, 1000 x 30 1.36 / 1.27, 2000 x 20 1.02 / 1.13, 3000 x 10 0.77 / 1.06,
#: 2e4 x 20 0.47 / 0.57, 1e6 x 20 0.48 / 1.08.
MAX_COMPILED_ROWS = 2000

#: see :data:`MAX_COMPILED_ROWS`. Measured (``newton.fit``, hinge ``C = 0.1`` / logistic
#: ``C = 1`` at q = 0.3 on standardised ``make_classification`` data, median of 5
#: alternating fits each, Python loop time over compiled): 1000 x 50 1.99 / 1.77,
#: 1000 x 64 1.41 / 1.62, 1500 x 64 1.42 / 1.47, 2000 x 50 1.48 / 1.44, 1000 x 100
#: 1.26 / 1.19, 2000 x 64 1.22 / 1.44, 500 x 200 1.16 / 1.30 (digits, 1797 x 64: 1.41 /
#: 1.40). With the compiled Hessian in row blocks of 128 (``compiled._HESSIAN_ROWS``, no
#: page faults per fit; same method, hinge / logistic): 1000 x 150 1.19 / 1.53,
#: 1500 x 100 1.09 / 1.31, 2000 x 100 1.00 / 1.20; beyond 200 000 entries the Python
#: loop's float32 Hessian wins: 1500 x 200 0.79 / 1.01, 3000 x 100 (rows) 0.83 / 1.08,
#: 2000 x 200 0.69 / 0.93, 1000 x 400 0.65 / 0.83 (before the row blocks: 1000 x 150
#: 0.88 / 0.95, 1500 x 100 0.93 / 1.06, 2000 x 100 0.77 / 0.94).
MAX_COMPILED_ENTRIES = 200_000

#: ... and up to this many features ``D``: on wider designs the Python loop's float32
#: Hessian (``O(N D^2)``) wins even below :data:`MAX_COMPILED_ENTRIES` entries. Measured
#: as there (hinge / logistic): 700 x 250 0.98 / 1.09, 600 x 300 0.85 / 1.05, 300 x 400
#: 0.82 / 1.27, 500 x 400 0.76-0.78 / 1.00-1.62 (two runs), 150 x 800 0.55 / 1.02,
#: 250 x 800 0.70-0.91 / 0.79-0.83: the hinge loss always faster in the Python loop, the
#: logistic loss either way
MAX_COMPILED_FEATURES = 256

#: the first Newton fit of a process on a dense design of at most this many entries
#: ``N x D`` runs interpreted while numba is not loaded
#: (:func:`bayesdrop._jit.interpret_first`): the interpreter finishes it sooner than
#: numba loads (about 50 ms on breast cancer, 569 x 30, against about 0.4 s)
INTERPRET_MAX_ENTRIES = 40_000

#: step lengths (besides the full step) whose ``J`` a row back-end evaluates in the same
#: pass as the next Hessian, so that a damped step costs no extra pass over the data
ROW_TRIAL_STEPS = 0.5 ** np.arange(1, 5)

#: further step lengths, tried in one more (objective-only) pass when none of
#: :data:`ROW_TRIAL_STEPS` gives sufficient decrease
ROW_SHORT_STEPS = 0.5 ** np.arange(5, 41)

#: With ``bare_J`` (``solver="auto"`` on a piecewise-linear loss under noise: the best
#: bare model's ``J``), Newton stops as a stall when, after this many steps, its ``J`` is
#: still above it and the line search cut the last step (``t < 1``): the iterate is no
#: better than ``w = 0`` and the trap's curvature near ``w = 0`` shortens the steps
#: (full steps are Newton's own convergence). Digits 8-vs-rest (hinge ``q = 0.2``,
#: ``C = 0.1``, optimum ``w = 0``): ``J`` 3e-2 above the bare model's after 3 steps (step
#: lengths 1/4 to 1/16), 3e-4 after 15, when the stagnation rule stopped it. The bare
#: model's certificate (:func:`bayesdrop.solvers.bare.bare_newton`) then needs no point
#: near ``w = 0``, so the check comes early: 3 steps rather than 6 (when the
#: certificate came from IRLS's maps, which need such a point) -- the trap classes of
#: a digits grid (hinge, dropout 0.2-0.5, ``C`` 0.01-1) 15-20 -> 10-15 ms, a synthetic
#: 3000 x 30 class at ``w = 0`` 12-15 -> 8-11 ms, and no class of the grid, of breast
#: cancer (hinge, 16 settings) or of diabetes (epsilon-insensitive, 9) stopped falsely.
#: Where the optimum lies just below the bare model's ``J`` (Fashion-MNIST hinge
#: ``q = 0.5``, ``C = 0.1``, four classes), the certificate's first steps find the
#: direction in which ``J`` falls, :data:`bayesdrop.solvers.ESCAPE_MAPS` IRLS maps get
#: below the bare model and Newton converges from there
#: (:func:`bayesdrop.solvers.fit_problem`).
TRAP_STEPS = 3

#: On a large dense design (``hessian.single_applies``) with :data:`RAY_MIN_PARAMS`
#: parameters or more the IRLS start of a non-smooth loss (one IRLS map from zero) is
#: scaled by the ``alpha`` of lowest ``J`` along its ray,
#: sought in ``[exp(-RAY_LOG_RANGE), exp(RAY_LOG_RANGE)]`` to a bracket of
#: :data:`RAY_LOG_TOL` in ``log alpha`` (12 evaluations of the terms, no product with
#: ``X``: :func:`bayesdrop.solvers.newton.ray_scale`). The map's scale is far off there:
#: Fashion-MNIST 4000 x 784, hinge ``q = 0.5``, ``C = 0.1``: ``J`` of the map 46-49 above
#: ``J*`` (as far as ``J(0)``), at ``alpha = 0.62-0.65`` 0.9-1.7 above; the ten classes'
#: Newton fits 9.7 -> 5.8 s, the four classes that fell into the trap near ``w = 0`` no
#: longer do. On small designs it was measured and not kept: breast cancer hinge
#: ``q = 0.3`` 8 -> 9 steps, a 15 x 30 three-class fit 6-7 -> 8-9 steps (closer in ``J``,
#: but slower to converge from there); digits 1797 x 64 about 10 % faster.
RAY_LOG_RANGE = 4.0

#: see :data:`RAY_LOG_RANGE`
RAY_LOG_TOL = 0.05

#: see :data:`RAY_LOG_RANGE`: the search costs about 12 evaluations of the terms, which
#: a saved Newton step repays only where a Hessian is dear. Measured (best of 7, without
#: -> with the scaled start): 10000 x 50 hinge q = 0.3 3.24 -> 3.45 ms (5 -> 4 steps),
#: 20000 x 20 epsilon-insensitive 6.2 -> 7.5 ms (7 -> 4 steps), 5000 x 100 hinge
#: q = 0.5 3.50 -> 3.37 ms (6 -> 4 steps), Fashion-MNIST 4000 x 784 about 40 % less.
RAY_MIN_PARAMS = 100

#: On a large dense design (``hessian.single_applies``) with this many features or more,
#: a fresh Newton direction is first **refined from the kept factor**: conjugate
#: gradients on the current Hessian's products (float32, ``hessian.single_operator``),
#: preconditioned by the factor of an earlier Hessian
#: (:func:`bayesdrop.solvers.newton.steps.direction_refined`), to the relative residual
#: :data:`REFINE_RTOL` -- nearly the exact step, so the loop's decrement, contraction and
#: stopping tests read it as one -- in at most :data:`REFINE_MAXITER` products; beyond,
#: a new factor. A fresh direction that took more than :data:`REFINE_REFRESH` products
#: makes the next one compute a new factor (the kept one has drifted). The products
#: read float32 copies of ``X`` and ``M`` (``Design.single_arrays``: half the memory of
#: the design's own arrays, kept while the design lives, i.e. for the fit). Where the loop
#: needs fresh directions often, each costs a few products instead of an ``O(N D^2)``
#: Hessian: Fashion-MNIST 4000 x 784, 10 classes, hinge ``q = 0.5``, ``C = 0.1``: 35
#: Hessians -> 15 and 420-440 products, the fit 4.1-4.4 -> 2.9-3.3 s (2 cores, AMD EPYC).
#: Measured on standardised ``make_classification`` data (refined / new factors, best of
#: 4 x 5 fits; hinge ``q = 0.3``, ``C = 0.1`` takes one factor and no fresh direction):
#: logistic ``q = 0.3``, ``C = 1`` / ``q = 0.1``, ``C = 10``: 4000 x 512 0.99 / 0.94,
#: 4000 x 784 0.81 / 0.76, 2000 x 1000 0.90 / 0.64; below, where a Hessian costs a few
#: milliseconds and CG's Python steps about as much, it lost: 2000 x 200 1.17-1.26,
#: 2000 x 400 1.15-1.21.
REFINE_MIN_FEATURES = 512

#: see :data:`REFINE_MIN_FEATURES`
REFINE_RTOL = 1e-4

#: see :data:`REFINE_MIN_FEATURES`
REFINE_MAXITER = 20

#: see :data:`REFINE_MIN_FEATURES`
REFINE_REFRESH = 20
