"""Count, for every view, the service and selector functions it calls.

STYLE.md: views and DRF APIs only parse, call one service or selector, and
render. A view here is a public top-level function of an app's ``views*.py`` or
``exports/api*.py`` module, or a class there (its methods together). A call
counts when its callee was imported from a ``services``, ``selectors`` or
``blindness`` module (or a ``services_*`` / ``selectors_*`` one), directly or
through the module's own private helpers. Distinct callees are counted.

Usage: ``python scripts/view_calls.py [--over N]`` prints every view with more
than N (default 2) such calls, and exits 1 if there is one.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYER = re.compile(r"^(services|selectors|blindness)(_\w+)?$")
# Modules of services that do not say so in their name.
SERVICE_MODULES = {
    "annotation.calibration",
    "annotation.calibration_judging",
    "jobs.reaper",
    "windows.builds",
    "windows.import_batches",
}


def _is_layer(module: str) -> bool:
    return module in SERVICE_MODULES or any(
        LAYER.match(part) for part in module.split(".")
    )


def _is_module(dotted: str, root: Path) -> bool:
    path = root.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _view_modules(root: Path) -> list[Path]:
    found = []
    for path in sorted(root.glob("*/views*.py")) + sorted(root.glob("exports/api*.py")):
        if ".venv" not in path.parts:
            found.append(path)
    return found


def _imports(tree: ast.Module, package: str, root: Path) -> tuple[dict, dict]:
    """Names bound to layer functions, and names bound to layer modules."""
    functions: dict[str, str] = {}
    modules: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([package, base]).strip(".")
            for alias in node.names:
                bound = alias.asname or alias.name
                full = f"{base}.{alias.name}"
                if _is_layer(alias.name) or (
                    _is_layer(full) and _is_module(full, root)
                ):
                    modules[bound] = full
                elif _is_layer(base):
                    functions[bound] = full
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if _is_layer(alias.name):
                    modules[alias.asname or alias.name] = alias.name
    return functions, modules


def _callee(call: ast.Call, functions: dict, modules: dict) -> str | None:
    func = call.func
    if isinstance(func, ast.Name) and func.id in functions:
        return functions[func.id]
    parts = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name) and parts and func.id in modules:
        if parts[-1][:1].isupper():  # a constant's method (FILTERS.items())
            return None
        return ".".join([modules[func.id], *reversed(parts)])
    return None


def _local_calls(node: ast.AST) -> set[str]:
    return {
        call.func.id
        for call in ast.walk(node)
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
    }


def module_counts(path: Path, root: Path = ROOT) -> dict[str, set[str]]:
    """Each view of the module with the service and selector functions it
    calls."""
    tree = ast.parse(path.read_text(), filename=str(path))
    functions, modules = _imports(tree, path.parent.name, root)
    bodies = {
        node.name: node
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    }
    direct = {
        name: {
            callee
            for call in ast.walk(node)
            if isinstance(call, ast.Call)
            and (callee := _callee(call, functions, modules))
        }
        for name, node in bodies.items()
    }
    helpers = {name for name in bodies if name.startswith("_")}

    def reach(name: str, seen: set[str]) -> set[str]:
        calls = set(direct[name])
        for local in _local_calls(bodies[name]) & helpers:
            if local not in seen:
                seen.add(local)
                calls |= reach(local, seen)
        return calls

    return {
        name: reach(name, {name})
        for name in bodies
        if not name.startswith("_")
        and not (
            isinstance(bodies[name], ast.ClassDef)
            and not any(
                isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
                for item in bodies[name].body
            )
        )
    }


def views_over(limit: int = 2, root: Path = ROOT) -> list[tuple[str, set[str]]]:
    over = []
    for path in _view_modules(root):
        for name, calls in module_counts(path, root).items():
            if len(calls) > limit:
                over.append((f"{path.relative_to(root)}:{name}", calls))
    return over


def main(argv: list[str]) -> int:
    limit = int(argv[argv.index("--over") + 1]) if "--over" in argv else 2
    over = views_over(limit)
    for where, calls in over:
        print(f"{len(calls)}  {where}: {', '.join(sorted(calls))}")
    print(f"{len(over)} views call more than {limit} services/selectors")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
