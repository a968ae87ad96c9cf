"""What a sim bridge publishes: the observation on the robot's topics, episode info, diagnostics.

``ObservationPublishing`` is a part of :class:`lerobot_sim.bridge_base.SimBridgeNode` (its publishers,
``cfg``, ``session`` and counters are the node's).
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rosgraph_msgs.msg import Clock as ClockMsg
from sensor_msgs.msg import CameraInfo, CompressedImage, Image, JointState
from std_msgs.msg import Float64MultiArray

from lerobot_core.image_conversion import encode_compressed, fill_image_msg
from lerobot_core.ros import qos
from lerobot_core.time import ns_to_stamp
from lerobot_core.topics import camera_info_topic, camera_topic, compressed_camera_topic
from lerobot_msgs.msg import EpisodeInfo
from lerobot_sim.session import StepResult, camera_images


def has_subscribers(publisher) -> bool:
    """Whether a volatile topic has a matched subscriber (publishing to none would reach no one)."""
    return publisher.get_subscription_count() > 0


class ObservationPublishing:
    """The publishing half of a sim bridge node."""

    def _stamp_for(self, result: StepResult) -> Time:
        if self.cfg.mode == "lockstep":
            return ns_to_stamp(result.sim_time_ns, Time)
        return self.get_clock().now().to_msg()

    def _episode_msg(self, result: StepResult, stamp: Time | None = None) -> EpisodeInfo:
        ep = result.episode
        msg = EpisodeInfo()
        msg.header.stamp = stamp or self._stamp_for(result)
        msg.header.frame_id = self.cfg.frame_id
        msg.episode_index = ep.episode_index
        msg.seed = ep.seed
        msg.step = ep.step
        msg.reward = ep.reward
        msg.sum_reward = ep.sum_reward
        msg.max_reward = ep.max_reward if math.isfinite(ep.max_reward) else 0.0
        msg.is_success = ep.is_success
        msg.terminated = ep.terminated
        msg.truncated = ep.truncated
        return msg

    def _state_vector(self, obs: Any) -> np.ndarray | None:
        if isinstance(obs, dict):
            return None if "agent_pos" not in obs else np.asarray(obs["agent_pos"], dtype=np.float64).ravel()
        return np.asarray(obs, dtype=np.float64).ravel()

    def _joint_state(self, result: StepResult, stamp: Time) -> JointState | None:
        state = self._state_vector(result.observation)
        if state is None:
            return None
        names = self.cfg.state_names or tuple(f"state_{i}" for i in range(state.size))
        msg = JointState()
        msg.header.stamp = stamp
        msg.header.frame_id = self.cfg.frame_id
        msg.name = list(names[: state.size])
        msg.position = state.tolist()
        return msg

    def _publish(self, result: StepResult) -> None:
        self._last_result = result
        self._last_publish = time.monotonic()
        stamp = self._stamp_for(result)
        if "clock" in self._pubs:  # always: latched, a late subscriber must get the current time
            self._pubs["clock"].publish(ClockMsg(clock=stamp))
        obs = result.observation
        # A volatile topic nobody subscribes to is not built at all: a message published without a matched
        # reader reaches no one, so skipping it changes nothing a subscriber can see, and saves the
        # message construction and conversion on each lockstep step (docs/sim.md, section 7).
        for cam, img in camera_images(obs, self.cfg.single_camera_name).items():
            if cam not in self._cam_pubs:
                self._cam_pubs[cam] = (
                    self._observation_publisher(Image, camera_topic(cam), qos.IMAGES),
                    self._observation_publisher(CameraInfo, camera_info_topic(cam), qos.IMAGES),
                    self._observation_publisher(CompressedImage, compressed_camera_topic(cam), qos.IMAGES),
                )
                self._camera_infos[cam] = self._camera_info(cam, int(img.shape[0]), int(img.shape[1]))
            image_pub, info_pub, jpeg_pub = self._cam_pubs[cam]
            frame_id = f"{cam}_optical_frame"
            if has_subscribers(image_pub):
                msg = Image()
                msg.header.stamp = stamp
                msg.header.frame_id = frame_id
                fill_image_msg(msg, np.asarray(img, dtype=np.uint8), "rgb8")
                image_pub.publish(msg)
            if has_subscribers(jpeg_pub):  # as a camera node with publish_compressed (image_transport's name)
                comp = CompressedImage()
                comp.header.stamp = stamp
                comp.header.frame_id = frame_id
                comp.format, comp.data = encode_compressed(
                    np.asarray(img, dtype=np.uint8), "jpeg", self.cfg.jpeg_quality
                )
                jpeg_pub.publish(comp)
            if has_subscribers(info_pub):
                info = self._camera_infos[cam]
                info.header.stamp = stamp
                info.header.frame_id = frame_id
                info_pub.publish(info)
        if has_subscribers(self._pubs["state"]):
            state = self._state_vector(obs)
            if state is not None:
                self._pubs["state"].publish(Float64MultiArray(data=state.tolist()))
        if isinstance(obs, dict) and "environment_state" in obs and has_subscribers(self._pubs["env_state"]):
            env_state = np.asarray(obs["environment_state"], dtype=np.float64).ravel()
            self._pubs["env_state"].publish(Float64MultiArray(data=env_state.tolist()))
        self._publish_extra(result, stamp)
        if has_subscribers(self._pubs["joint_states"]):
            js = self._joint_state(result, stamp)
            if js is not None:
                self._pubs["joint_states"].publish(js)
        # last: a lockstep client waiting for episode_info of step k finds the rest already sent
        self._pubs["episode_info"].publish(self._episode_msg(result, stamp))

    def _publish_diagnostics(self) -> None:
        if self.session is None:
            return
        elapsed = max(time.monotonic() - self._t_start, 1e-9)
        ep = self.session.episode
        status = DiagnosticStatus(
            level=DiagnosticStatus.OK,
            name=f"{self.get_name()}: simulation",
            message="active" if self._active else "inactive",
            hardware_id=self.cfg.env_id,
            values=[
                KeyValue(key="mode", value=self.cfg.mode),
                KeyValue(key="episode_index", value=str(ep.episode_index)),
                KeyValue(key="step", value=str(ep.step)),
                KeyValue(key="steps_per_s", value=f"{self._steps_done / elapsed:.1f}"),
                KeyValue(key="late_periods", value=str(self._late_periods)),
                KeyValue(
                    key="waiting_for",
                    value=",".join(self._waiting_for()) if self.cfg.required_consumers else "",
                ),
            ],
        )
        if self._late_periods:
            status.level = DiagnosticStatus.WARN
        msg = DiagnosticArray(status=[status])
        msg.header.stamp = self.get_clock().now().to_msg()
        self._pubs["diagnostics"].publish(msg)
