"""A LeRobot ``Robot`` over ROS 2 topics, shaped by a lerobot_ros contract.

* ``observation_features``: the contract's joint features as ``<joint>.pos`` floats (the names the
  recorder node writes) and its cameras as ``(height, width, 3)``; units as the contract declares.
* ``connect()``: subscribes to every observation topic and waits for each (TimeoutError names the
  silent ones), opens the command publisher, anchors the safety filter at the measured position.
* ``get_observation()``: the latest message of every topic; one older than its max age is an error
  (:class:`StaleObservationError`), never a silent repeat.
* ``send_action()``: contract units -> published units (rad) -> safety (joint limits, bounded change per
  call, non-finite rejected) -> the command topic; returns what was sent, in the contract's units.
* ``lockstep`` (a lockstep sim, which steps only on a command stamped with its current tick):
  ``get_observation()`` waits for the next tick (all topics stamped alike, later than the last one
  returned) instead of checking ages, and ``send_action()`` stamps the command with that tick.
* Calibration belongs to the driver node: ``is_calibrated`` is True and ``calibrate()`` does nothing.
"""

from __future__ import annotations

import logging
import math
import time

import numpy as np
from lerobot.robots.robot import Robot
from lerobot.utils.errors import DeviceAlreadyConnectedError, DeviceNotConnectedError

from lerobot_core.ros.commands import command_message
from lerobot_core.ros.device import BackgroundNode, import_rclpy, message_class, stamp_ns
from lerobot_core.safety import SafetyFilter, SafetyLimits
from lerobot_core.time import ns_to_stamp

from .config_ros import (
    RosArmConfig,
    RosRobotConfig,
    RosSO101Config,
    RosSO101SimConfig,
)

logger = logging.getLogger(__name__)

IMAGE_PREFIX = "observation.images."
# --robot.lockstep: while the sim repeats the current tick (its keep-alive), the tick's command is sent
# again at most this often [s]
LOCKSTEP_RESEND_S = 0.25


class StaleObservationError(RuntimeError):
    """A topic's latest message is older than allowed: the publisher stalled or died."""


class ActionRejectedError(ValueError):
    """send_action got an action the robot cannot send (missing joints, non-finite values)."""


