"""Build the documentation site with warnings as errors (as CI does)."""

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.heavy  # few long tests: scheduled first (conftest.py)

pytest.importorskip("sphinx")
pytest.importorskip("numpydoc")
pytest.importorskip("myst_nb")
pytest.importorskip("pydata_sphinx_theme")


def test_docs_build_without_warnings(tmp_path):
    docs = Path(__file__).resolve().parents[1] / "docs"
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
         "-d", str(tmp_path / "doctrees"), str(docs), str(tmp_path / "html")],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-5000:]
    html = (tmp_path / "html" / "api.html").read_text()
    assert "DropoutSVC" in html and "TLogisticRegression" in html
    assert (tmp_path / "html" / "notebooks" / "robustness_uncertainty.html").exists()
