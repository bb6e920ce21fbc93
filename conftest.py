"""pytest configuration shared by the tests and the doctests of the package."""

import numpy as np
import pytest

collect_ignore = ["bayesdrop/__main__.py"]


@pytest.fixture(autouse=True)
def _doctest_numpy(doctest_namespace):
    """Doctest examples may use ``np`` without importing it."""
    doctest_namespace["np"] = np
