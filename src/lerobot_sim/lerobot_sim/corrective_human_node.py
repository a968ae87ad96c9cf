"""``corrective_human``: the scripted "human" of a simulated human-in-the-loop session.

It plays the operator with a leader arm: it publishes ``teleop/joint_commands`` (sensor_msgs/
JointState) on every ``joint_states`` message (and repeats its newest command at ``fps`` while none
come, as a leader arm reports at its own rate), the follower's own pose while it only watches (a
leader mirroring the follower) and the scripted expert's targets while it drives. When the policy's
rollout goes wrong (``lerobot_sim.corrector``: cube not grasped by a deadline, or the gripper far
from the expert's plan) it sends ``pause`` then ``takeover`` to the control arbiter
(``arbiter/command``), recovers, and sends ``resume``. With ``demonstrate`` it drives every episode
from start to end (demonstrations recorded through the same graph and contract).
"""

from __future__ import annotations

import time
from functools import partial

import numpy as np
from geometry_msgs.msg import PoseStamped
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from sensor_msgs.msg import JointState

from lerobot_core.joint_map import index_plan
from lerobot_core.ros import qos
from lerobot_core.ros.node import run_node
from lerobot_core.ros.params import declare
from lerobot_msgs.msg import ControlStatus, EpisodeInfo
from lerobot_msgs.srv import ArbiterCommand
from lerobot_sim.bridge_base import QOS_STATE
from lerobot_sim.corrector import Corrector, CorrectorConfig
from lerobot_sim.so101_model import JOINT_NAMES

# an arbiter request without an answer after this long is given up and asked again (a lost answer
# must not silence every later request); the episode-start resume is asked again this often
REQUEST_TIMEOUT_S = 1.0
HANDBACK_RETRY_S = 0.5

MODES = {
    ControlStatus.MODE_POLICY: "policy",
    ControlStatus.MODE_HUMAN: "human",
    ControlStatus.MODE_HOLD: "hold",
}


