"""Which video encoder, with which options: LeRobot's settings, hardware encoder detection (`auto`),
and settings checked before the first frame (ROS-free; PyAV)."""

from __future__ import annotations

import logging
import os
import threading
from fractions import Fraction

import av

from .errors import DatasetError

_LOG = logging.getLogger(__name__)

# SVT-AV1 prints ~25 info lines to stderr per encoder (i.e. per camera per episode); keep errors only
# unless the user asked for more (SVT_LOG=3 restores the info lines).
os.environ.setdefault("SVT_LOG", "1")


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
