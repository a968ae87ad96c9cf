"""Robot specifications as LeRobot names them (ROS-free).

A :class:`RobotSpec` says which motors a robot has (name, bus id, model, LeRobot normalisation
mode), which bus family drives them, where LeRobot keeps its calibration file, and the joint
limits in radians used by the drivers, the policy node, the URDF (``lerobot_bringup/urdf/so101.urdf``) and the sim.

Joint names and motor ids follow LeRobot (so_follower / so_leader / koch_follower / koch_leader):
``shoulder_pan, shoulder_lift, elbow_flex, wrist_flex, wrist_roll, gripper`` with ids 1..6.
Bimanual robots carry two arms with ``right_`` then ``left_`` prefixes (right first).

Usage::

    from lerobot_core.robots import get_robot_spec
    spec = get_robot_spec("so101_follower")
    spec.joint_names            # ('shoulder_pan', ..., 'gripper')
    spec.limits["elbow_flex"]   # JointLimit(lower=-1.69, upper=1.69, velocity=..., effort=...)
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from lerobot_core.units import DEGREES, RANGE_0_100, RANGE_M100_100, degrees_to_radians

FEETECH = "feetech"
DYNAMIXEL = "dynamixel"

SO_JOINTS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")


@dataclass(frozen=True)
class JointLimit:
    """Position limits in rad, velocity limit in rad/s, effort limit in N*m."""

    lower: float
    upper: float
    velocity: float
    effort: float

    def clamp(self, value: float) -> float:
        return min(self.upper, max(self.lower, value))


@dataclass(frozen=True)
class MotorSpec:
    """One motor on a bus: LeRobot name, bus id, model string and normalisation mode."""

    name: str
    id: int
    model: str
    norm_mode: str


@dataclass(frozen=True)
class RobotSpec:
    """Everything the driver stack needs to know about one arm (or a bimanual pair)."""

    name: str  # the LeRobot type name, e.g. "so101_follower"
    bus: str  # FEETECH or DYNAMIXEL
    motors: tuple[MotorSpec, ...]
    limits: dict[str, JointLimit]
    # LeRobot's calibration folder: $HF_LEROBOT_CALIBRATION/<calibration_kind>/<calibration_name>/<id>.json
    calibration_kind: str  # "robots" or "teleoperators"
    calibration_name: str  # LeRobot class `name`, e.g. "so_follower"
    # older LeRobot releases used the registered type name as folder; searched as a fallback
    legacy_calibration_names: tuple[str, ...] = ()
    is_leader: bool = False
    # motors whose range is a full turn (LeRobot records 0..4095 for them during calibration)
    full_turn_motors: tuple[str, ...] = ()
    # sub-arms of a bimanual robot, in LeRobot's order (right first): (prefix, spec)
    arms: tuple[tuple[str, RobotSpec], ...] = field(default=())

    @property
    def joint_names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.motors)

    @property
    def motor_ids(self) -> tuple[int, ...]:
        return tuple(m.id for m in self.motors)

    @property
    def is_bimanual(self) -> bool:
        return bool(self.arms)

    @property
    def feature_names(self) -> tuple[str, ...]:
        """LeRobot feature names, ``<joint>.pos``."""
        return tuple(f"{n}.pos" for n in self.joint_names)

    def motor(self, name: str) -> MotorSpec:
        for m in self.motors:
            if m.name == name:
                return m
        raise KeyError(f"robot {self.name!r} has no motor {name!r}; motors: {', '.join(self.joint_names)}")

    def with_degrees(self) -> RobotSpec:
        """LeRobot's ``use_degrees=True``: body joints in DEGREES, gripper stays RANGE_0_100."""
        motors = tuple(
            replace(m, norm_mode=DEGREES) if m.norm_mode == RANGE_M100_100 else m for m in self.motors
        )
        arms = tuple((p, a.with_degrees()) for p, a in self.arms)
        return replace(self, motors=motors, arms=arms)


_deg = degrees_to_radians


# SO-100/SO-101 joint limits (rad). They match urdf/so101.urdf in lerobot_bringup and the MuJoCo
# model of lerobot_sim; the gripper joint is the moving jaw's hinge.
# STS3215: 0.222 s/60deg at 7.4 V -> ~4.7 rad/s no-load; stall torque ~2.9 N*m (30 kg*cm at 12 V).
_SO_LIMITS = {
    "shoulder_pan": JointLimit(_deg(-110.0), _deg(110.0), 4.7, 2.9),
    "shoulder_lift": JointLimit(_deg(-100.0), _deg(100.0), 4.7, 2.9),
    "elbow_flex": JointLimit(_deg(-97.0), _deg(97.0), 4.7, 2.9),
    "wrist_flex": JointLimit(_deg(-95.0), _deg(95.0), 4.7, 2.9),
    "wrist_roll": JointLimit(_deg(-160.0), _deg(160.0), 4.7, 2.9),
    "gripper": JointLimit(_deg(-10.0), _deg(100.0), 4.7, 2.9),
}

