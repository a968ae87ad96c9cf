"""A camera frame as training sees it: through the dataset's video codec and back (ROS-free; PyAV).

A policy trains on frames decoded from the dataset's mp4s (lossy: LeRobot's libsvtav1 at crf 30,
4:2:0 chroma) and is served the raw frames of the camera topic. `CodecRoundTrip` gives a served
frame the same loss, so that training and serving see the same kind of image; `psnr` says how far
apart the two are.

The dataset's stream has a keyframe every `g` frames (LeRobot: 2) and predicts the frames between
from the keyframe before them. The round trip follows that structure frame by frame: a frame at a
keyframe position is encoded alone; any other frame is encoded after the frames since the last
keyframe, and only its own decoded picture is kept. One call costs an encoder and a decoder opening
(about 10 ms at 96 x 128 with libsvtav1 here).

The codec runs on one thread of its own that has given up CAP_SYS_NICE (`forbid_realtime_priority`),
as the recorder's encoder threads do: run as root, SVT-AV1 puts the thread that opens it, and every
thread that thread starts later, on SCHED_FIFO priority 99. Opened on the caller's thread (a node's
subscription thread, a test process), that would turn the caller real-time for good. It is a daemon
thread: a codec that hangs costs its caller `timeout_s` and a `DatasetError` that says so, and is
abandoned (the next call starts a fresh codec thread); it never holds up the interpreter's exit.
"""

from __future__ import annotations

import queue
import threading
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FuturesTimeout
from fractions import Fraction

import av
import numpy as np

from .encoders import LEROBOT_VIDEO_SETTINGS, codec_options, forbid_realtime_priority
from .errors import DatasetError

_codec_jobs: queue.SimpleQueue | None = None
_codec_jobs_lock = threading.Lock()


def _run_codec_jobs(jobs: queue.SimpleQueue) -> None:
    forbid_realtime_priority()
    while True:
        future, fn, args = jobs.get()
        try:
            future.set_result(fn(*args))
        except BaseException as exc:  # the caller's, raised by its future.result()
            future.set_exception(exc)


def _on_codec_thread(fn, *args, timeout_s: float, what: str):
    """`fn(*args)` run on the module's codec thread (one, started on first use, without CAP_SYS_NICE).

    A daemon thread, not a ThreadPoolExecutor's worker: Python joins those at exit, so one stuck in the
    codec would keep the process from ever ending. A job that takes longer than `timeout_s` raises a
    `DatasetError` naming `what`; its thread is left to itself and the next job gets a new one."""
    global _codec_jobs
    with _codec_jobs_lock:
        if _codec_jobs is None:
            _codec_jobs = queue.SimpleQueue()
            threading.Thread(
                target=_run_codec_jobs, args=(_codec_jobs,), name="codec-roundtrip", daemon=True
            ).start()
        jobs = _codec_jobs
    future: Future = Future()
    jobs.put((future, fn, args))
    try:
        return future.result(timeout_s)
    except FuturesTimeout:
        with _codec_jobs_lock:
            if _codec_jobs is jobs:  # stuck: abandon that thread (and whatever queued behind it)
                _codec_jobs = None
        raise DatasetError(
            f"{what}: no picture after {timeout_s:g} s (one takes ~10 ms): the codec is stuck; "
            "this frame is dropped and the next one gets a new codec thread"
        ) from None


# decoders for the encoders' bitstreams, as PyAV names them (the reader's PyAV picks the same ones)
_DECODERS = {"libsvtav1": "libdav1d", "libaom-av1": "libdav1d", "libx264": "h264", "libx265": "hevc"}


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    """Peak signal-to-noise ratio of two uint8 images of the same shape [dB]; inf when identical."""
    if a.shape != b.shape:
        raise ValueError(f"psnr: shapes differ, {a.shape} and {b.shape}")
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return float("inf") if mse == 0.0 else 10.0 * np.log10(255.0**2 / mse)


class CodecRoundTrip:
    """Frames of one camera stream through an encoder and back, keeping the stream's keyframe spacing.

    `vcodec`, `pix_fmt`, `crf`, `g` and `preset` default to the settings the recorder writes datasets
    with (LeRobot's); a frame that takes longer than `timeout_s` raises `DatasetError`. Call `reset()`
    where a new recorded episode (a new video) would begin.
    """

    def __init__(
        self,
        vcodec: str = LEROBOT_VIDEO_SETTINGS["vcodec"],
        pix_fmt: str = LEROBOT_VIDEO_SETTINGS["pix_fmt"],
        crf: int | None = LEROBOT_VIDEO_SETTINGS["crf"],
        g: int = LEROBOT_VIDEO_SETTINGS["g"],
        preset: int | str | None = None,
        fps: int = 30,
        timeout_s: float = 5.0,
    ):
        try:
            self.vcodec = av.codec.Codec(vcodec, "w").name
        except Exception as exc:
            raise DatasetError(
                f"video codec {vcodec!r} has no encoder in this PyAV/FFmpeg build: {exc}"
            ) from None
        self.decoder = _DECODERS.get(self.vcodec, self.vcodec)
        self.pix_fmt = pix_fmt
        self.g = max(1, int(g))
        self.fps = fps
        self.timeout_s = timeout_s  # one frame's round trip, before the codec counts as stuck
        # g is kept by feeding at most g frames per encoder, so the encoder gets no g of its own
        self.options = codec_options(self.vcodec, None, crf, preset)
        self._since_key: list[np.ndarray] = []

    def describe(self) -> str:
        opts = " ".join(f"{k}={v}" for k, v in sorted(self.options.items()))
        return f"{self.vcodec} {self.pix_fmt} g={self.g} {opts}"

    def reset(self) -> None:
        self._since_key = []

    def __call__(self, frame: np.ndarray) -> np.ndarray:
        """The decoded picture of `frame` (HxWx3 uint8 RGB) as the dataset's video would hold it."""
        frame = np.ascontiguousarray(frame)
        if frame.ndim != 3 or frame.shape[2] != 3 or frame.dtype != np.uint8:
            raise ValueError(
                f"codec round trip: expected an HxWx3 uint8 RGB frame, got {frame.shape} {frame.dtype}"
            )
        if len(self._since_key) >= self.g or (self._since_key and self._since_key[0].shape != frame.shape):
            self._since_key = []
        self._since_key.append(frame)
        frames = list(self._since_key)
        what = f"codec round trip ({self.describe()})"
        return _on_codec_thread(self._encode_decode, frames, timeout_s=self.timeout_s, what=what)[-1]

    def _encode_decode(self, frames: list[np.ndarray]) -> list[np.ndarray]:
        h, w = frames[0].shape[:2]
        enc = av.CodecContext.create(self.vcodec, "w")
        enc.width, enc.height, enc.pix_fmt = w, h, self.pix_fmt
        enc.time_base = Fraction(1, self.fps)
        enc.options = dict(self.options)
        packets = []
        for i, f in enumerate(frames):
            vf = av.VideoFrame.from_ndarray(f, format="rgb24")
            vf.pts = i
            packets += enc.encode(vf)
        packets += enc.encode(None)
        dec = av.CodecContext.create(self.decoder, "r")
        out = [p.to_ndarray(format="rgb24") for pkt in packets for p in dec.decode(pkt)]
        out += [p.to_ndarray(format="rgb24") for p in dec.decode(None)]
        if len(out) != len(frames):
            raise DatasetError(
                f"codec round trip ({self.describe()}): {len(frames)} frame(s) in, {len(out)} decoded"
            )
        return out
