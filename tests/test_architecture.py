"""The shape of the tree (DESIGN.md, "Layers, and the one-way rule"): checked on every run.

Every import in ``logstore/`` is read from the source (module level, under
``TYPE_CHECKING`` and inside functions alike: an import that only dodges a
cycle is still the cycle) and checked against the layers::

    base (errors, the C core) <- records <- storage <- protocol <- security <- coordinator <- broker <- cluster
    client: sees base, records, protocol, security
    top: embedded, arrow, spark, cli, the tools: see everything, seen by nothing below
    console (the web console): sees the base and the client; only the CLI imports it

A layer imports only layers below it; modules import each other with no cycle;
no Python file is over :data:`LINES_MAX` lines.

The tree does not meet this yet (issue 23 is the work that gets it there):
``tests/architecture_debt.txt`` lists the violations known today, one per
line. The check fails on any violation not listed, and on a listed one that
is gone (delete its line: the list only shrinks).

The tests' own shape is checked too: tests/ mirrors ``logstore/`` (a test
stands beside what it tests, Kafka's ``PartitionTest`` beside ``Partition``),
with the shared kit in tests/kit/; and tiers are markers, not folders: every
test module names its tier, and one that starts processes is not ``unit``.
"""

from __future__ import annotations

import ast
import pathlib
from collections.abc import Iterator

import pytest

pytestmark = pytest.mark.unit

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "logstore"
DEBT = pathlib.Path(__file__).resolve().parent / "architecture_debt.txt"
LINES_MAX = 1000

# The base: the error table, the C core (cffi's _native_c and the _speedups extension are not .py
# files), crash points for the crash tests, progress reporting for long work.
BASE = (
    "logstore.errors", "logstore._native", "logstore._speedups", "logstore._native_c",
    "logstore._crashpoints", "logstore._progress",
)  # fmt: skip
# The layers in order, lowest first (prefixes of module names).
LAYERS = (
    BASE,
    ("logstore.records",),
    ("logstore.storage",),
    ("logstore.protocol",),
    ("logstore.security",),
    ("logstore.coordinator", "logstore.schemas"),
    ("logstore.broker",),
    ("logstore.cluster",),
)
CLIENT = "logstore.client"
TOP = -1
# The web console (logstore/console) sits at the top: it sees the base and the client only (it
# speaks to any Kafka-compatible cluster over the wire), and only the CLI imports it.
CONSOLE = "logstore.console"
CONSOLE_IMPORTERS = ("logstore.cli",)


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, pathlib.Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def rank(name: str) -> int:
    """The module's layer: 0.. for the ordered layers, len(LAYERS) for the client, TOP for the rest."""
    for index, prefixes in enumerate(LAYERS):
        if any(_within(name, prefix) for prefix in prefixes):
            return index
    if _within(name, CLIENT):
        return len(LAYERS)
    return TOP


def allowed(importer: str, imported: str) -> bool:
    """May ``importer`` import ``imported`` (both logstore modules)?"""
    a, b = rank(importer), rank(imported)
    if _within(imported, CONSOLE) and not _within(importer, CONSOLE):
        return any(_within(importer, prefix) for prefix in CONSOLE_IMPORTERS)
    if _within(importer, CONSOLE) and not _within(imported, CONSOLE):
        return b in (0, len(LAYERS))  # the base and the client
    if a == TOP:
        return True
    if b == TOP:
        return False
    client = len(LAYERS)
    if a == client:
        return b == client or b in (0, 1, 3, 4)  # base, records, protocol, security
    if b == client:
        return False
    return b <= a


