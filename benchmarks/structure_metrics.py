"""Coupling and size metrics of the source tree, measured with :mod:`ast` (nothing is imported).

The table the structural review and issue "One loop, declared plug-in points" track, over ``privaudit/`` and
``attacks/``:

* lines of code (physical lines of the .py files);
* function-level imports of the project's own modules (an ``import``/``from … import`` of ``privaudit`` or
  ``attacks`` inside a function body), with the packages that hold the most;
* ``getattr(obj, name, default)`` calls (three arguments);
* private names (``_x``) imported from another module of the project;
* import cycles between packages (``privaudit.fl.engine`` → its first two components below the root, e.g.
  ``privaudit.fl``), counting function-level imports: the strongly connected components with more than one package;
* modules over 500 lines, functions over 80 lines, functions with ≥ 10 parameters (``self``/``cls`` not counted;
  typer command signatures under ``privaudit/cli`` listed apart);
* modules outside ``privaudit/papers/`` whose code (docstrings and comments aside) names a paper.

Usage: ``.venv/bin/python benchmarks/structure_metrics.py [--json PATH] [--detail]``; prints a Markdown table.
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import re
import tokenize
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("privaudit", "attacks")
PAPER_WORDS = {
    "upcycled": re.compile(r"upcycl", re.I),
    "fedreg": re.compile(r"fedreg", re.I),
    "privatefl": re.compile(r"privatefl", re.I),
    "pfa": re.compile(r"\bpfa|pfa\b|_pfa|pfa_", re.I),
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def own(name: str) -> bool:
    return name.split(".")[0] in PACKAGES


def package_of(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "privaudit" else parts[0] if len(parts) < 2 else ".".join(parts[:2])


def code_text(source: str) -> str:
    """The source without comments and docstrings (string constants that are whole expression statements)."""
    tree = ast.parse(source)
    doc_lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            doc_lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    kept = []
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    for tok in tokens:
        if tok.type == tokenize.COMMENT or tok.start[0] in doc_lines:
            continue
        if tok.type in (tokenize.NAME, tokenize.STRING, tokenize.OP, tokenize.NUMBER):
            kept.append(tok.string)
    return " ".join(kept)


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
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
            out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def measure() -> dict:
    files = sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))
    lines = 0
    function_imports: Counter[str] = Counter()
    getattr_defaults: list[str] = []
    private_imports: list[str] = []
    long_modules: list[str] = []
    long_functions: list[str] = []
    many_params: list[str] = []
    many_params_typer: list[str] = []
    paper_modules: dict[str, list[str]] = defaultdict(list)
    package_graph: dict[str, set[str]] = defaultdict(set)
    module_graph: dict[str, set[str]] = defaultdict(set)
    modules = {module_name(p) for p in files}
    for path in files:
        source = path.read_text()
        rel = str(path.relative_to(ROOT))
        n_lines = source.count("\n") + 1
        lines += n_lines
        if n_lines > 500:
            long_modules.append(f"{rel} ({n_lines})")
        module = module_name(path)
        tree = ast.parse(source)
        is_package = path.name == "__init__.py"
        parents: dict[ast.AST, ast.AST] = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                parents[child] = node

        def in_function(node: ast.AST, parents: dict[ast.AST, ast.AST] = parents) -> bool:
            while node in parents:
                node = parents[node]
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                    return True
            return False

        for node in ast.walk(tree):
            targets: list[tuple[str, list[str]]] = []
            if isinstance(node, ast.Import):
                targets = [(alias.name, []) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = resolve(module, is_package, node)
                targets = [(base, [alias.name for alias in node.names])]
            for target, names in targets:
                if not own(target):
                    continue
                if isinstance(node, ast.ImportFrom) and node.level == 0 and under_type_checking(node, parents):
                    continue
                if in_function(node):
                    function_imports[package_of(module)] += 1
                src_pkg, dst_pkg = package_of(module), package_of(target)
                if src_pkg != dst_pkg:
                    package_graph[src_pkg].add(dst_pkg)
                imported_modules = [f"{target}.{n}" if f"{target}.{n}" in modules else target for n in names] or [target]
                for dst in imported_modules:
                    if dst in modules and dst != module:
                        module_graph[module].add(dst)
                for name in names:
                    if name.startswith("_") and not name.startswith("__") and target != module:
                        private_imports.append(f"{rel}:{node.lineno} ← {target}.{name}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr" \
                    and len(node.args) == 3:
                getattr_defaults.append(f"{rel}:{node.lineno}")
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > 80:
                    long_functions.append(f"{rel}:{node.lineno} {node.name} ({length})")
                args = node.args
                params = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs) if a.arg not in ("self", "cls")]
                if len(params) >= 10:
                    entry = f"{rel}:{node.lineno} {node.name} ({len(params)})"
                    typer = rel.startswith("privaudit/cli/") and any(
                        isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and d.func.attr == "command"
                        for d in node.decorator_list)
                    (many_params_typer if typer else many_params).append(entry)
        if not rel.startswith("privaudit/papers/"):
            text = code_text(source)
            for paper, pattern in PAPER_WORDS.items():
                if pattern.search(text):
                    paper_modules[paper].append(rel)
    package_cycles = [c for c in strongly_connected(package_graph) if len(c) > 1]
    module_cycles = [c for c in strongly_connected(module_graph) if len(c) > 1]
    return {
        "lines": lines,
        "function_level_imports": sum(function_imports.values()),
        "function_level_imports_by_package": dict(function_imports.most_common()),
        "getattr_with_default": getattr_defaults,
        "private_imports_across_modules": private_imports,
        "package_cycles": package_cycles,
        "module_cycles": module_cycles,
        "modules_over_500_lines": long_modules,
        "functions_over_80_lines": long_functions,
        "functions_with_10_or_more_parameters": many_params,
        "typer_commands_with_10_or_more_parameters": many_params_typer,
        "modules_naming_a_paper_outside_papers": dict(paper_modules),
    }


def under_type_checking(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """True for an import under ``if TYPE_CHECKING:`` (not a run-time dependency)."""
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            return True
    return False


def table(m: dict) -> str:
    top = ", ".join(f"{k} {v}" for k, v in list(m["function_level_imports_by_package"].items())[:4])
    papers = ", ".join(f"{k} {len(v)}" for k, v in m["modules_naming_a_paper_outside_papers"].items())
    rows = [
        ("lines in privaudit/ + attacks/", f"{m['lines']:,}"),
        ("function-level imports of own modules", f"{m['function_level_imports']} ({top})"),
        ("`getattr(obj, name, default)`", str(len(m["getattr_with_default"]))),
        ("private names imported across modules", str(len(m["private_imports_across_modules"]))),
        ("import cycles between packages", str(len(m["package_cycles"]))
         + (f" ({'; '.join(' ↔ '.join(c) for c in m['package_cycles'])})" if m["package_cycles"] else "")),
        ("import cycles between modules", str(len(m["module_cycles"]))),
        ("modules > 500 lines", str(len(m["modules_over_500_lines"]))),
        ("functions > 80 lines", str(len(m["functions_over_80_lines"]))),
        ("functions with ≥ 10 parameters (typer commands apart)",
         f"{len(m['functions_with_10_or_more_parameters'])} (+ {len(m['typer_commands_with_10_or_more_parameters'])})"),
        ("modules outside papers/ naming a paper", papers or "0"),
    ]
    out = ["| metric | value |", "|---|---|"]
    out += [f"| {name} | {value} |" for name, value in rows]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write every metric with its sites")
    parser.add_argument("--detail", action="store_true", help="list the sites under the table")
    args = parser.parse_args()
    metrics = measure()
    print(table(metrics))
    if args.detail:
        for key, value in metrics.items():
            if isinstance(value, list) and value:
                print(f"\n{key}:")
                for item in value:
                    print(f"  {item}")
    if args.json:
        args.json.write_text(json.dumps(metrics, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
