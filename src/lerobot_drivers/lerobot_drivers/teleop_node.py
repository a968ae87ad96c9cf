"""teleop: leader arm joint states -> follower joint commands, through ROS topics.

Subscribes ``leader_joint_states`` (default /leader/joint_states), publishes the mapped targets on
``joint_commands`` (sensor_msgs/JointState, positions by name) at ``rate_hz`` while the leader is
fresh; when the leader goes quiet for ``leader_timeout_s`` it stops sending, so the follower's own
command timeout puts it in its safe state.

With ``mirror_follower`` (a leader with active motors, human-in-the-loop), it also maps the follower's
``follower_joint_states`` back to the leader (``TeleopMapper.inverse``) and publishes them on
``leader_joint_commands`` at ``rate_hz`` (the leader bus follows them only while its torque is on),
and ``leader_mirror_error`` (std_msgs/Float64, rad): the largest |leader - mirrored follower| over the
joints, which the control arbiter waits on before a takeover.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from functools import partial

from rclpy.lifecycle import LifecycleNode, State, TransitionCallbackReturn
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64

from lerobot_core.robots import get_robot_spec
from lerobot_core.ros import qos
from lerobot_core.ros.node import autostart_timer, run_node
from lerobot_core.ros.params import declare
from lerobot_drivers.teleop import TeleopMapper, parse_joint_map


@dataclass(frozen=True)
class TeleopConfig:
    leader_robot: str
    follower_robot: str
    joint_map: tuple
    leader_prefix: str
    follower_prefix: str
    rate_hz: float
    leader_timeout_s: float
    autostart: bool
    mirror_follower: bool = False


class TeleopNode(LifecycleNode):
    def __init__(self, **kwargs) -> None:
        super().__init__("teleop", **kwargs)
        p = partial(declare, self)

        self.cfg = TeleopConfig(
            leader_robot=p("leader_robot", "so101_leader", "LeRobot type of the leader arm"),
            follower_robot=p("follower_robot", "so101_follower", "LeRobot type of the follower arm"),
            joint_map=tuple(p("joint_map", [""], "leader:follower joint pairs; empty = same names")),
            leader_prefix=p("leader_prefix", "", "prefix of the leader's published joint names"),
            follower_prefix=p("follower_prefix", "", "prefix of the follower's joint names"),
            rate_hz=p(
                "rate_hz",
                100.0,
                "command publish rate [Hz]",
                range=(1.0, 1000.0),
            ),
            leader_timeout_s=p(
                "leader_timeout_s",
                0.25,
                "stop commanding when the leader is older [s]",
                read_only=False,
                range=(0.01, 10.0),
            ),
            autostart=p("autostart", False, "configure and activate right after start"),
            mirror_follower=p(
                "mirror_follower",
                False,
                "publish the follower's pose mapped to the leader (leader_joint_commands, leader_mirror_error)",
            ),
        )
        self._follower = None
        self._leader_raw: dict[str, float] = {}
        if self.cfg.mirror_follower:
            self.pub_mirror = self.create_lifecycle_publisher(JointState, "leader_joint_commands", qos.LATEST)
            self.pub_mirror_error = self.create_lifecycle_publisher(
                Float64, "leader_mirror_error", qos.LATEST
            )
            self.create_subscription(JointState, "follower_joint_states", self._on_follower, qos.LATEST)
        self.mapper = None
        self._latest = None
        self._latest_t = 0.0
        self._lock = threading.Lock()
        self._stale_logged = False
        self.sent = 0
        self.pub = self.create_lifecycle_publisher(JointState, "joint_commands", qos.RELIABLE)
        self.sub = None
        self.timer = None
        if self.cfg.autostart:
            autostart_timer(self)

    def on_configure(self, state: State) -> TransitionCallbackReturn:
        try:
            self.mapper = TeleopMapper(
                get_robot_spec(self.cfg.leader_robot),
                get_robot_spec(self.cfg.follower_robot),
                parse_joint_map(self.cfg.joint_map),
                self.cfg.leader_prefix,
                self.cfg.follower_prefix,
            )
        except (KeyError, ValueError) as exc:
            self.get_logger().error(f"configure failed: {exc}")
            return TransitionCallbackReturn.FAILURE
        # leader states: keep only the newest
        self.sub = self.create_subscription(JointState, "leader_joint_states", self._on_leader, qos.LATEST)
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: State) -> TransitionCallbackReturn:
        self.timer = self.create_timer(1.0 / self.cfg.rate_hz, self._tick)
        self.get_logger().info(
            f"{self.cfg.leader_robot} ({self.sub.topic_name}) -> {self.cfg.follower_robot} ({self.pub.topic_name}) "
            f"at {self.cfg.rate_hz:g} Hz"
        )
        return super().on_activate(state)

    def on_deactivate(self, state: State) -> TransitionCallbackReturn:
        if self.timer is not None:
            self.destroy_timer(self.timer)
            self.timer = None
        return super().on_deactivate(state)

    def on_cleanup(self, state: State) -> TransitionCallbackReturn:
        if self.sub is not None:
            self.destroy_subscription(self.sub)
            self.sub = None
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: State) -> TransitionCallbackReturn:
        return TransitionCallbackReturn.SUCCESS

    def _on_leader(self, msg: JointState) -> None:
        targets = self.mapper.map(msg.name, msg.position)
        with self._lock:
            self._latest = targets
            self._latest_t = time.monotonic()
            if self.cfg.mirror_follower:
                self._leader_raw = dict(zip(msg.name, msg.position, strict=False))

    def _on_follower(self, msg: JointState) -> None:
        with self._lock:
            self._follower = (list(msg.name), list(msg.position))

    def _mirror(self) -> None:
        with self._lock:
            follower, leader = self._follower, self._leader_raw
        if follower is None or self.mapper is None:
            return
        target = self.mapper.inverse(*follower)
        msg = JointState(name=list(target), position=[float(v) for v in target.values()])
        msg.header.stamp = self.get_clock().now().to_msg()
        self.pub_mirror.publish(msg)
        errors = [abs(leader[n] - v) for n, v in target.items() if n in leader]
        if errors:
            self.pub_mirror_error.publish(Float64(data=float(max(errors))))

    def _tick(self) -> None:
        if self.cfg.mirror_follower:
            self._mirror()
        with self._lock:
            targets, age = self._latest, time.monotonic() - self._latest_t
        if not targets:
            return
        if age > self.cfg.leader_timeout_s:
            if not self._stale_logged:
                self._stale_logged = True
                self.get_logger().warning(f"leader silent for {age:.2f} s: not commanding the follower")
            return
        if self._stale_logged:
            self._stale_logged = False
            self.get_logger().info("leader back: teleoperating")
        msg = JointState()
        msg.header.stamp = self.get_clock().now().to_msg()
        msg.name = list(targets)
        msg.position = [targets[n] for n in msg.name]
        self.pub.publish(msg)
        self.sent += 1


def main(args=None) -> int:
    return run_node(TeleopNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
