"""The recorder's hot path: a camera frame from the serialized message to the video encoder, not copied.

The recorder node subscribes raw (serialized bytes, copied once by rclpy out of its own buffer), its
worker decodes with ``lerobot_core.ros.serialized.decode_message`` and hands the frame to the encoder through the
contract and the dataset writer. Here the real worker (``LiveRecorder``) records rgb8 images that
rclpy serialized, and the frames ``CameraEncoder.put`` receives are checked to be the very bytes of
those messages (``np.shares_memory``), with the same pixels.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

pytest.importorskip("rclpy")

from rclpy.serialization import serialize_message
from sensor_msgs.msg import Image, JointState

from lerobot_core.contract import Contract
from lerobot_core.image_conversion import fill_image_msg
from lerobot_core.ros.device import message_class
from lerobot_core.ros.serialized import decode_message
from lerobot_dataset import DatasetReader, video
from lerobot_recorder.episode_control import EpisodeConfig
from lerobot_recorder.live_recorder import LiveConfig, LiveRecorder
from lerobot_recorder.live_types import RESULT_SAVED

JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
CAMERA = "/cameras/front/image_raw"
CONTRACT = {
    "fps": 10,
    "robot_type": "so101_follower",
    "task": "hot path",
    "defaults": {"max_staleness": 0.25},
    "features": {
        "observation.state": {"topic": "/joint_states", "joints": JOINTS, "policy": "interpolate"},
        "observation.images.front": {"topic": CAMERA, "policy": "nearest", "tolerance": 0.02},
    },
}


def _stamp(msg, t_ns: int):
    msg.header.stamp.sec, msg.header.stamp.nanosec = t_ns // 10**9, t_ns % 10**9
    return msg


def _joints(t_ns: int, value: float) -> bytes:
    return serialize_message(_stamp(JointState(name=JOINTS, position=[value] * 6), t_ns))


def _image(t_ns: int, seq: int) -> bytes:
    pixels = np.random.default_rng(seq).integers(0, 256, (48, 64, 3), dtype=np.uint8)
    return serialize_message(_stamp(fill_image_msg(Image(), pixels, "rgb8"), t_ns))


def test_a_camera_frame_reaches_the_encoder_as_the_bytes_of_its_message(tmp_path, monkeypatch):
    handed: list[np.ndarray] = []
    put = video.CameraEncoder.put

    def recording_put(self, frame, block):  # the real put, after noting what it was given
        handed.append(frame)
        return put(self, frame, block)

    monkeypatch.setattr(video.CameraEncoder, "put", recording_put)
    contract = Contract.from_dict(CONTRACT)
    msgtypes = {t: s.msgtype for t, s in contract.streams.items()}
    classes = {t: message_class(m) for t, m in msgtypes.items()}
    cfg = LiveConfig(
        dataset_root=str(tmp_path / "ds"),
        mode="dataset",
        vcodec="libx264",
        episode=EpisodeConfig(episode_time_s=1000.0, reset_time_s=0.0, num_episodes=1, task=""),
    )
    now = [5 * 10**9]
    rec = LiveRecorder(
        cfg,
        contract,
        decode=lambda t, data: decode_message(data, msgtypes[t], classes[t]),
        clock=lambda: now[0],
    )
    sent: list[bytes] = []  # every image message, kept alive to compare against

    def feed(t0: int, seconds: float) -> int:
        for k in range(int(seconds * 100)):
            now[0] = t = t0 + k * 10_000_000
            rec.ingest("/joint_states", _joints(t, k * 0.001), t)
            if k % 10 == 0:
                sent.append(_image(t, len(sent)))
                rec.ingest(CAMERA, sent[-1], t)
        return t0 + int(seconds * 100) * 10_000_000

    rec.start()
    try:
        t = feed(now[0], 0.3)
        out = rec.request("start").result(10)
        t = feed(t, 1.0)
        time.sleep(0.2)
        fut = rec.outcome_future(out["seq"])
        rec.request("stop").result(30)
        outcome = fut.result(10)
        rec.request("finalize").result(30)
    finally:
        rec.close()
    assert outcome.result_code == RESULT_SAVED, outcome.message
    assert len(handed) == outcome.frames >= 9
    buffers = [np.frombuffer(b, np.uint8) for b in sent]
    for frame in handed:
        owners = [k for k, buf in enumerate(buffers) if np.shares_memory(frame, buf)]
        assert len(owners) == 1, "the frame handed to the encoder is a copy, not the message's bytes"
        expected = np.random.default_rng(owners[0]).integers(0, 256, (48, 64, 3), dtype=np.uint8)
        assert np.array_equal(frame, expected)
    assert DatasetReader(tmp_path / "ds").num_frames == outcome.frames
