"""``gym_bridge``: any registered gymnasium environment on ROS 2 topics, mapped as LeRobot maps it.

pixels (dict or single image) -> cameras/<name>/image_raw (observation.images.<name> for the recorder),
agent_pos -> joint_states (names from state_names) and observation/state, environment_state ->
observation/environment_state, and stamped on sim/environment_state (a JointState named state_0...: the
lockstep evaluator matches it to its step by stamp, as every other observation topic). Actions arrive as Float64MultiArray on forward_position_controller/commands
(the same command topic the robots take), clipped to the env's action space.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray

from lerobot_sim.bridge_base import QOS_STATE, SimBridgeNode, run_node
from lerobot_sim.bridge_publish import has_subscribers

ENV_STATE_TOPIC = "sim/environment_state"


class GymBridgeNode(SimBridgeNode):
    default_env_id = "gym_pusht/PushT-v0"

    def __init__(self, **kwargs):
        super().__init__("gym_bridge", **kwargs)
        self._last_action: np.ndarray | None = None

    def _create_extra_publishers(self) -> None:
        space = self.session.env.observation_space
        if isinstance(space, spaces.Dict) and "environment_state" in space.spaces:
            self._pubs["env_state_stamped"] = self._observation_publisher(
                JointState, ENV_STATE_TOPIC, QOS_STATE
            )

    def _publish_extra(self, result, stamp) -> None:
        pub = self._pubs.get("env_state_stamped")
        obs = result.observation
        if (
            pub is None
            or not isinstance(obs, dict)
            or "environment_state" not in obs
            or not has_subscribers(pub)
        ):
            return
        values = np.asarray(obs["environment_state"], dtype=np.float64).ravel()
        msg = JointState()
        msg.header.stamp = stamp
        msg.header.frame_id = self.cfg.frame_id
        msg.name = [f"state_{i}" for i in range(values.size)]
        msg.position = values.tolist()
        pub.publish(msg)

    def _setup_commands(self) -> None:
        self._command_subscription(
            Float64MultiArray, "forward_position_controller/commands", self._on_command
        )

    def _on_command(self, msg: Float64MultiArray) -> None:
        if not self._active or self.session is None:
            return
        space = self.session.env.action_space
        action = np.asarray(msg.data, dtype=np.float64)
        if isinstance(space, spaces.Box):
            if action.size != int(np.prod(space.shape)):
                self.get_logger().warn(
                    f"command has {action.size} values, {self.cfg.env_id} expects {space.shape}",
                    throttle_duration_sec=1.0,
                )
                return
            if not np.all(np.isfinite(action)):
                self.get_logger().warn(
                    "command contains non-finite values; ignored", throttle_duration_sec=1.0
                )
                return
            action = np.clip(action.reshape(space.shape), space.low, space.high).astype(space.dtype)
        elif isinstance(space, spaces.Discrete):
            action = int(action.ravel()[0])
        self._last_action = action
        self._target = action
        if self.cfg.mode == "lockstep":
            self._lockstep_step(action)

    def _realtime_action(self):
        # without a command yet, a generic env has no safe "hold" action: wait
        return self._last_action


def main(args=None) -> int:
    return run_node(GymBridgeNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
