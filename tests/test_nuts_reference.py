"""The Gibbs sampler with its scheduled exact moves against long NumPyro NUTS runs.

``tests/nuts_reference.json`` holds, for three breast-cancer posteriors ``exp(-J)``, every
parameter's posterior mean and standard deviation with their Monte Carlo standard errors
from NUTS (dense mass, x64, 4 x 25000 draws; ``benchmarks/nuts_reference.py`` writes it --
an independent sampler of the same target). Our draws (the default ``sample``: compiled
sweeps, the moves the schedule picks in tuning) must match each within 4 combined MCSE.
"""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from bayesdrop._arviz import mcse
from bayesdrop.samplers import sample
from bayesdrop.solvers import fit_problem

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = json.loads((ROOT / "tests" / "nuts_reference.json").read_text())


def _build():
    spec = importlib.util.spec_from_file_location(
        "nuts_reference", ROOT / "benchmarks" / "nuts_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build


@pytest.mark.parametrize("name", sorted(REFERENCE["problems"]))
def test_posterior_moments_match_long_nuts(name):
    ref = REFERENCE["problems"][name]
    problem = _build()(ref["loss"], ref["C"], ref["noise_level"])
    theta_hat = fit_problem(problem).theta
    res = sample(problem, draws=5000, tune=1000, chains=4, theta_hat=theta_hat,
                 random_state=0, progressbar=False)
    assert np.all(res.mh_moves >= 0)  # the scheduled independence moves ran
    if ref["noise_level"] == 0:  # zero noise at large C: the slice moves joined the sweep
        assert all(moves.slice is not None for moves in res.last_state.moves)
    theta = res.theta
    for k in range(theta.shape[-1]):
        x = theta[..., k]
        se_mean = np.hypot(mcse(x), ref["mcse_mean"][k])
        assert abs(x.mean() - ref["mean"][k]) <= 4 * se_mean, (k, x.mean(), ref["mean"][k])
        se_sd = np.hypot(mcse(x, "sd"), ref["mcse_sd"][k])
        assert abs(x.std() - ref["sd"][k]) <= 4 * se_sd, (k, x.std(), ref["sd"][k])
