"""``gz_command_relay``: the robot's three command types -> one std_msgs/Float64 per joint for Gazebo.

Gazebo's JointPositionController takes one double per joint; the real robot takes joint_commands,
forward_position_controller/commands and joint_trajectory_controller/joint_trajectory. This node accepts
the latter with the driver's safety rules (clamp to limits, bounded change per cycle, hold when input is
stale or on deactivate) and publishes the held target on gz_commands/<joint> at rate_hz; ros_gz_bridge
forwards those to gz (config/gz_bridge_so101.yaml).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from rclpy.lifecycle import LifecycleNode, LifecycleState, TransitionCallbackReturn
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64

from lerobot_core.command import parse_command
from lerobot_core.joint_map import index_plan
from lerobot_core.ros.commands import subscribe_commands
from lerobot_core.ros.node import run_node
from lerobot_core.ros.params import declare
from lerobot_core.safety import CommandError, SafetyLimits
from lerobot_sim.bridge_base import QOS_COMMAND, QOS_STATE
from lerobot_sim.gazebo import RELAY_PREFIX
from lerobot_sim.so101_model import JOINT_NAMES, JointLimits


@dataclass(frozen=True)
class RelayConfig:
    rate_hz: float
    max_joint_velocity: float
    autostart: bool


class GzCommandRelayNode(LifecycleNode):
    def __init__(self, **kwargs):
        super().__init__("gz_command_relay", **kwargs)
        self.cfg = RelayConfig(
            declare(self, "rate_hz", 50.0, "target publish rate [Hz]"),
            declare(self, "max_joint_velocity", 4.7, "bound on target change [rad/s]"),
            declare(self, "autostart", False, "configure and activate at start"),
        )
        lim = JointLimits.so101()
        step = self.cfg.max_joint_velocity / self.cfg.rate_hz
        self.safety = SafetyLimits.build(
            len(JOINT_NAMES), lim.lower, lim.upper, step if step > 0 else float("inf")
        )
        self._goal: np.ndarray | None = None  # latest accepted command (clamped to limits)
        self._target: np.ndarray | None = None  # what is sent, moving toward _goal at bounded speed
        self._active = False
        self._pubs = {}
        self._subs = []
        self._timer = None

    def on_configure(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._pubs = {
            j: self.create_publisher(Float64, f"{RELAY_PREFIX}/{j}", QOS_COMMAND) for j in JOINT_NAMES
        }
        self._subs = [
            self.create_subscription(JointState, "joint_states", self._on_state, QOS_STATE),
            *subscribe_commands(self, self._accept, QOS_COMMAND),
        ]
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._active = True
        self._timer = self.create_timer(1.0 / self.cfg.rate_hz, self._tick)
        return super().on_activate(state)

    def on_deactivate(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._active = False
        self._goal = self._target  # hold where the arm was sent
        if self._timer is not None:
            self.destroy_timer(self._timer)
            self._timer = None
        return super().on_deactivate(state)

    def on_cleanup(self, state: LifecycleState) -> TransitionCallbackReturn:
        for sub in self._subs:
            self.destroy_subscription(sub)
        self._subs = []
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: LifecycleState) -> TransitionCallbackReturn:
        self._goal = self._target
        return TransitionCallbackReturn.SUCCESS

    def _on_state(self, msg: JointState) -> None:
        if self._target is None:
            plan = index_plan(msg.name, JOINT_NAMES)
            if plan.unknown or not len(msg.name) or len(msg.name) != len(msg.position):
                return
            q = plan.gather(msg.position, np.zeros(len(JOINT_NAMES)))
            self._target = np.clip(q, self.safety.lower, self.safety.upper)
            self._goal = self._target.copy()

    def _accept(self, msg) -> None:
        if not self._active or self._target is None:
            return
        try:
            goal = parse_command(msg, JOINT_NAMES).onto(self._goal)  # size and finiteness checked
        except CommandError as exc:
            self.get_logger().warn(f"command rejected: {exc}", throttle_duration_sec=1.0)
            return
        self._goal = np.clip(goal, self.safety.lower, self.safety.upper)

    def _tick(self) -> None:
        if self._target is None:
            return
        # the target walks toward the last goal at bounded speed; with no new goal it holds
        self._target = self.safety.apply(self._goal, self._target)
        for joint, value in zip(JOINT_NAMES, self._target, strict=True):
            self._pubs[joint].publish(Float64(data=float(value)))


def main(args=None) -> int:
    return run_node(GzCommandRelayNode, args, autostart=True)


if __name__ == "__main__":
    raise SystemExit(main())
