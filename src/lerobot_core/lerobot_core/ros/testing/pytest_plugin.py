"""pytest plugin (auto-loaded through the `pytest11` entry point of lerobot_core).

It changes the environment only for this project's test runs: the rootdir lies in a lerobot_ros
checkout (a folder holding src/lerobot_core/package.xml), or LEROBOT_ROS_TEST_PLUGIN=1 asks for it.
Any other pytest run where lerobot_core is installed keeps its own ROS_DOMAIN_ID (the fixtures stay
available to it).

* Gives this pytest process its own ROS_DOMAIN_ID, reserved with a lock file so concurrent pytest
  processes on the machine never share one, and forces DDS discovery onto localhost.
* Every test module then gets a fresh domain of its own (the previous one is released): what one
  module leaves behind in DDS cannot reach the next one. Tests SIGKILL nodes on purpose; a killed
  participant stays in discovery until its lease runs out, and Fast DDS's shared-memory ports of a
  killed process can leave a later participant on the same port "matched but receiving nothing"
  (eProsima/Fast-DDS#5053, #5469). Ports are numbered per domain, so a new domain never meets them.
* Fixtures: `ros_domain_id`, `ros_node` (an rclpy node on its own context, spun in a thread),
  `lerobot_python` (a LeRobot side venv's python, for the tests that check us against the real
  LeRobot; parametrized over every supported LeRobot version, test ids `lerobot-0.4.4` and
  `lerobot-0.6.1`; `lerobot_version` is the version of that run).
"""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

import pytest

_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lerobot_ros"
# LeRobot version -> (its side venv, the variable naming it, the variable with why it could not be built)
# (scripts/make-lerobot-ref-venv.sh --version V builds them; scripts/test.sh when missing)
LEROBOT_VERSIONS = ("0.4.4", "0.6.1")
_VENV_ENV = {"0.4.4": "LEROBOT_REF_VENV", "0.6.1": "LEROBOT_REF_VENV_06"}


def ref_venv(version: str = "0.4.4") -> Path:
    """The side venv of LeRobot `version` ($LEROBOT_REF_VENV / $LEROBOT_REF_VENV_06, else the cache's)."""
    return Path(os.environ.get(_VENV_ENV[version]) or _CACHE / f"lerobot-{version}")


REF_VENV = ref_venv("0.4.4")
_DOMAIN_RANGE = range(110, 200)  # Fast DDS accepts 0..232; stay clear of env.sh's default 42
_LOCK_DIR = Path("/tmp/lerobot_ros_domains")
_lock_file = None
_next_index: int | None = None


def reserve_domain_id(lock_dir: Path = _LOCK_DIR) -> int:
    """Lock the next free id in the range (releasing this process's previous one) and return it.

    The search starts after the previously reserved id (first call: at pid modulo the range), so
    consecutive reservations walk through the range before an id comes back.
    """
    global _lock_file, _next_index
    lock_dir.mkdir(parents=True, exist_ok=True)
    n = len(_DOMAIN_RANGE)
    start = os.getpid() % n if _next_index is None else _next_index
    previous = _lock_file
    for k in range(n):
        index = (start + k) % n
        domain = _DOMAIN_RANGE[index]
        f = open(lock_dir / f"{domain}.lock", "w")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            continue
        _lock_file, _next_index = f, index + 1  # held until the next reservation or process exit
        if previous is not None:
            previous.close()  # closing the file releases its lock
        return domain
    raise RuntimeError(f"no free ROS_DOMAIN_ID in {_DOMAIN_RANGE.start}..{_DOMAIN_RANGE.stop - 1}")


_active = False  # set by pytest_configure: this is one of the project's test runs


def in_this_project(rootpath: Path) -> bool:
    """A run of this project's tests: `rootpath` is in a lerobot_ros checkout, or the variable asks."""
    if os.environ.get("LEROBOT_ROS_TEST_PLUGIN") == "1":
        return True
    return any((d / "src" / "lerobot_core" / "package.xml").is_file() for d in (rootpath, *rootpath.parents))


def pytest_configure(config):
    global _active
    config.addinivalue_line("markers", "ros: needs rclpy and DDS (loopback, per-module ROS_DOMAIN_ID)")
    _active = in_this_project(Path(config.rootpath).resolve())
    if not _active:
        return
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    os.environ["ROS_DOMAIN_ID"] = str(reserve_domain_id())
    os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")


