"""pytest plugin (auto-loaded through the `pytest11` entry point of lerobot_bringup).

* Gives this pytest process its own ROS_DOMAIN_ID, reserved with a lock file so concurrent pytest
  processes on the machine never share one, and forces DDS discovery onto localhost.
* Fixtures: `ros_domain_id`, `ros_node` (an rclpy node on its own context, spun in a thread).
"""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

import pytest

_DOMAIN_RANGE = range(110, 200)  # Fast DDS accepts 0..232; stay clear of env.sh's default 42
_lock_file = None


def reserve_domain_id(lock_dir: Path = Path("/tmp/lerobot_ros_domains")) -> int:
    """Lock the first free id in the range for the life of this process."""
    global _lock_file
    lock_dir.mkdir(parents=True, exist_ok=True)
    start = os.getpid() % len(_DOMAIN_RANGE)
    for k in range(len(_DOMAIN_RANGE)):
        domain = _DOMAIN_RANGE[(start + k) % len(_DOMAIN_RANGE)]
        f = open(lock_dir / f"{domain}.lock", "w")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            continue
        _lock_file = f  # held until the process exits
        return domain
    raise RuntimeError(f"no free ROS_DOMAIN_ID in {_DOMAIN_RANGE.start}..{_DOMAIN_RANGE.stop - 1}")


def pytest_configure(config):
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    os.environ["ROS_DOMAIN_ID"] = str(reserve_domain_id())
    os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
    config.addinivalue_line("markers", "ros: needs rclpy and DDS (loopback, per-process ROS_DOMAIN_ID)")


def pytest_report_header(config):
    return f"lerobot_ros: ROS_DOMAIN_ID={os.environ['ROS_DOMAIN_ID']} ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST"


@pytest.fixture(scope="session")
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
