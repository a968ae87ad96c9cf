"""The evaluator's side of a lockstep sim over ROS 2: a sim process it owns and a client that steps it.

:class:`SimProcess` starts the installed ``sim`` / ``gym_bridge`` executable as a separate process (like
``ros2 run``); :class:`RosSimTransport` resets it through ``sim/reset``, sends each action on
``forward_position_controller/commands`` and waits until every observation topic of that step (matched
by header stamp = sim time) has arrived. A dead or silent sim raises :class:`SimUnavailableError`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import threading
import time
from typing import Any

import numpy as np
import rclpy
import yaml
from geometry_msgs.msg import PoseStamped
from rclpy.executors import SingleThreadedExecutor
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import Float64MultiArray

from lerobot_msgs.msg import EpisodeInfo
from lerobot_msgs.srv import ResetSim
from lerobot_recorder.image_conversion import image_msg_to_rgb
from lerobot_sim.bridge_base import QOS_COMMAND, QOS_IMAGE, QOS_STATE
from lerobot_sim.evaluation import SimUnavailableError
from lerobot_sim.session import EpisodeState


def find_executable(package: str, executable: str) -> str:
    from ament_index_python.packages import get_package_prefix

    path = os.path.join(get_package_prefix(package), "lib", package, executable)
    if not os.access(path, os.X_OK):
        raise FileNotFoundError(f"{package}/{executable} is not installed at {path}: build the workspace")
    return path


class SimProcess:
    """A sim node in its own process; output goes to a log file (path in .log_path)."""

    def __init__(
        self, executable: str, parameters: dict[str, Any], node_name: str = "sim", namespace: str = ""
    ):
        self.command = [
            find_executable("lerobot_sim", executable),
            "--ros-args",
            "-r",
            f"__node:={node_name}",
        ]
        if namespace:
            self.command += ["-r", f"__ns:=/{namespace.strip('/')}"]
        # a parameters file, not -p overrides: values such as JSON strings survive YAML typing intact
        params = tempfile.NamedTemporaryFile("w", prefix="lerobot_sim_params_", suffix=".yaml", delete=False)
        with params:
            yaml.safe_dump({"/**": {"ros__parameters": dict(parameters)}}, params)
        self.params_path = params.name
        self.command += ["--params-file", self.params_path]
        log = tempfile.NamedTemporaryFile(prefix=f"lerobot_sim_{executable}_", suffix=".log", delete=False)
        self.log_path = log.name
        self._log = log
        # own session: a terminal Ctrl-C reaches the evaluator only, which then stops the sim itself;
        # parent-death signal: the sim never outlives a killed evaluator (Linux; no-op elsewhere)
        self.proc = subprocess.Popen(
            self.command,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def output(self) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def stop(self, timeout: float = 5.0) -> int | None:
        if self.alive():
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)
        self._log.close()
        with contextlib.suppress(OSError):
            os.unlink(self.params_path)
        return self.proc.returncode


def _die_with_parent() -> None:
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _key(stamp) -> tuple[int, int]:
    return (stamp.sec, stamp.nanosec)


class RosSimTransport:
    """Client of one lockstep sim (see module docstring). Owns its rclpy context and spin thread."""

    def __init__(
        self,
        fps: float,
        cameras: tuple[str, ...],
        single_image: bool = False,
        cube_pose: bool = False,
        process: SimProcess | None = None,
        namespace: str = "",
        startup_timeout: float = 60.0,
        step_timeout: float = 20.0,
    ):
        self.fps = fps
        self.cameras = tuple(cameras)
        self.single_image = single_image
        self.process = process
        self.step_timeout = step_timeout
        self._cv = threading.Condition()
        self._infos: dict[tuple[int, int], EpisodeInfo] = {}
        self._joints: dict[tuple[int, int], JointState] = {}
        self._images: dict[str, dict[tuple[int, int], Image]] = {c: {} for c in self.cameras}
        self._cube: dict[tuple[int, int], PoseStamped] | None = {} if cube_pose else None
        self._episode_index = -1
        self._step = 0

        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        ns = namespace.strip("/")
        self.node = rclpy.create_node(
            "sim_eval_client", namespace="/" + ns if ns else "/", context=self.context
        )
        self._pub = self.node.create_publisher(
            Float64MultiArray, "forward_position_controller/commands", QOS_COMMAND
        )
        self.node.create_subscription(EpisodeInfo, "sim/episode_info", self._store(self._infos), QOS_STATE)
        self.node.create_subscription(JointState, "joint_states", self._store(self._joints), QOS_STATE)
        for cam in self.cameras:
            # reliable: lockstep needs every image (a best-effort reader loses large fragmented ones)
            self.node.create_subscription(
                Image, f"cameras/{cam}/image_raw", self._store(self._images[cam]), QOS_IMAGE
            )
        if self._cube is not None:
            self.node.create_subscription(PoseStamped, "sim/cube_pose", self._store(self._cube), QOS_STATE)
        self._reset_client = self.node.create_client(ResetSim, "sim/reset")
        self._executor = SingleThreadedExecutor(context=self.context)
        self._executor.add_node(self.node)
        self._thread = threading.Thread(target=self._executor.spin, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + startup_timeout
        while not self._reset_client.wait_for_service(timeout_sec=0.2):
            self._check_alive("starting")
            if time.monotonic() > deadline:
                raise SimUnavailableError(f"sim/reset not available after {startup_timeout:.0f} s")
        # Every endpoint must be matched before the first reset, or its first messages are lost:
        # the sim must see our command publisher, we must see each of its observation publishers.
        topics = ["sim/episode_info", "joint_states"] + [f"cameras/{c}/image_raw" for c in self.cameras]
        if self._cube is not None:
            topics.append("sim/cube_pose")
        resolved = [self.node.resolve_topic_name(t) for t in topics]
        while self._pub.get_subscription_count() == 0 or any(
            self.node.count_publishers(t) == 0 for t in resolved
        ):
            self._check_alive("starting")
            if time.monotonic() > deadline:
                missing = [t for t in resolved if self.node.count_publishers(t) == 0]
                raise SimUnavailableError(
                    f"sim endpoints not matched after {startup_timeout:.0f} s (no publisher of {missing} or "
                    "no subscriber of forward_position_controller/commands)"
                )
            time.sleep(0.05)

    def _store(self, table: dict):
        def callback(msg):
            with self._cv:
                table[_key(msg.header.stamp)] = msg
                if len(table) > 64:  # only the newest observations matter
                    for k in sorted(table)[: len(table) - 64]:
                        del table[k]
                self._cv.notify_all()

        return callback

    def _check_alive(self, what: str) -> None:
        if self.process is not None and not self.process.alive():
            tail = "\n".join(self.process.output().splitlines()[-15:])
            raise SimUnavailableError(
                f"sim process {self.process.pid} exited with code {self.process.proc.returncode} while {what}; "
                f"log {self.process.log_path}:\n{tail}"
            )

    def _wait_observation(
        self, episode_index: int, step: int, timeout: float | None = None
    ) -> tuple[dict[str, Any], EpisodeState]:
        timeout = self.step_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        with self._cv:
            while True:
                found = self._complete(episode_index, step)
                if found is not None:
                    return found
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cv.wait(min(remaining, 0.2))
                self._check_alive(f"waiting for step {step}")
        self._check_alive(f"waiting for step {step}")
        raise SimUnavailableError(
            f"no observation for episode {episode_index} step {step} within {timeout} s"
        )

    def _complete(self, episode_index: int, step: int):
        info = next(
            (m for m in self._infos.values() if m.episode_index == episode_index and m.step == step), None
        )
        if info is None:
            return None
        key = _key(info.header.stamp)
        if key not in self._joints or any(key not in self._images[c] for c in self.cameras):
            return None
        if self._cube is not None and key not in self._cube:
            return None
        obs: dict[str, Any] = {}
        for cam in self.cameras:
            img = image_msg_to_rgb(self._images[cam][key])
            obs["observation.image" if self.single_image else f"observation.images.{cam}"] = img
        obs["observation.state"] = np.asarray(self._joints[key].position, dtype=np.float64)
        if self._cube is not None:
            p, o = self._cube[key].pose.position, self._cube[key].pose.orientation
            obs["observation.env_state"] = np.array([p.x, p.y, p.z, o.w, o.x, o.y, o.z])
        ep = EpisodeState(
            episode_index=info.episode_index,
            seed=info.seed,
            step=info.step,
            reward=info.reward,
            sum_reward=info.sum_reward,
            max_reward=info.max_reward,
            is_success=info.is_success,
            terminated=info.terminated,
            truncated=info.truncated,
        )
        return obs, ep

    def reset(self, seed: int, attempts: int = 3) -> dict[str, Any]:
        """Reset with ``seed`` and return the first observation. A reset whose observation got lost
        (e.g. a publisher matched late) is simply repeated: the same seed gives the same state."""
        for attempt in range(1, attempts + 1):
            self._check_alive("resetting")
            future = self._reset_client.call_async(ResetSim.Request(use_seed=True, seed=int(seed)))
            deadline = time.monotonic() + self.step_timeout
            while not future.done():
                self._check_alive("resetting")
                if time.monotonic() > deadline:
                    raise SimUnavailableError(f"sim/reset did not answer within {self.step_timeout} s")
                time.sleep(0.005)
            response = future.result()
            if not response.success:
                raise SimUnavailableError(f"sim/reset failed: {response.message}")
            self._episode_index = response.info.episode_index
            self._step = 0
            try:
                obs, _ = self._wait_observation(self._episode_index, 0, timeout=min(self.step_timeout, 5.0))
                return obs
            except SimUnavailableError:
                if attempt == attempts:
                    raise
        raise AssertionError("unreachable")

    def step(self, action: np.ndarray) -> tuple[dict[str, Any], EpisodeState]:
        self._check_alive("stepping")
        self._pub.publish(Float64MultiArray(data=np.asarray(action, dtype=np.float64).ravel().tolist()))
        self._step += 1
        return self._wait_observation(self._episode_index, self._step)

    def close(self) -> None:
        try:
            self._executor.shutdown(timeout_sec=2.0)
            self.node.destroy_node()
        finally:
            rclpy.try_shutdown(context=self.context)
            self._thread.join(timeout=2.0)
            if self.process is not None:
                self.process.stop()
