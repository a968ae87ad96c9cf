"""Streaming mp4 encoding (PyAV, one thread per camera), remux-concatenation and decoding."""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np

from .depth import DEPTH_PIX_FMT, DepthQuantizer, DepthStatsAccumulator
from .errors import DatasetError
from .stats import ImageStatsAccumulator
from .storage import is_disk_full

_LOG = logging.getLogger(__name__)

# SVT-AV1 prints ~25 info lines to stderr per encoder (i.e. per camera per episode); keep errors only
# unless the user asked for more (SVT_LOG=3 restores the info lines).
os.environ.setdefault("SVT_LOG", "1")


# LeRobot 0.4.4's effective encoder settings. Its source (lerobot/datasets/video_utils.py) passes
# libsvtav1, yuv420p, g 2, crf 30 and, when the caller gives no preset, preset "12". But LeRobot 0.4.4
# pins PyAV 15 (av>=15,<16), whose wheels bundle SVT-AV1 3.0.0, and SVT-AV1 3.0.0 maps preset 12 to
# M10 ("Preset M12 is mapped to M10" in its log): LeRobot encodes at M10. Our PyAV 18 bundles SVT-AV1
# 4.1.0, which maps 12 to M11 (visibly worse on sudden scene changes), so LeRobot's quality here is
# preset 10. The writer, the live recorder and the bag import default to these; faster presets stay
# available as options (docs/benchmarks.md prints what they cost in quality).
LEROBOT_VIDEO_SETTINGS = {"vcodec": "libsvtav1", "pix_fmt": "yuv420p", "g": 2, "crf": 30, "preset": 10}

# Encoders that take a constant-quality `crf` option.
_CRF_CODECS = {"h264", "libx264", "hevc", "libx265", "libsvtav1", "libaom-av1"}

# Hardware encoders PyAV may expose, in the order `vcodec="auto"` tries them. Being in the FFmpeg
# build is not enough (nvenc/qsv are compiled into the PyPI wheels): an encoder counts as available
# only if it opens on this machine (driver + device present), see probe_encoder().
HW_ENCODERS = (
    "av1_nvenc",
    "hevc_nvenc",
    "h264_nvenc",
    "av1_qsv",
    "hevc_qsv",
    "h264_qsv",
    "av1_vaapi",
    "hevc_vaapi",
    "h264_vaapi",
)
# How each hardware family spells constant quality (the `crf` value is passed through).
_HW_QUALITY = {"nvenc": {"rc": "constqp", "qp": None}, "qsv": {"global_quality": None}, "vaapi": {"qp": None}}
_SENTINEL = None

# Encoder threads (and the codec's worker threads, which inherit it) run this much nicer than the
# rest of the process: encoding is throughput work with a queue in front of it, while receiving and
# time-stamping sensor data (this process's executor, and camera drivers on the same cores) is
# latency-sensitive. Raising one's own nice value needs no privilege (Linux: per thread).
ENCODER_NICE = 10

_CAP_SYS_NICE = 23
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


def forbid_realtime_priority() -> bool:
    """Drop CAP_SYS_NICE from the calling thread's effective capabilities (Linux; per thread).

    SVT-AV1 puts every worker thread it starts on SCHED_FIFO priority 99 when it may (root or
    CAP_SYS_NICE): ~70 real-time threads per encoder that starve camera drivers, DDS and the
    recorder's own executor on a small machine. Threads inherit their creator's capabilities, so
    calling this on the encoder thread before the codec opens keeps the codec's workers on normal
    (niced) scheduling; the rest of the process keeps its privileges. False when not possible
    (not Linux, no capget): nothing changes then, and without privilege the codec's request fails
    anyway.
    """
    import ctypes
    import ctypes.util

    class _Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class _Data(ctypes.Structure):
        _fields_ = [
            ("effective", ctypes.c_uint32),
            ("permitted", ctypes.c_uint32),
            ("inheritable", ctypes.c_uint32),
        ]

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        header, data = _Header(_LINUX_CAPABILITY_VERSION_3, 0), (_Data * 2)()
        if libc.capget(ctypes.byref(header), data) != 0:
            return False
        data[0].effective &= ~(1 << _CAP_SYS_NICE)
        return libc.capset(ctypes.byref(header), data) == 0
    except (OSError, AttributeError):
        return False


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


