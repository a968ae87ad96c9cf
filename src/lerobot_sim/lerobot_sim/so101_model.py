"""The simulated SO-101's kinematic table and file locations (ROS-free).

The numbers here are the single source for the sim: the MJCF in ``mjcf/so101_cube.xml`` implements
them and ``test_so101_model.py`` checks that it does. docs/sim.md lists them for reconciling with the
project's URDF and ``lerobot_core.robots``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from lerobot_core import units
from lerobot_core.robots import get_robot_spec

# Joint names and (lower, upper) in radians: the so101_follower spec of lerobot_core.robots (same as the
# URDF's), which the MJCF's joint ranges repeat (checked by test_so101_model.py).
_SPEC = get_robot_spec("so101_follower")
JOINT_NAMES: tuple[str, ...] = _SPEC.joint_names
JOINT_LIMITS: dict[str, tuple[float, float]] = {
    name: (_SPEC.limits[name].lower, _SPEC.limits[name].upper) for name in JOINT_NAMES
}

# Joint origin of each joint in its parent joint's frame (metres) and its rotation axis, at the zero pose:
# the project's URDF (lerobot_bringup/urdf/so101.urdf, all rpy 0), which test_so101_model.py compares.
JOINT_ORIGINS: dict[str, tuple[tuple[float, float, float], tuple[float, float, float]]] = {
    "shoulder_pan": ((0.0388, 0.0, 0.0624), (0.0, 0.0, 1.0)),
    "shoulder_lift": ((-0.0304, 0.0, 0.0542), (0.0, 1.0, 0.0)),
    "elbow_flex": ((0.028, 0.0, 0.11257), (0.0, 1.0, 0.0)),
    "wrist_flex": ((0.1349, 0.0, 0.0052), (0.0, 1.0, 0.0)),
    "wrist_roll": ((0.0611, 0.0, 0.0), (1.0, 0.0, 0.0)),
    "gripper": ((0.0202, 0.0188, -0.0234), (0.0, 0.0, 1.0)),
}

# Gripper command meaning (radians of the moving jaw): 0 = jaws touching, positive opens.
GRIPPER_OPEN = 1.0
GRIPPER_CLOSED = -0.174533

CUBE_HALF_SIZE = 0.0125


@dataclass(frozen=True)
class JointLimits:
    """Limits of a joint-position robot, in the order of ``names``."""

    names: tuple[str, ...]
    lower: tuple[float, ...]
    upper: tuple[float, ...]

    @classmethod
    def so101(cls) -> JointLimits:
        return cls(
            names=JOINT_NAMES,
            lower=tuple(JOINT_LIMITS[n][0] for n in JOINT_NAMES),
            upper=tuple(JOINT_LIMITS[n][1] for n in JOINT_NAMES),
        )


def to_lerobot_units(positions_rad) -> list[float]:
    """Joint positions in LeRobot's normalised units, with the sim's virtual calibration: the recorded range
    of motion is the joint limits, so 0 rad (mid-range) is 0 and the limits are -100/+100 (gripper 0..100).
    """
    out = []
    for name, q in zip(JOINT_NAMES, positions_rad, strict=True):
        lower, upper = JOINT_LIMITS[name]
        mode = _SPEC.motor(name).norm_mode
        if mode == units.RANGE_M100_100:  # symmetric about 0 rad
            lower, upper = -max(abs(lower), abs(upper)), max(abs(lower), abs(upper))
        out.append(units.normalize(float(q), lower, upper, mode))
    return out


def mjcf_dir() -> str:
    """Directory holding the MJCF files (source tree or installed share dir)."""
    here = os.path.dirname(os.path.realpath(__file__))
    candidates = [
        os.path.join(os.path.dirname(here), "mjcf"),  # source tree / symlink install
    ]
    try:
        from ament_index_python.packages import get_package_share_directory

        candidates.append(os.path.join(get_package_share_directory("lerobot_sim"), "mjcf"))
    except Exception:
        pass
    for path in candidates:
        if os.path.isfile(os.path.join(path, "so101_cube.xml")):
            return path
    raise FileNotFoundError(f"lerobot_sim: so101_cube.xml not found in any of {candidates}")


def so101_cube_xml() -> str:
    return os.path.join(mjcf_dir(), "so101_cube.xml")
