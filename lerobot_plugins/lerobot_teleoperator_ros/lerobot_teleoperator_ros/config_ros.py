"""Config of the ROS 2 teleoperator (``--teleop.type=ros``), checked when LeRobot parses it (no rclpy needed)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from lerobot.teleoperators.config import TeleoperatorConfig

from lerobot_core.contract import Contract, ContractError, normalize_msgtype

VECTOR_TYPES = (
    "sensor_msgs/msg/JointState",
    "std_msgs/msg/Float64MultiArray",
    "trajectory_msgs/msg/JointTrajectory",
)


@TeleoperatorConfig.register_subclass("ros")
@dataclass(kw_only=True)
class RosTeleoperatorConfig(TeleoperatorConfig):
    """A leader arm on ROS 2. Either ``contract`` (its ``action`` feature names the leader topic, joints and
    units: the same file the robot and the recorder node read) or ``topic`` + ``joints`` (+ ``msg_type``)."""

    contract: str | None = None  # the contract YAML's path, or a shipped one's name (so101_one_camera)
    topic: str | None = None  # e.g. /leader/joint_states; overrides the contract's action topic
    msg_type: str = (
        "sensor_msgs/msg/JointState"  # with `topic`: JointState | Float64MultiArray | JointTrajectory
    )
    joints: list[str] = field(default_factory=list)  # with `topic`: the joint names, in action order
    namespace: str = ""
    domain_id: int | None = None
    connect_timeout_s: float = 10.0
    max_age_s: float = 0.5  # a leader message older than this is an error in get_action
    # a leader that answers a lockstep sim's ticks (lerobot_sim scripted_expert, stamped with the tick):
    # get_action waits for a message stamped later than the last one returned, instead of checking ages
    lockstep: bool = False
    lockstep_timeout_s: float = 10.0  # get_action fails when no newer leader message comes this long
    # active leader (HIL): mirror the follower by commanding the leader's bus node; relative to `namespace`
    command_topic: str = "leader/joint_commands"
    # torque of a read-only leader bus node (lerobot_drivers motor_bus, read_only:=true): std_srvs/SetBool,
    # true = torque on and follow command_topic, false = torque off at once. "" or a bus node without the
    # service (read_only:=false): torque comes on with the first command and goes off command_timeout_s
    # after the last one (safe_state:=torque_off)
    torque_service: str = "leader/torque_enable"
    service_timeout_s: float = 5.0  # how long enable_torque waits for the service to appear / answer

    def __post_init__(self):
        if self.topic:
            mtype = normalize_msgtype(self.msg_type)
            if mtype not in VECTOR_TYPES:
                raise ValueError(f"--teleop.msg_type={self.msg_type}: not one of {', '.join(VECTOR_TYPES)}")
            if not self.joints:
                raise ValueError("--teleop.topic needs --teleop.joints (the leader's joint names, in order)")
            try:
                contract = Contract.from_flags(
                    fps=30, action=self.topic, joints=list(self.joints), types={self.topic: mtype}
                )
            except ContractError as exc:
                raise ValueError(f"--teleop.topic={self.topic}: {exc}") from None
        elif self.contract:
            try:
                contract = Contract.load(Path(self.contract).expanduser())
            except ContractError as exc:
                raise ValueError(f"--teleop.contract={self.contract}: {exc}") from None
            if "action" not in contract.vectors:
                raise ValueError(
                    f"--teleop.contract={self.contract}: no 'action' feature (the leader's topic)"
                )
            if any(s.joints is None for s in contract.vectors["action"]):
                raise ValueError(f"--teleop.contract={self.contract}: features.action must list 'joints'")
        else:
            raise ValueError(
                "--teleop.type=ros needs --teleop.contract=PATH|NAME or --teleop.topic=... --teleop.joints=[...]"
            )
        for name in ("connect_timeout_s", "max_age_s", "service_timeout_s", "lockstep_timeout_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"--teleop.{name}={value}: must be a positive number of seconds")
        # the action alone: the teleoperator neither reads nor needs the observation topics
        topics = {s.topic for s in contract.vectors["action"]}
        contract = replace(
            contract,
            vectors={"action": contract.vectors["action"]},
            images={},
            streams={t: s for t, s in contract.streams.items() if t in topics},
            task_text="-",
            task_topic=None,
        )
        object.__setattr__(self, "_contract", contract)

    @property
    def parsed_contract(self) -> Contract:
        return self._contract