def probe_encoder(name: str) -> str | None:
    """None if encoder `name` opens on this machine, else why not (one line)."""
    try:
        codec = av.codec.Codec(name, "w")
    except Exception as exc:
        return f"not in this PyAV/FFmpeg build ({type(exc).__name__})"
    formats = [f.name for f in (codec.video_formats or ())]
    pix_fmt = next((f for f in ("yuv420p", "nv12") if f in formats), formats[0] if formats else "yuv420p")
    try:
        ctx = av.CodecContext.create(codec)
        ctx.width, ctx.height, ctx.pix_fmt = 256, 256, pix_fmt
        ctx.time_base = Fraction(1, 30)
        ctx.open()
        del ctx  # closed when collected
    except Exception as exc:  # no driver, no device, no permission: FFmpeg says which
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"does not open here ({text})"
    return None


def detect_hw_encoders(candidates: tuple[str, ...] = HW_ENCODERS) -> dict[str, str | None]:
    """{encoder: None if usable else the reason}, for each candidate in order."""
    return {name: probe_encoder(name) for name in candidates}


def resolve_encoder(vcodec: str, candidates: tuple[str, ...] = HW_ENCODERS) -> str:
    """Name of the PyAV encoder for `vcodec` ("h264" -> libx264, "auto" -> first usable of
    `candidates`, else LeRobot's libsvtav1); DatasetError if absent or, for a hardware encoder,
    unusable on this machine."""
    if vcodec == "auto":
        found = detect_hw_encoders(candidates)
        usable = [name for name, why in found.items() if why is None]
        if usable:
            return usable[0]
        _LOG.info("vcodec auto: no hardware encoder usable here, using libsvtav1")
        return LEROBOT_VIDEO_SETTINGS["vcodec"]
    try:
        name = av.codec.Codec(vcodec, "w").name
    except Exception as exc:
        raise DatasetError(f"video codec {vcodec!r} has no encoder in this PyAV/FFmpeg build: {exc}") from exc
    if name in HW_ENCODERS:
        why = probe_encoder(name)
        if why is not None:
            raise DatasetError(
                f"video codec {vcodec!r}: hardware encoder {why}; use vcodec 'auto' to fall back to "
                "libsvtav1 when no hardware encoder works, or pick a software codec"
            )
    return name


class EncoderSettingError(DatasetError):
    """The encoder refuses one of its settings: ``setting`` is "crf", "preset", "fps" or "size" (the
    frame size), ``value`` what was asked, so a tool can name its own flag."""

    def __init__(self, setting: str | None, value, message: str):
        super().__init__(message)
        self.setting, self.value = setting, value


# What the encoders of this PyAV build accept, measured by opening them (for the messages only: the
# check itself always asks the encoder).
_SETTING_HINTS = {
    ("libsvtav1", "crf"): "0-63",
    ("libsvtav1", "preset"): "-2..13 (LeRobot encodes at 10)",
    ("libsvtav1", "fps"): "at most 240",
    ("libsvtav1", "size"): "frames of at least 4x4",
    ("libx264", "preset"): "ultrafast, superfast, veryfast, faster, fast, medium, slow, slower, veryslow",
    ("libx264", "size"): "even widths and heights",
    ("libx265", "preset"): "ultrafast, superfast, veryfast, faster, fast, medium, slow, slower, veryslow",
}


