"""``scripted_expert``: drives the simulated SO-101 with the scripted expert, one command per observation.

With ``metaworld_task`` set (e.g. ``reach-v3``) it drives a Meta-World sim (gym_bridge with
``LeRobotRos/MetaWorld-v0``) with that task's scripted policy instead: it answers every
sim/environment_state (the full 39-value observation, stamped) with a Float64MultiArray on
forward_position_controller/commands (what the sim steps with) and the same action as a JointState on
joint_commands, named hand_dx, hand_dy, hand_dz, gripper and stamped with the observation it answers (what a
recorder aligns to that observation: contract metaworld_sim_contract), and acknowledges the tick the same way.

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
from std_msgs.msg import Float64MultiArray, Header

from lerobot_core.joint_map import index_plan
from lerobot_core.ros import qos
from lerobot_core.ros.node import run_node
from lerobot_core.ros.params import declare
from lerobot_msgs.msg import EpisodeInfo
from lerobot_sim.bridge_base import QOS_COMMAND, QOS_STATE, TICK_ACK_TOPIC
from lerobot_sim.expert import ScriptedExpert
from lerobot_sim.so101_model import JOINT_NAMES

# the names of a Meta-World action (hand xyz displacement, gripper effort) on joint_commands
METAWORLD_ACTION_NAMES = ("hand_dx", "hand_dy", "hand_dz", "gripper")


class ScriptedExpertNode(Node):
    def __init__(self, **kwargs):
        super().__init__("scripted_expert", **kwargs)
        fps = int(round(declare(self, "fps", 30.0, "control rate of the sim [Hz]")))
        task = declare(self, "metaworld_task", "", "Meta-World task to drive (empty: the SO-101 cube sim)")
        self._episode = None
        self._reported = None
        self._cube: np.ndarray | None = None
        self._answered: tuple[int, int] | None = None  # stamp of the last observation answered
        self._answered_at = 0.0
        self._ack = self.create_publisher(Header, TICK_ACK_TOPIC, QOS_COMMAND)
        self.create_subscription(EpisodeInfo, "sim/episode_info", self._on_info, QOS_STATE)
        # depth 1: after a slow answer only the newest observation counts (no backlog of stale ones)
        if task:
            from lerobot_sim.envs.metaworld import MetaWorldExpert
            from lerobot_sim.gym_bridge_node import ENV_STATE_TOPIC

            self.expert = MetaWorldExpert(task)
            self._pub = self.create_publisher(
                Float64MultiArray, "forward_position_controller/commands", QOS_COMMAND
            )
            self._stamped = self.create_publisher(JointState, "joint_commands", QOS_COMMAND)
            self.create_subscription(JointState, ENV_STATE_TOPIC, self._on_metaworld_state, qos.LATEST)
        else:
            self.expert = ScriptedExpert(fps=fps)
            self._pub = self.create_publisher(JointState, "joint_commands", QOS_COMMAND)
            self.create_subscription(PoseStamped, "sim/cube_pose", self._on_cube, QOS_STATE)
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

    def _first_answer(self, msg) -> bool:
        """Whether ``msg``'s observation still needs an answer (not a republished one whose answer is in flight)."""
        stamp = (msg.header.stamp.sec, msg.header.stamp.nanosec)
        now = time.monotonic()
        if stamp == self._answered and now - self._answered_at < 1.0:
            return False
        self._answered, self._answered_at = stamp, now
        return True

    def _on_metaworld_state(self, msg: JointState) -> None:
        if self._episode is None or not self._first_answer(msg):
            return
        action = self.expert.select_action({"observation.environment_state": np.asarray(msg.position)})
        command = JointState(name=list(METAWORLD_ACTION_NAMES), position=action.tolist())
        command.header.stamp = msg.header.stamp
        self._stamped.publish(command)  # first: a recorder has it before the sim steps past this tick
        self._pub.publish(Float64MultiArray(data=action.tolist()))
        self._ack.publish(Header(stamp=msg.header.stamp, frame_id=self.get_name()))

    def _on_joints(self, msg: JointState) -> None:
        if self._cube is None or self._episode is None:
            return
        plan = index_plan(msg.name, JOINT_NAMES)
        if not plan.complete or not self._first_answer(msg):
            return
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
