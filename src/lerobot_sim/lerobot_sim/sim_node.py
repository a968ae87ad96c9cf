"""``sim``: the simulated SO-101 (MuJoCo) on the real robot's topics.

Same topics and command types as the real follower driver (joint_states, cameras/<name>/image_raw and
camera_info; joint_commands, forward_position_controller/commands, joint_trajectory_controller/
joint_trajectory), the same safety rules (clamp to joint limits, bounded change per control step, hold
on stale input, hold on deactivate/shutdown), plus sim/reset, sim/episode_info, sim/cube_pose and, in
lockstep mode, /clock.
"""

from __future__ import annotations

import time

import numpy as np
from geometry_msgs.msg import PoseStamped
from sensor_msgs.msg import CameraInfo, JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory

from lerobot_core.command import parse_command
from lerobot_core.safety import CommandError, SafetyLimits
from lerobot_core.time import stamp_to_ns
from lerobot_sim.bridge_base import QOS_STATE, SimBridgeNode, run_node
from lerobot_sim.bridge_publish import has_subscribers
from lerobot_sim.command import default_max_joint_velocity, so101_safety
from lerobot_sim.registration import SO101_CUBE_ID
from lerobot_sim.session import StepResult
from lerobot_sim.so101_model import JOINT_NAMES, to_lerobot_units

_VELOCITY = default_max_joint_velocity(JOINT_NAMES)  # the real servos' limits bound the change per step


class SimNode(SimBridgeNode):
    default_env_id = SO101_CUBE_ID
    default_state_names = JOINT_NAMES

    def __init__(self, **kwargs):
        super().__init__("sim", **kwargs)
        self._safety: SafetyLimits | None = None

    def _declare_extra(self) -> None:
        declare = self._declare
        declare("cameras", ["front", "wrist"], "rendered cameras (front, wrist); [''] for none")
        declare("image_width", 320, "rendered image width [px]")
        declare("image_height", 240, "rendered image height [px]")
        declare("max_joint_velocity", _VELOCITY, "bound on target change [rad/s] (x control period per step)")

    def _env_kwargs(self, cfg) -> dict:
        cams = [c for c in self.get_parameter("cameras").value if c]
        kwargs = dict(cfg.env_kwargs)
        if cfg.env_id == SO101_CUBE_ID:
            kwargs.setdefault("cameras", cams)
            kwargs.setdefault("obs_type", "pixels_agent_pos" if cams else "state")
            kwargs.setdefault("image_width", int(self.get_parameter("image_width").value))
            kwargs.setdefault("image_height", int(self.get_parameter("image_height").value))
            if cfg.fps:
                kwargs.setdefault("fps", int(round(cfg.fps)))
        self._safety = so101_safety(cfg.fps or 30.0, float(self.get_parameter("max_joint_velocity").value))
        return kwargs

    def _create_extra_publishers(self) -> None:
        self._pubs["cube_pose"] = self._observation_publisher(PoseStamped, "sim/cube_pose", QOS_STATE)
        # like the driver's publish_lerobot_units: positions in LeRobot's normalised units
        self._pubs["joint_states_lerobot"] = self._observation_publisher(
            JointState, "joint_states_lerobot", QOS_STATE
        )

    def _setup_commands(self) -> None:
        self._command_subscription(JointState, "joint_commands", self._on_joint_commands)
        self._command_subscription(Float64MultiArray, "forward_position_controller/commands", self._apply)
        self._command_subscription(
            JointTrajectory, "joint_trajectory_controller/joint_trajectory", self._apply
        )

    # ------------------------------------------------------------------ commands
    def _current_positions(self) -> np.ndarray:
        return self.session.env.unwrapped.joint_positions()

    def _initial_target(self) -> np.ndarray:
        return self._current_positions()

    def _hold_current(self) -> None:
        if self.session is not None and self.session.episode.episode_index >= 0:
            self._target = self._current_positions()
            self.session.env.unwrapped.data.ctrl[:6] = self._target  # actuators are in joint order

    def _apply(self, msg) -> None:
        if not self._active or self.session is None or self._target is None:
            return
        try:
            target = self._safety.apply(parse_command(msg, JOINT_NAMES).onto(self._target), self._target)
        except CommandError as exc:
            self.get_logger().warn(f"command rejected: {exc}", throttle_duration_sec=1.0)
            return
        self._target = target
        self._last_command_time = time.monotonic()
        if self.cfg.mode == "lockstep":
            self._lockstep_step(self._target)

    def _on_joint_commands(self, msg: JointState) -> None:
        stamp = stamp_to_ns(msg.header.stamp)
        # lockstep: a stamped command answers the observation of that stamp; one for an earlier tick (a
        # repeated answer to a republished observation) must not step the sim a second time
        lockstep = self.cfg is not None and self.cfg.mode == "lockstep" and self.session is not None
        if lockstep and stamp and stamp != self.session.sim_time_ns:
            return
        self._apply(msg)

    def _realtime_action(self) -> np.ndarray | None:
        if self._target is None:
            return None
        # Position targets persist: with stale input (no command for command_timeout_s) the arm holds
        # the last target, which is the driver's behaviour too.
        return self._target

    # ------------------------------------------------------------------ extra topics
    def _joint_state(self, result: StepResult, stamp) -> JointState:
        env = self.session.env.unwrapped
        msg = JointState()
        msg.header.stamp = stamp
        msg.header.frame_id = self.cfg.frame_id
        msg.name = list(JOINT_NAMES)
        msg.position = env.joint_positions().tolist()
        msg.velocity = env.joint_velocities().tolist()
        msg.effort = env.joint_efforts().tolist()
        return msg

    def _publish_extra(self, result: StepResult, stamp) -> None:
        env = self.session.env.unwrapped
        if has_subscribers(self._pubs["joint_states_lerobot"]):
            lr = JointState()
            lr.header.stamp = stamp
            lr.name = list(JOINT_NAMES)
            lr.position = to_lerobot_units(env.joint_positions())
            self._pubs["joint_states_lerobot"].publish(lr)
        if has_subscribers(self._pubs["cube_pose"]):
            pose = env.cube_pose()
            msg = PoseStamped()
            msg.header.stamp = stamp
            msg.header.frame_id = "world"
            msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = (float(v) for v in pose[:3])
            o = msg.pose.orientation
            o.w, o.x, o.y, o.z = (float(v) for v in pose[3:7])
            self._pubs["cube_pose"].publish(msg)

    def _camera_info(self, name: str, height: int, width: int) -> CameraInfo:
        model = self.session.env.unwrapped.model
        fovy = np.deg2rad(float(model.cam(name).fovy[0]))
        f = 0.5 * height / np.tan(0.5 * fovy)
        cx, cy = (width - 1) / 2.0, (height - 1) / 2.0
        info = CameraInfo(height=height, width=width, distortion_model="plumb_bob")
        info.d = [0.0] * 5
        info.k = [f, 0.0, cx, 0.0, f, cy, 0.0, 0.0, 1.0]
        info.r = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
        info.p = [f, 0.0, cx, 0.0, 0.0, f, cy, 0.0, 0.0, 0.0, 1.0, 0.0]
        return info


def main(args=None) -> int:
    return run_node(SimNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