# Koch v1.1: XL430-W250 (shoulder) ~6.2 rad/s, 1.5 N*m; XL330-M288 ~8.4 rad/s, 0.52 N*m.
_KOCH_LIMITS = {
    "shoulder_pan": JointLimit(_deg(-150.0), _deg(150.0), 6.2, 1.5),
    "shoulder_lift": JointLimit(_deg(-100.0), _deg(100.0), 6.2, 1.5),
    "elbow_flex": JointLimit(_deg(-100.0), _deg(100.0), 8.4, 0.52),
    "wrist_flex": JointLimit(_deg(-100.0), _deg(100.0), 8.4, 0.52),
    "wrist_roll": JointLimit(_deg(-160.0), _deg(160.0), 8.4, 0.52),
    "gripper": JointLimit(_deg(-10.0), _deg(100.0), 8.4, 0.52),
}


def _so_motors() -> tuple[MotorSpec, ...]:
    return tuple(
        MotorSpec(name, i + 1, "sts3215", RANGE_0_100 if name == "gripper" else RANGE_M100_100)
        for i, name in enumerate(SO_JOINTS)
    )


def _koch_motors(leader: bool) -> tuple[MotorSpec, ...]:
    if leader:
        models = ["xl330-m077"] * 6
    else:
        models = ["xl430-w250", "xl430-w250", "xl330-m288", "xl330-m288", "xl330-m288", "xl330-m288"]
    return tuple(
        MotorSpec(name, i + 1, models[i], RANGE_0_100 if name == "gripper" else RANGE_M100_100)
        for i, name in enumerate(SO_JOINTS)
    )


def _so(name: str, leader: bool) -> RobotSpec:
    generation = name.split("_")[0]  # so100 / so101
    return RobotSpec(
        name=name,
        bus=FEETECH,
        motors=_so_motors(),
        limits=dict(_SO_LIMITS),
        calibration_kind="teleoperators" if leader else "robots",
        calibration_name="so_leader" if leader else "so_follower",
        legacy_calibration_names=(f"{generation}_leader" if leader else f"{generation}_follower",),
        is_leader=leader,
        full_turn_motors=("wrist_roll",),
    )


def _koch(name: str, leader: bool) -> RobotSpec:
    return RobotSpec(
        name=name,
        bus=DYNAMIXEL,
        motors=_koch_motors(leader),
        limits=dict(_KOCH_LIMITS),
        calibration_kind="teleoperators" if leader else "robots",
        calibration_name=name,
        is_leader=leader,
        full_turn_motors=("shoulder_pan", "wrist_roll"),
    )


def make_bimanual(name: str, arm: RobotSpec, calibration_name: str) -> RobotSpec:
    """Two identical arms; joint names prefixed ``right_`` then ``left_`` (LeRobot's order).

    Each arm keeps its own bus (its own serial port) and its own calibration file
    (``<id>_right.json`` / ``<id>_left.json``); the combined spec lists all prefixed joints.
    """
    motors = []
    limits = {}
    for prefix in ("right_", "left_"):
        for m in arm.motors:
            motors.append(replace(m, name=prefix + m.name))
            limits[prefix + m.name] = arm.limits[m.name]
    return RobotSpec(
        name=name,
        bus=arm.bus,
        motors=tuple(motors),
        limits=limits,
        calibration_kind=arm.calibration_kind,
        calibration_name=calibration_name,
        is_leader=arm.is_leader,
        full_turn_motors=tuple(p + n for p in ("right_", "left_") for n in arm.full_turn_motors),
        arms=(("right_", arm), ("left_", arm)),
    )


def _build_registry() -> dict[str, RobotSpec]:
    specs = {}
    for gen in ("so100", "so101"):
        specs[f"{gen}_follower"] = _so(f"{gen}_follower", leader=False)
        specs[f"{gen}_leader"] = _so(f"{gen}_leader", leader=True)
    specs["koch_follower"] = _koch("koch_follower", leader=False)
    specs["koch_leader"] = _koch("koch_leader", leader=True)
    specs["bi_so_follower"] = make_bimanual("bi_so_follower", specs["so101_follower"], "bi_so_follower")
    specs["bi_so_leader"] = make_bimanual("bi_so_leader", specs["so101_leader"], "bi_so_leader")
    # aliases as older LeRobot releases spelled them
    specs["bi_so100_follower"] = replace(specs["bi_so_follower"], name="bi_so100_follower")
    specs["bi_so100_leader"] = replace(specs["bi_so_leader"], name="bi_so100_leader")
    return specs


ROBOT_SPECS: dict[str, RobotSpec] = _build_registry()


def robot_names() -> tuple[str, ...]:
    return tuple(sorted(ROBOT_SPECS))


def get_robot_spec(name: str, use_degrees: bool = False) -> RobotSpec:
    """Spec for a LeRobot robot/teleoperator type name (``so101_follower``, ``koch_leader``, ...)."""
    try:
        spec = ROBOT_SPECS[name]
    except KeyError:
        raise KeyError(f"unknown robot type {name!r}; known: {', '.join(robot_names())}") from None
    return spec.with_degrees() if use_degrees else spec
