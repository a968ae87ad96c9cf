"""``scripted_expert``: drives the simulated SO-101 with the scripted expert, one command per observation.

Subscribes joint_states and sim/cube_pose, restarts its plan when sim/episode_info shows a new episode,
and answers every joint_states message with a joint_commands target stamped with the stamp of the
observation it answers (so a recorder aligns each action with its observation in sim time), then
acknowledges that tick on sim/tick_ack. Against a lockstep sim this is a closed ping-pong loop;
against a realtime sim it commands at the sim's rate.
"""

from __future__ import annotations

import time

import numpy as np
from geometry_msgs.msg import PoseStamped
from rclpy.node import Node
from sensor_msgs.msg import JointState
from std_msgs.msg import Header

from lerobot_core.joint_map import index_plan
from lerobot_core.ros import qos
from lerobot_core.ros.node import run_node
from lerobot_core.ros.params import declare
from lerobot_msgs.msg import EpisodeInfo
from lerobot_sim.bridge_base import QOS_COMMAND, QOS_STATE, TICK_ACK_TOPIC
from lerobot_sim.expert import ScriptedExpert
from lerobot_sim.so101_model import JOINT_NAMES


class ScriptedExpertNode(Node):
    def __init__(self, **kwargs):
        super().__init__("scripted_expert", **kwargs)
        self.expert = ScriptedExpert(
            fps=int(round(declare(self, "fps", 30.0, "control rate of the sim [Hz]")))
        )
        self._episode = None
        self._reported = None
        self._cube: np.ndarray | None = None
        self._answered: tuple[int, int] | None = None  # stamp of the last observation answered
        self._answered_at = 0.0
        self._pub = self.create_publisher(JointState, "joint_commands", QOS_COMMAND)
        self._ack = self.create_publisher(Header, TICK_ACK_TOPIC, QOS_COMMAND)
        self.create_subscription(PoseStamped, "sim/cube_pose", self._on_cube, QOS_STATE)
        self.create_subscription(EpisodeInfo, "sim/episode_info", self._on_info, QOS_STATE)
        # depth 1: after a slow answer only the newest observation counts (no backlog of stale ones)
        self.create_subscription(JointState, "joint_states", self._on_joints, qos.LATEST)

    def _on_cube(self, msg: PoseStamped) -> None:
        p, o = msg.pose.position, msg.pose.orientation
        self._cube = np.array([p.x, p.y, p.z, o.w, o.x, o.y, o.z])

    def _on_info(self, msg: EpisodeInfo) -> None:
        if msg.episode_index != self._episode:
            self._episode = msg.episode_index
            self.expert.reset()
            self.get_logger().info(f"episode {msg.episode_index} (seed {msg.seed}): expert restarted")
        elif (msg.terminated or msg.truncated) and self._reported != msg.episode_index:
            self._reported = msg.episode_index
            self.get_logger().info(
                f"episode {msg.episode_index} done: success={msg.is_success} sum_reward={msg.sum_reward:.2f}"
            )

    def _on_joints(self, msg: JointState) -> None:
        if self._cube is None or self._episode is None:
            return
        plan = index_plan(msg.name, JOINT_NAMES)
        if not plan.complete:
            return
        stamp = (msg.header.stamp.sec, msg.header.stamp.nanosec)
        now = time.monotonic()
        if stamp == self._answered and now - self._answered_at < 1.0:
            return  # a republished observation whose answer is in flight
        self._answered, self._answered_at = stamp, now
        q = plan.take(msg.position)
        action = self.expert.act(q, self._cube)
        command = JointState(name=list(JOINT_NAMES), position=action.tolist())
        command.header.stamp = msg.header.stamp
        self._pub.publish(command)
        self._ack.publish(Header(stamp=msg.header.stamp, frame_id=self.get_name()))


def main(args=None) -> int:
    return run_node(ScriptedExpertNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
