"""Depth cameras as LeRobot 0.6 stores them: 12-bit codes of log depth in a lossless HEVC video.

LeRobot 0.6.1 (lerobot/configs/video.py, lerobot/datasets/depth_utils.py) stores a depth camera as a
``video`` feature of shape (H, W, 1) whose ``info`` has ``is_depth_map: true``, the unit the frames
were recorded in (``depth_unit``: "mm" for integer frames, "m" for float ones) and the quantiser's
parameters ``video.depth_min`` / ``video.depth_max`` / ``video.shift`` (metres) and ``video.use_log``.
Each pixel becomes a code in 0..4095::

    log mode:    code = rint(4095 * (ln(d + shift) - ln(min + shift)) / (ln(max + shift) - ln(min + shift)))
    linear mode: code = rint(4095 * (d - min) / (max - min))

clipped to 0..4095 (d, min, max and shift in the recorded unit), and the codes are encoded as
``gray12le`` by libx265 (LeRobot's "hevc") with ``x265-params lossless=1``, GOP 2. Decoding inverts
the mapping and clamps to [min, max]. Invalid pixels (0, NaN, -Inf: REP 118's "no reading") land
on code 0, which 0.6 reads back as ``depth_min``; +Inf ("too far") on code 4095 (``depth_max``).

The quantisation error of a pixel at depth d in range is at most half a code step, in log mode
``(d + shift) * expm1(ln((max + shift) / (min + shift)) / 8190)``: with the defaults (0.01 m ..
10 m, shift 3.5 m) 0.58 mm at 1 cm, 0.74 mm at 1 m, 2.2 mm at 10 m (LeRobot 0.6 then rounds to
whole millimetres when it returns millimetres).

Image statistics are those of the decoded depth in the recorded unit, shape (1, 1, 1), not divided
by 255 (taken from a histogram of the codes on the same pixel grid as RGB statistics).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .errors import DatasetError

QUANT_BITS = 12
QMAX = (1 << QUANT_BITS) - 1  # 4095
MM_PER_M = 1000.0
DEPTH_UNITS = ("mm", "m")

# LeRobot 0.6.1's DepthEncoderConfig defaults (the encoder name is PyAV's for LeRobot's "hevc")
DEPTH_VCODEC = "libx265"
DEPTH_PIX_FMT = "gray12le"
DEPTH_G = 2
DEPTH_CRF = 30
DEPTH_EXTRA_OPTIONS = {"x265-params": "lossless=1"}
# libx265's speed presets; the depth video is lossless, so they change speed and size, not the codes
X265_PRESETS = (
    "ultrafast",
    "superfast",
    "veryfast",
    "faster",
    "fast",
    "medium",
    "slow",
    "slower",
    "veryslow",
    "placebo",
)
DEPTH_MIN_SIZE = 16  # libx265 opens no smaller picture (measured: 16x16 and 17x16 open, 15x16 not)
DEFAULT_DEPTH_MIN = 0.01
DEFAULT_DEPTH_MAX = 10.0
DEFAULT_SHIFT = 3.5
DEFAULT_USE_LOG = True

# what float32 rounding in quantize() may add to the half code of the round-trip error
_FLOAT32_CODES = 0.005

# LeRobot versions a dataset can be written for; depth needs 0.6
LEROBOT_VERSIONS = ("0.4.4", "0.6")
DEPTH_MIN_LEROBOT = "0.6"


def check_lerobot_version(version: str) -> str:
    """``version`` normalised to one of LEROBOT_VERSIONS ("0.6.1" -> "0.6"); DatasetError otherwise."""
    text = str(version).strip().lstrip("v")
    for known in LEROBOT_VERSIONS:
        if text == known or text.startswith(known + ".") or (known == "0.4.4" and text == "0.4"):
            return known
    raise DatasetError(
        f"lerobot_version {version!r} is not one we write for; supported: {', '.join(LEROBOT_VERSIONS)}"
    )


def is_depth_feature(feature: Mapping) -> bool:
    """True for a depth video feature: ``is_depth_map`` set in its info (0.6's top-level key, or the
    ``video.is_depth_map`` older writers set)."""
    info = feature.get("info") or {}
    return bool(info.get("is_depth_map") or info.get("video.is_depth_map"))


@dataclass(frozen=True)
class DepthQuantizer:
    """LeRobot 0.6's depth quantiser for frames recorded in ``unit`` ("mm" or "m")."""

    unit: str
    depth_min: float = DEFAULT_DEPTH_MIN  # metres, code 0
    depth_max: float = DEFAULT_DEPTH_MAX  # metres, code 4095
    shift: float = DEFAULT_SHIFT  # metres, added before the log
    use_log: bool = DEFAULT_USE_LOG

    def __post_init__(self):
        if self.unit not in DEPTH_UNITS:
            raise DatasetError(f"depth_unit must be one of {DEPTH_UNITS}, got {self.unit!r}")
        if not (0 <= self.depth_min < self.depth_max) or not math.isfinite(self.depth_max):
            raise DatasetError(
                f"depth range must satisfy 0 <= depth_min < depth_max (metres), got "
                f"{self.depth_min} .. {self.depth_max}"
            )
        if self.use_log and self.depth_min + self.shift <= 0:
            raise DatasetError(
                f"depth_min + shift must be positive for log quantisation, got {self.depth_min} + {self.shift}"
            )

    @classmethod
    def from_info(cls, info: Mapping | None, unit: str | None = None) -> DepthQuantizer:
        """The quantiser a feature's ``info`` records (0.6's defaults for what it leaves out)."""
        info = info or {}
        unit = unit or info.get("depth_unit")
        if unit is None:
            raise DatasetError("depth feature has no depth_unit in its info")

        def get(key, default):
            value = info.get(f"video.{key}")
            return default if value is None else value

        return cls(
            unit=unit,
            depth_min=float(get("depth_min", DEFAULT_DEPTH_MIN)),
            depth_max=float(get("depth_max", DEFAULT_DEPTH_MAX)),
            shift=float(get("shift", DEFAULT_SHIFT)),
            use_log=bool(get("use_log", DEFAULT_USE_LOG)),
        )

    def info(self) -> dict:
        """What a depth feature's ``info`` holds before its first video exists (0.6's keys)."""
        return {
            "is_depth_map": True,
            "depth_unit": self.unit,
            "video.depth_min": self.depth_min,
            "video.depth_max": self.depth_max,
            "video.shift": self.shift,
            "video.use_log": self.use_log,
        }

    @property
    def _per_m(self) -> float:
        return 1.0 if self.unit == "m" else MM_PER_M

    def quantize(self, depth: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """HxW (or HxWx1) depth in ``unit`` -> HxW uint16 codes 0..4095 (into ``out`` if given).

        Computed in float32 in the recorded unit, the order of operations LeRobot 0.6.1 uses, so the
        codes are the ones it would write."""
        d = np.asarray(depth)
        if d.ndim == 3 and d.shape[2] == 1:
            d = d[:, :, 0]
        d = d.astype(np.float32)
        k = self._per_m
        lo_u, hi_u, shift_u = (np.float32(v * k) for v in (self.depth_min, self.depth_max, self.shift))
        with np.errstate(invalid="ignore", divide="ignore"):
            if self.use_log:
                lo, hi = math.log(float(lo_u + shift_u)), math.log(float(hi_u + shift_u))
                norm = (np.log(d + shift_u) - lo) / (hi - lo)
            else:
                norm = (d - lo_u) / (hi_u - lo_u)
            scaled = np.rint(norm * QMAX)
        np.nan_to_num(scaled, copy=False, nan=0.0, posinf=QMAX, neginf=0.0)
        np.clip(scaled, 0, QMAX, out=scaled)
        if out is None:
            return scaled.astype(np.uint16)
        np.copyto(out, scaled, casting="unsafe")
        return out

    def dequantize(self, codes: np.ndarray) -> np.ndarray:
        """Codes -> float64 depth in ``unit``, clamped to [depth_min, depth_max] (as 0.6 decodes)."""
        c = np.asarray(codes, dtype=np.float64)
        if self.use_log:
            lo = math.log(self.depth_min + self.shift)
            hi = math.log(self.depth_max + self.shift)
            m = np.exp(c * ((hi - lo) / QMAX) + lo) - self.shift
        else:
            m = c * ((self.depth_max - self.depth_min) / QMAX) + self.depth_min
        return np.clip(m, self.depth_min, self.depth_max) * self._per_m

    def max_error(self, depth: np.ndarray) -> np.ndarray:
        """The most a value at ``depth`` (in ``unit``, within range) moves in the round trip: half a
        code step (in log mode the step grows across a code: ``(d + shift) * expm1(half step in log)``),
        plus 0.005 of a code for the float32 arithmetic of quantize()."""
        d = np.clip(np.asarray(depth, dtype=np.float64) / self._per_m, self.depth_min, self.depth_max)
        codes = 0.5 + _FLOAT32_CODES
        if self.use_log:
            span = math.log((self.depth_max + self.shift) / (self.depth_min + self.shift))
            err = (d + self.shift) * math.expm1(span * codes / QMAX)
        else:
            err = np.full_like(d, (self.depth_max - self.depth_min) * codes / QMAX)
        return err * self._per_m


def depth_preview(frames: np.ndarray, quantizer: DepthQuantizer) -> np.ndarray:
    """(N, H, W, 1) depth in the quantiser's unit -> (N, H, W, 3) uint8 RGB to look at: the 12-bit
    code scaled to 8 bits through OpenCV's TURBO colour map (near blue, far red; invalid = depth_min)."""
    import cv2

    out = np.empty((*frames.shape[:3], 3), np.uint8)
    for i, frame in enumerate(frames):
        grey = (quantizer.quantize(frame).astype(np.uint32) * 255 // QMAX).astype(np.uint8)
        out[i] = cv2.cvtColor(cv2.applyColorMap(grey, cv2.COLORMAP_TURBO), cv2.COLOR_BGR2RGB)
    return out
