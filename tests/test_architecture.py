"""The house keeps its shape (issue 18): imports run one way, from cli/ down to specs/; modules and
functions stay small; `perfmodel --help` loads none of the heavy libraries; every input goes through
perfmodel.inputs.load."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "perfmodel"
# lowest first; a module may import its own package and any package below it (README "How it is
# built")
LAYERS = ["units", "errors", "specs", "cost", "engine", "inputs", "review", "output", "cli"]
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 450, 80


def _modules():
    return sorted(p for p in PKG.rglob("*.py") if "configs" not in p.parts)


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "perfmodel" else None


def _imports(path: Path):
    tree = ast.parse(path.read_text())
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            yield node.lineno, mod
        elif isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name


def test_imports_run_one_way_down_the_layers():
    wrong = []
    for path in _modules():
        own = _layer(".".join(path.relative_to(ROOT).with_suffix("").parts))
        if own not in LAYERS:
            continue
        for line, mod in _imports(path):
            dep = _layer(mod)
            if dep in LAYERS and LAYERS.index(dep) > LAYERS.index(own):
                wrong.append(f"{path.relative_to(ROOT)}:{line} ({own}) imports {mod} ({dep})")
    assert not wrong, "\n".join(wrong)


def _module_graph() -> dict[str, set[str]]:
    """Module -> the perfmodel modules it imports: every import statement, at the top of the module,
    inside a function or under TYPE_CHECKING alike (each is an arrow between two ideas), with
    ``from package import module`` read as importing that module."""
    mods = {
        ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p
        for p in _modules()
    }
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        out = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1]) if node.level else ""
                mod = ".".join(x for x in (base, node.module or "") if x)
                for a in node.names:
                    hit = f"{mod}.{a.name}" if f"{mod}.{a.name}" in mods else mod
                    out.add(hit)
            elif isinstance(node, ast.Import):
                out.update(a.name for a in node.names)
        graph[name] = {m for m in out if m in mods and m != name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan 1972), iteratively."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, edges = work[-1]
            w = next(edges, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_no_two_modules_import_each_other():
    """No circle of imports, counting the ones inside functions (issue 41): a module that a module
    it imports imports back is one idea split in two, or a lower piece reaching up."""
    assert not _cycles(_module_graph())


def test_the_circle_test_finds_circles():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_command_modules_do_not_import_the_group():
    """The group loads the command modules by name; they import cli.common, never the group back."""
    for path in (PKG / "cli").glob("*.py"):
        if path.name != "__init__.py":
            assert all(mod != "perfmodel.cli" for _, mod in _imports(path)), path


def test_modules_and_functions_stay_small():
    long_modules = [
        f"{p.relative_to(ROOT)}: {n}"
        for p in _modules()
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    ]
    long_functions = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long_functions.append(
                        f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {n}"
                    )
    assert not long_modules and not long_functions, long_modules + long_functions


@pytest.mark.parametrize("args", [["--help"], ["bubble", "-m", "48", "-p", "8"]])
def test_fast_commands_load_no_heavy_library(args):
    """--help loads neither pydantic, numpy nor rich; bubble loads no pydantic (it reads no
    spec)."""
    code = (
        "import sys, json; from perfmodel.cli import main\ntry:\n    main("
        + repr(args)
        + ")\nexcept SystemExit:\n    pass\nprint(json.dumps(sorted(m for m in ('pydantic',"
        " 'numpy', 'rich', 'yaml') if m in sys.modules)))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = json.loads(r.stdout.strip().splitlines()[-1])
    assert loaded == ([] if args == ["--help"] else ["numpy"]), loaded


def test_only_the_loader_decides_what_kind_a_file_is():
    """No command re-detects the kind of a file: perfmodel.inputs.load alone calls kind_of."""
    callers = [p.relative_to(ROOT) for p in _modules() if "kind_of(" in p.read_text()]
    assert callers == [Path("perfmodel/inputs/load.py")], callers
