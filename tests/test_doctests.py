"""Run the examples in the public docstrings as doctests."""

import doctest
import importlib

import pytest

MODULES = ["bayesdrop.estimators", "bayesdrop.augmentation", "bayesdrop.posterior",
           "bayesdrop.noise", "bayesdrop.losses", "bayesdrop.wls", "bayesdrop.irls",
           "bayesdrop.gibbs", "bayesdrop.diagnostics", "bayesdrop.design",
           "bayesdrop.baselines", "bayesdrop.datasets", "bayesdrop.studies"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE,
                             extraglobs={"np": importlib.import_module("numpy")})
    assert result.failed == 0
