"""Config of the ROS 2 camera (camera ``type: ros``), checked when LeRobot parses it (no rclpy needed)."""

from __future__ import annotations

from dataclasses import dataclass

from lerobot.cameras.configs import CameraConfig, ColorMode

from lerobot_core.contract import Contract, ContractError, normalize_msgtype


@CameraConfig.register_subclass("ros")
@dataclass(kw_only=True)
class RosCameraConfig(CameraConfig):
    topic: str  # e.g. /cameras/front/image_raw or /cameras/wrist/image_raw/compressed
    msg_type: str | None = (
        None  # Image | CompressedImage; None: CompressedImage when the topic ends in /compressed
    )
    qos: str = "sensor"  # sensor (best effort) | reliable
    color_mode: ColorMode = ColorMode.RGB
    namespace: str = ""
    domain_id: int | None = None
    connect_timeout_s: float = 10.0

    def __post_init__(self):
        self.color_mode = ColorMode(self.color_mode)
        if self.qos not in ("sensor", "reliable"):
            raise ValueError(f"camera {self.topic}: qos {self.qos!r} is not sensor or reliable")
        image = {"topic": self.topic, "qos": self.qos}
        if self.msg_type:
            image["type"] = normalize_msgtype(self.msg_type)
        if (self.width is None) != (self.height is None):
            raise ValueError(f"camera {self.topic}: give both width and height, or neither")
        if self.width is not None:
            image.update(height=self.height, width=self.width)
        try:  # the contract's image rules: supported types and encodings, one place
            contract = Contract.from_dict(
                {"fps": int(self.fps or 30), "task": "-", "features": {"observation.images.camera": image}},
                source=f"camera {self.topic}",
            )
        except ContractError as exc:
            raise ValueError(str(exc)) from None
        object.__setattr__(self, "_contract", contract)

    @property
    def parsed_contract(self) -> Contract:
        return self._contract
