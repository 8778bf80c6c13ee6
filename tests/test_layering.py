"""The package's layers, checked on the source: which module may import which.

Every module of ``privaudit`` and ``attacks`` is parsed with :mod:`ast` (nothing is imported, so the test is fast
and needs no torch). Three kinds of dependency are collected, wherever they occur (module level or inside a
function):

* ``import x`` / ``from x import y`` (relative imports resolved against the module's package);
* ``importlib.import_module("x")`` / ``__import__("x")`` with a literal string;
* a string constant that is exactly a dotted module name of this project (optionally ``module:attribute``): the
  references that are imported by name later (the papers' ``PAPER`` values, claims' ``recipe``).

A dependency breaks a rule when the importing module lies in the rule's layer and the imported name lies in one of
the rule's forbidden packages (prefix match on whole dotted components: ``torch`` forbids ``torch.nn`` but not
``torchmetrics``). The failure message lists ``file:line`` for each.

Exceptions are listed below by file and imported module, each with its reason; anything not listed fails, so a new
layering break cannot slip in unnoticed.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("privaudit", "attacks")

TORCH = ("torch", "torchvision", "opacus")
ABOVE_FL_CORE = ("privaudit.papers", "privaudit.audit", "privaudit.cli", "privaudit.report", "privaudit.interop")


@dataclass(frozen=True)
class Rule:
    """Modules under ``layer`` (``privaudit.cli`` etc.; ``""`` = every module) never import ``forbidden``."""

    layer: str
    forbidden: tuple[str, ...]
    why: str
    allowed_importers: tuple[str, ...] = ()  # modules under these prefixes are exempt from this rule

    def applies_to(self, module: str) -> bool:
        return _within(module, self.layer) and not any(_within(module, p) for p in self.allowed_importers)


RULES = (
    Rule(
        "privaudit.accounting",
        (*TORCH, "privaudit.fl", "privaudit.stats", "privaudit.audit", "privaudit.papers", "privaudit.report",
         "privaudit.cli", "attacks"),
        "accounting is numpy/scipy only: compute-epsilon must start without torch, and it sits below everything",
    ),
    Rule(
        "privaudit.stats",
        ("torch", "torchvision", "privaudit.fl", "privaudit.audit", "privaudit.papers", "privaudit.report",
         "privaudit.cli", "attacks"),
        "the ε-lower-bound statistics are pure functions of score arrays",
    ),
    Rule("attacks", ("privaudit.audit", "privaudit.cli"), "attacks produce scores; audits consume them, not the reverse"),
    Rule(
        "privaudit.data",
        ("privaudit.models", "privaudit.fl", "privaudit.papers", "privaudit.audit", "privaudit.report", "privaudit.cli",
         "attacks"),
        "datasets are the bottom of the training stack: loaders and partitioners know no model or algorithm",
    ),
    Rule(
        "privaudit.models",
        ("privaudit.fl", "privaudit.papers", "privaudit.audit", "privaudit.report", "privaudit.cli", "attacks"),
        "the model zoo sits below the round loop, which builds models by name (no models <-> fl cycle)",
    ),
    Rule(
        "privaudit.audit",
        ("privaudit.papers",),
        "the papers plug their claims into the generic audit (claims types, plan, runner, verdict), never the reverse",
    ),
    Rule("privaudit.fl.engine", ABOVE_FL_CORE, "the round loop knows no paper, audit, report or CLI"),
    Rule(
        "privaudit.interop",
        ("privaudit.papers", "privaudit.cli"),
        "interop turns the user's own training into checkpoints (and runs audits on it) on top of the engine and the "
        "generic audit; it knows no paper",
    ),
    Rule(
        "",
        ("privaudit.interop",),
        "only the CLI (and interop itself) uses the recorders; checkpoints they write are read through fl.engine",
        allowed_importers=("privaudit.interop", "privaudit.cli"),
    ),
    Rule("privaudit.fl.algorithms", ABOVE_FL_CORE, "generic algorithms know no paper, audit, report or CLI"),
    Rule("privaudit.fl.privacy", ABOVE_FL_CORE, "privatizers know no paper, audit, report or CLI"),
    Rule(
        "",
        ("privaudit.cli",),
        "the CLI is the top layer; only it and `python -m privaudit` may import it",
        allowed_importers=("privaudit.cli", "privaudit.__main__"),
    ),
    Rule(
        "privaudit.report",
        ("privaudit.audit", "privaudit.fl", "privaudit.papers", "privaudit.cli"),
        "the report only renders result files",
    ),
)

#: (file relative to the repository, imported module) → reason. An entry covers the module and the names imported
#: from it. Keep this list short and explicit; each entry says why it is allowed or which issue removes it.
KNOWN_EXCEPTIONS: dict[tuple[str, str], str] = {}


def _excepted(dep: Dependency) -> bool:
    return any(dep.path == path and _within(dep.imported, module) for path, module in KNOWN_EXCEPTIONS)

_MODULE_STRING = re.compile(r"^(?:privaudit|attacks)(?:\.\w+)+(?::\w+)?$")


@dataclass(frozen=True)
class Dependency:
    path: str  # relative to ROOT
    line: int
    importer: str
    imported: str


def _within(module: str, prefix: str) -> bool:
    return prefix == "" or module == prefix or module.startswith(prefix + ".")


def _module_name(relpath: str) -> str:
    parts = relpath.removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve_relative(importer: str, is_package: bool, level: int, module: str | None) -> str:
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, module] if module else base)


def _is_type_checking_block(node: ast.AST) -> bool:
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def dependencies(rel: str, source: str) -> list[Dependency]:
    """Everything the module at ``rel`` (a path relative to the repository) with text ``source`` depends on."""
    importer = _module_name(rel)
    found: list[Dependency] = []

    def add(node: ast.AST, name: str) -> None:
        found.append(Dependency(rel, node.lineno, importer, name))

    tree = ast.parse(source, filename=rel)
    type_only = {id(child) for node in ast.walk(tree) if _is_type_checking_block(node)
                 for stmt in node.body for child in ast.walk(stmt)}
    for node in ast.walk(tree):
        if id(node) in type_only:  # ``if TYPE_CHECKING:`` imports never run
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(node, alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = (
                _resolve_relative(importer, rel.endswith("/__init__.py"), node.level, node.module)
                if node.level
                else node.module or ""
            )
            add(node, base)
            # ``from privaudit import cli`` imports the submodule privaudit.cli
            for alias in node.names:
                add(node, f"{base}.{alias.name}")
        elif isinstance(node, ast.Call):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            first = node.args[0] if node.args else None
            if called in ("import_module", "__import__") and isinstance(first, ast.Constant) and isinstance(first.value, str):
                add(node, first.value)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _MODULE_STRING.match(node.value):
            add(node, node.value.partition(":")[0])
    return list(dict.fromkeys(found))  # import_module("x") is both a call and a module string: count it once


def all_dependencies() -> list[Dependency]:
    paths = sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))
    return [
        dep
        for path in paths
        for dep in dependencies(path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8"))
    ]


def violations(dependencies: list[Dependency]) -> list[tuple[Dependency, Rule]]:
    out = []
    for dep in dependencies:
        for rule in RULES:
            if rule.applies_to(dep.importer) and any(_within(dep.imported, f) for f in rule.forbidden):
                out.append((dep, rule))
    return out


def _format(dep: Dependency, rule: Rule) -> str:
    return f"{dep.path}:{dep.line}: {dep.importer} imports {dep.imported} ({rule.why})"


def test_no_forbidden_imports():
    unexpected = [
        _format(dep, rule)
        for dep, rule in violations(all_dependencies())
        if not _excepted(dep)
    ]
    assert not unexpected, "forbidden imports:\n" + "\n".join(sorted(set(unexpected)))


def test_known_exceptions_are_still_needed():
    """A listed exception whose import is gone must be removed from the list (it would hide a future break)."""
    found = [dep for dep, _ in violations(all_dependencies())]
    stale = sorted(
        f"{path}: {module}"
        for path, module in KNOWN_EXCEPTIONS
        if not any(dep.path == path and _within(dep.imported, module) for dep in found)
    )
    assert not stale, "exceptions no longer needed, remove them from KNOWN_EXCEPTIONS:\n" + "\n".join(stale)


def _violations_in(relpath: str, source: str) -> list[str]:
    return sorted({f"{d.importer} -> {d.imported}" for d, _ in violations(dependencies(relpath, source))})


@pytest.mark.parametrize(
    ("relpath", "source", "expected"),
    [
        # function-level import, relative import, import_module with a literal, a plugin string
        ("privaudit/accounting/x.py", "def f():\n    import torch.nn\n", ["privaudit.accounting.x -> torch.nn"]),
        ("privaudit/stats/x.py", "from ..fl.engine import glm\n",
         ["privaudit.stats.x -> privaudit.fl.engine", "privaudit.stats.x -> privaudit.fl.engine.glm"]),
        ("attacks/x.py", "import importlib\nimportlib.import_module('privaudit.audit.runner')\n",
         ["attacks.x -> privaudit.audit.runner"]),
        ("privaudit/fl/engine/x.py", "MODULES = ('privaudit.papers.pfa.specs',)\n",
         ["privaudit.fl.engine.x -> privaudit.papers.pfa.specs"]),
        ("privaudit/data/x.py", "from privaudit import cli\n", ["privaudit.data.x -> privaudit.cli"]),
        ("privaudit/report/x.py", "from privaudit.audit.verdict import Verdict\n",
         ["privaudit.report.x -> privaudit.audit.verdict", "privaudit.report.x -> privaudit.audit.verdict.Verdict"]),
        # allowed: the CLI importing itself, torchmetrics is not torch, stats importing accounting
        ("privaudit/cli/x.py", "import privaudit.cli.common\n", []),
        ("privaudit/__main__.py", "from privaudit.cli.app import entry\n", []),
        ("privaudit/accounting/x.py", "import torchmetrics\n", []),
        ("privaudit/stats/x.py", "from privaudit.accounting import rdp\n", []),
    ],
)
def test_checker_finds_what_it_should(relpath, source, expected):
    assert sorted(_violations_in(relpath, source)) == sorted(expected)


# --------------------------------------------------------------------------------------------------
# Ranked layers and cycles: every dependency points down (or within its layer), and nothing imports in a circle
# --------------------------------------------------------------------------------------------------

#: The layers from the bottom up. A module may depend on its own layer and the layers below it, never above; a
#: package not listed here fails :func:`test_every_module_has_a_layer` until it is placed deliberately.
LAYERS: tuple[tuple[str, ...], ...] = (
    # shared utilities that know no feature: errors, range checks, output folders, the plug-in registry's type,
    # progress bars, tables, devices, the JSON Schemas, the package's own metadata
    ("privaudit.errors", "privaudit.checks", "privaudit.output_folder", "privaudit.plugins", "privaudit.device",
     "privaudit.request_checks", "privaudit.progress", "privaudit.tables", "privaudit.schemas", "privaudit"),
    ("privaudit.accounting",),          # ε from mechanisms; numpy/scipy only
    ("privaudit.stats",),               # ε lower bounds from scores
    ("privaudit.data",),
    ("privaudit.models",),
    ("privaudit.executor",),
    ("privaudit.report",),              # renders result files (no trainer, no audit)
    ("privaudit.fl.engine",),           # the one round loop, trainers, checkpoints
    ("privaudit.fl.algorithms",),
    ("privaudit.fl.privacy",),
    ("privaudit.fl.run", "privaudit.fl"),
    ("privaudit.fl.canaries",),
    ("privaudit.fl.train_request",),
    ("attacks.metrics", "attacks"),
    ("attacks.membership",),
    ("attacks.inversion",),
    ("privaudit.check",),               # declared against observed
    ("privaudit.audit",),
    ("privaudit.papers",),              # the audited systems, plugged in through privaudit.plugins
    ("privaudit.interop",),
    ("privaudit.cli", "privaudit.__main__"),
)

#: (file, imported module) → why this dependency may point up or close a cycle. Keep it short; every entry says why.
LAYER_EXCEPTIONS: dict[tuple[str, str], str] = {
    ("privaudit/plugins.py", "privaudit.papers"): "the entry-point group's name ('privaudit.papers') is a string the "
                                                  "registry reads entry points by, not an import",
}

_ALL_LAYER_ENTRIES = sorted({entry for layer in LAYERS for entry in layer}, key=len, reverse=True)


def _layer_entry(module: str) -> str | None:
    """The most specific layer entry a module belongs to (``privaudit`` itself matches only privaudit/__init__)."""
    for entry in _ALL_LAYER_ENTRIES:
        if module == entry or (entry != "privaudit" and module.startswith(entry + ".")):
            return entry
    return None


def _rank(module: str) -> int:
    entry = _layer_entry(module)
    return next(i for i, layer in enumerate(LAYERS) if entry in layer)


def _project_modules() -> set[str]:
    return {_module_name(p.relative_to(ROOT).as_posix()) for package in PACKAGES for p in (ROOT / package).rglob("*.py")}


def _resolved(dependencies: list[Dependency], modules: set[str]) -> list[tuple[Dependency, str]]:
    """Each dependency on the project with the module it lands in (``from x import name`` → x unless x.name is one)."""
    out = []
    for dep in dependencies:
        target = dep.imported
        while target and target not in modules:
            target = target.rpartition(".")[0]
        # a module's own ancestor packages run before it anyway (``from pkg import sub`` names pkg): not a dependency
        if target and target != dep.importer and not dep.importer.startswith(target + "."):
            out.append((dep, target))
    return out


def _layer_excepted(dep: Dependency, target: str) -> bool:
    return any(dep.path == path and _within(target, module) for path, module in LAYER_EXCEPTIONS)


def test_every_module_has_a_layer():
    unplaced = sorted(m for m in _project_modules() if _layer_entry(m) is None)
    assert not unplaced, "modules in no layer (add their package to LAYERS where it belongs):\n" + "\n".join(unplaced)


def test_every_dependency_points_down_the_layers():
    upward = sorted({
        f"{dep.path}:{dep.line}: {dep.importer} (layer {_rank(dep.importer)}) imports {target} (layer {_rank(target)})"
        for dep, target in _resolved(all_dependencies(), _project_modules())
        if _rank(target) > _rank(dep.importer) and not _layer_excepted(dep, target)
    })
    assert not upward, "dependencies pointing up the layers:\n" + "\n".join(upward)


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan 1972), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def _graphs() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    modules: dict[str, set[str]] = {}
    packages: dict[str, set[str]] = {}
    for dep, target in _resolved(all_dependencies(), _project_modules()):
        if _layer_excepted(dep, target):
            continue
        modules.setdefault(dep.importer, set()).add(target)
        source, sink = _layer_entry(dep.importer), _layer_entry(target)
        if source != sink:
            packages.setdefault(source, set()).add(sink)
    return modules, packages


def test_no_import_cycle_between_modules_or_packages():
    """Function-level imports count: a cycle hidden inside a function is still a cycle."""
    modules, packages = _graphs()
    assert not _cycles(packages), f"import cycles between packages: {_cycles(packages)}"
    assert not _cycles(modules), f"import cycles between modules: {_cycles(modules)}"


def test_the_cycle_finder_finds_cycles():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_layer_exceptions_are_still_needed():
    used = {(dep.path, module) for dep, target in _resolved(all_dependencies(), _project_modules())
            for path, module in LAYER_EXCEPTIONS if dep.path == path and _within(target, module)}
    assert set(LAYER_EXCEPTIONS) == used, f"stale layer exceptions: {sorted(set(LAYER_EXCEPTIONS) - used)}"
