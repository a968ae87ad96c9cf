"""A LeRobot ``Camera`` reading a ROS 2 image topic (raw or compressed), decoded to RGB (or BGR)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from lerobot.cameras.camera import Camera
from lerobot.cameras.configs import ColorMode
from lerobot.utils.errors import DeviceAlreadyConnectedError, DeviceNotConnectedError

from lerobot_core.contract import COMPRESSED_IMAGE, IMAGE
from lerobot_core.ros.device import BackgroundNode, import_rclpy

from .config_ros import RosCameraConfig

FEATURE = "observation.images.camera"


class RosCamera(Camera):
    def __init__(self, config: RosCameraConfig):
        import_rclpy()
        super().__init__(config)
        self.config = config
        self.contract = config.parsed_contract
        self._topic = self.contract.images[FEATURE].topic
        self._node: BackgroundNode | None = None
        self._consumed = 0  # message count of the last frame async_read returned

    def __str__(self) -> str:
        return f"RosCamera({self._topic})"

    @property
    def is_connected(self) -> bool:
        return self._node is not None

    @staticmethod
    def find_cameras() -> list[dict[str, Any]]:
        """Image topics visible on this ROS domain (listed for a moment by a temporary node)."""
        rclpy = import_rclpy()
        ctx = rclpy.Context()
        rclpy.init(context=ctx)
        try:
            node = rclpy.create_node("lerobot_find_cameras", context=ctx)
            time.sleep(1.0)  # discovery
            found = [
                {"name": name, "type": "ros", "id": name, "msg_type": t}
                for name, types in node.get_topic_names_and_types()
                for t in types
                if t in (IMAGE, COMPRESSED_IMAGE)
            ]
            node.destroy_node()
            return found
        finally:
            rclpy.shutdown(context=ctx)

    def connect(self, warmup: bool = True) -> None:
        if self.is_connected:
            raise DeviceAlreadyConnectedError(f"{self} is already connected")
        node = BackgroundNode("lerobot_camera_ros", self.config.namespace, self.config.domain_id)
        try:
            stream = self.contract.streams[self._topic]
            node.subscribe(self._topic, stream.msgtype, stream.qos, depth=2)
            node.wait_for([self._topic], self.config.connect_timeout_s)
            first = node.latest(self._topic).msg
            self.contract = self.contract.resolve({self._topic: first})  # size from the data when not given
        except BaseException:
            node.close()
            raise
        src = self.contract.images[FEATURE]
        self.width, self.height = src.width, src.height
        self._node = node

    def _frame(self, msg) -> np.ndarray:
        frame, _ = self.contract.make_frame({self._topic: msg})
        rgb = frame[FEATURE]
        return rgb[..., ::-1].copy() if self.config.color_mode == ColorMode.BGR else rgb

    def _check(self) -> None:
        if not self.is_connected:
            raise DeviceNotConnectedError(f"{self} is not connected. Run `.connect()` first.")

    def read(self) -> np.ndarray:
        """The next new frame (waits up to connect_timeout_s)."""
        return self.async_read(timeout_ms=self.config.connect_timeout_s * 1000.0)

    def async_read(self, timeout_ms: float = 200) -> np.ndarray:
        self._check()
        self._node.wait_for([self._topic], timeout_ms / 1000.0, after={self._topic: self._consumed})
        latest = self._node.latest(self._topic)
        self._consumed = latest.count
        return self._frame(latest.msg)

    def read_latest(self, max_age_ms: int = 500) -> np.ndarray:
        self._check()
        latest = self._node.latest(self._topic)
        age_ms = (time.monotonic() - latest.received) * 1000.0
        if age_ms > max_age_ms:
            raise TimeoutError(f"{self}: the latest frame is {age_ms:.0f} ms old (max {max_age_ms} ms)")
        return self._frame(latest.msg)

    def disconnect(self) -> None:
        if not self.is_connected:
            raise DeviceNotConnectedError(f"{self} is not connected")
        node, self._node = self._node, None
        node.close()
