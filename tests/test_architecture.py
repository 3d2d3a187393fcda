"""The house rules that code review keeps forgetting, checked on the source with `ast`: no import
cycles in memora/ and bot/ (TYPE_CHECKING imports count), the core never imports telegram, no
class over 300 lines, no module over 450 lines, no imports inside functions except the lazy
loads of heavy optional dependencies, each marked with a comment; parts composed rather than
inherited (at most two base classes), SQL only in memora/storage/, long-term memory apart from
the learner model and extraction, one meaning per file name, and no test importing a test."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import memora
from memora import errors

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("memora", "bot")
MAX_CLASS_LINES = 300
MAX_MODULE_LINES = 450


# Imports inside a function that load a heavy optional dependency only when it is used. Each
# such line carries a comment that says so (checked below).
LAZY_MARK = "lazily"


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def imported(name: str, path: Path, tree: ast.Module) -> Iterator[tuple[str, ast.stmt]]:
    """Every module name `tree` imports (relative imports resolved), with its statement."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            yield base, node
            for alias in node.names:  # `from pkg import module`
                yield f"{base}.{alias.name}", node


def graph() -> dict[str, set[str]]:
    known = modules()
    edges: dict[str, set[str]] = {}
    for name, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        targets = {target for target, _ in imported(name, path, tree) if target in known}
        edges[name] = targets - {name}
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
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


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_memora_and_bot_have_no_import_cycles() -> None:
    edges = graph()
    # A package's __init__ importing its own modules is how it re-exports them, not a cycle;
    # a module that imports its package's __init__ back is (that edge stays).
    for name in edges:
        edges[name] = {t for t in edges[name] if not t.startswith(name + ".")}
    assert cycles(edges) == []


