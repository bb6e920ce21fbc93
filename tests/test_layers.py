"""The package's layers hold: model <- linalg <- solvers, samplers <- inference data <-
estimators <- baselines, studies and the applications, with no import cycle and no
lower layer importing a higher one. Imports are read from the source (module-level and
function-level alike), so a lazy import inside a function counts too."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "bayesdrop"

#: layers from the bottom up; a module belongs to the longest prefix that names it
LAYERS = [
    ("base", ["bayesdrop._validation", "bayesdrop._progress", "bayesdrop._threads",
              "bayesdrop._version", "bayesdrop._blas", "bayesdrop._jit", "bayesdrop._blocks"]),
    ("model", ["bayesdrop.model"]),
    ("linalg", ["bayesdrop.linalg"]),
    ("solvers and samplers", ["bayesdrop.solvers", "bayesdrop.samplers"]),
    ("inference data", ["bayesdrop._arviz", "bayesdrop.posterior", "bayesdrop.predictive",
                        "bayesdrop.diagnostics"]),
    ("estimators", ["bayesdrop.estimators"]),
    ("baselines, studies, applications", ["bayesdrop.baselines", "bayesdrop.studies",
                                          "bayesdrop.demo", "bayesdrop.warmup",
                                          "bayesdrop.__main__", "bayesdrop"]),
]


def _modules():
    mods = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            name = ".".join(parts[:-1])
            package = name
        else:
            name = ".".join(parts)
            package = ".".join(parts[:-1])
        mods[name] = (path, package)
    return mods


def import_graph():
    """``{module: set of bayesdrop modules it imports}`` (``from a import b`` counts as an
    import of ``a.b`` where that is a module)."""
    mods = _modules()
    graph = {}
    for name, (path, package) in mods.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    targets.add(sub if sub in mods else target)
            elif isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
        graph[name] = {t for t in targets if t in mods and t != name}
    return graph


def layer(module):
    best = None
    for level, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[1]:
                    best = (level, len(prefix))
    return None if best is None else best[0]


def cycles(graph):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_the_checks_find_a_cycle_and_an_upward_edge():
    graph = {"bayesdrop.model.a": {"bayesdrop.solvers.b"},
             "bayesdrop.solvers.b": {"bayesdrop.model.a"}}
    assert cycles(graph) == [["bayesdrop.model.a", "bayesdrop.solvers.b"]]
    assert layer("bayesdrop.model.a") < layer("bayesdrop.solvers.b")


def test_every_module_has_a_layer():
    assert [m for m in import_graph() if layer(m) is None] == []


def test_no_import_cycle():
    assert cycles(import_graph()) == []


def test_no_lower_layer_imports_a_higher_one():
    graph = import_graph()
    upward = sorted(f"{a} -> {b}" for a, targets in graph.items() for b in targets
                    if layer(b) > layer(a))
    assert upward == []


@pytest.mark.parametrize("module", ["bayesdrop.samplers.driver", "bayesdrop.samplers.rows",
                                    "bayesdrop.solvers.dual", "bayesdrop.solvers.smoothing",
                                    "bayesdrop.estimators._base", "bayesdrop.estimators._dask"])
def test_former_circles_are_open(module):
    """The circles there were (driver <-> rows, dual <-> smoothing, _base <-> _dask) stay
    open: no module reaches itself."""
    graph = import_graph()
    seen, todo = set(), list(graph[module])
    while todo:
        v = todo.pop()
        if v not in seen:
            seen.add(v)
            todo.extend(graph[v])
    assert module not in seen