def _open_error(
    vcodec: str, pix_fmt: str, options: dict[str, str], fps: int, width: int, height: int
) -> str | None:
    """None if the encoder opens with these settings, else FFmpeg's reason (one line).

    Opened on a short-lived thread without CAP_SYS_NICE, as the encoder thread does (see
    :func:`forbid_realtime_priority`): SVT-AV1 starts its workers when it opens, and would put them on
    SCHED_FIFO 99 from a privileged thread. The context is freed before the thread ends."""
    result: list[str | None] = []

    def probe() -> None:
        forbid_realtime_priority()
        try:
            ctx = av.CodecContext.create(vcodec, "w")
            ctx.width, ctx.height, ctx.pix_fmt = int(width), int(height), pix_fmt
            ctx.time_base = Fraction(1, int(fps))
            ctx.framerate = Fraction(int(fps), 1)
            ctx.options = dict(options)
            ctx.open()
            del ctx
            result.append(None)
        except Exception as exc:
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            result.append(text.split(": '")[0])  # FFmpeg's reason, without the option dict PyAV appends

    svt_log = os.environ.get("SVT_LOG")
    os.environ["SVT_LOG"] = "0"  # SVT-AV1 prints each refusal itself; the caller words the one that counts
    try:
        thread = threading.Thread(target=probe, name="encoder-probe", daemon=True)
        thread.start()
        thread.join()
    finally:
        if svt_log is None:
            del os.environ["SVT_LOG"]
        else:
            os.environ["SVT_LOG"] = svt_log
    return result[0] if result else "the probe thread failed"


def check_encoder_settings(
    vcodec: str, pix_fmt: str, options: dict[str, str], fps: int, width: int = 64, height: int = 64
) -> None:
    """Open the encoder in memory with these settings and a `width` x `height` frame; when it refuses,
    find the setting it refuses (each retried at LeRobot's value) and raise :class:`EncoderSettingError`
    naming it. Cheap (a few ms); run it before any frame is written."""
    why = _open_error(vcodec, pix_fmt, options, fps, width, height)
    if why is None:
        return
    defaults = {"crf": str(LEROBOT_VIDEO_SETTINGS["crf"]), "preset": str(LEROBOT_VIDEO_SETTINGS["preset"])}
    trials = []
    for key in ("crf", "preset"):
        if key in options:
            fixed = dict(options)
            if vcodec == LEROBOT_VIDEO_SETTINGS["vcodec"]:
                fixed[key] = defaults[key]
            else:
                fixed.pop(key)
            trials.append((key, options[key], (vcodec, pix_fmt, fixed, fps, width, height)))
    trials.append(("fps", fps, (vcodec, pix_fmt, options, 30, width, height)))
    trials.append(("size", f"{width}x{height}", (vcodec, pix_fmt, options, fps, 64, 64)))
    for setting, value, args in trials:
        if _open_error(*args) is None:
            hint = _SETTING_HINTS.get((vcodec, setting))
            what = f"{value} frames" if setting == "size" else f"{setting} {value}"
            raise EncoderSettingError(
                setting, value, f"{vcodec} refuses {what} ({why})" + (f"; it takes {hint}" if hint else "")
            )
    raise EncoderSettingError(
        None,
        None,
        f"{vcodec} does not open with {describe_settings(vcodec, pix_fmt, options)} at {fps} fps, {width}x{height} ({why})",
    )


def encoder_pix_fmt(vcodec: str, pix_fmt: str) -> str:
    """`pix_fmt`, or the hardware encoder's 4:2:0 input format when it does not take `pix_fmt`."""
    try:
        formats = [f.name for f in (av.codec.Codec(vcodec, "w").video_formats or ())]
    except Exception:
        return pix_fmt
    if not formats or pix_fmt in formats:
        return pix_fmt
    return next((f for f in ("nv12", "yuv420p") if f in formats), pix_fmt)