class RosRobot(Robot):
    config_class = RosRobotConfig
    name = "ros"

    def __init__(self, config: RosRobotConfig):
        import_rclpy()  # fail here, with how to get it, rather than in connect()
        super().__init__(config)
        self.config = config
        self.contract = config.parsed_contract
        if self.contract.robot_type:
            self.name = self.contract.robot_type  # the dataset's robot_type, as the recorder node writes it
        self._obs = config.observation_contract
        self._node: BackgroundNode | None = None
        self._publisher = None
        src = self.contract.vectors["action"][0]
        self._action_joints = tuple(src.joints)
        self._action_names = src.names()
        scale, offset = self.contract.unit_conversion("action")
        self._act_scale, self._act_offset = scale, offset
        self._safety = SafetyFilter(self._limits())
        self._tick_ns = -1  # lockstep: the stamp of the last tick get_observation returned
        self._last_command: np.ndarray | None = None  # lockstep: what answered that tick

    def __str__(self) -> str:
        return f"ros robot {self.id or self.name}"

    # ------------------------------------------------------------------ features
    @property
    def observation_features(self) -> dict:
        out: dict = {}
        for feature, spec in self._obs.features().items():
            if feature.startswith(IMAGE_PREFIX):
                out[feature[len(IMAGE_PREFIX) :]] = tuple(spec["shape"])
            else:
                out.update({name: float for name in spec["names"]})
        return out

    @property
    def action_features(self) -> dict:
        return {name: float for name in self._action_names}

    @property
    def cameras(self) -> dict:
        """Camera name -> the contract's image source (topic, type, size); LeRobot sizes its image
        writer by how many there are. The robot reads them itself, in get_observation."""
        return {f[len(IMAGE_PREFIX) :]: src for f, src in self._obs.images.items()}

    # ------------------------------------------------------------------ calibration (the driver's)
    @property
    def is_calibrated(self) -> bool:
        return True

    def calibrate(self) -> None:
        logger.info("%s: calibration belongs to the driver node (lerobot-ros-calibrate); nothing to do", self)

    def configure(self) -> None:
        pass

    # ------------------------------------------------------------------ connection
    @property
    def is_connected(self) -> bool:
        return self._node is not None

    def connect(self, calibrate: bool = True) -> None:
        if self.is_connected:
            raise DeviceAlreadyConnectedError(f"{self} is already connected")
        node = BackgroundNode("lerobot_robot_ros", self.config.namespace, self.config.domain_id)
        try:
            for topic, stream in self._obs.streams.items():
                node.subscribe(topic, stream.msgtype, stream.qos)
            ctopic, ctype = self.config.command
            self._publisher = node.publisher(ctopic, ctype)
            node.wait_for(list(self._obs.streams), self.config.connect_timeout_s)
        except BaseException:
            node.close()
            raise
        self._node = node
        self._tick_ns, self._last_command = -1, None
        self._anchor_safety()
        logger.info(
            "%s connected (%d topics, commands on %s)", self, len(self._obs.streams), node.resolve(ctopic)
        )

    def disconnect(self) -> None:
        if not self.is_connected:
            raise DeviceNotConnectedError(f"{self} is not connected")
        node, self._node = self._node, None
        publisher, self._publisher = self._publisher, None
        # the last command may still be in flight: closing the node now would drop it (the lockstep sim
        # would never see the tick's answer, a recorder never record it)
        from rclpy.duration import Duration

        if not publisher.wait_for_all_acked(Duration(seconds=1.0)):
            logger.warning(
                "%s: the last command on %s was not acknowledged in 1 s", self, publisher.topic_name
            )
        node.close()
        logger.info("%s disconnected", self)

    # ------------------------------------------------------------------ observation
    def _max_age(self, topic: str) -> float:
        if self.config.max_age_s is not None:
            return self.config.max_age_s
        staleness = self._obs.streams[topic].max_staleness
        return staleness if staleness is not None else math.inf

    def get_observation(self) -> dict:
        if not self.is_connected:
            raise DeviceNotConnectedError(f"{self} is not connected. Run `.connect()` first.")
        if self.config.lockstep:
            self._tick_ns = self._wait_for_next_tick()
        return self._read_observation()

    def _wait_for_next_tick(self) -> int:
        """The stamp (ns) of the next complete lockstep tick: every topic stamped alike, later than the last.

        While the sim repeats the current tick (its keep-alive: it is still waiting), the command that
        answered the tick goes out again, at most every LOCKSTEP_RESEND_S. A node that must take the
        command in before the sim steps (a recorder among the sim's required consumers) but matched this
        robot's publisher only after the command was sent would otherwise never get it, and the lockstep
        would wait for good. The sim ignores a command for a tick it has left behind.
        """
        topics = list(self._obs.streams)
        deadline = time.monotonic() + self.config.lockstep_timeout_s
        last_counts, last_sent = self._node.counts(), time.monotonic()
        while True:
            counts = self._node.counts()
            stamps = {t: stamp_ns(self._node.latest(t).msg) for t in topics}
            newest = max(stamps.values())
            if newest > self._tick_ns and all(v == newest for v in stamps.values()):
                return newest
            now = time.monotonic()
            repeated = counts != last_counts and all(v == self._tick_ns for v in stamps.values())
            if repeated and self._last_command is not None and now - last_sent >= LOCKSTEP_RESEND_S:
                self._publish(self._last_command)
                last_sent = now
            last_counts = counts
            left = deadline - now
            if left <= 0:
                seen = ", ".join(f"{self._node.resolve(t)} at {v / 1e9:.3f} s" for t, v in stamps.items())
                raise StaleObservationError(
                    f"{self}: --robot.lockstep: no complete tick after sim time {self._tick_ns / 1e9:.3f} s "
                    f"within {self.config.lockstep_timeout_s:g} s (latest: {seen}); is the sim in lockstep "
                    "mode and waiting for this robot's commands?"
                )
            self._node.wait_newer({t: counts[t] for t in topics}, left)

    def _read_observation(self) -> dict:
        now = time.monotonic()
        values = {}
        for topic in self._obs.streams:
            latest = self._node.latest(topic)
            age = now - latest.received
            # lockstep: the sim waits for this robot, so a tick can be old in wall time and still current
            if not self.config.lockstep and age > self._max_age(topic):
                raise StaleObservationError(
                    f"{self}: the latest message on {self._node.resolve(topic)} is {age:.3f} s old "
                    f"(max {self._max_age(topic):g} s): its publisher stalled or stopped"
                )
            values[topic] = self._obs.extract(topic, latest.msg)[0]
        frame, _ = self._obs.make_frame(values)
        obs: dict = {}
        for feature, value in frame.items():
            if feature.startswith(IMAGE_PREFIX):
                obs[feature[len(IMAGE_PREFIX) :]] = value
            else:
                names = self._obs.features()[feature]["names"]
                obs.update({n: float(v) for n, v in zip(names, value, strict=True)})
        return obs

    # ------------------------------------------------------------------ action
    def _limits(self) -> SafetyLimits:
        lim = self.config.limits
        n = len(self._action_joints)
        lower = [lim.get(j, (-math.inf,))[0] for j in self._action_joints]
        upper = [lim.get(j, (0.0, math.inf))[1] for j in self._action_joints]
        if self.config.max_step_rad is not None:
            step = [float(self.config.max_step_rad)] * n
        else:
            step = [lim.get(j, (0, 0, math.inf))[2] / self.contract.fps for j in self._action_joints]
        return SafetyLimits.build(n, lower, upper, step)

    def _anchor_safety(self) -> None:
        """Bound the first command relative to where the arm is now (when the observation has it)."""
        try:
            obs = self._read_observation()  # not a lockstep tick: LeRobot's first get_observation gets it
        except StaleObservationError:
            obs = {}
        if all(n in obs for n in self._action_names):
            stored = np.array([obs[n] for n in self._action_names], dtype=np.float64)
            self._safety.reset((stored - self._act_offset) / self._act_scale)
        else:
            self._safety.reset(None)

    def send_action(self, action: dict) -> dict:
        if not self.is_connected:
            raise DeviceNotConnectedError(f"{self} is not connected. Run `.connect()` first.")
        missing = [n for n in self._action_names if n not in action]
        if missing:
            raise ActionRejectedError(
                f"{self}: action lacks {missing} (action features: {self._action_names})"
            )
        stored = np.array([float(action[n]) for n in self._action_names], dtype=np.float64)
        if not np.all(np.isfinite(stored)):
            bad = [n for n, v in zip(self._action_names, stored, strict=True) if not math.isfinite(v)]
            raise ActionRejectedError(f"{self}: non-finite action values for {bad}; nothing sent")
        result = self._safety.apply((stored - self._act_offset) / self._act_scale)
        command = result.command
        self._publish(command)
        sent = command * self._act_scale + self._act_offset
        return {n: float(v) for n, v in zip(self._action_names, sent, strict=True)}

    def _publish(self, positions: np.ndarray) -> None:
        _, ctype = self.config.command
        if self.config.lockstep and self._tick_ns >= 0:  # the tick this command answers
            stamp = ns_to_stamp(self._tick_ns, message_class("builtin_interfaces/msg/Time"))
        else:
            stamp = self._node.node.get_clock().now().to_msg()
        point_s = self.config.trajectory_time_s or 1.0 / self.contract.fps  # a JointTrajectory's one point
        if self.config.lockstep:
            self._last_command = positions
        self._publisher.publish(command_message(ctype, self._action_joints, positions, stamp, point_s))


# LeRobot finds a device class by its config's name without "Config" (make_device_from_device_class)
RosSO101Sim = RosRobot
RosSO101 = RosRobot
RosArm = RosRobot

__all__ = [
    "RosRobot",
    "RosSO101Sim",
    "RosSO101",
    "RosArm",
    "RosRobotConfig",
    "RosSO101SimConfig",
    "RosSO101Config",
    "RosArmConfig",
    "StaleObservationError",
    "ActionRejectedError",
]