def imports(path: pathlib.Path, name: str, known: dict[str, pathlib.Path]) -> Iterator[tuple[str, int]]:
    """(imported logstore module, line) for each import in the file, wherever it stands."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if (  # importlib.import_module("logstore.x"): an import by name is an import
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and _within(node.args[0].value, "logstore")
        ):
            yield _existing(node.args[0].value, known), node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if _within(alias.name, "logstore"):
                    yield _existing(alias.name, known), node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            if not _within(source, "logstore"):
                continue
            for alias in node.names:
                candidate = f"{source}.{alias.name}"
                extension = candidate in BASE  # a compiled module: no .py to find
                yield (candidate if candidate in known or extension else _existing(source, known)), node.lineno


def _existing(name: str, known: dict[str, pathlib.Path]) -> str:
    """The module ``name`` names: itself, or the package that holds the attribute it names."""
    while name not in known and name not in BASE and "." in name:
        name = name.rpartition(".")[0]
    return name


def graph() -> tuple[dict[str, set[str]], list[str]]:
    """The import graph of logstore's modules, and the upward imports as debt lines."""
    known = modules()
    edges: dict[str, set[str]] = {name: set() for name in known}
    upward = []
    for name, path in known.items():
        for imported, _line in imports(path, name, known):
            if imported == name or imported not in known:
                continue
            edges[name].add(imported)
            if not allowed(name, imported):
                upward.append(f"upward import: {name} -> {imported}")
    return edges, sorted(set(upward))


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def violations() -> list[str]:
    edges, upward = graph()
    found = list(upward)
    for component in cycles(edges):
        found.append(f"import cycle: {' '.join(component)}")
    for path in modules().values():
        lines = len(path.read_text().splitlines())
        if lines > LINES_MAX:
            found.append(f"file over {LINES_MAX} lines: {path.relative_to(ROOT)}")
    return sorted(found)


def _debt() -> list[str]:
    return [line.strip() for line in DEBT.read_text().splitlines() if line.strip() and not line.startswith("#")]


def test_layers_cycles_and_file_sizes() -> None:
    found = set(violations())
    debt = set(_debt())
    new = sorted(found - debt)
    paid = sorted(debt - found)
    assert not new, "new violations of DESIGN.md's layers (fix them; do not list them):\n" + "\n".join(new)
    assert not paid, f"gone from the tree: delete these lines from {DEBT.name}:\n" + "\n".join(paid)


def test_the_check_sees_what_it_must() -> None:
    """The checker itself: an upward import, a cycle and the client rule are caught."""
    assert not allowed("logstore.storage.log", "logstore.broker.broker")
    assert not allowed("logstore.security.sasl", "logstore.broker.network.connection")
    assert not allowed("logstore.client.cluster", "logstore.embedded")
    assert not allowed("logstore.broker.network.inter_broker", "logstore.client.connection")
    assert allowed("logstore.client.connection", "logstore.protocol.frames")
    assert allowed("logstore.embedded", "logstore.broker.broker")
    assert allowed("logstore.cluster.zk_broker", "logstore.broker.broker")
    assert allowed("logstore.console.topics", "logstore.client.admin")
    assert allowed("logstore.cli.web_console", "logstore.console.app")
    assert not allowed("logstore.console.app", "logstore.broker.broker")
    assert not allowed("logstore.embedded", "logstore.console.app")
    assert not allowed("logstore.broker.broker", "logstore.console")
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


# -- the tests' shape -------------------------------------------------------

TESTS = ROOT / "tests"
KIT_FOLDERS = {"kit", "kit/java"}
"""The shared kit (helpers, fixtures, scripts run by path, Java sources): tests of no package."""
OTHER_SOURCES = {"native": ROOT / "native"}
"""Test folders of sources outside ``logstore/``: the C core (native/*.c, logstore._native)."""
TIERS = ("unit", "property", "integration", "crash", "external")
"""Each test module names one of these in its ``pytestmark`` (``cluster`` and ``spark`` come
with ``integration``); pyproject.toml describes them."""
PROCESS_TIERS = ("integration", "crash", "external")
PROCESS_KITS = (
    "tests.kit.brokerkit", "tests.kit.clusterkit", "tests.kit.saslkit", "tests.kit.txnkit",
    "tests.kit.sparkkit", "tests.kit.crashkit", "tests.kit.librdkafka_suite",
)  # fmt: skip
PROCESS_FIXTURES = frozenset({"broker", "broker_factory", "fast_broker", "cluster", "zookeeper", "zk_connect", "spark"})
"""Fixtures that start processes (tests/conftest.py, tests/kit/zookeeper_fixtures.py, tests/spark/)."""


