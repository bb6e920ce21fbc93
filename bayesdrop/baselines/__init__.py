"""Baselines from the related papers (MATH.md section 7), with the estimators' conventions.

One module per method: :mod:`.mcf`, :mod:`.wager`, :mod:`.t_logistic`, :mod:`.invariant`,
:mod:`.explicit`; the classifiers fitted problem by problem share the one-vs-rest engine
(:mod:`bayesdrop.estimators._base`).

============================================  ==============================================
estimator                                     objective (per binary problem, ``y`` in +-1)
============================================  ==============================================
:class:`MCFQuadraticClassifier`               ``1/2 ||w||^2 + (C/2) sum_n E (y_n - w.x~_n - b)^2``
:class:`MCFLogisticRegression`                ``1/2 ||w||^2 + C sum_n log(1 + E exp(-y_n w.x~_n - y_n b))``
:class:`WagerDropoutLogisticRegression`       ``1/2 ||w||^2 + C [sum_n log(1 + e^{-y_n m_n}) + R_q]``
:class:`TLogisticRegression`                  ``1/2 ||W||^2 - C sum_n log p_t(y_n | x_n)``
:class:`InvariantSVC`                         ``1/2 ||(w, b/s)||^2 + C sum_n max(0, 1 - min_{x' in S(x_n)} y_n f(x'))``
:class:`ExplicitCorruptionClassifier`         any estimator fitted on ``M`` corrupted copies
============================================  ==============================================

All are scikit-learn classifiers (``fit`` returns ``self``; ``coef_``, ``intercept_``,
``classes_``, ``n_iter_``); multiclass problems are one-vs-rest except for the t-logistic
regression, whose multiclass model is the joint one of the paper. ``C`` means what it
means for :class:`sklearn.linear_model.LogisticRegression`: at zero noise (``t = 1``,
no deleted features) each reduces to the ordinary model, which the tests check.
"""

from .explicit import ExplicitCorruptionClassifier
from .invariant import InvariantSVC, worst_case_margin
from .mcf import MCFLogisticRegression, MCFQuadraticClassifier
from .t_logistic import TLogisticRegression, exp_t, log_t, t_partition
from .wager import WagerDropoutLogisticRegression

__all__ = [
    "MCFQuadraticClassifier",
    "MCFLogisticRegression",
    "WagerDropoutLogisticRegression",
    "TLogisticRegression",
    "InvariantSVC",
    "ExplicitCorruptionClassifier",
    "exp_t",
    "log_t",
    "t_partition",
    "worst_case_margin",
]
