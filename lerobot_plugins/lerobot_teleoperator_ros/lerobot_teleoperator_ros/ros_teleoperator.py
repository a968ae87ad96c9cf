"""A LeRobot ``Teleoperator`` reading a leader arm's joint topic over ROS 2.

``get_action()`` is the latest leader message as ``<joint>.pos`` values in the contract's units; one
older than ``max_age_s`` is an error. For an active leader (human-in-the-loop), ``enable_torque`` /
``write_goal_positions`` / ``disable_torque`` drive the leader's bus node through its command topic:
lerobot_drivers' motor_bus_node turns torque on with the first command and, with
``safe_state:=torque_off``, off again ``command_timeout_s`` after the last one. The bus node has no
torque service or parameter, so ``disable_torque`` cannot be immediate (see docs/lerobot_plugins.md).
"""

from __future__ import annotations

import logging
import time

import numpy as np
from lerobot.teleoperators.teleoperator import Teleoperator
from lerobot.utils.errors import DeviceAlreadyConnectedError, DeviceNotConnectedError

from lerobot_core.ros.device import BackgroundNode, import_rclpy, message_class

from .config_ros import RosTeleoperatorConfig

logger = logging.getLogger(__name__)


class StaleLeaderError(RuntimeError):
    """The leader's latest message is older than max_age_s."""


class RosTeleoperator(Teleoperator):
    config_class = RosTeleoperatorConfig
    name = "ros"

    def __init__(self, config: RosTeleoperatorConfig):
        import_rclpy()
        super().__init__(config)
        self.config = config
        self.contract = config.parsed_contract
        self._sources = self.contract.vectors["action"]
        self._names = [n for s in self._sources for n in s.names()]
        self._scale, self._offset = self.contract.unit_conversion("action")
        self._node: BackgroundNode | None = None
        self._mirror = None
        self._mirroring = False

    @property
    def action_features(self) -> dict:
        return {n: float for n in self._names}

    @property
    def feedback_features(self) -> dict:
        return {}

    @property
    def is_connected(self) -> bool:
        return self._node is not None

    @property
    def is_calibrated(self) -> bool:
        return True  # the leader's driver node owns its calibration

    def calibrate(self) -> None:
        logger.info("%s: calibration belongs to the leader's driver node; nothing to do", self)

    def configure(self) -> None:
        pass

    def connect(self, calibrate: bool = True) -> None:
        if self.is_connected:
            raise DeviceAlreadyConnectedError(f"{self} is already connected")
        node = BackgroundNode("lerobot_teleoperator_ros", self.config.namespace, self.config.domain_id)
        try:
            for topic, stream in self.contract.streams.items():
                node.subscribe(topic, stream.msgtype, stream.qos)
            topics = [s.topic for s in self._sources]
            node.wait_for(topics, self.config.connect_timeout_s)
        except BaseException:
            node.close()
            raise
        self._node = node

    def disconnect(self) -> None:
        if not self.is_connected:
            raise DeviceNotConnectedError(f"{self} is not connected")
        node, self._node, self._mirror = self._node, None, None
        node.close()

    def get_action(self) -> dict:
        if not self.is_connected:
            raise DeviceNotConnectedError(f"{self} is not connected. Run `.connect()` first.")
        now = time.monotonic()
        pieces = []
        for src in self._sources:
            latest = self._node.latest(src.topic)
            age = now - latest.received
            if age > self.config.max_age_s:
                raise StaleLeaderError(
                    f"{self}: the latest message on {self._node.resolve(src.topic)} is {age:.3f} s old "
                    f"(max {self.config.max_age_s:g} s): the leader's driver stalled or stopped"
                )
            values, _, _ = self.contract.extract(src.topic, latest.msg)
            pieces.append(values)
        # extract gives each topic's (field, joint) values; make_frame orders them and applies the units
        frame, _ = self.contract.make_frame({s.topic: p for s, p in zip(self._sources, pieces, strict=True)})
        return {n: float(v) for n, v in zip(self._names, frame["action"], strict=True)}

    def send_feedback(self, feedback: dict) -> None:
        if not self.is_connected:
            raise DeviceNotConnectedError(f"{self} is not connected. Run `.connect()` first.")

    # ------------------------------------------------------------- active leader (HIL hooks)
    def enable_torque(self) -> None:
        """Hold the leader where it is (its bus node turns torque on with the first command)."""
        self._mirroring = True
        self.write_goal_positions(self.get_action())

    def disable_torque(self) -> None:
        """Stop commanding the leader: a bus node with safe_state:=torque_off releases it after its
        command_timeout_s (the node has no immediate torque-off interface)."""
        self._mirroring = False

    def write_goal_positions(self, positions: dict) -> None:
        """Command the leader arm to ``positions`` (``<joint>.pos`` in the contract's units)."""
        if not self.is_connected:
            raise DeviceNotConnectedError(f"{self} is not connected. Run `.connect()` first.")
        if self._mirror is None:
            self._mirror = self._node.publisher(self.config.command_topic, "sensor_msgs/msg/JointState")
        src = self._sources[0]
        stored = np.array([float(positions[n]) for n in src.names()], dtype=np.float64)
        n = len(stored)
        published = (stored - self._offset[:n]) / self._scale[:n]
        msg = message_class("sensor_msgs/msg/JointState")()
        msg.header.stamp = self._node.node.get_clock().now().to_msg()
        msg.name = list(src.joints)
        msg.position = [float(v) for v in published]
        self._mirror.publish(msg)
