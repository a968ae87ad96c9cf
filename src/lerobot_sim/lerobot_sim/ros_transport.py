"""The evaluator's side of a lockstep sim over ROS 2: a sim process it owns and a client that steps it.

:class:`SimProcess` starts the installed ``sim`` / ``gym_bridge`` executable as a separate process (like
``ros2 run``); :class:`RosSimTransport` resets it through ``sim/reset``, sends each action on
``forward_position_controller/commands`` and waits until every observation topic of that step (matched
by header stamp = sim time) has arrived. A dead or silent sim raises :class:`SimUnavailableError`.

The client has no executor and no spin thread: the caller's own thread waits on one rcl wait set holding
the observation subscriptions and the reset client, and takes the messages itself (as rclpy's
``wait_for_message`` does). A lockstep step is a strict request/response, so this is all the client
needs, and it saves an executor pass per message and a thread hand-off per step (docs/sim.md, section 7).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import time
from typing import Any

import numpy as np
import rclpy
import yaml
from geometry_msgs.msg import PoseStamped
from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy
from sensor_msgs.msg import Image, JointState
from std_msgs.msg import Float64MultiArray

from lerobot_core.ament import find_executable
from lerobot_core.image_conversion import image_msg_to_rgb
from lerobot_core.topics import camera_topic
from lerobot_msgs.msg import EpisodeInfo
from lerobot_msgs.srv import ResetSim
from lerobot_sim.bridge_base import QOS_COMMAND, QOS_IMAGE, QOS_STATE
from lerobot_sim.evaluation import SimUnavailableError
from lerobot_sim.session import EpisodeState


class SimProcess:
    """A sim node in its own process; output goes to a log file (path in .log_path), removed by
    :meth:`stop` when the sim ended cleanly."""

    def __init__(
        self, executable: str, parameters: dict[str, Any], node_name: str = "sim", namespace: str = ""
    ):
        self.command = [
            str(find_executable("lerobot_sim", executable)),
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
        if self.proc.returncode in (0, -signal.SIGINT):
            # a clean run's log goes (one per sim start would pile up in the temp folder); the log of a
            # sim that failed stays, for the error that names it
            with contextlib.suppress(OSError):
                os.unlink(self.log_path)
        return self.proc.returncode


def _load_prctl():
    try:
        import ctypes

        return ctypes.CDLL("libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):
        return None


# resolved here, not in the child: between fork and exec only the forking thread exists, and an import or
# a dlopen there could wait forever on a lock another thread of the evaluator held at fork time
# (multi-task evaluation starts sims from several threads)
_PRCTL = _load_prctl()


def _die_with_parent() -> None:
    if _PRCTL is not None:
        _PRCTL(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG


def _key(stamp) -> tuple[int, int]:
    return (stamp.sec, stamp.nanosec)


def _never_called(msg) -> None:
    """Callback of subscriptions that are read through a wait set, never through an executor."""


class RosSimTransport:
    """Client of one lockstep sim (see module docstring). Owns its rclpy context; not thread-safe."""

    def __init__(
        self,
        fps: float,
        cameras: tuple[str, ...],
        single_image: bool = False,
        cube_pose: bool = False,
        environment_state: bool = False,
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
        self._infos: dict[tuple[int, int], EpisodeInfo] = {}  # by (episode_index, step), not by stamp
        self._joints: dict[tuple[int, int], JointState] = {}
        self._images: dict[str, dict[tuple[int, int], Image]] = {c: {} for c in self.cameras}
        self._cube: dict[tuple[int, int], PoseStamped] | None = {} if cube_pose else None
        # the gym bridge's stamped environment state (e.g. Meta-World's full observation)
        self._env_state: dict[tuple[int, int], JointState] | None = {} if environment_state else None
        self._episode_index = -1
        self._step = 0

        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        ns = namespace.strip("/")
        # nothing spins this node, so it offers no parameter services that could never answer
        self.node = rclpy.create_node(
            "sim_eval_client",
            namespace="/" + ns if ns else "/",
            context=self.context,
            start_parameter_services=False,
        )
        self._pub = self.node.create_publisher(
            Float64MultiArray, "forward_position_controller/commands", QOS_COMMAND
        )
        # episode_info first: _take_ready can wake on it alone
        tables: list[tuple[Any, str, dict]] = [
            (EpisodeInfo, "sim/episode_info", self._infos),
            (JointState, "joint_states", self._joints),
        ]
        # reliable images: lockstep needs every one (a best-effort reader loses large fragmented ones)
        tables += [(Image, camera_topic(cam), self._images[cam]) for cam in self.cameras]
        if self._cube is not None:
            tables.append((PoseStamped, "sim/cube_pose", self._cube))
        if self._env_state is not None:
            tables.append((JointState, "sim/environment_state", self._env_state))
        self._subs = []
        for msg_type, topic, table in tables:
            qos = QOS_IMAGE if msg_type is Image else QOS_STATE
            sub = self.node.create_subscription(msg_type, topic, _never_called, qos)
            self._subs.append((sub, table))
        self._reset_client = self.node.create_client(ResetSim, "sim/reset")
        self._wait_set = _rclpy.WaitSet(len(self._subs), 0, 0, 1, 0, 0, self.context.handle)
        self._responses: dict[int, ResetSim.Response] = {}
        deadline = time.monotonic() + startup_timeout
        while not self._reset_client.wait_for_service(timeout_sec=0.2):
            self._check_alive("starting")
            if time.monotonic() > deadline:
                raise SimUnavailableError(f"sim/reset not available after {startup_timeout:.0f} s")
        # Every endpoint must be matched before the first reset, or its first messages are lost:
        # the sim must see our command publisher, we must see each of its observation publishers.
        resolved = [sub.topic_name for sub, _ in self._subs]
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

    def _take_ready(self, timeout: float, wake_on_info_only: bool = False) -> None:
        """Wait up to ``timeout`` s for a message, then take every message that is there.

        ``wake_on_info_only``: wait for ``sim/episode_info`` alone. The sim publishes it after the other
        topics of a step, so one wake-up usually finds the whole step; waking on every topic would take
        the CPU from the sim while it is still publishing. Delivery order across topics is not
        guaranteed, so the caller falls back to waiting on all topics when something is still missing.
        """
        ws = self._wait_set
        ws.clear_entities()
        for sub, _ in self._subs[:1] if wake_on_info_only else self._subs:
            ws.add_subscription(sub.handle)
        ws.add_client(self._reset_client.handle)
        ws.wait(int(timeout * 1e9))
        for sub, table in self._subs:
            while (taken := sub.handle.take_message(sub.msg_type, False)) is not None:
                msg = taken[0]
                if table is self._infos:
                    table[(msg.episode_index, msg.step)] = msg
                else:
                    table[_key(msg.header.stamp)] = msg
            while len(table) > 64:  # only the newest observations matter (dicts keep arrival order)
                del table[next(iter(table))]
        if ws.get_ready_entities("client"):
            header, response = self._reset_client.handle.take_response(ResetSim.Response)
            if header is not None:
                self._responses[header.request_id.sequence_number] = response

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
        info_only = True
        while True:
            found = self._complete(episode_index, step)
            if found is not None:
                return found
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            if info_only and self._has_info(episode_index, step):
                info_only = False  # episode_info is in, something else is not: wait for any topic
            self._take_ready(min(remaining, 0.2), wake_on_info_only=info_only)
            self._check_alive(f"waiting for step {step}")
        self._check_alive(f"waiting for step {step}")
        raise SimUnavailableError(
            f"no observation for episode {episode_index} step {step} within {timeout} s"
        )

    def _info(self, episode_index: int, step: int) -> EpisodeInfo | None:
        return self._infos.get((episode_index, step))

    def _has_info(self, episode_index: int, step: int) -> bool:
        return self._info(episode_index, step) is not None

    def _complete(self, episode_index: int, step: int):
        info = self._info(episode_index, step)
        if info is None:
            return None
        key = _key(info.header.stamp)
        if key not in self._joints or any(key not in self._images[c] for c in self.cameras):
            return None
        if self._cube is not None and key not in self._cube:
            return None
        if self._env_state is not None and key not in self._env_state:
            return None
        obs: dict[str, Any] = {}
        for cam in self.cameras:
            img = image_msg_to_rgb(self._images[cam][key])
            obs["observation.image" if self.single_image else f"observation.images.{cam}"] = img
        obs["observation.state"] = np.asarray(self._joints[key].position, dtype=np.float64)
        if self._cube is not None:
            p, o = self._cube[key].pose.position, self._cube[key].pose.orientation
            obs["observation.environment_state"] = np.array([p.x, p.y, p.z, o.w, o.x, o.y, o.z])
        if self._env_state is not None:
            obs["observation.environment_state"] = np.asarray(self._env_state[key].position, dtype=np.float64)
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
            with self._reset_client.handle:
                sequence = self._reset_client.handle.send_request(
                    ResetSim.Request(use_seed=True, seed=int(seed))
                )
            deadline = time.monotonic() + self.step_timeout
            while sequence not in self._responses:
                self._check_alive("resetting")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise SimUnavailableError(f"sim/reset did not answer within {self.step_timeout} s")
                self._take_ready(min(remaining, 0.2))
            response = self._responses.pop(sequence)
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
            self._wait_set = None
            self.node.destroy_node()
        finally:
            rclpy.try_shutdown(context=self.context)
            if self.process is not None:
                self.process.stop()
