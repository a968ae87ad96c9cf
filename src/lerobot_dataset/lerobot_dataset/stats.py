"""Per-episode and aggregated feature statistics, as LeRobot's meta/stats.json expects.

Numeric features: exact numpy statistics over the episode's frames (quantiles with numpy's default
linear interpolation). Video features: per-channel statistics in [0, 1] with shape (3, 1, 1),
computed from a 256-bin histogram per channel of every frame (frames are first spatially strided
the way LeRobot does for image stats), which gives the exact quantiles of those pixels.
Aggregation over episodes follows LeRobot: count-weighted mean, pooled variance, min of minima,
max of maxima and count-weighted quantiles.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import cv2
import numpy as np

from .depth import QMAX, DepthQuantizer
from .format import QUANTILE_KEYS, QUANTILES


def numeric_stats(values: np.ndarray) -> dict[str, np.ndarray]:
    """Statistics over axis 0 of an (N,) or (N, D) array; outputs have shape (1,) or (D,)."""
    arr = np.asarray(values)
    if arr.ndim == 1:
        arr = arr.reshape(-1, 1)
    if arr.dtype == np.bool_:
        arr = arr.astype(np.int64)
    n = arr.shape[0]
    work = arr.astype(np.float64)
    stats = {
        "min": arr.min(axis=0),
        "max": arr.max(axis=0),
        "mean": work.mean(axis=0),
        "std": work.std(axis=0),
        "count": np.array([n], dtype=np.int64),
    }
    qs = np.quantile(work, QUANTILES, axis=0)
    for key, q in zip(QUANTILE_KEYS, qs, strict=True):
        stats[key] = q
    return stats


def stats_stride(height: int, width: int, target: int = 150, threshold: int = 300) -> int:
    """Spatial stride LeRobot applies to images before computing their statistics."""
    if max(height, width) < threshold:
        return 1
    return max(1, int(width / target) if width > height else int(height / target))


class ImageStatsAccumulator:
    """Running per-channel histogram of uint8 RGB frames; memory is constant in episode length."""

    def __init__(self, height: int, width: int):
        self.stride = stats_stride(height, width)
        self.hist = np.zeros((3, 256), dtype=np.int64)
        self.frames = 0

    def update(self, rgb: np.ndarray) -> None:
        """Add the frame's pixels on the stride grid (rows and columns 0, stride, 2*stride, ...)."""
        h, w = rgb.shape[:2]
        s = self.stride
        if s > 1 and w % s == 0 and rgb.flags.c_contiguous:
            # every s-th row, seen as w/s pixels of 3*s channels: channels 0-2 are the RGB of
            # columns 0, s, 2s, ..., the stride grid with no copy (OpenCV, GIL released)
            sub = rgb.reshape(h, w // s, 3 * s)[::s]
        else:
            sub = np.ascontiguousarray(rgb[::s, ::s])
        for c in range(3):
            self.hist[c] += cv2.calcHist([sub], [c], None, [256], [0, 256]).ravel().astype(np.int64)
        self.frames += 1

    def result(self) -> dict[str, np.ndarray] | None:
        if self.frames == 0:
            return None
        return histogram_stats(self.hist, self.frames)


def histogram_stats(
    hist: np.ndarray, frames: int, values: np.ndarray | None = None, scale: float = 255.0
) -> dict[str, np.ndarray]:
    """Stats of the values given a (C, B) histogram, divided by `scale`, shaped (C, 1, 1).

    Bin b holds `values[b]` (default: b, uint8 pixels, and `scale` 255 puts them in [0, 1]); the
    values must increase with b (depth codes decoded to depth do)."""
    values = np.arange(hist.shape[1], dtype=np.float64) if values is None else np.asarray(values, np.float64)
    channels = hist.shape[0]
    out = {k: np.zeros(channels) for k in ("min", "max", "mean", "std", *QUANTILE_KEYS)}
    for c in range(channels):
        h = hist[c]
        n = int(h.sum())
        nz = np.nonzero(h)[0]
        out["min"][c] = values[nz[0]]
        out["max"][c] = values[nz[-1]]
        mean = float((h * values).sum()) / n
        out["mean"][c] = mean
        out["std"][c] = np.sqrt(float((h * (values - mean) ** 2).sum()) / n)
        cum = np.cumsum(h)
        for key, q in zip(QUANTILE_KEYS, QUANTILES, strict=True):
            pos = q * (n - 1)
            lo = int(np.floor(pos))
            hi = min(lo + 1, n - 1)
            v_lo = int(np.searchsorted(cum, lo, side="right"))
            v_hi = int(np.searchsorted(cum, hi, side="right"))
            out[key][c] = values[v_lo] + (pos - lo) * (values[v_hi] - values[v_lo])
    res = {k: (v / scale).reshape(channels, 1, 1) for k, v in out.items()}
    res["count"] = np.array([frames], dtype=np.int64)
    return res


def aggregate_feature_stats(items: Sequence[Mapping[str, np.ndarray]]) -> dict[str, np.ndarray]:
    counts = np.stack([np.asarray(s["count"]) for s in items]).astype(np.float64)
    means = np.stack([np.asarray(s["mean"], dtype=np.float64) for s in items])
    variances = np.stack([np.asarray(s["std"], dtype=np.float64) ** 2 for s in items])
    total = counts.sum(axis=0)
    w = counts
    while w.ndim < means.ndim:
        w = w[..., np.newaxis]
    total_b = total
    while np.ndim(total_b) < means.ndim - 1:
        total_b = np.asarray(total_b)[..., np.newaxis]
    mean = (means * w).sum(axis=0) / total_b
    var = ((variances + (means - mean) ** 2) * w).sum(axis=0) / total_b
    out = {
        "min": np.min(np.stack([np.asarray(s["min"]) for s in items]), axis=0),
        "max": np.max(np.stack([np.asarray(s["max"]) for s in items]), axis=0),
        "mean": mean,
        "std": np.sqrt(var),
        "count": np.asarray(total, dtype=np.int64).reshape(1),
    }
    for key in QUANTILE_KEYS:
        if all(key in s for s in items):
            qv = np.stack([np.asarray(s[key], dtype=np.float64) for s in items])
            out[key] = (qv * w).sum(axis=0) / total_b
    return out


def aggregate_stats(stats_list: Sequence[Mapping[str, Mapping[str, np.ndarray]]]) -> dict:
    keys: list[str] = []
    for stats in stats_list:
        for key in stats:
            if key not in keys:
                keys.append(key)
    return {k: aggregate_feature_stats([s[k] for s in stats_list if k in s]) for k in keys}


def stats_to_json(stats: Mapping[str, Mapping[str, np.ndarray]]) -> dict:
    return {k: {s: np.asarray(v).tolist() for s, v in ft.items()} for k, ft in stats.items()}


def stats_from_json(data: Mapping) -> dict[str, dict[str, np.ndarray]]:
    return {k: {s: np.asarray(v) for s, v in ft.items()} for k, ft in data.items()}


def flatten_episode_stats(stats: Mapping[str, Mapping[str, np.ndarray]]) -> dict[str, list]:
    """`stats/<feature>/<stat>` columns of the episodes parquet."""
    return {f"stats/{k}/{s}": np.asarray(v).tolist() for k, ft in stats.items() for s, v in ft.items()}


class DepthStatsAccumulator:
    """Running histogram of a depth camera's codes; stats of the decoded depth in the recorded unit."""

    def __init__(self, quantizer: DepthQuantizer, height: int, width: int):
        self.quantizer = quantizer
        self.stride = stats_stride(height, width)
        self.hist = np.zeros((1, QMAX + 1), dtype=np.int64)
        self.frames = 0

    def update(self, codes: np.ndarray) -> None:
        s = self.stride
        self.hist[0] += np.bincount(codes[::s, ::s].ravel(), minlength=QMAX + 1)[: QMAX + 1]
        self.frames += 1

    def result(self) -> dict[str, np.ndarray] | None:
        if self.frames == 0:
            return None
        values = self.quantizer.dequantize(np.arange(QMAX + 1))
        return histogram_stats(self.hist, self.frames, values=values, scale=1.0)
