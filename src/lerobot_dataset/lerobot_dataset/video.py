"""The camera encoder: streaming mp4 encoding with PyAV, one thread per camera (RGB or depth)."""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np

from .depth import DEPTH_PIX_FMT, DepthQuantizer
from .encoders import ENCODER_NICE, forbid_realtime_priority, thread_options
from .errors import DatasetError
from .mp4 import sane_dts
from .stats import DepthStatsAccumulator, ImageStatsAccumulator
from .storage import is_disk_full

_LOG = logging.getLogger(__name__)

_SENTINEL = None


# RGB -> limited-range BT.601 chroma (the matrix libswscale uses for rgb24 -> yuv420p), as rows for
# cv2.transform: [r, g, b, offset] / 255 per output channel.
_BT601_UV = (
    np.array([[-37.797, -74.203, 112.0, 128.0 * 255], [112.0, -93.786, -18.214, 128.0 * 255]], np.float32)
    / 255
)


# Output pixels per OpenCV call up to which it works on the calling thread (its parallel loops cut
# the work into stripes of 2**16 output pixels: one stripe runs inline).
_SERIAL_PIXELS = 1 << 16


def rgb_to_yuv420p(frame: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """An HxWx3 uint8 RGB frame -> one (H*3/2)xW uint8 array of I420 planes (Y, then U, then V).

    Same BT.601 limited-range matrix as libswscale's rgb24 -> yuv420p, ~3x faster on these cores:
    luma through OpenCV's SIMD converter, chroma from the 2x2 box average of RGB (linear, so equal to
    averaging the full-resolution chroma), where OpenCV's own I420 converter would point-sample it.
    Width and height must be even. `out` (uint8, C-contiguous (H*3/2)xW) is filled and returned
    when given.

    The frame is converted in bands of rows small enough for OpenCV to work on the calling thread:
    on a whole VGA frame it hands stripes to its thread pool, whose worker busy-waits after each call
    (twice the conversion's CPU when a core is idle) and, when the encoder holds the other core,
    makes the caller wait until it is scheduled. Every output pixel depends on its own 2x2 block
    only, so the bytes are those of the whole-frame calls.
    """
    h, w = frame.shape[:2]
    if out is None:
        out = np.empty((h * 3 // 2, w), np.uint8)
    flat, n = out.reshape(-1), h * w  # the chroma planes follow luma byte for byte (PyAV's layout)
    u = flat[n : n + n // 4].reshape(h // 2, w // 2)
    v = flat[n + n // 4 :].reshape(h // 2, w // 2)
    band = max(2, (_SERIAL_PIXELS // max(w, 1)) & ~1)
    # luma first, top to bottom: a band's own I420 chroma lands on rows below it, which the next
    # band's luma (or the chroma loop) overwrites
    for y in range(0, h, band):
        rows = min(band, h - y)
        cv2.cvtColor(frame[y : y + rows], cv2.COLOR_RGB2YUV_I420, dst=out[y : y + rows * 3 // 2])
    band *= 4  # the 2x2 box average writes a quarter of the pixels it reads
    for y in range(0, h, band):
        rows = min(band, h - y)
        half = cv2.resize(frame[y : y + rows], (w // 2, rows // 2), interpolation=cv2.INTER_AREA)
        uv = cv2.transform(half, _BT601_UV)
        u[y // 2 : (y + rows) // 2] = uv[..., 0]
        v[y // 2 : (y + rows) // 2] = uv[..., 1]
    return out


class CameraEncoder:
    """Encodes frames of one camera for one episode into an mp4, on its own thread.

    Frames are handed over through a bounded queue: a full queue means the encoder is behind, and
    the caller either waits (backpressure) or gets an error; a frame is never dropped silently.
    A depth camera (`depth` given) takes HxW (or HxWx1) depth in the quantiser's unit, quantised
    on the caller's thread into 12-bit codes that the encoder writes as gray12le.
    """

    def __init__(
        self,
        key: str,
        path: Path,
        fps: int,
        height: int,
        width: int,
        vcodec: str,
        pix_fmt: str,
        options: dict[str, str],
        queue_size: int,
        threads: int | None = None,
        nice: int = ENCODER_NICE,
        depth: DepthQuantizer | None = None,
    ):
        self.key = key
        self.depth = depth
        self._last_dts: int | None = None  # depth: the last packet's decode timestamp (sane_dts)
        self.nice = nice
        self.native_id: int | None = None  # the encoder thread's kernel id, once it runs
        self.path = Path(path)
        self.fps = fps
        self.height = height
        self.width = width
        self.vcodec = vcodec
        self.pix_fmt = pix_fmt
        self.options = dict(options)
        self.threads = threads
        self.queue: queue.Queue = queue.Queue(maxsize=max(1, queue_size))
        # Frame buffers cycle caller -> queue -> encoder -> _free; at most queue_size + 2 exist.
        self._free: queue.Queue = queue.Queue()
        self.frames_in = 0
        self.frames_encoded = 0
        self.packets_muxed = 0
        self.error: BaseException | None = None
        if depth is not None and pix_fmt != DEPTH_PIX_FMT:
            raise DatasetError(f"depth camera {key!r}: pixel format must be {DEPTH_PIX_FMT}, got {pix_fmt!r}")
        self.stats = (
            DepthStatsAccumulator(depth, height, width) if depth else ImageStatsAccumulator(height, width)
        )
        self._yuv_in_put = depth is None and pix_fmt == "yuv420p" and width % 2 == 0 and height % 2 == 0
        self._cancel = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"encoder[{key}]", daemon=True)
        self._thread.start()

    # -- producer side -------------------------------------------------------------------------
    def has_room(self) -> bool:
        return not self.queue.full()

    def put(self, frame: np.ndarray, block: bool) -> None:
        """Queue one HxWx3 uint8 frame (copied: the caller may reuse its buffer).

        For yuv420p the copy is the I420 conversion itself (on the caller's thread, GIL released in
        OpenCV), and the image statistics are taken here from the RGB frame: the encoder thread is
        then left with the codec alone, which is what bounds throughput.
        """
        self.raise_if_failed()
        try:
            item = self._free.get_nowait()  # recycled buffer: no ~1 MB allocation per frame
        except queue.Empty:
            if self.depth is not None:
                item = np.empty((self.height, self.width), dtype=np.uint16)
            else:
                shape = (
                    (self.height * 3 // 2, self.width) if self._yuv_in_put else (self.height, self.width, 3)
                )
                item = np.empty(shape, dtype=np.uint8)
        if self.depth is not None:
            self.depth.quantize(frame, out=item)
        elif self._yuv_in_put:
            rgb_to_yuv420p(frame, out=item)
        else:
            np.copyto(item, frame)
        if not block:
            self.queue.put_nowait(item)
        else:
            while True:
                try:
                    self.queue.put(item, timeout=0.5)
                    break
                except queue.Full:
                    self.raise_if_failed()
                    if not self._thread.is_alive():
                        raise DatasetError(f"encoder for {self.key!r} stopped unexpectedly") from None
        self.frames_in += 1
        if self.depth is not None:  # counted once queued: a frame refused above leaves no trace
            self.stats.update(item)
        elif self._yuv_in_put:
            self.stats.update(frame)

    def backlog(self) -> int:
        return self.queue.qsize()

    def raise_if_failed(self) -> None:
        if self.error is not None:
            note = ""
            if is_disk_full(self.error):
                note = " (disk full: this episode cannot be saved; the episodes saved before it are intact)"
            raise DatasetError(
                f"video encoder for {self.key!r} failed writing {self.path}: {self.error}{note}"
            ) from self.error

    def finish(self, stall_timeout: float = 30.0) -> None:
        """Flush the encoder and close the file; raises DatasetError if encoding failed or stalled.

        Waits as long as the encoder makes progress; `stall_timeout` seconds without a new frame
        or packet is reported as an error instead of hanging the recorder forever.
        """
        self._put_sentinel()
        last, since = -1, time.monotonic()
        while self._thread.is_alive():
            self._thread.join(0.2)
            progress = self.frames_encoded + self.packets_muxed
            if progress != last:
                last, since = progress, time.monotonic()
            elif time.monotonic() - since > stall_timeout:
                self.error = TimeoutError(
                    f"no progress for {stall_timeout:.0f} s after {self.frames_encoded} frames "
                    f"({self.vcodec}, {self.width}x{self.height})"
                )
                break
        self.raise_if_failed()

    def cancel(self) -> None:
        self._cancel.set()
        self._put_sentinel()
        self._thread.join(10.0)  # a wedged codec thread is abandoned (daemon) rather than hanging us

    def _put_sentinel(self) -> None:
        while self._thread.is_alive():
            try:
                self.queue.put(_SENTINEL, timeout=0.2)
                return
            except queue.Full:
                continue

    # -- encoder thread ------------------------------------------------------------------------
    def _encode_one(self, container, stream, item: np.ndarray) -> None:
        """Encode one queued frame (I420 planes, or RGB for other pixel formats) and mux its packets."""
        if self.depth is not None:
            vf = av.VideoFrame.from_ndarray(item, format=DEPTH_PIX_FMT)
        elif self._yuv_in_put:
            vf = av.VideoFrame.from_ndarray(item, format="yuv420p")
        else:
            vf = av.VideoFrame.from_ndarray(item, format="rgb24")
            self.stats.update(item)
        vf.pts = self.frames_encoded
        vf.time_base = Fraction(1, self.fps)
        for packet in stream.encode(vf):
            self._mux(container, packet)

    def _mux(self, container, packet) -> None:
        if self.depth is not None:
            self._last_dts = sane_dts(packet, self._last_dts)
        container.mux(packet)
        self.packets_muxed += 1

    def _run(self) -> None:
        container = None
        self.native_id = threading.get_native_id()
        if self.nice > 0 and hasattr(os, "setpriority"):
            try:
                os.setpriority(
                    os.PRIO_PROCESS, self.native_id, os.getpriority(os.PRIO_PROCESS, 0) + self.nice
                )
            except OSError as exc:  # not fatal: encoding just competes at normal priority
                _LOG.debug("could not lower encoder thread priority: %s", exc)
        forbid_realtime_priority()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            container = av.open(str(self.path), mode="w")
            stream = container.add_stream(
                self.vcodec, rate=self.fps, options=thread_options(self.vcodec, self.threads, self.options)
            )
            stream.width = self.width
            stream.height = self.height
            stream.pix_fmt = self.pix_fmt
            stream.time_base = Fraction(1, self.fps)
            if self.threads is not None:
                stream.codec_context.thread_count = self.threads
            while True:
                item = self.queue.get()
                if item is _SENTINEL:
                    break
                if self._cancel.is_set():
                    continue
                self._encode_one(container, stream, item)
                self.frames_encoded += 1
                self._free.put_nowait(item)
            if not self._cancel.is_set():
                for packet in stream.encode(None):
                    self._mux(container, packet)
            container.close()
            container = None
        except BaseException as exc:
            self.error = exc
            # Drain so a blocked producer wakes up and sees the error.
            while True:
                try:
                    self.queue.get_nowait()
                except queue.Empty:
                    break
        finally:
            if container is not None:
                try:
                    container.close()
                except Exception:
                    pass


def wait_until(predicate, timeout: float, interval: float = 0.005) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
    return True
