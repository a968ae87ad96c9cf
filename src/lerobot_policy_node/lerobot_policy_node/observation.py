"""ROS-free observation assembly for the policy node.

Samples from topics are pushed into the shared alignment core (`lerobot_core.alignment`),
the same code that built the training frames, and an observation is taken with
`Aligner.sample_at(now)`: for each stream the latest sample at or before `now`, rejected when older
than `max_age_s`. Joint positions are mapped by name into the policy's state order; images are kept
as RGB uint8 and converted (resize to the policy's input shape, float32 CHW in [0, 1]) only when an
observation is taken, on the inference thread.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lerobot_core import units
from lerobot_core.alignment import Aligner, DroppedTick, StreamSpec
from lerobot_core.joint_map import index_plan

STATE_KEY = "observation.state"
ENV_STATE_KEY = "observation.environment_state"
JOINTS_STREAM = "joints"


class StaleObservationError(RuntimeError):
    """No usable observation: a stream has no data yet or its latest sample is too old."""

    def __init__(self, reasons: dict[str, str]):
        self.reasons = dict(reasons)
        super().__init__(", ".join(f"{k}: {v}" for k, v in sorted(self.reasons.items())))


def rgb_to_chw_float(rgb: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """HxWx3 uint8 -> float32 (3, H', W') in [0, 1], resized to `shape` = (3, H', W') if needed."""
    c, h, w = (int(s) for s in shape)
    if rgb.ndim != 3 or rgb.shape[2] != 3 or c != 3:
        raise ValueError(
            f"expected an HxWx3 RGB image for a (3, H, W) input, got {rgb.shape} for {tuple(shape)}"
        )
    if rgb.shape[0] != h or rgb.shape[1] != w:
        import cv2

        interp = cv2.INTER_AREA if rgb.shape[0] > h else cv2.INTER_LINEAR
        rgb = cv2.resize(rgb, (w, h), interpolation=interp)
    out = np.empty((3, h, w), dtype=np.float32)
    np.multiply(np.moveaxis(rgb, 2, 0), np.float32(1.0 / 255.0), out=out, casting="unsafe")
    return out


@dataclass(frozen=True)
class ObservationSpec:
    state_names: tuple[str, ...]  # joint names in the policy's state order
    image_shapes: dict[str, tuple[int, ...]]  # policy image key -> (3, H, W)
    fps: float
    max_age_s: float
    deg: bool = False  # the policy works in degrees, ROS in radians
    # per joint, policy = rad * scale + offset (a contract's units: lerobot_core.units); None = deg above
    state_affine: tuple[np.ndarray, np.ndarray] | None = None
    env_state_dim: int = 0  # observation.environment_state values (0: the policy takes none)


class ObservationBuilder:
    def __init__(self, spec: ObservationSpec):
        self.spec = spec
        self._seen: np.ndarray = np.zeros(len(spec.state_names), dtype=bool)
        self._latest = np.full(len(spec.state_names), np.nan)
        streams = [StreamSpec(JOINTS_STREAM, policy="hold", max_staleness_s=spec.max_age_s)]
        streams += [StreamSpec(k, policy="hold", max_staleness_s=spec.max_age_s) for k in spec.image_shapes]
        if spec.env_state_dim:
            streams.append(StreamSpec(ENV_STATE_KEY, policy="hold", max_staleness_s=spec.max_age_s))
        self.aligner = Aligner(fps=spec.fps, streams=streams, latency_margin_s=0.0, history_s=2.0)
        self._lock = threading.Lock()  # callbacks push while the control/inference threads sample

    def push_joints(self, names: Sequence[str], positions: Sequence[float], stamp_ns: int) -> bool:
        """Map a JointState by name; returns False until every state joint has been seen."""
        with self._lock:
            plan = index_plan(names[: len(positions)], self.spec.state_names)  # unnamed extras: dropped
            plan.gather(positions, self._latest)
            self._seen[plan.dst] = True
            if not self._seen.all():
                return False
            self.aligner.push(JOINTS_STREAM, self._latest.copy(), stamp_ns=stamp_ns)
            return True

    def missing_joints(self) -> list[str]:
        return [n for n, seen in zip(self.spec.state_names, self._seen, strict=True) if not seen]

    def push_image(self, key: str, rgb: np.ndarray, stamp_ns: int) -> None:
        with self._lock:
            self.aligner.push(key, rgb, stamp_ns=stamp_ns)

    def push_env_state(self, values: np.ndarray, stamp_ns: int) -> None:
        """observation.environment_state as the contract extracted it (e.g. an object's pose)."""
        values = np.asarray(values, dtype=np.float64)
        if values.shape != (self.spec.env_state_dim,):
            raise ValueError(
                f"{ENV_STATE_KEY}: {values.shape[0]} values, the policy takes {self.spec.env_state_dim}"
            )
        with self._lock:
            self.aligner.push(ENV_STATE_KEY, values, stamp_ns=stamp_ns)

    def latest_joints(self) -> np.ndarray | None:
        with self._lock:
            return self._latest.copy() if self._seen.all() else None

    def sample(self, now_ns: int) -> tuple[dict, dict[str, int]]:
        """Raw sample (joint vector in rad, RGB images) at `now_ns`; StaleObservationError if not usable."""
        with self._lock:
            frame = self.aligner.sample_at(int(now_ns))
        if isinstance(frame, DroppedTick):
            reasons = dict(frame.reasons)
            if JOINTS_STREAM in reasons and self.missing_joints():
                reasons[JOINTS_STREAM] = f"no data for joints {self.missing_joints()}"
            raise StaleObservationError(reasons)
        return frame.values, {k: v for k, v in frame.sample_ns.items() if v is not None}

    def to_policy_batch(self, values: dict, task: str | None = None) -> dict:
        """Raw sample -> LeRobot feature batch (B=1): state float32 (1, D), images float32 (1, 3, H, W)."""
        state = np.asarray(values[JOINTS_STREAM], dtype=np.float64)
        if self.spec.state_affine is not None:
            scale, offset = self.spec.state_affine
            state = state * scale + offset
        elif self.spec.deg:
            state = state * units.DEGREES_PER_RADIAN
        batch: dict = {STATE_KEY: state.astype(np.float32)[None]}
        if self.spec.env_state_dim:
            batch[ENV_STATE_KEY] = np.asarray(values[ENV_STATE_KEY], dtype=np.float32)[None]
        for key, shape in self.spec.image_shapes.items():
            batch[key] = rgb_to_chw_float(values[key], shape)[None]
        if task is not None:
            batch["task"] = [task]
        return batch
