"""A ROS 2 node in the background of a non-ROS program: what the LeRobot plugins (robot, teleoperator,
camera in ``lerobot_plugins/``) use to subscribe and publish from inside LeRobot's own commands.

Each :class:`BackgroundNode` owns its rclpy context, node and executor thread, so several devices in
one process (a robot, its teleoperator, cameras) start and stop independently. It keeps the latest
message of every subscribed topic with its receive time (monotonic), and waits for topics with a
timeout that names what never arrived.

rclpy is imported on first use, not at import time: :func:`import_rclpy` raises an ImportError that
says how to get it, so a LeRobot venv without ROS 2 still lists the plugins' config types.
"""

from __future__ import annotations

import importlib
import os
import threading
import time
from dataclasses import dataclass
from typing import Any

from lerobot_core.dds_transport import large_image_reader_transport
from lerobot_core.time import stamp_to_ns

RCLPY_HELP = (
    "the ROS 2 plugins need rclpy, which is not importable in this Python ({exc}). Either source a "
    "ROS 2 install first (`source /opt/ros/<distro>/setup.bash`, with a Python of the same version), "
    "or install the ROS 2 wheels into this environment (Python 3.11): `pip install -r "
    "requirements-ros-wheels.txt` from the lerobot_ros repository; then run with "
    "RMW_IMPLEMENTATION=rmw_fastrtps_cpp."
)


def import_rclpy():
    """rclpy, or an ImportError saying how to get it."""
    os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")  # the wheels need it named
    try:
        import rclpy
    except ImportError as exc:
        raise ImportError(RCLPY_HELP.format(exc=exc)) from exc
    return rclpy


def message_class(msgtype: str):
    """'sensor_msgs/msg/JointState' -> the rclpy message class (ImportError names the package)."""
    parts = msgtype.split("/")
    if len(parts) == 2:
        parts = [parts[0], "msg", parts[1]]
    if len(parts) != 3:
        raise ValueError(f"not a ROS message type name: {msgtype!r} (expected pkg/msg/Type)")
    package, _, name = parts
    try:
        module = importlib.import_module(f"{package}.msg")
    except ImportError as exc:
        raise ImportError(f"message package {package} (for {msgtype}) is not importable: {exc}") from exc
    try:
        return getattr(module, name)
    except AttributeError:
        raise ImportError(f"{package}.msg has no message {name} (for {msgtype})") from None


def stamp_ns(msg) -> int:
    """A message's header stamp in nanoseconds (0 for a message without a header)."""
    header = getattr(msg, "header", None)
    return 0 if header is None else stamp_to_ns(header.stamp)


@dataclass
class Latest:
    """The newest message of one topic, when it arrived (time.monotonic) and how many so far."""

    msg: Any = None
    received: float = 0.0
    count: int = 0


def qos_profile(kind: str, depth: int = 10):
    """'sensor' (best effort, keep last) or 'reliable' (reliable, keep last): the contract's qos names."""
    from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

    reliability = ReliabilityPolicy.BEST_EFFORT if kind == "sensor" else ReliabilityPolicy.RELIABLE
    return QoSProfile(depth=depth, history=HistoryPolicy.KEEP_LAST, reliability=reliability)


