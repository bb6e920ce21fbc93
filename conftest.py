"""pytest configuration shared by the tests and the doctests of the package."""

import numpy as np
import pytest

collect_ignore = ["bayesdrop/__main__.py"]


@pytest.fixture(autouse=True)
def _doctest_numpy(doctest_namespace):
    """Doctest examples may use ``np`` without importing it."""
    doctest_namespace["np"] = np


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "heavy: a test file of few but long tests (whole kernel sets compiled in "
        "fresh processes, notebooks, the docs' build), scheduled first (see "
        "pytest_collection_modifyitems)")


def pytest_collection_modifyitems(config, items):
    """The order in which xdist's ``--dist loadfile`` hands out the test files (with
    ``--no-loadscope-reorder``, ``pyproject.toml``; pytest-xdist 3.8 or later): files with a test marked ``heavy``
    first, then by number of tests, most first (xdist's own order). xdist's order alone
    put the three compile-coverage tests of ``tests/test_warmup.py`` (about 200 s on one
    worker) last, while the other worker had nothing left to run."""
    files = {}
    for item in items:
        files.setdefault(item.nodeid.split("::")[0], []).append(item)

    def cost(entry):
        tests = entry[1]
        return (not any(t.get_closest_marker("heavy") for t in tests), -len(tests))

    items[:] = [t for _, tests in sorted(files.items(), key=cost) for t in tests]