class CorrectiveHumanNode(Node):
    def __init__(self, **kwargs):
        super().__init__("corrective_human", **kwargs)

        p = partial(declare, self)

        self.cfg = CorrectorConfig(
            fps=int(round(p("fps", 30.0, "control rate of the sim [Hz]", range=(1.0, 1000.0)))),
            grasp_deadline_s=p(
                "grasp_deadline_s",
                6.0,
                "intervene when the cube is not lifted by then [s]",
                range=(0.1, 600.0),
            ),
            drift_m=p(
                "drift_m",
                0.08,
                "intervene when the gripper is this far from the expert's plan [m]",
                range=(0.001, 10.0),
            ),
            drift_steps=p(
                "drift_steps",
                15,
                "... for this many control steps in a row",
                range=(1, 100000),
            ),
            handback_phase=p("handback_phase", "lift", "hand back once the expert reached this phase"),
            max_intervention_s=p(
                "max_intervention_s", 8.0, "hand back after this long in any case [s]", range=(0.1, 600.0)
            ),
            max_interventions=p(
                "max_interventions",
                1,
                "interventions per episode",
                range=(0, 1000),
            ),
            demonstrate=p("demonstrate", False, "drive every episode from the start (demonstrations)"),
        )
        self.corrector = Corrector(self.cfg)
        self._mode = "hold"
        self._cube: np.ndarray | None = None
        self._episode: int | None = None
        self._t0_ns = 0
        self._pending = None
        self._pending_command = ""
        self._pending_since = 0.0
        self._handback = False  # a new episode: the policy must drive it from its start
        self._handback_asked = 0.0
        self._command: list[float] | None = None  # the newest teleop command
        self._fresh = False  # published since the keep-alive's last tick
        self.pub = self.create_publisher(JointState, "teleop/joint_commands", qos.LATEST)
        self.cli = self.create_client(ArbiterCommand, "arbiter/command")
        self.create_subscription(PoseStamped, "sim/cube_pose", self._on_cube, QOS_STATE)
        self.create_subscription(EpisodeInfo, "sim/episode_info", self._on_info, QOS_STATE)
        self.create_subscription(ControlStatus, "arbiter/status", self._on_status, qos.STATUS)
        self.create_subscription(JointState, "joint_states", self._on_joints, qos.LATEST)
        # a leader arm reports at its own rate, not only when the follower does: the newest command
        # is repeated when no joint_states came for a period (the sim resetting or starved), so the
        # arbiter does not see a live human as silent
        self.create_timer(1.0 / self.cfg.fps, self._keep_alive)

    def _on_cube(self, msg: PoseStamped) -> None:
        p, o = msg.pose.position, msg.pose.orientation
        self._cube = np.array([p.x, p.y, p.z, o.w, o.x, o.y, o.z])

    def _on_status(self, msg: ControlStatus) -> None:
        self._mode = MODES.get(msg.mode, "hold")

    def _on_info(self, msg: EpisodeInfo) -> None:
        if msg.episode_index == self._episode:
            return
        if self._episode is not None and self.corrector.interventions:
            self.get_logger().info(f"episode {self._episode}: {self.corrector.interventions} intervention(s)")
        self._episode = msg.episode_index
        self._t0_ns = self.get_clock().now().nanoseconds
        self.corrector.reset()
        # a new episode starts with the policy in control; asked again until it is (the arbiter
        # refuses while the policy is still silent after the sim's reset pause)
        self._handback, self._handback_asked = not self.cfg.demonstrate, 0.0
        self._ask_handback()

    def _ask_handback(self) -> None:
        if not self._handback:
            return
        if self._mode == "policy" or self.corrector.state != "watch":
            self._handback = self.corrector.state == "watch" and self._mode != "policy"
            return
        now = time.monotonic()
        if now - self._handback_asked >= HANDBACK_RETRY_S:
            self._handback_asked = now
            self._request("resume")

    def _on_joints(self, msg: JointState) -> None:
        if self._cube is None or self._episode is None:
            return
        plan = index_plan(msg.name, JOINT_NAMES)
        if not plan.complete:
            return
        q = plan.take(msg.position)
        t_s = (self.get_clock().now().nanoseconds - self._t0_ns) * 1e-9
        before = self.corrector.state
        command, request = self.corrector.step(q, self._cube, t_s, self._mode)
        if self.corrector.state != before and before == "watch":
            self.get_logger().info(f"episode {self._episode}: intervening ({self.corrector.reason})")
        self._command = [float(v) for v in command]
        self._publish(self._command)
        if request is not None:
            self._request(request)
        else:
            self._ask_handback()

    def _publish(self, position: list[float]) -> None:
        out = JointState(name=list(JOINT_NAMES), position=position)
        out.header.stamp = self.get_clock().now().to_msg()
        self._fresh = True
        self.pub.publish(out)

    def _keep_alive(self) -> None:
        command = self._command
        if command is not None and not self._fresh:
            self._publish(command)
        self._fresh = False

    def _request(self, command: str) -> None:
        if self._pending is not None and not self._pending.done():
            if time.monotonic() - self._pending_since < REQUEST_TIMEOUT_S:
                return  # one request in flight at a time; the corrector asks again next step
            # no answer: the request or its answer was lost; give it up, or no request goes out again
            self.cli.remove_pending_request(self._pending)
            self.get_logger().warning(
                f"arbiter/command: no answer to {self._pending_command!r} within {REQUEST_TIMEOUT_S:g} s; "
                f"sending {command!r}"
            )
        if not self.cli.service_is_ready():
            self.get_logger().warning("arbiter/command is not available", throttle_duration_sec=5.0)
            return
        self._pending = self.cli.call_async(ArbiterCommand.Request(command=command))
        self._pending_command, self._pending_since = command, time.monotonic()

        def done(f, command=command):
            r = f.result()
            if r is not None and not r.success:
                self.get_logger().info(f"{command}: {r.message}", throttle_duration_sec=2.0)

        self._pending.add_done_callback(done)


def main(args=None) -> int:
    return run_node(
        CorrectiveHumanNode,
        args,
        errors=(ValueError,),
        error_prefix="corrective_human: error",
        # one thread: a step takes < 1 ms (22 ms when a phase is planned), so the keep-alive never
        # waits long behind one; rclpy's multi-threaded executor busy-polled while a callback group
        # was taken (the spin thread at 56 % of a core on 2 cores), and starved its own keep-alive:
        # the arbiter saw the human silent for 0.5-1.2 s, several times per run
        executor=SingleThreadedExecutor,
    )


if __name__ == "__main__":
    raise SystemExit(main())
