"""The policy node as a real process, driving an emulated arm (another process) over loopback DDS."""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from .conftest import ACT_SMALL

pytestmark = pytest.mark.ros

rclpy = pytest.importorskip("rclpy")

from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data  # noqa: E402
from sensor_msgs.msg import Image, JointState  # noqa: E402
from std_msgs.msg import Float64MultiArray  # noqa: E402
from trajectory_msgs.msg import JointTrajectory  # noqa: E402

from lerobot_core.ros.testing import MessageCollector, RosProcess, wait_until  # noqa: E402
from lerobot_msgs.action import RunPolicy  # noqa: E402
from lerobot_msgs.msg import ActionChunk, PolicyStatus  # noqa: E402
from lerobot_msgs.srv import LoadPolicy  # noqa: E402

from .emulated_robot import camera_image  # noqa: E402

ROBOT = Path(__file__).resolve().parent / "emulated_robot.py"
MAX_STEP = 0.05
STATUS_QOS = QoSProfile(
    depth=50, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)
SO101_LIMIT = 3.2  # every SO-101 joint limit lies within +-pi (lerobot_core.robots)


class EmulatedRobot:
    def __init__(self, *args):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            [sys.executable, str(ROBOT), *map(str, args)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def __enter__(self):
        return self

    def stop_camera(self):
        """From now on no more images (the robot's camera fails)."""
        self.proc.send_signal(signal.SIGUSR1)

    def __exit__(self, *exc):
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def policy_params(**kw):
    base = {
        "policy_path": str(ACT_SMALL),
        "autostart": True,
        "fps": 30.0,
        "max_step_rad": MAX_STEP,
        "max_observation_age_s": 0.3,
        "torch_threads": 1,
    }
    base.update(kw)
    return base


def positions(msgs, kind):
    if kind is Float64MultiArray:
        return np.array([m.data for m in msgs])
    if kind is JointTrajectory:
        return np.array([m.points[0].positions for m in msgs])
    return np.array([m.position for m in msgs])


class Silence:
    """Polled by wait_until: true once `collector` has had no new message for `seconds`."""

    def __init__(self, collector: MessageCollector, seconds: float):
        self.collector, self.seconds = collector, seconds
        self.count, self.since = len(collector.messages), time.monotonic()

    def __call__(self) -> bool:
        n, now = len(self.collector.messages), time.monotonic()
        if n != self.count:
            self.count, self.since = n, now
        return now - self.since >= self.seconds


def test_drives_emulated_arm_and_holds_on_stale_camera(ros_node):
    cmds = MessageCollector(ros_node, JointState, "joint_commands")
    chunks = MessageCollector(ros_node, ActionChunk, "policy/action_chunk")
    status = MessageCollector(ros_node, PolicyStatus, "policy/status", qos=STATUS_QOS)
    states = MessageCollector(ros_node, JointState, "joint_states")
    images = MessageCollector(ros_node, Image, "cameras/front/image_raw", qos=qos_profile_sensor_data)
    with (
        EmulatedRobot() as robot,
        RosProcess("lerobot_policy_node", "policy", parameters=policy_params()) as node,
    ):
        got = chunks.wait(4, timeout=30)
        assert all(len(c.trajectory.points) == 10 for c in got)
        assert list(got[0].trajectory.joint_names) == [
            "shoulder_pan",
            "shoulder_lift",
            "elbow_flex",
            "wrist_flex",
            "wrist_roll",
            "gripper",
        ]
        assert all(c.inference_latency_s > 0 for c in got)
        assert wait_until(lambda: any(s.state == PolicyStatus.STATE_RUNNING for s in status.messages), 10)

        # the camera stops once the policy has moved the arm: not at a fixed time, which a slow start on a
        # loaded machine could pass before the first chunk, nor after a fixed number of commands, which a
        # loaded machine can send before the arm has gone far. Then the node must notice and hold.
        def arm_travel() -> float:
            js = positions(list(states.messages), JointState)
            return float(np.abs(js[-1] - js[0]).max()) if len(js) > 1 else 0.0

        assert wait_until(lambda: arm_travel() > 0.05, 60), f"the arm moved {arm_travel():.3f} rad in 60 s"
        robot.stop_camera()
        assert wait_until(
            lambda: any(
                s.state == PolicyStatus.STATE_HOLDING and "images.front: stale" in s.message
                for s in status.messages
            ),
            20,
        ), [(s.state, s.message) for s in status.messages][-5:]
        # a loaded machine can also pause the camera past max age for a moment before it stops for
        # good: the held commands are counted from when it has been silent for a second
        assert wait_until(Silence(images, 1.0), 20), f"{len(images.messages)} images"
        n_stale = len(cmds.messages)
        assert wait_until(lambda: len(cmds.messages) >= n_stale + 10, 5)
        out = node.output()
    p = positions(cmds.messages, JointState)
    assert np.all(np.isfinite(p)) and np.all(np.abs(p) <= SO101_LIMIT)
    assert np.abs(np.diff(p, axis=0)).max() <= MAX_STEP + 1e-9
    # while stale, the last command is held: identical positions
    tail = p[n_stale + 2 :]
    assert len(tail) >= 5 and np.all(tail == tail[0])
    # the arm moved under the policy's commands
    js = positions(states.messages, JointState)
    assert np.abs(js[-1] - js[0]).max() > 0.05, out


def test_nan_policy_output_is_never_commanded(ros_node, tmp_path):
    """A diverged checkpoint (inf in the action head's bias: allowed in weights, where masks use it, but
    every action comes out inf or NaN): the node holds with the reason, and nothing non-finite reaches
    the robot or the chunk topic. (NaN in weights is refused at load: test_non_finite.py.)"""
    from safetensors.torch import load_file, save_file

    ckpt = tmp_path / "nan_policy"
    shutil.copytree(ACT_SMALL, ckpt)
    state = load_file(ckpt / "model.safetensors")
    state["model.action_head.bias"][2] = float("inf")
    state["model.action_head.bias"][1] = float("-inf")
    save_file(state, ckpt / "model.safetensors")
    cmds = MessageCollector(ros_node, Float64MultiArray, "forward_position_controller/commands")
    status = MessageCollector(ros_node, PolicyStatus, "policy/status", qos=STATUS_QOS)
    chunks = MessageCollector(ros_node, ActionChunk, "policy/action_chunk")
    params = policy_params(policy_path=str(ckpt), command_interface="forward_position")
    with EmulatedRobot(), RosProcess("lerobot_policy_node", "policy", parameters=params) as node:
        assert wait_until(lambda: any("non-finite" in s.message for s in status.messages), 60), node.output()
        cmds.wait(20, timeout=20)
    assert all(np.isfinite(pt.positions).all() for c in chunks.messages for pt in c.trajectory.points)
    p = positions(cmds.messages, Float64MultiArray)
    assert np.all(np.isfinite(p)), "a NaN reached the robot"
    np.testing.assert_array_equal(p, np.zeros_like(p))  # held at the start position (emulated arm at 0)


def test_load_policy_service_and_run_action(ros_node, tmp_path):
    from lifecycle_msgs.msg import Transition
    from lifecycle_msgs.srv import ChangeState
    from rclpy.action import ActionClient

    traj = MessageCollector(ros_node, JointTrajectory, "joint_trajectory_controller/joint_trajectory")
    status = MessageCollector(ros_node, PolicyStatus, "policy/status", qos=STATUS_QOS)
    params = policy_params(
        policy_path=str(tmp_path / "missing"),
        autostart=True,
        run_on_activate=False,
        command_interface="joint_trajectory",
    )
    load = ros_node.create_client(LoadPolicy, "policy/load_policy")
    change = ros_node.create_client(ChangeState, "policy/change_state")
    run = ActionClient(ros_node, RunPolicy, "policy/run")

    def call(client, req, timeout=20):
        assert client.wait_for_service(timeout_sec=timeout)
        fut = client.call_async(req)
        assert wait_until(fut.done, timeout)
        return fut.result()

    with EmulatedRobot(), RosProcess("lerobot_policy_node", "policy", parameters=params) as node:
        # configure fails with a missing checkpoint, reported on the status topic
        assert wait_until(lambda: any(s.state == PolicyStatus.STATE_ERROR for s in status.messages), 20)
        err = [s for s in status.messages if s.state == PolicyStatus.STATE_ERROR][-1]
        assert "missing" in err.message and "does not exist" in err.message
        # a corrupt checkpoint is refused by the service, naming the file
        bad = tmp_path / "bad"
        shutil.copytree(ACT_SMALL, bad)
        (bad / "model.safetensors").write_bytes(b"junk")
        res = call(load, LoadPolicy.Request(policy_path=str(bad)))
        assert not res.success and "model.safetensors" in res.message
        res = call(load, LoadPolicy.Request(policy_path=str(ACT_SMALL)))
        assert res.success, res.message
        assert (res.policy_type, res.chunk_size, res.n_action_steps) == ("act", 10, 5)
        for tid in (Transition.TRANSITION_CONFIGURE, Transition.TRANSITION_ACTIVATE):
            assert call(change, ChangeState.Request(transition=Transition(id=tid))).success
        assert run.wait_for_server(timeout_sec=10)
        feedback = []
        goal_fut = run.send_goal_async(
            RunPolicy.Goal(task="pick the cube", max_steps=20),
            feedback_callback=lambda f: feedback.append(f.feedback),
        )
        assert wait_until(goal_fut.done, 10) and goal_fut.result().accepted
        res_fut = goal_fut.result().get_result_async()
        assert wait_until(res_fut.done, 60), node.output()
        result = res_fut.result().result
        n_after = len(traj.messages)
        assert wait_until(lambda: False, 0.5) is False
        assert len(traj.messages) <= n_after + 1  # after the run: hold, no more policy commands
    assert result.result_code == RunPolicy.Result.RESULT_DONE, result.message
    assert result.steps >= 20 and result.chunks >= 1 and result.mean_inference_latency_s > 0
    assert feedback and max(f.steps for f in feedback) <= result.steps
    assert any(s.task == "pick the cube" for s in status.messages)
    p = np.array([m.points[0].positions for m in traj.messages])
    assert np.all(np.isfinite(p)) and np.abs(np.diff(p, axis=0)).max() <= MAX_STEP + 1e-9


def _first_chunk_offline(images: list[np.ndarray]) -> list[np.ndarray]:
    """ACT_SMALL's chunk for the emulated arm at rest (joints 0) seeing each of `images`."""
    from lerobot_policy_node.observation import rgb_to_chw_float
    from lerobot_runtime import load_policy

    policy = load_policy(str(ACT_SMALL))
    shape = policy.config.image_features["observation.images.front"]
    out = []
    for img in images:
        batch = {
            "observation.state": np.zeros((1, 1, 6), np.float32),
            "observation.images.front": rgb_to_chw_float(img, shape)[None, None],
        }
        policy.reset()
        out.append(np.asarray(policy.predict_action_chunk(batch), dtype=np.float64)[0])
    return out


# the node's commands go here, which the emulated arm does not hear: it stays at rest, so every chunk
# is the policy's output for the at-rest picture (under load the collector may join after the first)
UNHEARD = {"joint_commands": "not_the_arm/joint_commands"}


def assert_chunks_are_one_of(chunks: list, expected: list[np.ndarray]) -> None:
    for chunk in chunks:
        served = np.array([p.positions for p in chunk.trajectory.points])
        errors = [float(np.abs(served - e).max()) for e in expected]
        assert min(errors) <= 1e-5, errors


@pytest.mark.parametrize("roundtrip", [False, True])
def test_image_codec_roundtrip_serves_what_the_dataset_video_holds(ros_node, roundtrip):
    """image_codec_roundtrip:=true: the policy sees each camera frame through the recorder's codec and
    back (keyframe or predicted frame), false: the raw frame. The arm stays at rest (UNHEARD), so every
    chunk is the policy's output for exactly one of those pictures."""
    from lerobot_dataset.roundtrip import CodecRoundTrip

    at_rest = camera_image(np.zeros(6))  # emulated_robot's camera with every joint at 0
    stream = CodecRoundTrip()
    keyframe, predicted = stream(at_rest), stream(at_rest)
    raw, via_key, via_predicted = _first_chunk_offline([at_rest, keyframe, predicted])
    assert np.abs(raw - via_key).max() > 1e-3 and np.abs(raw - via_predicted).max() > 1e-3

    chunks = MessageCollector(ros_node, ActionChunk, "policy/action_chunk")
    params = policy_params(image_codec_roundtrip=roundtrip)
    with (
        EmulatedRobot(),
        RosProcess("lerobot_policy_node", "policy", parameters=params, remappings=UNHEARD),
    ):
        got = chunks.wait(3, timeout=30)
    assert_chunks_are_one_of(got[:3], [via_key, via_predicted] if roundtrip else [raw])


def test_image_transport_compressed_reads_the_jpeg_stream(ros_node):
    """image_transport:=compressed (deploy_remote_gpu's default): the node subscribes to
    cameras/front/image_raw/compressed and infers from the decoded JPEG, not from image_raw."""
    from types import SimpleNamespace

    from lerobot_core.image_conversion import compressed_msg_to_rgb, encode_compressed

    at_rest = camera_image(np.zeros(6))  # emulated_robot's camera with every joint at 0
    fmt, data = encode_compressed(at_rest, "jpeg", 20)
    jpeg = compressed_msg_to_rgb(SimpleNamespace(format=fmt, data=data))
    raw, via_jpeg = _first_chunk_offline([at_rest, jpeg])
    assert np.abs(raw - via_jpeg).max() > 1e-3

    chunks = MessageCollector(ros_node, ActionChunk, "policy/action_chunk")
    params = policy_params(image_transport="compressed")
    with (
        EmulatedRobot("--jpeg-quality", 20),
        RosProcess("lerobot_policy_node", "policy", parameters=params, remappings=UNHEARD),
    ):
        got = chunks.wait(3, timeout=30)
        subs = [
            topic
            for topic, _ in ros_node.get_subscriber_names_and_types_by_node("policy", "/")
            if "cameras" in topic
        ]
    assert subs == ["/cameras/front/image_raw/compressed"], subs
    assert_chunks_are_one_of(got[:3], [via_jpeg])
