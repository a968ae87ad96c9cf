"""The package dependency graph: every lerobot_* import is declared in package.xml and points down.

    msgs, core  <-  dataset, runtime  <-  drivers, recorder, policy_node  <-  sim  <-  bringup

lerobot_dataset (the LeRobotDataset v3 library) is ROS-free: it imports only lerobot_core, and
never rclpy (nor lerobot_core.ros), so it installs and runs without ROS.
lerobot_runtime (the plain-torch policies and checkpoint loading) is ROS-free in the same way.

Plain pytest, no ROS: imports are read from the source with ``ast`` (also the ones inside functions).
Package code must be covered by exec_depend/depend; test code by those or test_depend.
"""

from __future__ import annotations

import ast
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGES = sorted(
    p.name for p in SRC.iterdir() if (p / "package.xml").is_file() and p.name.startswith("lerobot_")
)

# the lerobot_* packages each package may import (besides itself)
LOWER = {"lerobot_msgs", "lerobot_core", "lerobot_dataset", "lerobot_runtime"}
MIDDLE = {"lerobot_drivers", "lerobot_recorder", "lerobot_policy_node"}
# ROS-free packages: no rclpy import anywhere in their code (lerobot_core's is in lerobot_core.ros only)
ROS_FREE = {"lerobot_dataset", "lerobot_runtime"}
ALLOWED = {
    "lerobot_msgs": set(),
    "lerobot_core": {"lerobot_msgs"},
    "lerobot_dataset": {"lerobot_core"},
    "lerobot_runtime": {"lerobot_core"},
    **{pkg: LOWER for pkg in MIDDLE},
    "lerobot_sim": LOWER | MIDDLE,
    "lerobot_bringup": LOWER | MIDDLE | {"lerobot_sim"},
}


