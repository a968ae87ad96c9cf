"""The policy node's side of remote inference over DDS (the rules are in the ROS-free `remote` module).

inference: remote (robot host): chunks from `remote_chunk_topic` go through a `ChunkGate` into the
controller's queue (`PolicyController.submit_remote`); a refused one is logged and named in the hold status.
inference: serve (inference host): each inferred chunk is published there with this host's id. The
link's delay and loss can be injected here, at the application level (the kernel's netem is not
available everywhere): half the delay on the observations read (the observation is taken as of
``now - delay/2``), half on the chunks published; loss drops observation messages and chunks.
"""

from __future__ import annotations

import os
import random
import socket
import threading

import numpy as np
from builtin_interfaces.msg import Duration, Time
from trajectory_msgs.msg import JointTrajectoryPoint

from lerobot_core.ros import qos
from lerobot_core.ros.node import publish_unless_shut_down
from lerobot_core.time import NS_PER_S, ns_to_stamp, seconds_to_duration, stamp_to_ns
from lerobot_msgs.msg import ActionChunk

from .action_path import ChunkInfo
from .remote import ChunkGate, ChunkRefusedError, RemoteConfig


def chunk_message(
    info: ChunkInfo, policy_type: str, names: list[str], fps: float, source: str = ""
) -> ActionChunk:
    msg = ActionChunk(
        policy_type=policy_type,
        chunk_index=info.index,
        inference_latency_s=info.latency_s,
        actions_skipped=info.skipped,
        source_id=source,
    )
    msg.header.stamp = ns_to_stamp(info.obs_stamp_ns, Time)  # the robot's clock: its observation's stamp
    msg.trajectory.joint_names = list(names)
    msg.trajectory.points = [
        JointTrajectoryPoint(
            positions=[float(v) for v in row], time_from_start=seconds_to_duration(k / fps, Duration)
        )
        for k, row in enumerate(info.chunk)
    ]
    return msg


class RemoteLink:
    """Created by the policy node once its checkpoint is loaded, for inference remote or serve."""

    def __init__(self, node, cfg, action_names: list[str]):
        self.node, self.cfg = node, cfg
        self.delay_s = cfg.link_delay_ms / 1000.0
        self.loss = cfg.link_loss_percent / 100.0
        self.source = f"{socket.gethostname()}:{os.getpid()}"
        self.gate = ChunkGate(
            action_names, RemoteConfig(cfg.max_chunk_age_s, cfg.source_timeout_s), cfg.remote_chunk_topic
        )
        self._sub = self._pub = None
        self._timers: set[threading.Timer] = set()

    # ------------------------------------------------------------------ robot host
    def subscribe(self, callback_group=None) -> None:
        if self._sub is None:
            # re-made by a re-configure or policy/load_policy in an executor worker: no QoS event handlers
            self._sub = qos.subscription_without_events(
                self.node,
                ActionChunk,
                self.cfg.remote_chunk_topic,
                self._on_chunk,
                qos.RELIABLE,
                callback_group=callback_group,
            )

    def starved_reason(self, now_ns: int) -> str:
        return self.gate.hold_reason(now_ns)

    def _on_chunk(self, msg: ActionChunk) -> None:
        c = self.node.controller
        if c is None or not c.running:
            return
        names = list(msg.trajectory.joint_names)
        rows = [list(p.positions) for p in msg.trajectory.points]
        if any(len(r) != len(names) for r in rows):
            chunk = np.zeros((len(rows), 0))  # ragged rows: refused by the gate as another shape
        else:
            chunk = np.asarray(rows, dtype=np.float64).reshape(len(rows), len(names))
        now = self.node.get_clock().now().nanoseconds
        try:
            age = self.gate.check(
                msg.source_id, names, chunk, stamp_to_ns(msg.header.stamp), now, msg.inference_latency_s
            )
        except ChunkRefusedError as exc:
            self.node.get_logger().warning(str(exc), throttle_duration_sec=2.0)
            return
        c.stats.last_inference_latency_s = float(msg.inference_latency_s)
        c.submit_remote(chunk, age)

    # ------------------------------------------------------------------ inference host
    def now_ns(self) -> int:
        """The observation time used on the inference host: `now - delay/2` (the injected receive delay)."""
        return self.node.get_clock().now().nanoseconds - round(self.delay_s / 2 * NS_PER_S)

    def drop(self) -> bool:
        """True for an incoming observation message the injected loss drops."""
        return self.loss > 0 and random.random() < self.loss

    def publish(self, info: ChunkInfo, policy_type: str, names: list[str], fps: float) -> None:
        if self._pub is None:
            self._pub = self.node.create_publisher(ActionChunk, self.cfg.remote_chunk_topic, qos.RELIABLE)
        if self.drop():
            return
        msg = chunk_message(info, policy_type, names, fps, self.source)
        if self.delay_s <= 0:
            publish_unless_shut_down(self._pub, msg, self.node.context)
            return
        timer = threading.Timer(self.delay_s / 2, self._publish_later, (msg,))
        timer.daemon = True
        self._timers.add(timer)
        timer.start()

    def _publish_later(self, msg: ActionChunk) -> None:
        self._timers.discard(threading.current_thread())
        pub = self._pub
        if pub is not None:  # None: closed meanwhile (another checkpoint loaded)
            publish_unless_shut_down(pub, msg, self.node.context)

    def close(self) -> None:
        for t in list(self._timers):
            t.cancel()
        if self._sub is not None:
            self.node.destroy_subscription(self._sub)
            self._sub = None
        if self._pub is not None:
            self.node.destroy_publisher(self._pub)
            self._pub = None
