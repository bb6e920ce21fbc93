"""The README's benchmark table is the one generated from the committed results files."""

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _generator():
    spec = importlib.util.spec_from_file_location("readme_table",
                                                  ROOT / "benchmarks" / "readme_table.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_benchmark_table_equals_the_results_files():
    gen = _generator()
    block = gen.readme_block((ROOT / "README.md").read_text())
    assert block is not None, "README.md lost its benchmark-table markers"
    assert block == gen.table(), "run: python benchmarks/readme_table.py --write"


def test_readme_numbers_outside_the_table_are_in_a_results_file():
    """Every ``1.23x`` ratio quoted in the README's prose appears in a results file."""
    text = (ROOT / "README.md").read_text()
    gen = _generator()
    prose = text.replace(gen.readme_block(text), "")
    results = "\n".join(p.read_text() for p in (ROOT / "benchmarks" / "results").glob("*.txt"))
    for ratio in re.findall(r"\b(\d+\.\d+)x\b", prose):
        assert ratio in results, ratio


def test_readme_has_no_history():
    text = (ROOT / "README.md").read_text().lower()
    for word in ("latest run", "session", "previous run", "two sessions ago", "used to"):
        assert word not in text, word