@pytest.fixture(scope="module", autouse=True)
def _module_ros_domain():
    """A fresh ROS_DOMAIN_ID for each test module (autouse: set before the module's own fixtures)."""
    if _active:
        os.environ["ROS_DOMAIN_ID"] = str(reserve_domain_id())
    yield


_CWD = pytest.StashKey[str]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    if _active:
        item.stash[_CWD] = os.getcwd()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item):
    """A test that leaves the working directory changed is an error (the directory is put back). The run's
    processes inherit it: a passed test's tmp_path is removed (tmp_path_retention_policy), and every
    process started afterwards ran in a deleted folder (torch's MKL then cannot load libtorch_cpu.so)."""
    before = item.stash.get(_CWD, None)
    result = yield
    if _active and before is not None:
        try:
            now = os.getcwd()
        except FileNotFoundError:
            now = "(a removed folder)"
        if now != before:
            os.chdir(before)
            raise RuntimeError(
                f"{item.nodeid} left the working directory at {now} (was {before}): use monkeypatch.chdir, "
                "or give the subprocess cwd="
            )
    return result


def pytest_report_header(config):
    if not _active:
        return None
    return f"lerobot_ros: ROS_DOMAIN_ID={os.environ['ROS_DOMAIN_ID']} ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST"


@pytest.fixture
def ros_domain_id() -> int:
    return int(os.environ.get("ROS_DOMAIN_ID", "0"))


@pytest.fixture
def ros_node(request):
    """A plain rclpy Node on a private context, spun by a MultiThreadedExecutor in a background thread."""
    import rclpy
    from rclpy.executors import MultiThreadedExecutor

    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    name = "test_" + "".join(c if c.isalnum() else "_" for c in request.node.name)[:50]
    node = rclpy.create_node(name, context=ctx)
    executor = MultiThreadedExecutor(num_threads=2, context=ctx)
    executor.add_node(node)
    thread = threading.Thread(target=executor.spin, daemon=True)
    thread.start()
    try:
        yield node
    finally:
        # the spin thread ends before the node goes: a node destroyed under a spin that is still in a
        # callback (a loaded machine: shutdown's wait timed out) raised InvalidHandle in that thread
        executor.shutdown(timeout_sec=10.0)
        thread.join(timeout=10.0)
        node.destroy_node()
        rclpy.try_shutdown(context=ctx)


def ref_venv_python(version: str = "0.4.4") -> Path:
    """The python of LeRobot `version`'s side venv. Missing, it is a test failure saying why, never a
    skip: scripts/test.sh builds the venvs and passes on why one could not be built
    (LEROBOT_REF_VENV_ERROR, LEROBOT_REF_VENV_06_ERROR). Also for module-scoped fixtures, which cannot
    take the function-scoped `lerobot_python`."""
    if version not in _VENV_ENV:
        raise ValueError(f"LeRobot {version} has no side venv (supported: {', '.join(LEROBOT_VERSIONS)})")
    venv = ref_venv(version)
    flag = "" if version == "0.4.4" else f"--version {version} "
    error = os.environ.get(f"{_VENV_ENV[version]}_ERROR")
    if error:
        pytest.fail(f"the LeRobot {version} side venv could not be built: {error}")
    if not (venv / ".ready").exists():
        pytest.fail(
            f"the LeRobot {version} side venv {venv} is not built: run `bash scripts/make-lerobot-ref-venv.sh "
            f"{flag}{venv}` (scripts/test.sh does this itself) or point {_VENV_ENV[version]} at one"
        )
    return venv / "bin" / "python"


@pytest.fixture(params=LEROBOT_VERSIONS, ids=[f"lerobot-{v}" for v in LEROBOT_VERSIONS])
def lerobot_version(request) -> str:
    """Each supported LeRobot version in turn (a test taking it runs once per version)."""
    return request.param


@pytest.fixture
def lerobot_python(lerobot_version) -> Path:
    """ref_venv_python(lerobot_version) as a fixture: the test runs against every supported version."""
    return ref_venv_python(lerobot_version)
