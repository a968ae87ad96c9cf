"""Shared by the recorder benchmarks: the encoder settings line, the codec's floor (bare PyAV on the
same frames with the same options) and a quality figure (PSNR of decoded frames vs their sources).

The floor converts RGB to I420 with the writer's converter (video.rgb_to_yuv420p, inside the timing)
and hands I420 frames to the encoder: what any writer using the codec must at least spend. Quality is
PSNR over RGB (8-bit, per frame, against the exact source frame), mean and worst frame. The floor's
encoder runs niced like the writer's encoder threads (see bare_encode).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import av
import numpy as np

from lerobot_dataset.encoders import (
    ENCODER_NICE,
    LEROBOT_VIDEO_SETTINGS,
    codec_options,
    describe_settings,
    forbid_realtime_priority,
    resolve_encoder,
)
from lerobot_dataset.roundtrip import psnr as psnr_db
from lerobot_dataset.video import rgb_to_yuv420p


def parse_spec(spec: str) -> tuple[str, int | str | None]:
    """ "libsvtav1:12" -> ("libsvtav1", 12); "h264:ultrafast" -> ("h264", "ultrafast"); no preset -> None."""
    vcodec, _, preset = spec.partition(":")
    if not preset:
        return vcodec, None
    return vcodec, int(preset) if preset.isdigit() else preset


def encoder_settings(spec: str) -> tuple[str, dict[str, str], str]:
    """(encoder name, PyAV options, one printable line) for a vcodec[:preset] spec at LeRobot's g/crf."""
    vcodec, preset = parse_spec(spec)
    name = resolve_encoder(vcodec)
    options = codec_options(name, LEROBOT_VIDEO_SETTINGS["g"], LEROBOT_VIDEO_SETTINGS["crf"], preset)
    return name, options, describe_settings(name, LEROBOT_VIDEO_SETTINGS["pix_fmt"], options)


def bare_encode(
    frame_at: Callable[[int], np.ndarray], n: int, spec: str, path: Path, fps: int = 30
) -> tuple[float, float]:
    """(wall s, CPU s of this process) to encode frames frame_at(0..n-1) to `path` with bare PyAV.

    Runs on its own thread with the writer's encoder-thread scheduling (nice +ENCODER_NICE, no
    real-time codec workers), so on a busy machine floor and writer compete for CPU alike.
    """
    result: list = []
    thread = threading.Thread(target=lambda: result.append(_encode(frame_at, n, spec, path, fps)))
    t, c = time.perf_counter(), time.process_time()
    thread.start()
    thread.join()
    if len(result) != 1:
        raise RuntimeError(f"bare PyAV encode of {spec} failed (see the thread's traceback above)")
    return time.perf_counter() - t, time.process_time() - c


def _encode(frame_at, n, spec, path, fps) -> None:
    os.setpriority(
        os.PRIO_PROCESS, threading.get_native_id(), os.getpriority(os.PRIO_PROCESS, 0) + ENCODER_NICE
    )
    forbid_realtime_priority()
    name, options, _ = encoder_settings(spec)
    h, w = frame_at(0).shape[:2]
    with av.open(str(path), "w") as out:
        stream = out.add_stream(name, rate=fps, options=options)
        stream.width, stream.height, stream.pix_fmt = w, h, LEROBOT_VIDEO_SETTINGS["pix_fmt"]
        for i in range(n):
            yuv = rgb_to_yuv420p(frame_at(i))
            for packet in stream.encode(av.VideoFrame.from_ndarray(yuv, format="yuv420p")):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)


def decode(path: Path) -> list[np.ndarray]:
    with av.open(str(path)) as container:
        return [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]


def psnr(sources: Sequence[np.ndarray], decoded: Sequence[np.ndarray]) -> tuple[float, float]:
    """(mean, worst) per-frame RGB PSNR in dB; frame counts must match."""
    if len(sources) != len(decoded):
        raise ValueError(f"{len(decoded)} decoded frames for {len(sources)} sources")
    values = [frame_psnr(src, got) for src, got in zip(sources, decoded, strict=True)]
    return float(np.mean(values)), float(np.min(values))


def frame_psnr(source: np.ndarray, decoded: np.ndarray) -> float:
    """RGB PSNR in dB of one decoded frame against its source (lerobot_dataset.roundtrip.psnr; 99 for
    identical frames, so that means stay finite)."""
    return min(psnr_db(source, decoded), 99.0)


def iter_decoded(path: Path):
    """The frames of `path` as RGB arrays, one at a time (long videos do not fit in memory at once)."""
    with av.open(str(path)) as container:
        for frame in container.decode(video=0):
            yield frame.to_ndarray(format="rgb24")
