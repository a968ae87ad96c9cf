"""Config classes of the ROS 2 robot (``--robot.type=ros`` and presets), checked when LeRobot parses them.

Importing this module needs neither rclpy nor a running graph: LeRobot lists and parses configs first.
Everything that can be wrong in a contract or a command setting is an error here, naming the flag.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from lerobot.robots.config import RobotConfig

from lerobot_core.command import COMMAND_INTERFACES
from lerobot_core.contract import JOINT_STATE, JOINT_TRAJECTORY, Contract, ContractError, normalize_msgtype

COMMAND_TYPES = tuple(msgtype for msgtype, _ in COMMAND_INTERFACES.values())


def load_contract(path: str | None, flag: str) -> Contract:
    """The contract at ``path`` (or the shipped contract of that name, lerobot_core/config/contracts);
    ValueError in the words of the command-line ``flag``."""
    if not path:
        raise ValueError(
            f"{flag} is required: a lerobot_ros contract, the path of its YAML or the name of a shipped one "
            "(see docs/lerobot_plugins.md)"
        )
    try:
        contract = Contract.load(Path(path).expanduser())
    except ContractError as exc:
        raise ValueError(f"{flag}={path}: {exc}") from None
    if not contract.resolved:
        raise ValueError(
            f"{flag}={path}: LeRobot asks for a device's features before it connects, so the contract "
            "must list 'joints' for every joint feature and 'height'/'width' for every image"
        )
    return contract


def robot_limits(name: str) -> dict[str, tuple[float, float, float]]:
    """{joint: (lower rad, upper rad, velocity rad/s)} of a robot in the stack's registry."""
    try:
        import lerobot_core.robots as spec_module
    except ImportError:
        spec_module = None
    if spec_module is None:
        raise ValueError(
            f"--robot.limits_from={name}: the robot registry (lerobot_core.robots) is not importable; "
            "pip install lerobot_core from the lerobot_ros repository, or give --robot.joint_limits"
        )
    try:
        spec = spec_module.get_robot_spec(name)
    except (KeyError, ValueError) as exc:
        raise ValueError(f"--robot.limits_from={name}: {exc}") from None
    return {j: (lim.lower, lim.upper, lim.velocity) for j, lim in spec.limits.items()}


