"""The house's measurable rules (issue 37, "Done when"), each a test that fails
with the offenders named: no module over 600 lines, no dead code by vulture, a
"where is" table in docs/architecture.md whose paths and names exist, and the
one-way flow of imports that the same document states. No database."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = ROOT / "docs" / "architecture.md"
MAX_LINES = 600


def _tracked_py() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    return [p for p in out.stdout.split() if "/migrations/" not in p]


def test_no_tracked_module_is_over_600_lines():
    over = {}
    for path in _tracked_py():
        count = len((ROOT / path).read_text().splitlines())
        if count > MAX_LINES:
            over[path] = count
    assert over == {}, f"modules over {MAX_LINES} lines: {over}"


def test_vulture_finds_no_dead_code():
    try:
        import vulture  # noqa: F401
    except ImportError:  # requirements-dev.txt: absent is a failure, not a skip
        pytest.fail("vulture is not installed (requirements-dev.txt)")
    command = [sys.executable, "-m", "vulture", ".", "vulture_whitelist.py"]
    command += ["--min-confidence", "60"]
    command += ["--exclude", ".venv,*/migrations/*,var,tests"]
    out = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    found = out.stdout + out.stderr
    assert (out.returncode, found) == (0, ""), f"vulture:\n{found}"


# --- docs/architecture.md's "where is" tables -------------------------------

TOKEN = re.compile(r"`([^`]+)`")
PATH = re.compile(r"^[A-Za-z_][\w/.]*(\.py|\.html|\.md|/)$")
NAME = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def where_rows(markdown: str) -> list[tuple[str, str]]:
    """The (what, where) cells of the tables under the "## Where is" heading."""
    rows, inside = [], False
    for line in markdown.splitlines():
        if line.startswith("## "):
            inside = line.lower().startswith("## where is")
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not inside or not line.lstrip().startswith("|") or len(cells) < 2:
            continue
        if set("".join(cells)) <= set("-: ") or cells[0] in ("what", "question"):
            continue
        rows.append((cells[0], cells[-1]))
    return rows


def where_refs(cell: str) -> list[tuple[str, str | None]]:
    """The paths a "where" cell names, each with None, and the names beside
    them, each with the path it is said to be in: the path before it, or the
    one after it when the text reads "`name` in `path`". A bare file name
    (`fitting.py`) is beside the path before it; a dotted name whose head is a
    module (`agents.base.WindowContext`) is in that module."""
    tokens = [(m.group(1), m.start(), m.end()) for m in TOKEN.finditer(cell)]
    refs: list[tuple[str, str | None]] = []
    last_path = None
    for index, (text, _start, end) in enumerate(tokens):
        if PATH.match(text):
            if "/" not in text and last_path is not None:
                folder = last_path.rsplit("/", 1)[0]
                text = f"{folder}/{text}"
            refs.append((text, None))
            last_path = text
            continue
        if not NAME.match(text):
            continue  # `STORAGES["realicu"]`, `<id:...>`, `manage.py serve`
        following = tokens[index + 1] if index + 1 < len(tokens) else None
        if (
            following
            and cell[end : following[1]] == " in "
            and PATH.match(following[0])
        ):
            refs.append((text.split(".")[0], following[0]))
        elif "." in text:
            refs.append((text, "dotted"))
        elif last_path is not None:
            refs.append((text, last_path))
    return refs


def _module_of(dotted: str) -> tuple[Path, str] | None:
    head, _, name = dotted.rpartition(".")
    base = ROOT.joinpath(*head.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path, name
    return None


def _defined(path: Path) -> set[str]:
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def _defined_at(where: str) -> set[str]:
    path = ROOT / where
    if path.is_dir():
        return set().union(*(_defined(p) for p in sorted(path.rglob("*.py"))))
    return _defined(path) if path.suffix == ".py" and path.is_file() else set()


def where_errors(markdown: str) -> list[str]:
    errors = []
    tracked = _tracked_py()
    for what, where in where_rows(markdown):
        refs = where_refs(where)
        paths = [name for name, path in refs if path is None]
        if len(paths) == 1:  # names in the question, answered by one path
            refs += [
                (name, paths[0])
                for name, path in where_refs(f"`{paths[0]}` {what}")
                if path == paths[0]
            ]
        for name, path in refs:
            if path is None:
                if not (ROOT / name).exists() and not any(
                    t.endswith("/" + name) for t in tracked
                ):
                    errors.append(f"{what!r}: no {name}")
            elif path == "dotted":
                found = _module_of(name)
                if found and found[1] not in _defined(found[0]):
                    errors.append(f"{what!r}: {name} is not defined")
            elif name not in _defined_at(path):
                errors.append(f"{what!r}: {name} is not defined in {path}")
    return errors


def test_the_where_is_parser_reads_paths_and_the_names_beside_them():
    markdown = (
        "## Where is ...\n\n"
        "| what | where |\n| --- | --- |\n"
        "| a | `accounts/web.py` (`refusal_shown`, `found_or_404`), "
        "`accounts/commands.py` (`command_row`) |\n"
        "| b | `oracle/backbones/dialects.py`, `fitting.py` (a budget) |\n"
        "| c | `agents/context.py` (`agents.base.WindowContext`); page `data-use/a/` |\n"
        '| d | `STORAGES["x"]` and `BUCKET` in `realicu_web/settings/base.py` |\n'
        "| e | `jobs/` (`job_fail`), `manage.py serve` |\n"
        "| the cut (`bedside_filter`) | `windows/selectors_context.py` |\n\n"
        "## How a request travels\n\n| x | `not/read.py` |\n"
    )
    refs = [where_refs(where) for _, where in where_rows(markdown)]
    assert refs == [
        [
            ("accounts/web.py", None),
            ("refusal_shown", "accounts/web.py"),
            ("found_or_404", "accounts/web.py"),
            ("accounts/commands.py", None),
            ("command_row", "accounts/commands.py"),
        ],
        [("oracle/backbones/dialects.py", None), ("oracle/backbones/fitting.py", None)],
        [("agents/context.py", None), ("agents.base.WindowContext", "dotted")],
        [
            ("BUCKET", "realicu_web/settings/base.py"),
            ("realicu_web/settings/base.py", None),
        ],
        [("jobs/", None), ("job_fail", "jobs/")],
        [("windows/selectors_context.py", None)],
    ]
    wrong = (
        markdown.replace("found_or_404", "found_or_403")
        .replace("fitting.py", "fitted.py")
        .replace("bedside_filter", "bedside_cut")
    )
    assert where_errors(wrong) == [
        "'a': found_or_403 is not defined in accounts/web.py",
        "'b': no oracle/backbones/fitted.py",
        "'d': BUCKET is not defined in realicu_web/settings/base.py",
        "'the cut (`bedside_cut`)': bedside_cut is not defined in "
        "windows/selectors_context.py",
    ]


def test_every_path_and_name_in_the_where_is_tables_exists():
    markdown = ARCHITECTURE.read_text()
    assert len(where_rows(markdown)) > 40
    assert where_errors(markdown) == []


# --- the one-way flow of imports -------------------------------------------

APPS_OF_ALL = {"accounts", "jobs"}  # "imported by everyone"


def flow(markdown: str) -> dict[str, set[str]]:
    """Which apps each app may import, from the code block under "## The
    one-way flow": a line's apps, then "imports a, b (why)", "imports any of the
    above" or the ground floor's "import no app above them". Everyone may
    import accounts and jobs, which import nothing of the apps."""
    block = markdown.split("## The one-way flow", 1)[1].split("```")[1]
    allowed: dict[str, set[str]] = {}
    for line in block.strip().splitlines():
        names, says = re.split(r"\s{2,}", line.strip().lstrip("->").strip(), maxsplit=1)
        apps = [a.strip() for a in names.split(",")]
        says = re.sub(r"\([^)]*\)", "", says)
        if "any of the above" in says:
            imports = set(allowed)
        elif "imports" in says:
            imports = {a.strip() for a in says.split("imports", 1)[1].split(",")}
        else:
            imports = set()
        for app in apps:
            allowed[app] = (imports | APPS_OF_ALL) - {app}
    for app in APPS_OF_ALL:
        allowed[app] = set()
    return allowed


def cross_imports(apps: set[str], root: Path = ROOT) -> list[tuple[str, str, str]]:
    """(importing app, imported module, where) for every absolute import in an
    app's modules (function bodies included, migrations left out) of another
    module of the project's apps."""
    found = []
    paths = (
        _tracked_py()
        if root == ROOT
        else sorted(str(p.relative_to(root)) for p in root.rglob("*.py"))
    )
    for path in paths:
        app = path.split("/")[0]
        if app not in apps:
            continue
        for node in ast.walk(ast.parse((root / path).read_text())):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
                modules += [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top in apps and top != app:
                    found.append((app, module, f"{path}:{node.lineno}"))
    return found


def flow_offences(markdown: str, root: Path = ROOT) -> dict[tuple[str, str], list]:
    allowed = flow(markdown)
    offences: dict[tuple[str, str], list] = {}
    for app, module, where in cross_imports(set(allowed), root):
        top = module.split(".")[0]
        if top not in allowed[app]:
            offences.setdefault((app, top), [])
            if where not in offences[(app, top)]:
                offences[(app, top)].append(where)
    return offences


def test_no_app_imports_an_app_its_flow_line_does_not_name():
    assert flow_offences(ARCHITECTURE.read_text()) == {}


def test_no_module_imports_another_app_s_views():
    apps = set(flow(ARCHITECTURE.read_text())) | {"realicu_web"}
    views = re.compile(r"^\w+\.views\w*(\.|$)")
    found = [
        f"{where} {module}"
        for app, module, where in cross_imports(apps)
        if views.match(module)
    ]
    assert found == []


def test_the_client_imports_neither_django_nor_the_apps():
    """STYLE.md: the researchers' client of the REST API has no Django import."""
    apps = set(flow(ARCHITECTURE.read_text())) | {"django", "rest_framework"}
    found = []
    for path in (ROOT / "client").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                modules = [node.module or ""]
            else:
                continue
            found += [
                f"{path.relative_to(ROOT)}:{node.lineno} {m}"
                for m in modules
                if m.split(".")[0] in apps
            ]
    assert found == []


def test_the_flow_is_read_from_the_document_and_an_upward_import_is_named(tmp_path):
    markdown = (
        "## The one-way flow\n\n```\n"
        "accounts, jobs, windows      ground floor: import no app above them\n"
        "      -> annotation          imports windows (labels)\n"
        "      -> exports             imports any of the above\n"
        "```\n"
    )
    assert flow(markdown) == {
        "accounts": set(),
        "jobs": set(),
        "windows": {"accounts", "jobs"},
        "annotation": {"accounts", "jobs", "windows"},
        "exports": {"accounts", "jobs", "windows", "annotation"},
    }
    for app in ("windows", "annotation", "exports"):
        (tmp_path / app).mkdir()
    (tmp_path / "windows" / "models.py").write_text(
        "def f():\n    from annotation.models import Label\n"
    )
    (tmp_path / "annotation" / "services.py").write_text("import exports.api\n")
    (tmp_path / "exports" / "api.py").write_text("from windows import models\n")
    assert flow_offences(markdown, tmp_path) == {
        ("windows", "annotation"): ["windows/models.py:2"],
        ("annotation", "exports"): ["annotation/services.py:1"],
    }
