"""Test helpers for lerobot_ros packages: real rclpy nodes and real node processes on loopback DDS.

Loaded into every pytest run as a plugin (entry point `pytest11`), which gives each pytest process
its own ROS_DOMAIN_ID so that parallel runs never hear each other. Import the helpers from here::

    from lerobot_core.ros.testing import RosProcess, wait_for_messages, wait_until
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from lerobot_core.ament import die_with_parent, find_executable


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0, interval: float = 0.02) -> bool:
    """Poll `predicate` until it is true (returns True) or `timeout` seconds pass (returns False)."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


class MessageCollector:
    """Collects messages of one topic from the moment it is created (subscribe first, then start peers)."""

    def __init__(self, node, msg_type, topic: str, qos=None, keep: int = 100000):
        from rclpy.qos import QoSProfile

        from lerobot_core.ros.qos import subscription_without_events

        self.node = node
        self.messages: list = []
        self._lock = threading.Lock()
        self._keep = keep
        # closed while the node spins (wait_for_messages does): no QoS event handlers
        self.sub = subscription_without_events(
            node, msg_type, topic, self._cb, qos if qos is not None else QoSProfile(depth=100)
        )
        self.topic = self.sub.topic_name

    def _cb(self, msg) -> None:
        with self._lock:
            if len(self.messages) < self._keep:
                self.messages.append(msg)

    def wait(self, count: int = 1, timeout: float = 10.0) -> list:
        """The first `count` messages; TimeoutError naming the topic if fewer arrive in time."""
        if not wait_until(lambda: len(self.messages) >= count, timeout):
            raise TimeoutError(
                f"{len(self.messages)}/{count} message(s) on {self.topic} within {timeout:g} s "
                f"({self.node.count_publishers(self.topic)} publisher(s) seen)"
            )
        with self._lock:
            return list(self.messages[:count])

    def close(self) -> None:
        self.node.destroy_subscription(self.sub)

    def __enter__(self) -> MessageCollector:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def wait_for_messages(node, msg_type, topic: str, count: int = 1, timeout: float = 10.0, qos=None) -> list:
    """Subscribe on `node` (which must be spinning, e.g. the `ros_node` fixture) and collect `count` messages.

    Raises TimeoutError naming the topic and how many arrived when fewer than `count` came in time.
    """
    with MessageCollector(node, msg_type, topic, qos, keep=count) as c:
        return c.wait(count, timeout)


class RosProcess:
    """A node executable started as its own process, with the test's ROS environment.

    Usage::

        with RosProcess("lerobot_bringup", "synthetic_joints", parameters={"rate_hz": 100.0}) as p:
            ...
        assert p.returncode == 0
    """

    def __init__(
        self,
        package: str,
        executable: str,
        name: str | None = None,
        parameters: Mapping[str, Any] | None = None,
        remappings: Mapping[str, str] | None = None,
        args: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        namespace: str = "",
        ros_args: bool = True,
    ):
        self.package, self.executable = package, executable
        exe = find_executable(package, executable)
        self._tmp = tempfile.TemporaryDirectory(prefix=f"rosproc-{executable}-")
        cmd = [str(exe), *(args or [])]
        if ros_args:
            cmd.append("--ros-args")
            if name:
                cmd += ["-r", f"__node:={name}"]
            if namespace:
                cmd += ["-r", f"__ns:={namespace if namespace.startswith('/') else '/' + namespace}"]
            if parameters:
                pfile = Path(self._tmp.name) / "params.yaml"
                pfile.write_text(yaml.safe_dump({"/**": {"ros__parameters": dict(parameters)}}))
                cmd += ["--params-file", str(pfile)]
            for src, dst in (remappings or {}).items():
                cmd += ["-r", f"{src}:={dst}"]
        self.cmd = cmd
        self.env = dict(os.environ)
        self.env.update(env or {})
        self.env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
        self.env["PYTHONUNBUFFERED"] = "1"
        assert self.env.get("ROS_DOMAIN_ID"), (
            "ROS_DOMAIN_ID must be set (the lerobot_ros pytest plugin, lerobot_core.ros.testing, sets it)"
        )
        self.log_path = Path(self._tmp.name) / "output.log"
        self.proc: subprocess.Popen | None = None

    def start(self) -> RosProcess:
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            self.cmd,
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent,  # a killed test run leaves no nodes behind
        )
        return self

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def returncode(self) -> int | None:
        return self.proc.poll() if self.proc else None

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def wait_for_output(self, text: str, timeout: float = 10.0) -> bool:
        return wait_until(lambda: text in self.output(), timeout, 0.05)

    def signal(self, sig: int) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)

    def stop(self, timeout: float = 10.0) -> int:
        """SIGINT, then SIGKILL after `timeout`; returns the exit code."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.signal(signal.SIGINT)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.signal(signal.SIGKILL)
                self.proc.wait(5)
        self._log.close()
        return self.proc.returncode

    def __enter__(self) -> RosProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __del__(self):
        try:
            self._tmp.cleanup()
        except Exception:
            pass


__all__ = [
    "MessageCollector",
    "RosProcess",
    "wait_for_messages",
    "wait_until",
]