def folders_of_tests() -> list[str]:
    """Every folder of tests/ holding Python files, as a path relative to tests/ ("" is tests/)."""
    found = {path.parent.relative_to(TESTS).as_posix() for path in TESTS.rglob("*.py")}
    found |= {path.parent.relative_to(TESTS).as_posix() for path in TESTS.rglob("*.java")}
    return sorted(name if name != "." else "" for name in found if "__pycache__" not in name)


def mirrored(folder: str) -> bool:
    """Does tests/<folder> stand for something the repository has?"""
    if folder == "" or folder in KIT_FOLDERS:
        return True
    if folder in OTHER_SOURCES:
        return OTHER_SOURCES[folder].is_dir()
    return (PACKAGE / folder / "__init__.py").is_file() or (PACKAGE / f"{folder}.py").is_file()



def test_tests_mirror_the_packages() -> None:
    folders = folders_of_tests()
    strays = [f"tests/{folder}/" for folder in folders if not mirrored(folder)]
    assert not strays, (
        "test folders that mirror no logstore package or module (move the tests beside what they "
        "test; helpers go to tests/kit/):\n" + "\n".join(strays)
    )
    missing = [f"tests/{folder}/__init__.py" for folder in folders if folder not in ("kit/java",)
               and not (TESTS / folder / "__init__.py").is_file()]  # fmt: skip
    assert not missing, "every test folder is a package (see tests/conftest.py):\n" + "\n".join(missing)


def module_tiers(tree: ast.Module) -> list[str]:
    """The markers a test module's ``pytestmark`` names (``pytest.mark.<name>``)."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            return [
                mark.attr
                for mark in ast.walk(node.value)
                if isinstance(mark, ast.Attribute) and isinstance(mark.value, ast.Attribute) and mark.value.attr == "mark"
            ]
    return []


def starts_processes(tree: ast.Module) -> bool:
    """Does the module use a kit or a fixture that starts broker (or ZooKeeper, Spark, crash) processes?"""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
            if names & set(PROCESS_KITS):
                return True
        elif (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.name.startswith("test")
            and PROCESS_FIXTURES & {arg.arg for arg in node.args.args}
        ):
            return True
    return False


def test_every_test_module_names_its_tier() -> None:
    untiered, misplaced = [], []
    for path in sorted(TESTS.rglob("test_*.py")):
        tree = ast.parse(path.read_text(), str(path))
        names = module_tiers(tree)
        where = path.relative_to(ROOT).as_posix()
        if not any(name in TIERS for name in names):
            untiered.append(f"{where}: pytestmark names none of {', '.join(TIERS)}")
        elif {"cluster", "spark"} & set(names) and "integration" not in names:
            untiered.append(f"{where}: cluster and spark tests are integration tests too")
        if starts_processes(tree) and not any(name in PROCESS_TIERS for name in names):
            misplaced.append(f"{where}: starts processes, so its tier is one of {', '.join(PROCESS_TIERS)}")
    assert not untiered + misplaced, "\n".join(untiered + misplaced)


def test_the_tier_check_sees_what_it_must() -> None:
    tiered = ast.parse("import pytest\npytestmark = [pytest.mark.slow, pytest.mark.integration]\n")
    assert module_tiers(tiered) == ["slow", "integration"]
    assert module_tiers(ast.parse("x = 1\n")) == []
    assert starts_processes(ast.parse("from tests.kit.brokerkit import BrokerProcess\n"))
    assert starts_processes(ast.parse("from tests.kit import crashkit as ck\n"))
    assert starts_processes(ast.parse("def test_a(broker): pass\n"))
    assert not starts_processes(ast.parse("from tests.kit.wire import WireClient\ndef test_a(tmp_path): pass\n"))
    assert mirrored("broker/network") and mirrored("arrow") and mirrored("native") and mirrored("kit")
    assert not mirrored("unit") and not mirrored("integration")
