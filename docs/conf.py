"""Sphinx configuration: numpydoc API reference, MyST pages, notebooks rendered with outputs."""

import os
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import bayesdrop  # noqa: E402

project = "bayesdrop"
author = "bayesdrop developers"
copyright = "2026, bayesdrop developers"
release = version = bayesdrop.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.intersphinx",
    "numpydoc",
    "myst_nb",
]

# the notebooks live in ../notebooks; copy them in (with their stored outputs) at build time
_nb_src, _nb_dst = HERE.parent / "notebooks", HERE / "notebooks"
_nb_dst.mkdir(exist_ok=True)
for nb in _nb_src.glob("*.ipynb"):
    shutil.copy2(nb, _nb_dst / nb.name)
# the committed study figures, shown on the robustness page
_res_src, _res_dst = HERE.parent / "benchmarks" / "results", HERE / "_results"
_res_dst.mkdir(exist_ok=True)
for png in _res_src.glob("robustness_*.png"):
    shutil.copy2(png, _res_dst / png.name)
nb_execution_mode = "off"  # rendered from the outputs stored in the repository

templates_path = ["_templates"]
autosummary_generate = True
autodoc_default_options = {"members": True, "inherited-members": False}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
myst_enable_extensions = ["dollarmath", "amsmath"]
suppress_warnings = ["mystnb.unknown_mime_type"]

intersphinx_mapping = {
    "python": ("https://docs.python.org/3", None),
    "numpy": ("https://numpy.org/doc/stable/", None),
    "sklearn": ("https://scikit-learn.org/stable/", None),
    "arviz": ("https://python.arviz.org/en/stable/", None),
}
# offline builds (CI, this machine) must not fail on the inventories
if os.environ.get("BAYESDROP_DOCS_OFFLINE", "1") == "1":
    intersphinx_mapping = {}

exclude_patterns = ["_build", "README.md", "**.ipynb_checkpoints"]
html_theme = "pydata_sphinx_theme"
html_title = "bayesdrop"
html_theme_options = {"navigation_with_keys": False}


def _skip_sklearn_plumbing(app, what, name, obj, skip, options):
    """Hide scikit-learn's generated metadata-routing methods (``set_fit_request`` ...)."""
    if name.startswith("set_") and name.endswith("_request"):
        return True
    if name in ("get_metadata_routing", "get_params", "set_params"):
        return True
    return skip


def setup(app):
    app.connect("autodoc-skip-member", _skip_sklearn_plumbing)