def test_the_core_never_imports_telegram() -> None:
    for name, path in modules().items():
        if not name.startswith("memora"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for target, _ in imported(name, path, tree):
            assert target.split(".")[0] not in {"telegram", "bot"}, (name, target)


def test_no_module_over_450_lines_and_no_class_over_300() -> None:
    too_big: list[str] = []
    for name, path in modules().items():
        text = path.read_text(encoding="utf-8")
        if len(text.splitlines()) > MAX_MODULE_LINES:
            too_big.append(f"{name}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                qualified = f"{name}.{node.name}"
                if lines > MAX_CLASS_LINES:
                    too_big.append(f"{qualified}: {lines} lines")
    assert too_big == []


def test_imports_inside_functions_are_only_marked_lazy_loads() -> None:
    unmarked: list[str] = []
    for name, path in modules().items():
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for func in ast.walk(ast.parse(text)):
            if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(func):
                if isinstance(node, ast.Import | ast.ImportFrom):
                    said = lines[node.lineno - 1] + (
                        lines[node.lineno - 2] if node.lineno > 1 else ""
                    )
                    if LAZY_MARK not in said:
                        unmarked.append(f"{name}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    assert unmarked == []


def test_the_packages_have_no_import_cycles_between_them() -> None:
    """One level up: memora.learner, memora.storage, memora.longterm, bot.telegram ... and the
    top-level modules, each as one node."""
    collapsed: dict[str, set[str]] = {}
    for name, targets in graph().items():
        node = ".".join(name.split(".")[:2])
        collapsed.setdefault(node, set()).update(".".join(t.split(".")[:2]) for t in targets)
    for node in collapsed:
        collapsed[node].discard(node)
    assert cycles(collapsed) == []


def test_the_public_surface_is_small_and_every_error_is_a_memora_error() -> None:
    assert sorted(memora.__all__) == sorted(
        [
            "ChatRef",
            "Engine",
            "MemoraError",
            "Reply",
            "Settings",
            "UserRef",
            "__version__",
            "load_settings",
            "open_engine",
        ]
    )
    for name in errors.__all__:
        assert issubclass(getattr(errors, name), memora.MemoraError), name
    # importing the adapters changes nothing in the environment
    probe = (
        "import os; os.environ.pop('PTB_TIMEDELTA', None); e = dict(os.environ); "
        "import bot.cli, bot.telegram; print(e == os.environ)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


def classes() -> Iterator[tuple[str, ast.ClassDef]]:
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                yield f"{name}.{node.name}", node


def test_parts_are_composed_not_inherited() -> None:
    """A class has at most two base classes (exceptions aside: their tree is `errors.py`'s)."""
    many = {
        name
        for name, node in classes()
        if len(node.bases) > 2 and not name.startswith("memora.errors.")
    }
    assert many == set()


def test_no_class_inherits_behaviour_from_a_class_that_inherits_it_too() -> None:
    """A part's methods are in its own class or in one base class of ours (an interface such as
    `Lesson` or `OpenAILLM`), never down a chain. Data schemas (pydantic) may extend each other."""
    bases: dict[str, list[str]] = {}
    home: dict[str, str] = {}
    for name, node in classes():
        bases[node.name] = [ast.unparse(b).rpartition(".")[2] for b in node.bases]
        home[node.name] = name.rpartition(".")[0]

    def ours(cls: str) -> list[str]:
        return [b for b in bases.get(cls, []) if b in bases]

    def schema(cls: str) -> bool:
        return "BaseModel" in bases.get(cls, []) or any(schema(b) for b in ours(cls))

    chained = {
        home[cls] for cls in bases if not schema(cls) and any(ours(parent) for parent in ours(cls))
    }
    chained = {".".join(module.split(".")[:2]) for module in chained}
    assert chained == set()


def test_longterm_imports_neither_the_learner_model_nor_extraction() -> None:
    """Long-term memory stores and ranks; what to extract into it is decided above it."""
    for name, targets in graph().items():
        if name.startswith("memora.longterm"):
            banned = {t for t in targets if t.startswith(("memora.learner", "memora.extraction"))}
            assert banned == set(), (name, banned)


# A statement of SQL: the words that start one, followed by what only SQL puts after them.
SQL = re.compile(
    r"\b(SELECT\b[\s\S]+?\bFROM|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|"
    r"CREATE\s+(TABLE|INDEX|UNIQUE)|DROP\s+(TABLE|INDEX)|ALTER\s+TABLE|PRAGMA\s+\w+|sqlite_master)\b"
)


def test_the_sql_finder_finds_sql_and_not_prose() -> None:
    assert SQL.search("SELECT a, b FROM t WHERE user_id=?")
    assert SQL.search("DELETE FROM learner_words WHERE user_id=?")
    assert SQL.search("PRAGMA wal_checkpoint(TRUNCATE)")
    assert not SQL.search("Delete everything stored about you? Nothing can bring it back.")
    assert not SQL.search("update %s arrived again; it was handled or is queued")


def test_sql_is_written_only_in_storage() -> None:
    writing: set[str] = set()
    for name, path in modules().items():
        if name.startswith("memora.storage"):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if id(node) not in docstrings and SQL.search(node.value):
                    writing.add(name)
    assert writing == set()


def test_every_file_name_has_one_meaning() -> None:
    """Within the core, and within the adapters, no two modules share a file name; an adapter's
    module may share the name of the core part it adapts."""
    for package in PACKAGES:
        seen: dict[str, list[str]] = {}
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.name != "__init__.py":
                seen.setdefault(path.stem, []).append(str(path.relative_to(ROOT)))
        twice = {stem: paths for stem, paths in seen.items() if len(paths) > 1}
        assert twice == {}


def test_about_a_dozen_top_level_modules_in_the_core() -> None:
    """Each top-level module of memora/ is a concern the whole core shares; a feature is a
    package."""
    top = sorted(p.stem for p in (ROOT / "memora").glob("*.py") if p.stem != "__init__")
    assert len(top) <= TOP_LEVEL_MODULES, top


# app blocking check clock config errors i18n startup textnorm types usage views
TOP_LEVEL_MODULES = 12


def imports_of_tests(tree: ast.Module) -> Iterator[tuple[str, int]]:
    """The test_* modules `tree` imports (`from tests.test_x import …`, `import test_x`,
    `from . import test_x`), each with its line."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            names = [base, *(f"{base}.{alias.name}".lstrip(".") for alias in node.names)]
        else:
            continue
        for name in names:
            if any(part.startswith("test_") for part in name.split(".")):
                yield name, node.lineno
                break


def test_no_test_module_imports_a_test_module() -> None:
    """Tests share their tools through tests/support/ and tests/conftest.py, never by importing
    another test module, in tests/ or in benchmarks/."""
    sample = "from tests.test_x import y\nfrom . import test_z\nfrom tests.support import bot\n"
    assert [n for n, _ in imports_of_tests(ast.parse(sample))] == ["tests.test_x", "test_z"]
    found = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for folder in ("tests", "benchmarks")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for name, line in imports_of_tests(ast.parse(path.read_text("utf-8")))
    ]
    assert found == []