@RobotConfig.register_subclass("ros")
@dataclass(kw_only=True)
class RosRobotConfig(RobotConfig):
    """Any robot whose topics a lerobot_ros contract describes.

    Observation features: every contract feature but ``action`` (joint values as ``<joint>.pos``,
    cameras by name). Action features: the contract's ``action`` names, sent on ``command_topic``.
    """

    contract: str | None = (
        None  # the contract YAML's path, or a shipped one's name (as the recorder node reads)
    )
    # where send_action publishes; default: the contract's action topic
    command_topic: str | None = None
    # sensor_msgs/msg/JointState | std_msgs/msg/Float64MultiArray | trajectory_msgs/msg/JointTrajectory
    command_type: str | None = None
    namespace: str = ""  # ROS namespace the relative topic names resolve in
    domain_id: int | None = None  # ROS_DOMAIN_ID; None: from the environment
    connect_timeout_s: float = 10.0  # connect() fails naming the topics silent this long
    # an observation older than this is an error (s); None: each topic's max_staleness in the contract
    max_age_s: float | None = None
    # safety: joint limits by name [lower, upper] in rad, and/or a robot of the stack's registry
    joint_limits: dict[str, list[float]] = field(default_factory=dict)
    limits_from: str | None = None  # e.g. so101_follower (lerobot_core.robots)
    # bound on the change of each joint per send_action (rad); None: from the registry's velocity / fps
    max_step_rad: float | None = None
    trajectory_time_s: float | None = None  # JointTrajectory time_from_start; None: one period (1/fps)
    # a lockstep sim (lerobot_sim mode:=lockstep): get_observation waits for the next tick (every observation
    # topic stamped alike, later than the last one returned; no wall-clock age check) and send_action stamps
    # its command with that tick, which is what steps the sim
    lockstep: bool = False
    lockstep_timeout_s: float = 10.0  # get_observation fails when no new tick comes this long

    def __post_init__(self):
        super().__post_init__()
        self.load()

    # what the robot needs, computed once (not dataclass fields: draccus must not see them)
    def load(self) -> None:
        contract = load_contract(self.contract, "--robot.contract")
        if "action" not in contract.vectors:
            raise ValueError(
                f"--robot.contract={self.contract}: no 'action' feature (what send_action commands)"
            )
        sources = contract.vectors["action"]
        if len(sources) != 1:
            raise ValueError(
                f"--robot.contract={self.contract}: features.action has {len(sources)} sources; the robot "
                "publishes one command topic (use one robot per arm)"
            )
        action = sources[0]
        if tuple(action.fields) != ("position",):
            raise ValueError(
                f"--robot.contract={self.contract}: features.action.fields is {list(action.fields)}; "
                "the robot commands positions only"
            )
        ctype = normalize_msgtype(self.command_type) if self.command_type else action.msgtype
        if ctype not in COMMAND_TYPES:
            raise ValueError(
                f"--robot.command_type={self.command_type}: not one of {', '.join(COMMAND_TYPES)}"
            )
        ctopic = self.command_topic or action.topic
        observed = [
            t for f, srcs in contract.vectors.items() if f != "action" for t in (s.topic for s in srcs)
        ]
        observed += [s.topic for s in contract.images.values()]
        if ctopic in observed:
            raise ValueError(
                f"--robot.command_topic={ctopic}: the robot reads that topic as an observation; "
                "commands need their own topic"
            )
        for name, value in (
            ("connect_timeout_s", self.connect_timeout_s),
            ("max_age_s", self.max_age_s),
            ("lockstep_timeout_s", self.lockstep_timeout_s),
        ):
            if value is not None and not (math.isfinite(value) and value > 0):
                raise ValueError(f"--robot.{name}={value}: must be a positive number of seconds")
        limits = {}
        if self.limits_from:
            limits = dict(robot_limits(self.limits_from))
        for joint, pair in self.joint_limits.items():
            if len(pair) != 2 or not pair[0] < pair[1]:
                raise ValueError(
                    f"--robot.joint_limits: {joint}: expected [lower, upper] with lower < upper, got {pair}"
                )
            old = limits.get(joint, (0.0, 0.0, math.inf))
            limits[joint] = (float(pair[0]), float(pair[1]), old[2])
        unknown = sorted(set(self.joint_limits) - set(action.joints))
        if unknown:
            raise ValueError(
                f"--robot.joint_limits: {unknown} are not joints of the action {list(action.joints)}"
            )
        object.__setattr__(self, "_contract", contract)
        object.__setattr__(self, "_command", (ctopic, ctype))
        object.__setattr__(self, "_limits", limits)

    @property
    def parsed_contract(self) -> Contract:
        return self._contract

    @property
    def observation_contract(self) -> Contract:
        """The contract without ``action`` and task: what get_observation assembles."""
        c = self._contract
        vectors = {k: v for k, v in c.vectors.items() if k != "action"}
        topics = {s.topic for srcs in vectors.values() for s in srcs} | {s.topic for s in c.images.values()}
        streams = {t: s for t, s in c.streams.items() if t in topics}
        return replace(c, vectors=vectors, streams=streams, task_text="-", task_topic=None)

    @property
    def command(self) -> tuple[str, str]:
        """(topic, message type) send_action publishes on."""
        return self._command

    @property
    def limits(self) -> dict[str, tuple[float, float, float]]:
        """{joint: (lower, upper, velocity)} in rad, rad/s, for the joints that have limits."""
        return self._limits


@RobotConfig.register_subclass("ros_so101_sim")
@dataclass(kw_only=True)
class RosSO101SimConfig(RosRobotConfig):
    """The simulated SO-101 (lerobot_sim): the shipped contract so101_sim_robot (the sim's topics, its
    default 320x240 images), commanded like the real arm."""

    contract: str | None = "so101_sim_robot"
    command_topic: str | None = "/joint_commands"
    command_type: str | None = JOINT_STATE
    limits_from: str | None = "so101_follower"
    # the realtime sim holds a finished episode reset_delay_s (1 s) before the next, and lags under load
    max_age_s: float | None = 2.0


@RobotConfig.register_subclass("ros_so101")
@dataclass(kw_only=True)
class RosSO101Config(RosRobotConfig):
    """A real SO-101 follower on lerobot_drivers' bus node: the shipped contract so101_one_camera (the
    recorder's: follower state, leader action, front camera), commands on joint_commands."""

    contract: str | None = "so101_one_camera"
    command_topic: str | None = "/joint_commands"
    command_type: str | None = JOINT_STATE
    limits_from: str | None = "so101_follower"


@RobotConfig.register_subclass("ros_arm")
@dataclass(kw_only=True)
class RosArmConfig(RosRobotConfig):
    """A generic arm: JointState observation (contract), JointTrajectory commands (ros2_control's
    joint_trajectory_controller)."""

    command_topic: str | None = "/joint_trajectory_controller/joint_trajectory"
    command_type: str | None = JOINT_TRAJECTORY
