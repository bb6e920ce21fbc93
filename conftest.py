"""pytest configuration shared by the tests and the doctests of the package."""

import numpy as np
import pytest

# deprecated module aliases (bayesdrop/_compat.py): their docstrings live in the new homes
collect_ignore = [f"bayesdrop/{name}.py" for name in
                  ("augmentation", "datasets", "design", "gibbs", "irls", "latent", "losses",
                   "noise", "problem", "wls")] + ["bayesdrop/__main__.py"]


@pytest.fixture(autouse=True)
def _doctest_numpy(doctest_namespace):
    """Doctest examples may use ``np`` without importing it."""
    doctest_namespace["np"] = np