def _all_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every absolute import in a file (also the ones inside functions)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module))
    return out


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every absolute lerobot_* import in a file."""
    return [(line, mod) for line, mod in _all_imports(path) if mod.split(".")[0].startswith("lerobot_")]


def _python_files(pkg: str, tests: bool) -> list[Path]:
    root = SRC / pkg
    code = sorted((root / pkg).rglob("*.py")) + sorted((root / "launch").glob("*.py"))
    return sorted((root / "test").rglob("*.py")) if tests else code


def _declared(pkg: str, tags: tuple[str, ...]) -> set[str]:
    root = ET.parse(SRC / pkg / "package.xml").getroot()
    return {el.text.strip() for tag in tags for el in root.iter(tag) if el.text}


def _edges(pkg: str, tests: bool) -> list[tuple[str, str]]:
    """(where, imported module) of every import of another lerobot_* package."""
    return [
        (f"{path.relative_to(SRC)}:{line}", mod)
        for path in _python_files(pkg, tests)
        for line, mod in _imports(path)
        if mod.split(".")[0] != pkg
    ]


def undeclared(pkg: str, tests: bool) -> list[str]:
    tags = ("depend", "exec_depend", "build_export_depend") + (("test_depend",) if tests else ())
    declared = _declared(pkg, tags)
    return [
        f"{where}: imports {mod}, not declared in {pkg}/package.xml"
        for where, mod in _edges(pkg, tests)
        if mod.split(".")[0] not in declared
    ]


def upward(pkg: str, tests: bool) -> list[str]:
    allowed = ALLOWED[pkg]
    return [
        f"{where}: imports {mod}, but {pkg} may only use {sorted(allowed) or 'no lerobot_* package'}"
        for where, mod in _edges(pkg, tests)
        if mod.split(".")[0] not in allowed
    ]


def test_every_package_is_in_the_layer_table():
    assert set(PACKAGES) == set(ALLOWED)


@pytest.mark.parametrize("tests", [False, True], ids=["code", "tests"])
@pytest.mark.parametrize("pkg", PACKAGES)
def test_imports_are_declared_in_package_xml(pkg, tests):
    problems = undeclared(pkg, tests)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("tests", [False, True], ids=["code", "tests"])
@pytest.mark.parametrize("pkg", PACKAGES)
def test_imports_point_down_the_layers(pkg, tests):
    problems = upward(pkg, tests)
    assert not problems, "\n".join(problems)


def ros_imports(root: Path, skip: str | None = None) -> list[str]:
    """Imports of rclpy and of lerobot_core.ros under a package folder (except its sub-package `skip`)."""
    return [
        f"{path.relative_to(SRC)}:{line}: {mod}"
        for path in sorted(root.rglob("*.py"))
        if path.relative_to(root).parts[0] != skip
        for line, mod in _all_imports(path)
        if mod.split(".")[0] == "rclpy" or (mod + ".").startswith("lerobot_core.ros.")
    ]


def test_lerobot_core_top_level_never_imports_rclpy():
    """lerobot_core.ros is where the rclpy helpers live; the rest of lerobot_core imports neither."""
    assert ros_imports(SRC / "lerobot_core" / "lerobot_core", skip="ros") == []


@pytest.mark.parametrize("pkg", sorted(ROS_FREE))
def test_ros_free_packages_are_ros_free(pkg):
    """Neither rclpy nor lerobot_core.ros anywhere in the package's code, nor a ROS package in its
    package.xml: it installs and runs without ROS."""
    assert ros_imports(SRC / pkg / pkg) == []
    ros = {"rclpy", "rcl_interfaces", "lerobot_msgs", "std_msgs", "sensor_msgs"}
    assert _declared(pkg, ("depend", "exec_depend", "test_depend")) & ros == set()


def test_the_checks_catch_a_violation(tmp_path, monkeypatch):
    """A driver importing the recorder and bringup, undeclared, is reported by both checks."""
    fake = tmp_path / "src"
    pkg = fake / "lerobot_drivers"
    (pkg / "lerobot_drivers").mkdir(parents=True)
    (pkg / "test").mkdir()
    (pkg / "package.xml").write_text(
        "<package><name>lerobot_drivers</name><exec_depend>lerobot_core</exec_depend></package>"
    )
    (pkg / "lerobot_drivers" / "node.py").write_text(
        "from lerobot_core.units import normalize\n"
        "from lerobot_bringup.shutdown import until_shutdown\n"
        "def f():\n    import lerobot_recorder.contract\n"
    )
    monkeypatch.setitem(globals(), "SRC", fake)
    assert undeclared("lerobot_drivers", tests=False) == [
        "lerobot_drivers/lerobot_drivers/node.py:2: imports lerobot_bringup.shutdown, not declared in "
        "lerobot_drivers/package.xml",
        "lerobot_drivers/lerobot_drivers/node.py:4: imports lerobot_recorder.contract, not declared in "
        "lerobot_drivers/package.xml",
    ]
    assert upward("lerobot_drivers", tests=False) == [
        "lerobot_drivers/lerobot_drivers/node.py:2: imports lerobot_bringup.shutdown, but lerobot_drivers "
        "may only use ['lerobot_core', 'lerobot_dataset', 'lerobot_msgs', 'lerobot_runtime']",
        "lerobot_drivers/lerobot_drivers/node.py:4: imports lerobot_recorder.contract, but lerobot_drivers "
        "may only use ['lerobot_core', 'lerobot_dataset', 'lerobot_msgs', 'lerobot_runtime']",
    ]


def test_the_checks_catch_ros_in_the_dataset_library(tmp_path, monkeypatch):
    """lerobot_dataset importing the recorder, rclpy (in a function) or lerobot_core.ros is reported."""
    pkg = tmp_path / "src" / "lerobot_dataset"
    (pkg / "lerobot_dataset").mkdir(parents=True)
    (pkg / "package.xml").write_text("<package><exec_depend>lerobot_core</exec_depend></package>")
    (pkg / "lerobot_dataset" / "w.py").write_text(
        "from lerobot_core.ros.qos import x\nfrom lerobot_recorder import y\ndef f():\n    import rclpy.node\n"
    )
    monkeypatch.setitem(globals(), "SRC", tmp_path / "src")
    assert upward("lerobot_dataset", tests=False) == [
        "lerobot_dataset/lerobot_dataset/w.py:2: imports lerobot_recorder, but lerobot_dataset may only use "
        "['lerobot_core']"
    ]
    assert ros_imports(pkg / "lerobot_dataset") == [
        "lerobot_dataset/lerobot_dataset/w.py:1: lerobot_core.ros.qos",
        "lerobot_dataset/lerobot_dataset/w.py:4: rclpy.node",
    ]


def _module_of(path: Path, pkg: str) -> str:
    rel = path.relative_to(SRC / pkg).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def module_circles(pkg: str) -> list[list[str]]:
    """Import circles between one package's own modules (imports inside functions count: a lazy import
    hides a circle from Python, not from a reader)."""
    files = {_module_of(p, pkg): p for p in (SRC / pkg / pkg).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for mod, path in files.items():
        is_pkg = path.name == "__init__.py"
        edges = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = mod.split(".")[: len(mod.split(".")) - node.level + (1 if is_pkg else 0)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                names = [f"{target}.{a.name}" for a in node.names] + [target]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            edges |= {n for n in names if n in files and n != mod and n != pkg}
        graph[mod] = edges
    circles, state = [], {}

    def visit(mod: str, stack: list[str]) -> None:
        state[mod] = "open"
        for dep in sorted(graph[mod]):
            if state.get(dep) == "open":
                circles.append(stack[stack.index(dep) :] + [dep])
            elif dep not in state:
                visit(dep, [*stack, dep])
        state[mod] = "done"

    for mod in sorted(graph):
        if mod not in state:
            visit(mod, [mod])
    return circles


@pytest.mark.parametrize("pkg", sorted(ROS_FREE | {"lerobot_core"}))
def test_no_import_circle_between_a_librarys_modules(pkg):
    assert module_circles(pkg) == []


def test_the_circle_check_sees_a_lazy_import(tmp_path, monkeypatch):
    pkg = tmp_path / "lerobot_fake" / "lerobot_fake"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import B\n")
    (pkg / "b.py").write_text("def f():\n    from lerobot_fake.c import C\n")
    (pkg / "c.py").write_text("from . import a\n")
    monkeypatch.setitem(globals(), "SRC", tmp_path)
    assert module_circles("lerobot_fake") == [
        ["lerobot_fake.a", "lerobot_fake.b", "lerobot_fake.c", "lerobot_fake.a"]
    ]


NODE_BASES = {"Node", "LifecycleNode"}
NODE_MAX_LINES = 500  # a node file wires parameters and messages; the work lives in ROS-free modules


def node_files(pkg: str) -> list[Path]:
    """The files of a package's code that define a ROS node class (a class whose base is named Node or
    LifecycleNode, or derives from such a class of the same package)."""
    nodes, bases = [], {}
    for path in _python_files(pkg, tests=False):
        for cls in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(cls, ast.ClassDef):
                names = {b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "") for b in cls.bases}
                bases[cls.name] = (path, names)
    known = set(NODE_BASES)
    while True:  # classes deriving from a node class of this package are node classes too
        more = {name for name, (_, names) in bases.items() if names & known} - known
        if not more:
            break
        known |= more
    for name in known - NODE_BASES:
        nodes.append(bases[name][0])
    return sorted(set(nodes))


def oversized_nodes(pkg: str) -> list[str]:
    return [
        f"{path.relative_to(SRC)}: {n} lines (a node file holds at most {NODE_MAX_LINES})"
        for path in node_files(pkg)
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > NODE_MAX_LINES
    ]


@pytest.mark.parametrize("pkg", PACKAGES)
def test_node_files_stay_thin(pkg):
    assert oversized_nodes(pkg) == []


def test_the_size_check_sees_a_node_of_a_node(tmp_path, monkeypatch):
    pkg = tmp_path / "lerobot_fake" / "lerobot_fake"
    pkg.mkdir(parents=True)
    (pkg / "base.py").write_text("from rclpy.node import Node\n\n\nclass Base(Node):\n    pass\n")
    (pkg / "big_node.py").write_text("from .base import Base\n\n\nclass Big(Base):\n    pass\n" + "\n" * 500)
    (pkg / "big_library.py").write_text("class Helper:\n    pass\n" + "\n" * 600)
    monkeypatch.setitem(globals(), "SRC", tmp_path)
    assert node_files("lerobot_fake") == [pkg / "base.py", pkg / "big_node.py"]
    assert oversized_nodes("lerobot_fake") == [
        "lerobot_fake/lerobot_fake/big_node.py: 505 lines (a node file holds at most 500)"
    ]
