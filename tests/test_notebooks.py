"""Execute the notebooks top to bottom on reduced sizes (BAYESDROP_SMALL=1)."""

from pathlib import Path

import pytest

pytestmark = pytest.mark.heavy  # few long tests: scheduled first (conftest.py)

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted((Path(__file__).parent.parent / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path, tmp_path, monkeypatch):
    monkeypatch.setenv("BAYESDROP_SMALL", "1")
    monkeypatch.setenv("CI", "true")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors


_NOTEBOOK_SETUP = """
import numpy as np
from bayesdrop import LogisticLoss, Dropout, Problem
from bayesdrop.samplers import sample
from bayesdrop.solvers import fit_problem
rng = np.random.default_rng(0)
X = rng.normal(size=(1500, 30))
y = np.where(X[:, 0] + 0.5 * rng.normal(size=1500) > 0, 1.0, -1.0)
problem = Problem.create(X, y, LogisticLoss(1.0), Dropout(0.3))
theta = fit_problem(problem).theta
sample(problem, draws=2, tune=1, chains=1, theta_hat=theta, progressbar=False)  # compiles
"""


@pytest.mark.parametrize("cores", [1, 2], ids=["in-sequence", "in-threads"])
def test_the_notebook_interrupt_button_returns_the_draws_so_far(cores):
    """Jupyter's "interrupt the kernel" (SIGINT to the kernel process, whose handler
    ipykernel swaps in for each cell) during ``sample``: the cell ends within seconds
    with the draws so far, and the kernel goes on (the next cell runs)."""
    import queue
    import time

    jupyter_client = pytest.importorskip("jupyter_client")
    km, kc = jupyter_client.manager.start_new_kernel(kernel_name="python3")
    try:
        reply = kc.execute_interactive(_NOTEBOOK_SETUP, timeout=180)
        assert reply["content"]["status"] == "ok", reply["content"]
        msg_id = kc.execute(
            "print('STARTED', flush=True)\n"
            f"res = sample(problem, draws=10**7, tune=5, chains=2, cores={cores}, "
            "theta_hat=theta, progressbar=False, random_state=0)\n"
            "print('RETURNED', res.interrupted, res.theta.shape[1] > 0)")
        out, sent, status = "", None, None
        deadline = time.monotonic() + 60
        while status is None and time.monotonic() < deadline:
            try:
                msg = kc.get_iopub_msg(timeout=1)
            except queue.Empty:  # nothing yet
                msg = None
            if sent is None and "STARTED" in out:
                time.sleep(1.5)  # into the kept draws
                km.interrupt_kernel()
                sent = time.monotonic()
            if msg is None or msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "stream":
                out += msg["content"]["text"]
            elif msg["msg_type"] == "error":
                out += "ERROR " + msg["content"]["ename"]
            elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                status = "idle"
        assert sent is not None and status == "idle", out
        assert time.monotonic() - sent < 10, out  # (the kernel's output loop adds latency)
        assert "RETURNED True True" in out, out
        after = kc.execute_interactive("print(res.theta.shape[0])", timeout=30)
        assert after["content"]["status"] == "ok"  # the kernel goes on
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
