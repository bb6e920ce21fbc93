"""Robustness studies: data, study harnesses and their figures.

* :mod:`.datasets` -- bundled newsgroups text, digits, breast cancer, Fashion-MNIST,
  Long-Servedio, Mease-Wyner and rare-features generators, label flipping;
* :mod:`.robustness` -- nightmare at test time, label noise, posterior-predictive
  calibration (ECE, Brier, the reliability table);
* :mod:`.plots` -- :func:`plot_study`, :func:`reliability_diagram`.
"""

from . import datasets
from .plots import plot_study, reliability_diagram
from .robustness import (DELETION_LEVELS, calibration_table, classification_metrics,
                         delete_features, expected_calibration_error, grid,
                         label_noise_study, nightmare_at_test_time, uncertainty_study)

__all__ = ["datasets", "grid", "delete_features", "expected_calibration_error",
           "classification_metrics", "nightmare_at_test_time", "label_noise_study",
           "uncertainty_study", "plot_study", "DELETION_LEVELS", "calibration_table",
           "reliability_diagram"]
