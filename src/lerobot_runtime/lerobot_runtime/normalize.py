"""Normalization as LeRobot's NormalizerProcessorStep / UnnormalizerProcessorStep define it.

Modes per feature type (VISUAL, STATE, ENV, ACTION): MEAN_STD, MIN_MAX, QUANTILES, QUANTILE10,
IDENTITY. A feature without stats passes through unchanged, like in LeRobot.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

SUPPORTED_MODES = ("IDENTITY", "MEAN_STD", "MIN_MAX", "QUANTILES", "QUANTILE10")
_RANGE_STATS = {"MIN_MAX": ("min", "max"), "QUANTILES": ("q01", "q99"), "QUANTILE10": ("q10", "q90")}


@dataclass
class Normalizer:
    """Feature-wise (un)normalization.

    features: feature name -> feature type ("VISUAL", "STATE", "ENV", "ACTION").
    norm_map: feature type -> mode. stats: feature name -> stat name -> tensor.
    """

    features: dict[str, str]
    norm_map: dict[str, str]
    stats: dict[str, dict[str, torch.Tensor]] = field(default_factory=dict)
    eps: float = 1e-8
    source: str = "normalizer"

    def __post_init__(self) -> None:
        for ftype, mode in self.norm_map.items():
            if mode not in SUPPORTED_MODES:
                raise ValueError(
                    f"{self.source}: normalization mode {mode!r} for {ftype} is not supported "
                    f"(supported: {', '.join(SUPPORTED_MODES)})"
                )
        for key, ftype in self.features.items():
            mode = self.norm_map.get(ftype, "IDENTITY")
            if mode == "IDENTITY" or key not in self.stats:
                continue
            needed = ("mean", "std") if mode == "MEAN_STD" else _RANGE_STATS[mode]
            missing = [s for s in needed if s not in self.stats[key]]
            if missing:
                raise ValueError(
                    f"{self.source}: {mode} normalization of {key!r} needs stats {missing}, "
                    f"found {sorted(self.stats[key])}"
                )

    @classmethod
    def from_flat_state(cls, features, norm_map, flat: Mapping[str, torch.Tensor], eps=1e-8, source=""):
        """Build from LeRobot's flat state dict ("<feature>.<stat>" -> tensor)."""
        stats: dict[str, dict[str, torch.Tensor]] = {}
        for flat_key, tensor in flat.items():
            key, stat = flat_key.rsplit(".", 1)
            stats.setdefault(key, {})[stat] = tensor.to(torch.float32)
        return cls(features=dict(features), norm_map=dict(norm_map), stats=stats, eps=eps, source=source)

    def to(self, device: torch.device | str) -> Normalizer:
        self.stats = {k: {s: t.to(device) for s, t in v.items()} for k, v in self.stats.items()}
        return self

    def mode(self, key: str) -> str:
        return self.norm_map.get(self.features.get(key, ""), "IDENTITY")

    def normalize(self, key: str, x: torch.Tensor) -> torch.Tensor:
        mode = self.mode(key)
        if mode == "IDENTITY" or key not in self.stats:
            return x
        s = self.stats[key]
        if mode == "MEAN_STD":
            return (x - s["mean"]) / (s["std"] + self.eps)
        lo, hi = (s[n] for n in _RANGE_STATS[mode])
        denom = hi - lo
        denom = torch.where(denom == 0, torch.full_like(denom, self.eps), denom)
        return 2 * (x - lo) / denom - 1

    def unnormalize(self, key: str, x: torch.Tensor) -> torch.Tensor:
        mode = self.mode(key)
        if mode == "IDENTITY" or key not in self.stats:
            return x
        s = self.stats[key]
        if mode == "MEAN_STD":
            return x * s["std"] + s["mean"]
        lo, hi = (s[n] for n in _RANGE_STATS[mode])
        denom = hi - lo
        denom = torch.where(denom == 0, torch.full_like(denom, self.eps), denom)
        if mode == "MIN_MAX":
            return (x + 1) / 2 * denom + lo
        return (x + 1) * denom / 2 + lo
