"""A LeRobot ``Teleoperator`` reading a leader arm's joint topic over ROS 2.

``get_action()`` is the latest leader message as ``<joint>.pos`` values in the contract's units; one
older than ``max_age_s`` is an error. For an active leader (human-in-the-loop), ``enable_torque`` /
``write_goal_positions`` / ``disable_torque`` drive the leader's bus node (lerobot_drivers motor_bus):

- a read-only leader bus node (``read_only:=true``, the default of the teleop and HIL profiles) serves
  ``torque_enable`` (std_srvs/SetBool): ``enable_torque`` calls it with true (the arm holds its pose and
  follows ``command_topic``), ``disable_torque`` with false (the arm is free at once);
- a commandable one (``read_only:=false safe_state:=torque_off``) has no such service: torque comes on
  with the first command and goes off ``command_timeout_s`` after the last one.
"""

from __future__ import annotations

import logging
import time

import numpy as np
from lerobot.teleoperators.teleoperator import Teleoperator
from lerobot.utils.errors import DeviceAlreadyConnectedError, DeviceNotConnectedError

from lerobot_core.ros.device import BackgroundNode, import_rclpy, message_class, stamp_ns

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
        self._torque_client = None  # SetBool client while the leader's bus node serves torque_enable
        self._torque_via_service: bool | None = None  # None: not asked yet
        self._stamps: dict[str, int] = {}  # lockstep: stamps (ns) of the leader messages last returned

    def __str__(self) -> str:  # errors start with it: LeRobot's default says "None ..." without --teleop.id
        return f"ros teleoperator {self.id}" if self.id else "ros teleoperator"

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
        self._stamps = {}

    def disconnect(self) -> None:
        if not self.is_connected:
            raise DeviceNotConnectedError(f"{self} is not connected")
        if self._torque_via_service and self._mirroring:
            self.disable_torque()  # leave the leader free, as LeRobot's leader arms are
        node, self._node, self._mirror, self._torque_client = self._node, None, None, None
        self._torque_via_service, self._mirroring = None, False
        node.close()

    def get_action(self) -> dict:
        if not self.is_connected:
            raise DeviceNotConnectedError(f"{self} is not connected. Run `.connect()` first.")
        if self.config.lockstep:
            self._wait_for_newer_stamp()
        now = time.monotonic()
        pieces = []
        for src in self._sources:
            latest = self._node.latest(src.topic)
            age = now - latest.received
            if not self.config.lockstep and age > self.config.max_age_s:
                raise StaleLeaderError(
                    f"{self}: the latest message on {self._node.resolve(src.topic)} is {age:.3f} s old "
                    f"(max {self.config.max_age_s:g} s): the leader's driver stalled or stopped"
                )
            values, _, _ = self.contract.extract(src.topic, latest.msg)
            pieces.append(values)
        # extract gives each topic's (field, joint) values; make_frame orders them and applies the units
        frame, _ = self.contract.make_frame({s.topic: p for s, p in zip(self._sources, pieces, strict=True)})
        return {n: float(v) for n, v in zip(self._names, frame["action"], strict=True)}

    def _wait_for_newer_stamp(self) -> None:
        """Lockstep: block until every leader topic has a message stamped later than the last returned."""
        topics = [s.topic for s in self._sources]
        deadline = time.monotonic() + self.config.lockstep_timeout_s
        while True:
            counts = self._node.counts()
            stamps = {t: stamp_ns(self._node.latest(t).msg) for t in topics}
            if all(stamps[t] > self._stamps.get(t, -1) for t in topics):
                self._stamps = stamps
                return
            left = deadline - time.monotonic()
            if left <= 0:
                raise StaleLeaderError(
                    f"{self}: --teleop.lockstep: no leader message newer than sim time "
                    f"{max(self._stamps.values(), default=0) / 1e9:.3f} s on "
                    f"{', '.join(self._node.resolve(t) for t in topics)} within "
                    f"{self.config.lockstep_timeout_s:g} s: does the leader answer the sim's ticks?"
                )
            self._node.wait_newer({t: counts[t] for t in topics}, left)

    def send_feedback(self, feedback: dict) -> None:
        if not self.is_connected:
            raise DeviceNotConnectedError(f"{self} is not connected. Run `.connect()` first.")

    # ------------------------------------------------------------- active leader (HIL hooks)
    def enable_torque(self) -> None:
        """Hold the leader where it is, then follow write_goal_positions (mirroring the follower)."""
        if not self.is_connected:
            raise DeviceNotConnectedError(f"{self} is not connected. Run `.connect()` first.")
        if self._uses_torque_service():
            self._set_torque(True)
        self._mirroring = True
        self.write_goal_positions(self.get_action())

    def disable_torque(self) -> None:
        """Release the leader: at once through torque_enable; without the service, by no longer
        commanding it (a bus node with safe_state:=torque_off releases it after its command_timeout_s)."""
        if not self.is_connected:
            raise DeviceNotConnectedError(f"{self} is not connected. Run `.connect()` first.")
        self._mirroring = False
        if self._uses_torque_service():
            self._set_torque(False)

    def _uses_torque_service(self) -> bool:
        """Whether the leader's bus node serves torque_enable (looked up once, on first use)."""
        if self._torque_via_service is None:
            self._torque_via_service = False
            if self.config.torque_service:
                client = self._node.service_client(self.config.torque_service, "std_srvs/srv/SetBool")
                if client.wait_for_service(timeout_sec=self.config.service_timeout_s):
                    self._torque_client, self._torque_via_service = client, True
                else:
                    self._node.node.destroy_client(client)
                    logger.warning(
                        "%s: no service %s within %g s; torque follows the commands on %s (a bus node "
                        "with read_only:=false safe_state:=torque_off)",
                        self,
                        self._node.node.resolve_service_name(self.config.torque_service),
                        self.config.service_timeout_s,
                        self._node.resolve(self.config.command_topic),
                    )
        return self._torque_via_service

    def _set_torque(self, on: bool) -> None:
        from std_srvs.srv import SetBool

        response = self._node.call(
            self._torque_client, SetBool.Request(data=on), self.config.service_timeout_s
        )
        if not response.success:
            raise RuntimeError(
                f"{self}: {self._torque_client.service_name} {str(on).lower()} failed: {response.message}"
            )
        logger.info("%s: %s", self, response.message)

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