def codec_options(vcodec: str, g: int | None, crf: int | None, preset: int | str | None) -> dict[str, str]:
    options: dict[str, str] = {}
    if g is not None:
        options["g"] = str(g)
    family = next((f for f in _HW_QUALITY if vcodec.endswith("_" + f)), None)
    if crf is not None and vcodec in _CRF_CODECS:
        options["crf"] = str(crf)
    elif crf is not None and family is not None:
        options.update({k: (str(crf) if v is None else v) for k, v in _HW_QUALITY[family].items()})
    if vcodec == "libsvtav1":
        options["preset"] = str(LEROBOT_VIDEO_SETTINGS["preset"] if preset is None else preset)
    elif preset is not None:
        options["preset"] = str(preset)
    return options


def thread_options(vcodec: str, threads: int | None, options: dict[str, str]) -> dict[str, str]:
    """`options` plus what limits `vcodec` to `threads` cores, where the codec context's thread_count
    alone does not: libsvtav1 ignores it (one encoder used both cores of a 2-core machine with
    thread_count 1) and takes its level of parallelism as ``svtav1-params lp=N`` instead. The
    bitstream does not depend on it (same mp4 bytes for lp 1, 2 and all cores)."""
    if not threads or vcodec != "libsvtav1":
        return options
    params = [p for p in options.get("svtav1-params", "").split(":") if p and not p.startswith("lp=")]
    return {**options, "svtav1-params": ":".join([*params, f"lp={int(threads)}"])}


def describe_settings(vcodec: str, pix_fmt: str, options: dict[str, str]) -> str:
    """One line with every encoder setting, e.g. "libsvtav1 yuv420p crf=30 g=2 preset=12"."""
    return " ".join([vcodec, pix_fmt, *(f"{k}={v}" for k, v in sorted(options.items()))])


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


# the most frames an encoder's decode order may run ahead of presentation (x265: 2 with its B-frames)
_MAX_REORDER = 64


def sane_dts(packet, last_dts: int | None) -> int:
    """Repair a packet's decode timestamp where the encoder left it unset; returns the DTS.

    FFmpeg's libx265 wrapper (in PyAV 18's FFmpeg) hands out episodes of one or two frames with an
    uninitialised DTS (values like -1.4e14: 19 of 20 one-frame sequences here, 30 of 40 packets of
    two-frame ones); the mp4 muxer refuses some ("Not yet implemented in FFmpeg"). Such short sequences have no B-frames, so
    their DTS is the PTS; a DTS that is plausible (at or before the PTS, after the last one, within
    the reorder window) is kept as it is.
    """
    dts, pts = packet.dts, packet.pts
    if pts is None:
        return dts if dts is not None else (last_dts or 0)
    if dts is None or dts > pts or dts < pts - _MAX_REORDER or (last_dts is not None and dts <= last_dts):
        dts = pts if last_dts is None or pts > last_dts else last_dts + 1
        packet.dts = dts
    return dts


