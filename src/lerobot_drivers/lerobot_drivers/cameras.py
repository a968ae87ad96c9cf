"""Camera frame sources and a capture thread that never blocks its owner (ROS-free).

Sources return RGB uint8 HxWx3 frames:

* :class:`OpenCVSource` - a V4L2/OpenCV device by index (``0``) or path (``/dev/video0``), with
  width, height, fps and fourcc (``MJPG``), like LeRobot's ``OpenCVCameraConfig``;
* :class:`VideoFileSource` - a video file replayed at its own (or a given) fps, optionally looped;
* :class:`SyntheticSource` - a deterministic moving test pattern with the frame counter drawn in
  and encoded in the first pixels, for graphs and tests without a camera.

:class:`CaptureThread` reads a source on its own thread, stamps every frame with its capture
time and hands it to a callback; a stalled source is detected by the owner through
``seconds_since_last_frame`` instead of a read blocking the node.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

import numpy as np


class CameraError(RuntimeError):
    """A camera that cannot be opened or read; the message names the device."""


@dataclass
class Frame:
    image: np.ndarray  # HxWx3 uint8 RGB
    stamp: float  # time.time() at capture
    index: int


class FrameSource:
    name = "source"
    width = 0
    height = 0
    fps = 30.0
    paced = False  # True when read() itself waits for the next frame (devices)

    def open(self) -> None:
        pass

    def read(self) -> Optional[np.ndarray]:
        raise NotImplementedError

    def close(self) -> None:
        pass


def parse_device(device: str):
    """ "0" -> 0 (index), anything else -> path string."""
    device = str(device).strip()
    return int(device) if device.isdigit() else device


class OpenCVSource(FrameSource):
    paced = True

    def __init__(self, device, width: int = 0, height: int = 0, fps: float = 0.0, fourcc: str = ""):
        self.device = parse_device(device) if isinstance(device, str) else device
        self.width, self.height, self.fps, self.fourcc = int(width), int(height), float(fps), fourcc
        self.name = f"opencv:{self.device}"
        self._cap = None

    def open(self) -> None:
        import cv2

        backend = cv2.CAP_V4L2 if hasattr(cv2, "CAP_V4L2") else cv2.CAP_ANY
        cap = cv2.VideoCapture(self.device, backend)
        if not cap.isOpened():
            cap.release()
            raise CameraError(
                f"cannot open camera {self.device!r}: check the index/path (v4l2-ctl --list-devices) and permissions"
            )
        if self.fourcc:
            if len(self.fourcc) != 4:
                raise CameraError(f"fourcc {self.fourcc!r} must be 4 characters, e.g. MJPG")
            cap.set(cv2.CAP_PROP_FOURCC, cv2.VideoWriter_fourcc(*self.fourcc))
        if self.width:
            cap.set(cv2.CAP_PROP_FRAME_WIDTH, self.width)
        if self.height:
            cap.set(cv2.CAP_PROP_FRAME_HEIGHT, self.height)
        if self.fps:
            cap.set(cv2.CAP_PROP_FPS, self.fps)
        w, h = int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)), int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
        if (self.width and w != self.width) or (self.height and h != self.height):
            cap.release()
            raise CameraError(
                f"camera {self.device!r} gives {w}x{h}, not the requested {self.width}x{self.height}"
            )
        self.width, self.height = w, h
        self.fps = self.fps or float(cap.get(cv2.CAP_PROP_FPS) or 30.0)
        self._cap = cap

    def read(self) -> Optional[np.ndarray]:
        import cv2

        ok, bgr = self._cap.read()
        if not ok or bgr is None:
            return None
        return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)

    def close(self) -> None:
        if self._cap is not None:
            self._cap.release()
            self._cap = None


class VideoFileSource(FrameSource):
    def __init__(self, path: str, fps: float = 0.0, loop: bool = True, width: int = 0, height: int = 0):
        self.path, self.loop = path, loop
        self.fps = float(fps)
        self.want = (int(width), int(height))
        self.name = f"file:{path}"
        self._cap = None

    def open(self) -> None:
        import cv2

        cap = cv2.VideoCapture(self.path)
        if not cap.isOpened():
            raise CameraError(f"cannot open video file {self.path!r}: missing or unsupported codec")
        self.fps = self.fps or float(cap.get(cv2.CAP_PROP_FPS) or 30.0)
        self.width = self.want[0] or int(cap.get(cv2.CAP_PROP_FRAME_WIDTH))
        self.height = self.want[1] or int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
        self._cap = cap

    def read(self) -> Optional[np.ndarray]:
        import cv2

        ok, bgr = self._cap.read()
        if not ok and self.loop:
            self._cap.set(cv2.CAP_PROP_POS_FRAMES, 0)
            ok, bgr = self._cap.read()
        if not ok:
            return None
        if bgr.shape[1] != self.width or bgr.shape[0] != self.height:
            bgr = cv2.resize(bgr, (self.width, self.height), interpolation=cv2.INTER_AREA)
        return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)

    def close(self) -> None:
        if self._cap is not None:
            self._cap.release()
            self._cap = None


def make_test_pattern(index: int, width: int, height: int) -> np.ndarray:
    """Deterministic frame ``index``: scrolling colour bars, a bouncing square, the counter.

    The counter is also written as 4 little-endian bytes in the red channel of the first 4
    pixels of row 0, so a consumer can recover which frame it got.
    """
    import cv2

    x = np.arange(width)
    bars = ((x + 4 * index) // max(1, width // 8)) % 8
    palette = np.array(
        [
            [255, 255, 255],
            [255, 255, 0],
            [0, 255, 255],
            [0, 255, 0],
            [255, 0, 255],
            [255, 0, 0],
            [0, 0, 255],
            [16, 16, 16],
        ],
        dtype=np.uint8,
    )
    img = np.repeat(palette[bars][None, :, :], height, axis=0).copy()
    size = max(4, min(width, height) // 6)
    span_x, span_y = max(1, width - size), max(1, height - size)
    px = (7 * index) % (2 * span_x)
    py = (5 * index) % (2 * span_y)
    px = px if px < span_x else 2 * span_x - px
    py = py if py < span_y else 2 * span_y - py
    img[py : py + size, px : px + size] = (0, 0, 0)
    scale = max(0.4, height / 480.0)
    cv2.putText(
        img,
        f"{index:06d}",
        (8, height - 10),
        cv2.FONT_HERSHEY_SIMPLEX,
        scale,
        (0, 0, 0),
        max(1, int(2 * scale)),
    )
    img[0, :4, 0] = np.frombuffer(int(index & 0xFFFFFFFF).to_bytes(4, "little"), dtype=np.uint8)
    return img


def frame_index_of(image: np.ndarray) -> int:
    """Inverse of the counter written by :func:`make_test_pattern`."""
    return int.from_bytes(bytes(image[0, :4, 0].tolist()), "little")


class SyntheticSource(FrameSource):
    def __init__(self, width: int = 640, height: int = 480, fps: float = 30.0):
        self.width, self.height, self.fps = int(width), int(height), float(fps)
        self.name = "synthetic"
        self._i = 0

    def read(self) -> Optional[np.ndarray]:
        img = make_test_pattern(self._i, self.width, self.height)
        self._i += 1
        return img


class CaptureThread:
    """Reads ``source`` on its own thread; ``on_frame(Frame)`` is called for every frame."""

    def __init__(
        self, source: FrameSource, on_frame: Callable[[Frame], None], on_error: Callable[[str], None] = print
    ):
        self.source = source
        self.on_frame = on_frame
        self.on_error = on_error
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.frames = 0
        self.failed_reads = 0
        self.last_frame_time = 0.0
        self.started = 0.0

    def start(self) -> None:
        self._stop.clear()
        self.started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name=f"capture-{self.source.name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        period = 1.0 / self.source.fps if self.source.fps > 0 else 0.0
        next_t = time.monotonic()
        while not self._stop.is_set():
            if not self.source.paced and period:
                delay = next_t - time.monotonic()
                if delay > 0 and self._stop.wait(delay):
                    break
                next_t = max(next_t + period, time.monotonic() - period)
            try:
                image = self.source.read()
            except Exception as exc:
                image = None
                self.on_error(f"{self.source.name}: read failed: {exc}")
            stamp = time.time()
            if image is None:
                self.failed_reads += 1
                self._stop.wait(min(0.1, period or 0.1))
                continue
            self.last_frame_time = time.monotonic()
            self.on_frame(Frame(image, stamp, self.frames))
            self.frames += 1

    def seconds_since_last_frame(self) -> float:
        ref = self.last_frame_time or self.started
        return time.monotonic() - ref

    def stop(self, timeout: float = 2.0) -> bool:
        """Stop; returns False when the source is stuck inside read() (the thread is abandoned)."""
        self._stop.set()
        if self._thread is None:
            return True
        self._thread.join(timeout)
        alive = self._thread.is_alive()
        self._thread = None
        return not alive


def make_source(
    kind: str,
    device: str = "0",
    width: int = 640,
    height: int = 480,
    fps: float = 30.0,
    fourcc: str = "",
    video_path: str = "",
    loop: bool = True,
) -> FrameSource:
    if kind == "opencv":
        return OpenCVSource(device, width, height, fps, fourcc)
    if kind == "video":
        if not video_path:
            raise CameraError("source 'video' needs video_path")
        return VideoFileSource(video_path, fps, loop, width, height)
    if kind == "synthetic":
        return SyntheticSource(width or 640, height or 480, fps or 30.0)
    raise CameraError(f"unknown camera source {kind!r}: use opencv, video or synthetic")


def pinhole_k(width: int, height: int, hfov_deg: float) -> tuple[float, ...]:
    """A 3x3 intrinsic matrix (row-major) for a centred pinhole with horizontal FOV ``hfov_deg``."""
    import math

    fx = width / (2.0 * math.tan(math.radians(hfov_deg) / 2.0))
    return (fx, 0.0, width / 2.0, 0.0, fx, height / 2.0, 0.0, 0.0, 1.0)
