"""Leader -> follower joint mapping for teleoperation (ROS-free).

Joints are matched by name (optionally through an explicit ``leader:follower`` map and prefixes).
Body joints pass through in radians; the gripper is rescaled linearly from the leader's gripper
range to the follower's (leader and follower jaws differ), then every value is clamped to the
follower's joint limits.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Optional

from lerobot_core.robots import RobotSpec


def parse_joint_map(entries: Sequence[str]) -> dict[str, str]:
    """["leader_name:follower_name", ...] -> dict; a clear error for malformed entries."""
    out = {}
    for e in entries:
        if not e:
            continue
        if e.count(":") != 1 or not all(part.strip() for part in e.split(":")):
            raise ValueError(f"joint_map entry {e!r}: expected 'leader_joint:follower_joint'")
        a, b = (part.strip() for part in e.split(":"))
        out[a] = b
    return out


@dataclass(frozen=True)
class LinearMap:
    src_lo: float
    src_hi: float
    dst_lo: float
    dst_hi: float

    def __call__(self, x: float) -> float:
        if self.src_hi == self.src_lo:
            return self.dst_lo
        return self.dst_lo + (x - self.src_lo) * (self.dst_hi - self.dst_lo) / (self.src_hi - self.src_lo)


class TeleopMapper:
    def __init__(
        self,
        leader: RobotSpec,
        follower: RobotSpec,
        joint_map: Optional[Mapping[str, str]] = None,
        leader_prefix: str = "",
        follower_prefix: str = "",
        gripper_joints: Sequence[str] = ("gripper",),
    ):
        self.follower = follower
        pairs = dict(joint_map) if joint_map else {n: n for n in leader.joint_names if n in follower.limits}
        for src, dst in pairs.items():
            if src not in leader.limits:
                raise ValueError(f"joint_map: {src!r} is not a joint of leader {leader.name}")
            if dst not in follower.limits:
                raise ValueError(f"joint_map: {dst!r} is not a joint of follower {follower.name}")
        self._pairs: dict[str, tuple[str, Optional[LinearMap]]] = {}
        for src, dst in pairs.items():
            scale = None
            if src.split("_", 1)[-1] in gripper_joints or src in gripper_joints:
                ls, fs = leader.limits[src], follower.limits[dst]
                scale = LinearMap(ls.lower, ls.upper, fs.lower, fs.upper)
            self._pairs[leader_prefix + src] = (follower_prefix + dst, scale)
        self._limits = {follower_prefix + n: lim for n, lim in follower.limits.items()}
        self._leader_limits = {leader_prefix + n: lim for n, lim in leader.limits.items()}

    @property
    def leader_names(self):
        return tuple(self._pairs)

    def map(self, names: Sequence[str], positions: Sequence[float]) -> dict[str, float]:
        """Leader joint state -> follower targets (rad); unknown and non-finite values are skipped."""
        out = {}
        for name, value in zip(names, positions, strict=False):
            pair = self._pairs.get(name)
            if pair is None or not math.isfinite(value):
                continue
            dst, scale = pair
            v = scale(value) if scale else float(value)
            out[dst] = self._limits[dst].clamp(v)
        return out

    def inverse(self, names: Sequence[str], positions: Sequence[float]) -> dict[str, float]:
        """Follower joint state -> leader targets (rad): where the leader must stand to mirror the follower.

        Used when the leader arm's motors are driven (human-in-the-loop pause): the gripper range is
        mapped back, every value is clamped to the leader's joint limits.
        """
        back = {dst: (src, scale) for src, (dst, scale) in self._pairs.items()}
        out = {}
        for name, value in zip(names, positions, strict=False):
            pair = back.get(name)
            if pair is None or not math.isfinite(value):
                continue
            src, scale = pair
            v = float(value)
            if scale is not None:
                v = LinearMap(scale.dst_lo, scale.dst_hi, scale.src_lo, scale.src_hi)(v)
            out[src] = self._leader_limits[src].clamp(v) if src in self._leader_limits else v
        return out