def count_frames(path: Path) -> int:
    """Number of video packets (= frames) in the file, counted by demuxing (no decoding)."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        return sum(1 for p in container.demux(stream) if p.size > 0)


def video_info(path: Path, is_depth_map: bool = False) -> dict:
    """The `info` block LeRobot stores per video feature in meta/info.json.

    Both spellings of the depth flag: ``video.is_depth_map`` (what LeRobot 0.4.4 writes) and the
    top-level ``is_depth_map`` LeRobot 0.6 reads."""
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        pix_fmt = stream.codec_context.pix_fmt or stream.format.name
        channels = 1 if "gray" in pix_fmt else 4 if ("rgba" in pix_fmt or "yuva" in pix_fmt) else 3
        info = {
            "video.height": stream.codec_context.height,
            "video.width": stream.codec_context.width,
            "video.codec": stream.codec_context.codec.canonical_name
            if hasattr(stream.codec_context.codec, "canonical_name")
            else stream.codec_context.name,
            "video.pix_fmt": pix_fmt,
            "video.is_depth_map": bool(is_depth_map),
            "video.fps": int(stream.base_rate or stream.average_rate),
            "video.channels": channels,
            "has_audio": len(container.streams.audio) > 0,
            "is_depth_map": bool(is_depth_map),
        }
    return info


def concat_mp4(first: Path, second: Path, out: Path, fps: int) -> None:
    """Write `first` followed by `second` into `out` by remuxing packets (no re-encoding).

    Both inputs come from the same encoder settings; the second's timestamps are shifted by the
    number of frames of the first, so frame k of the second is at (frames_first + k) / fps.
    Decode timestamps are kept increasing across the seam: an encoder with B-frames starts a file's
    DTS one frame early, except in a one-frame file, so after one the next file's first DTS would
    repeat the last one; it moves up by the least step (it stays at or before its PTS).
    """
    with av.open(str(first)) as in1, av.open(str(second)) as in2, av.open(str(out), mode="w") as dst:
        s1 = in1.streams.video[0]
        ostream = dst.add_stream_from_template(template=s1, opaque=True)
        ostream.time_base = s1.time_base
        offset_frames = 0
        last_dts = None
        for src in (in1, in2):
            stream = src.streams.video[0]
            tb = stream.time_base
            shift = int(round(Fraction(offset_frames, fps) / tb))
            n = 0
            for packet in src.demux(stream):
                if packet.dts is None:
                    continue
                packet.pts = packet.pts + shift if packet.pts is not None else None
                packet.dts = packet.dts + shift
                if tb != ostream.time_base:
                    packet.pts = int(round(packet.pts * tb / ostream.time_base))
                    packet.dts = int(round(packet.dts * tb / ostream.time_base))
                if last_dts is not None and packet.dts <= last_dts:
                    packet.dts = last_dts + 1
                    if packet.pts is not None and packet.dts > packet.pts:
                        raise DatasetError(
                            f"cannot append {second} to {first}: its decode order overlaps the first's "
                            f"(packet at pts {packet.pts} would decode at {packet.dts})"
                        )
                last_dts = packet.dts
                packet.stream = ostream
                dst.mux(packet)
                n += 1
            offset_frames += n


def iter_frames(
    path: Path, from_s: float, to_s: float, fps: int, depth: DepthQuantizer | None = None
) -> Iterator[np.ndarray]:
    """The frames whose timestamps lie in [from_s, to_s), one at a time, as HxWx3 uint8 (RGB), or
    for a depth video (`depth` its quantiser) as HxWx1 float32 depth in the recorded unit."""
    half = 0.5 / fps
    if not Path(path).is_file():
        raise DatasetError(f"{path}: the video file is missing")
    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                raise DatasetError(f"{path}: holds no video stream")
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"
            if from_s > 0:
                container.seek(int(max(0.0, from_s - half) / stream.time_base), stream=stream, backward=True)
            for frame in container.decode(stream):
                t = float(frame.pts * stream.time_base)
                if t < from_s - half:
                    continue
                if t >= to_s - half:
                    break
                if depth is not None:
                    codes = frame.to_ndarray(format=DEPTH_PIX_FMT)
                    yield depth.dequantize(codes).astype(np.float32)[:, :, None]
                else:
                    yield frame.to_ndarray(format="rgb24")
    except (av.error.FFmpegError, OSError) as exc:  # truncated or not an mp4: one line, naming the file
        raise DatasetError(
            f"{path}: cannot decode the video ({str(exc).strip() or type(exc).__name__})"
        ) from None


def decode_range(
    path: Path, from_s: float, to_s: float, fps: int, depth: DepthQuantizer | None = None
) -> np.ndarray:
    """Decode the frames whose timestamps lie in [from_s, to_s) as an (N, H, W, 3) uint8 array (depth:
    (N, H, W, 1) float32, see iter_frames)."""
    frames = list(iter_frames(path, from_s, to_s, fps, depth))
    if not frames:
        raise DatasetError(f"{path}: no frames between {from_s:.4f}s and {to_s:.4f}s")
    return np.stack(frames)


def wait_until(predicate, timeout: float, interval: float = 0.005) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)
    return True