class BackgroundNode:
    """One rclpy node spinning in a daemon thread; latest message per subscribed topic."""

    def __init__(self, name: str, namespace: str = "", domain_id: int | None = None):
        rclpy = import_rclpy()
        from rclpy.executors import SingleThreadedExecutor

        self._rclpy = rclpy
        self.context = rclpy.Context()
        kwargs = {} if domain_id is None else {"domain_id": int(domain_id)}
        # the process's participant gets the reader profile: images from a graph of another Fast DDS major
        # version (Jazzy LeRobot, Kilted sim) come as UDP fragments, which the default socket buffer loses
        with large_image_reader_transport():
            rclpy.init(context=self.context, **kwargs)
            self.node = rclpy.create_node(name, namespace=namespace or "", context=self.context)
        self._executor = SingleThreadedExecutor(context=self.context)
        self._executor.add_node(self.node)
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._latest: dict[str, Latest] = {}
        self._thread = threading.Thread(target=self._spin, name=f"{name}-spin", daemon=True)
        self._thread.start()

    def _spin(self) -> None:
        try:
            self._executor.spin()
        except Exception:  # the context was shut down under the executor: the device is closing
            pass

    def resolve(self, topic: str) -> str:
        """The fully qualified name of ``topic`` in this node's namespace."""
        return self.node.resolve_topic_name(topic)

    def subscribe(self, topic: str, msgtype: str, qos: str = "reliable", depth: int = 10) -> None:
        cls = message_class(msgtype)
        self._latest.setdefault(topic, Latest())

        def on_msg(msg, topic=topic):
            with self._cond:
                slot = self._latest[topic]
                slot.msg, slot.received, slot.count = msg, time.monotonic(), slot.count + 1
                self._cond.notify_all()

        self.node.create_subscription(cls, topic, on_msg, qos_profile(qos, depth))

    def publisher(self, topic: str, msgtype: str, qos: str = "reliable", depth: int = 10):
        return self.node.create_publisher(message_class(msgtype), topic, qos_profile(qos, depth))

    def service_client(self, name: str, srvtype: str):
        """A client of service ``name`` (relative to this node's namespace), e.g. 'std_srvs/srv/SetBool'."""
        package, _, type_name = srvtype.split("/")
        try:
            cls = getattr(importlib.import_module(f"{package}.srv"), type_name)
        except (ImportError, AttributeError) as exc:
            raise ImportError(f"service type {srvtype} is not importable: {exc}") from exc
        return self.node.create_client(cls, name)

    def call(self, client, request, timeout_s: float):
        """The response of one call on ``client`` (served by this node's executor thread).

        TimeoutError names the service when it is not there or does not answer within ``timeout_s``.
        """
        if not client.wait_for_service(timeout_sec=timeout_s):
            raise TimeoutError(f"service {client.service_name} is not available (waited {timeout_s:g} s)")
        future = client.call_async(request)
        done = threading.Event()
        future.add_done_callback(lambda _: done.set())
        if not done.wait(timeout_s):
            client.remove_pending_request(future)
            raise TimeoutError(f"service {client.service_name} did not answer within {timeout_s:g} s")
        return future.result()

    def latest(self, topic: str) -> Latest:
        with self._lock:
            slot = self._latest[topic]
            return Latest(slot.msg, slot.received, slot.count)

    def wait_for(self, topics, timeout_s: float, after: dict[str, int] | None = None) -> None:
        """Block until every topic has a message (newer than count ``after[topic]`` when given).

        TimeoutError names the topics that stayed silent, fully qualified.
        """
        after = after or {}
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while True:
                missing = [t for t in topics if self._latest[t].count <= after.get(t, 0)]
                left = deadline - time.monotonic()
                if not missing or left <= 0:
                    break
                self._cond.wait(min(left, 0.1))
        if missing:
            names = ", ".join(self.resolve(t) for t in missing)
            raise TimeoutError(
                f"no message on {names} within {timeout_s:g} s (ROS_DOMAIN_ID="
                f"{os.environ.get('ROS_DOMAIN_ID', '0')}): is the node publishing it running, on this "
                "domain, and is the topic name right?"
            )

    def wait_newer(self, counts: dict[str, int], timeout_s: float) -> bool:
        """Block until a topic of ``counts`` has a message newer than its count there (True), or
        ``timeout_s`` passes (False)."""
        with self._cond:
            return self._cond.wait_for(
                lambda: any(self._latest[t].count > n for t, n in counts.items()), timeout=timeout_s
            )

    def counts(self) -> dict[str, int]:
        with self._lock:
            return {t: s.count for t, s in self._latest.items()}

    def close(self) -> None:
        if not self.context.ok():
            return
        self._executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
        self._rclpy.shutdown(context=self.context)
        self._thread.join(timeout=2.0)
