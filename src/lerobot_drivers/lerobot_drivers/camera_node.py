"""camera: lifecycle node publishing one camera as sensor_msgs/Image (rgb8) + CameraInfo.

Topics (relative): cameras/<camera_name>/image_raw, cameras/<camera_name>/camera_info and,
when publish_compressed, cameras/<camera_name>/image_raw/compressed. header.stamp is the capture
time. Frames are read on a capture thread; a camera that stops delivering is reported in the log
and on /diagnostics (ERROR after stall_timeout_s) while the node stays responsive.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Optional

from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.lifecycle import LifecycleNode, State, TransitionCallbackReturn
from sensor_msgs.msg import CameraInfo, CompressedImage, Image

from lerobot_core import topics
from lerobot_core.dds_transport import use_large_image_transport
from lerobot_core.image_conversion import encode_compressed, fill_image_msg
from lerobot_core.ros import qos
from lerobot_core.ros.node import autostart_timer, publish_unless_shut_down, run_node
from lerobot_core.ros.params import declare
from lerobot_core.time import seconds_to_stamp
from lerobot_drivers.cameras import CameraError, CaptureThread, Frame, make_source, pinhole_k


@dataclass(frozen=True)
class CameraConfig:
    camera_name: str
    source: str
    device: str
    video_path: str
    loop: bool
    width: int
    height: int
    fps: float
    fourcc: str
    frame_id: str
    hfov_deg: float
    publish_compressed: bool
    jpeg_quality: int
    stall_timeout_s: float
    autostart: bool


class CameraNode(LifecycleNode):
    def __init__(self, **kwargs) -> None:
        super().__init__("camera", **kwargs)
        p = partial(declare, self)

        self.cfg = CameraConfig(
            camera_name=p("camera_name", "front", "name in topics cameras/<name>/... (LeRobot camera key)"),
            source=p("source", "synthetic", "opencv | video | synthetic"),
            device=p("device", "0", "OpenCV index (0) or device path (/dev/video0)"),
            video_path=p("video_path", "", "video file for source=video"),
            loop=p("loop", True, "replay the video file in a loop"),
            width=p(
                "width",
                640,
                "frame width [px]; 0 = device default",
                range=(0, 8192),
            ),
            height=p(
                "height",
                480,
                "frame height [px]; 0 = device default",
                range=(0, 8192),
            ),
            fps=p(
                "fps",
                30.0,
                "frame rate [Hz]; 0 = device/file default",
                range=(0.0, 480.0),
            ),
            fourcc=p("fourcc", "", "capture pixel format, e.g. MJPG; empty = driver default"),
            frame_id=p("frame_id", "", "header.frame_id; empty = <camera_name>_optical_frame"),
            hfov_deg=p("hfov_deg", 70.0, "horizontal field of view for CameraInfo K [deg]"),
            publish_compressed=p("publish_compressed", False, "also publish image_raw/compressed (jpeg)"),
            jpeg_quality=p("jpeg_quality", 90, "jpeg quality 1-100"),
            stall_timeout_s=p("stall_timeout_s", 2.0, "no frame for this long = camera stalled [s]"),
            autostart=p("autostart", False, "configure and activate right after start"),
        )
        cam = self.cfg.camera_name
        self.frame_id = self.cfg.frame_id or f"{self.cfg.camera_name}_optical_frame"
        self.pub_img = self.create_lifecycle_publisher(Image, topics.camera_topic(cam), qos.IMAGES)
        self.pub_info = self.create_lifecycle_publisher(CameraInfo, topics.camera_info_topic(cam), qos.IMAGES)
        self.pub_comp = (
            self.create_lifecycle_publisher(CompressedImage, topics.compressed_camera_topic(cam), qos.IMAGES)
            if self.cfg.publish_compressed
            else None
        )
        self.pub_diag = self.create_publisher(DiagnosticArray, "/diagnostics", qos.RELIABLE)
        self.source = None
        self.capture: Optional[CaptureThread] = None
        self._stalled = False
        self._published = 0
        self._active = False
        self.create_timer(0.5, self._watchdog)
        if self.cfg.autostart:
            autostart_timer(self)

    def on_configure(self, state: State) -> TransitionCallbackReturn:
        c = self.cfg
        try:
            self.source = make_source(
                c.source, c.device, c.width, c.height, c.fps, c.fourcc, c.video_path, c.loop
            )
            self.source.open()
        except CameraError as exc:
            self.get_logger().error(f"configure failed: {exc}")
            self.source = None
            return TransitionCallbackReturn.FAILURE
        self.info = CameraInfo()
        self.info.header.frame_id = self.frame_id
        self.info.width, self.info.height = self.source.width, self.source.height
        self.info.distortion_model = "plumb_bob"
        self.info.d = [0.0] * 5
        self.info.k = list(pinhole_k(self.source.width, self.source.height, c.hfov_deg))
        self.info.r = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
        k = self.info.k
        self.info.p = [k[0], 0.0, k[2], 0.0, 0.0, k[4], k[5], 0.0, 0.0, 0.0, 1.0, 0.0]
        self.capture = CaptureThread(
            self.source, self._on_frame, lambda m: self.get_logger().warning(m, throttle_duration_sec=2.0)
        )
        self.get_logger().info(
            f"{self.source.name}: {self.source.width}x{self.source.height} at {self.source.fps:g} fps "
            f"-> {self.pub_img.topic_name}"
        )
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: State) -> TransitionCallbackReturn:
        self._active = True
        self.capture.start()
        return super().on_activate(state)

    def _stop_capture(self) -> None:
        self._active = False
        if self.capture is not None and not self.capture.stop():
            self.get_logger().error(
                f"{self.source.name} is stuck in a read; its capture thread was abandoned"
            )

    def on_deactivate(self, state: State) -> TransitionCallbackReturn:
        self._stop_capture()
        return super().on_deactivate(state)

    def on_cleanup(self, state: State) -> TransitionCallbackReturn:
        if self.source is not None:
            self.source.close()
            self.source = None
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: State) -> TransitionCallbackReturn:
        self._stop_capture()
        return self.on_cleanup(state)

    def _on_frame(self, frame: Frame) -> None:
        if not self._active or not self.context.ok():
            return
        stamp = seconds_to_stamp(frame.stamp, Time)
        msg = Image()
        msg.header.stamp = stamp
        msg.header.frame_id = self.frame_id
        fill_image_msg(msg, frame.image, "rgb8")
        # False: rclpy shut down meanwhile (Ctrl-C may come after the check above)
        if not publish_unless_shut_down(self.pub_img, msg, self.context):
            return
        self.info.header.stamp = stamp
        if not publish_unless_shut_down(self.pub_info, self.info, self.context):
            return
        if self.pub_comp is not None:
            fmt, data = encode_compressed(frame.image, "jpeg", self.cfg.jpeg_quality)
            comp = CompressedImage()
            comp.header = msg.header
            comp.format = fmt
            comp.data = data
            if not publish_unless_shut_down(self.pub_comp, comp, self.context):
                return
        self._published += 1

    def _watchdog(self) -> None:
        cap = self.capture
        st = DiagnosticStatus(
            name=f"{self.get_name()}: camera {self.cfg.camera_name}", hardware_id=str(self.cfg.device)
        )
        if cap is None or not self._active:
            st.level, st.message = DiagnosticStatus.OK, "inactive"
        else:
            age = cap.seconds_since_last_frame()
            if age > self.cfg.stall_timeout_s:
                st.level, st.message = (
                    DiagnosticStatus.ERROR,
                    f"no frame for {age:.1f} s (camera stalled or unplugged)",
                )
                if not self._stalled:
                    self._stalled = True
                    self.get_logger().error(f"{self.source.name}: {st.message}")
            else:
                st.level, st.message = DiagnosticStatus.OK, "streaming"
                if self._stalled:
                    self._stalled = False
                    self.get_logger().info(f"{self.source.name}: frames again")
            st.values = [
                KeyValue(key="frames", value=str(cap.frames)),
                KeyValue(key="published", value=str(self._published)),
                KeyValue(key="failed_reads", value=str(cap.failed_reads)),
                KeyValue(key="seconds_since_last_frame", value=f"{age:.2f}"),
            ]
        arr = DiagnosticArray(status=[st])
        arr.header.stamp = self.get_clock().now().to_msg()
        self.pub_diag.publish(arr)


def main(args=None) -> int:
    # images over shared memory on a localhost stack (before rclpy.init)
    return run_node(CameraNode, args, before_init=use_large_image_transport, on_exit=CameraNode._stop_capture)


if __name__ == "__main__":
    raise SystemExit(main())
