"""mp4 files after encoding: frame counts and stream info (probe), remux-concatenation, decoding."""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from .depth import DEPTH_PIX_FMT, DepthQuantizer
from .errors import DatasetError

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
