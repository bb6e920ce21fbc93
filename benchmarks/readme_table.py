"""The README's benchmark table, generated from the committed results files.

Run:  python benchmarks/readme_table.py [--write]

Every number is read from the newest (first) table of a file in ``benchmarks/results/``;
``--write`` replaces the block between the README's ``<!-- benchmark-table -->`` markers.
``tests/test_docs.py`` checks that the README holds exactly this table.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
START, END = "<!-- benchmark-table -->", "<!-- /benchmark-table -->"


def first_table(name, after=None):
    """The rows of the first markdown table of a results file (after the first line that
    starts with ``after``, if given): dicts by header."""
    lines = (RESULTS / name).read_text().splitlines()
    start = 0 if after is None else next(k for k, line in enumerate(lines)
                                         if line.startswith(after))
    i = next(k for k, line in enumerate(lines) if k >= start and line.startswith("| "))
    header = [c.strip() for c in lines[i].strip("|").split("|")]
    rows = []
    for line in lines[i + 2:]:
        if not line.startswith("|"):
            break
        rows.append(dict(zip(header, (c.strip().strip("*") for c in line.strip("|").split("|")))))
    return rows


def cell(name, key, column):
    """``column`` of the row whose first cell is ``key`` in the first table of ``name``."""
    for row in first_table(name):
        if next(iter(row.values())) == key:
            return row[column]
    raise KeyError(f"{key!r} not in {name}")


def corrupted_copies(label):
    """peer / ours of part 3 of solvers.txt (a fixed-width table) for ``label``."""
    for line in (RESULTS / "solvers.txt").read_text().splitlines():
        if line.startswith(label) and "x16" in line:
            return line.split()[-1]
    raise KeyError(label)


def times(ratio):
    """``"<ratio>x the time"``, with ``(slower)`` above 1."""
    return f"{ratio}x the time" + (" (slower)" if float(ratio) > 1 else "")


def table():
    """The README's benchmark table (markdown)."""
    fit = "plain_fit.txt"
    rows = [
        ("fit, dropout q = 0.3 (breast cancer LR)", "`LogisticRegression`, plain (q = 0)",
         times(cell(fit, 'breast cancer 569x30 LR q=.3 C=.5', 'ours / peer')), fit),
        ("fit, dropout q = 0.5 (newsgroups LR, sparse 1427 x 22178)",
         "`LogisticRegression`, plain",
         times(cell(fit, 'newsgroups 1427x22178 LR q=.5', 'ours / peer')), fit),
        ("fit, dropout q = 0.5 (newsgroups SVC)", "`LinearSVC` / `SVC`, plain",
         times(cell(fit, 'newsgroups 1427x22178 SVC q=.5', 'ours / peer')), fit),
        ("fit, dropout q = 0.2 (digits, 10 classes, SVC)", "`LinearSVC` / `SVC`, plain",
         times(cell(fit, 'digits 1797x64 10 classes SVC q=.2 C=.1', 'ours / peer')), fit),
        ("fit, dropout q = 0.5 (Fashion-MNIST 4000 x 784, 10 classes, SVC)",
         "`LinearSVC` / `SVC`, plain",
         times(cell(fit, 'Fashion-MNIST 4000x784 10 classes SVC q=.5 C=.1', 'ours / peer')),
         fit),
        ("dropout fit vs training on 16 corrupted copies (newsgroups)",
         "`LogisticRegression` on the copies",
         f"{corrupted_copies('newsgroups (half split)')}x faster", "solvers.txt"),
    ]
    cv = "cv_path.txt"
    for data, model, label in (("breast cancer 569 x 30", "LR", "breast cancer LR"),
                               ("breast cancer 569 x 30", "SVC", "breast cancer SVC"),
                               ("diabetes 442 x 10", "SVR", "diabetes SVR"),
                               ("newsgroups 1427 x 22178 (CSR)", "LR", "newsgroups LR")):
        ratio = next(r["ratio"] for r in first_table(cv)
                     if (r["data"], r["model"], r["grid"], r["n_jobs"])
                     == (data, model, "10 x 6", "1"))
        rows.append((f"choose (q, C) by 5-fold CV, 10 x 6 grid ({label})",
                     "`GridSearchCV` over the same grid and folds", f"{ratio}x faster", cv))
    sampler = "sampler_small.txt"
    col = "ours / better NUTS (ESS/s, min of bulk, tail)"
    for key, label in (("cancer logistic q=0", "breast cancer LR, q = 0"),
                       ("cancer logistic q=0.3", "breast cancer LR, q = 0.3"),
                       ("cancer hinge q=0", "breast cancer SVM, q = 0"),
                       ("cancer hinge q=0.3", "breast cancer SVM, q = 0.3"),
                       ("digits 8-vs-rest hinge q=0.3", "digits 8-vs-rest SVM, q = 0.3")):
        rows.append((f"posterior, ESS per second ({label}; 4 chains)",
                     "NumPyro NUTS, better of diagonal / dense mass",
                     f"{cell(sampler, key, col)}x", sampler))
    synthetic = "sampler_synthetic_dense_mass.txt"
    rows.append(("posterior, ESS per second (synthetic 10^4 x 50 LR, q = 0; 4 chains)",
                 "NumPyro NUTS, dense mass",
                 f"{cell(synthetic, 'synthetic 10000x50 logistic q=0', col)}x", synthetic))
    cold = first_table("cold_start.txt")
    fits = [float(r["first fit s"]) for r in cold]
    samples = [float(r["first sample s (2 x 500)"]) for r in cold]
    rows.append(("first fit / first posterior after install (numba compiles)", "-",
                 f"{min(fits):.1f}-{max(fits):.1f} s / {min(samples):.1f}-{max(samples):.1f} s",
                 "cold_start.txt"))
    warm = first_table("cold_start.txt", after="Part 2")
    whole = next(r for r in warm if r["timed"].startswith("the whole process"))
    rows.append(("a new process: import, fit and predict (breast cancer LR, numba cache warm)",
                 "`LogisticRegression` in its own process",
                 times(whole["ratio median"]), "cold_start.txt"))
    out = ["| task | peer (as configured in the results file) | ours against the peer | "
           "results |", "|---|---|---|---|"]
    out += [f"| {a} | {b} | {c} | `benchmarks/results/{d}` |" for a, b, c, d in rows]
    return "\n".join(out)


def readme_block(text):
    """The text between the README's markers."""
    match = re.search(re.escape(START) + r"\n(.*?)\n" + re.escape(END), text, re.S)
    return None if match is None else match.group(1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="update README.md")
    args = parser.parse_args()
    new = table()
    if args.write:
        path = ROOT / "README.md"
        text = path.read_text()
        old = readme_block(text)
        if old is None:
            raise SystemExit(f"README.md has no {START} ... {END} block")
        path.write_text(text.replace(old, new))
    print(new)


if __name__ == "__main__":
    main()
