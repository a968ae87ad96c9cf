"""pytest plugin (auto-loaded through the `pytest11` entry point of lerobot_core).

* Gives this pytest process its own ROS_DOMAIN_ID, reserved with a lock file so concurrent pytest
  processes on the machine never share one, and forces DDS discovery onto localhost.
* Every test module then gets a fresh domain of its own (the previous one is released): what one
  module leaves behind in DDS cannot reach the next one. Tests SIGKILL nodes on purpose; a killed
  participant stays in discovery until its lease runs out, and Fast DDS's shared-memory ports of a
  killed process can leave a later participant on the same port "matched but receiving nothing"
  (eProsima/Fast-DDS#5053, #5469). Ports are numbered per domain, so a new domain never meets them.
* Fixtures: `ros_domain_id`, `ros_node` (an rclpy node on its own context, spun in a thread),
  `lerobot_python` (the LeRobot 0.4.4 side venv's python, for the tests that load our datasets
  with the real LeRobot).
"""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

import pytest

REF_VENV = Path(os.environ.get("LEROBOT_REF_VENV", "/work/lerobot-ref-venv"))
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


def pytest_configure(config):
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    os.environ["ROS_DOMAIN_ID"] = str(reserve_domain_id())
    os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
    config.addinivalue_line("markers", "ros: needs rclpy and DDS (loopback, per-module ROS_DOMAIN_ID)")


@pytest.fixture(scope="module", autouse=True)
def _module_ros_domain():
    """A fresh ROS_DOMAIN_ID for each test module (autouse: set before the module's own fixtures)."""
    os.environ["ROS_DOMAIN_ID"] = str(reserve_domain_id())
    yield


def pytest_report_header(config):
    return f"lerobot_ros: ROS_DOMAIN_ID={os.environ['ROS_DOMAIN_ID']} ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST"


@pytest.fixture
def ros_domain_id() -> int:
    return int(os.environ["ROS_DOMAIN_ID"])


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
        executor.shutdown(timeout_sec=2.0)
        node.destroy_node()
        rclpy.try_shutdown(context=ctx)
        thread.join(timeout=2.0)


def ref_venv_python() -> Path:
    """The LeRobot 0.4.4 side venv's python. Missing, it is a test failure saying why, never a skip:
    scripts/test.sh builds the venv and passes on why it could not (LEROBOT_REF_VENV_ERROR). Also for
    module-scoped fixtures, which cannot take the function-scoped `lerobot_python`."""
    error = os.environ.get("LEROBOT_REF_VENV_ERROR")
    if error:
        pytest.fail(f"the LeRobot 0.4.4 side venv could not be built: {error}")
    if not (REF_VENV / ".ready").exists():
        pytest.fail(
            f"the LeRobot 0.4.4 side venv {REF_VENV} is not built: run `bash scripts/make-lerobot-ref-venv.sh "
            f"{REF_VENV}` (scripts/test.sh does this itself) or point LEROBOT_REF_VENV at one"
        )
    return REF_VENV / "bin" / "python"


@pytest.fixture
def lerobot_python() -> Path:
    """ref_venv_python() as a fixture."""
    return ref_venv_python()
