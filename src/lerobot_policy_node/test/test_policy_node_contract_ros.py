"""contract:=PATH across processes: a normalized-units checkpoint deployed on the recorder's contract.

The test process plays the robot (constant joint states in radians and a constant camera image on the
contract's topics); the policy node runs in its own process. The chunk it infers must be the one the
runtime policy gives for the contract-converted observation (input conversion), and every joint command
must be a chunk row converted back to radians (output conversion). A radians contract against the same
checkpoint, trained on normalized data, fails to configure with an error naming the feature.
"""

import json
import os

import numpy as np
import pytest
import yaml

from .conftest import ACT_SMALL
from .test_deployment import JOINTS, TICK, write_calibration

pytestmark = pytest.mark.ros

rclpy = pytest.importorskip("rclpy")

from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data  # noqa: E402
from sensor_msgs.msg import CompressedImage, Image, JointState  # noqa: E402

from lerobot_core.contract import Contract  # noqa: E402
from lerobot_core.image_conversion import encode_compressed, fill_image_msg  # noqa: E402
from lerobot_core.robots import get_robot_spec  # noqa: E402
from lerobot_core.ros.testing import MessageCollector, RosProcess, wait_until  # noqa: E402
from lerobot_msgs.msg import ActionChunk, PolicyStatus  # noqa: E402
from lerobot_policy_node.action_path import ObservationHistory  # noqa: E402
from lerobot_policy_node.deployment import from_contract  # noqa: E402
from lerobot_policy_node.observation import ObservationBuilder, ObservationSpec  # noqa: E402
from lerobot_runtime import load_policy  # noqa: E402

STATE_TOPIC, IMAGE_TOPIC = "/follower/joint_states", "/cams/front/image_raw"
STATUS_QOS = QoSProfile(
    depth=50, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)
RAD = np.array([300, -200, 150, -400, 100, 250]) * TICK  # inside every SO-101 limit
RGB = (np.arange(48 * 64 * 3, dtype=np.uint32).reshape(48, 64, 3) * 7 % 251).astype(np.uint8)


def normalized_checkpoint(tmp_path):
    """The ACT fixture (files linked) trained, as its train_config.json says, on a LeRobot dataset."""
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    for f in ACT_SMALL.iterdir():
        os.symlink(f, ckpt / f.name)
    feats = {
        k: {"dtype": "float32", "shape": [6], "names": [f"{j}.pos" for j in JOINTS]}
        for k in ("observation.state", "action")
    }
    (tmp_path / "ds" / "meta").mkdir(parents=True)
    (tmp_path / "ds" / "meta" / "info.json").write_text(json.dumps({"features": feats}))
    (ckpt / "train_config.json").write_text(json.dumps({"dataset": {"root": str(tmp_path / "ds")}}))
    return ckpt


def contract_file(tmp_path, units, compressed=False):
    write_calibration(tmp_path / "so101.json")
    data = {
        "fps": 30,
        "robot_type": "so101_follower",
        "units": units,
        "calibration_file": "so101.json",
        "task": "pick",
        "features": {
            "observation.state": {"topic": STATE_TOPIC, "joints": JOINTS},
            "action": {"topic": "/leader/joint_states", "joints": JOINTS},
            "observation.images.front": {"topic": IMAGE_TOPIC}
            if not compressed
            else {"topic": IMAGE_TOPIC + "/compressed", "type": "sensor_msgs/msg/CompressedImage"},
        },
    }
    path = tmp_path / f"{units}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def play_robot(node, compressed=False):
    js_pub = node.create_publisher(JointState, STATE_TOPIC, 10)
    if compressed:  # png: lossless, so the policy sees RGB exactly
        img_pub = node.create_publisher(CompressedImage, IMAGE_TOPIC + "/compressed", qos_profile_sensor_data)
        fmt, data = encode_compressed(RGB, "png")
    else:
        img_pub = node.create_publisher(Image, IMAGE_TOPIC, qos_profile_sensor_data)

    def tick():
        stamp = node.get_clock().now().to_msg()
        js = JointState(name=JOINTS, position=RAD.tolist())
        js.header.stamp = stamp
        img = CompressedImage(format=fmt, data=data) if compressed else fill_image_msg(Image(), RGB)
        img.header.stamp = stamp
        js_pub.publish(js)
        img_pub.publish(img)

    return node.create_timer(1 / 50, tick)


def params(ckpt, contract, **kw):
    return {
        "policy_path": str(ckpt),
        "contract": str(contract),
        "autostart": True,
        "max_step_rad": 0.0,  # no per-step bound (HIL leaves it to the arbiter): every command is a converted action
        "torch_threads": 1,
        **kw,
    }


@pytest.mark.parametrize("compressed", [False, True], ids=["image", "compressed_png"])
def test_normalized_checkpoint_deploys_on_the_contract(ros_node, tmp_path, compressed):
    ckpt = normalized_checkpoint(tmp_path)
    contract = contract_file(tmp_path, "normalized", compressed)
    deployment = from_contract(Contract.load(contract))
    chunks = MessageCollector(ros_node, ActionChunk, "policy/action_chunk")
    cmds = MessageCollector(ros_node, JointState, "joint_commands")
    timer = play_robot(ros_node, compressed)
    with RosProcess("lerobot_policy_node", "policy", parameters=params(ckpt, contract)) as node:
        chunks.wait(2, timeout=60)
        assert wait_until(lambda: sum(not np.allclose(m.position, RAD) for m in cmds.messages) >= 5, 30)
        out = node.output()
    timer.cancel()
    assert "contract" in out and "in normalized" in out, out
    # input: the node's chunk is the runtime policy's for the contract-converted observation
    policy = load_policy(str(ckpt))
    spec = ObservationSpec(
        tuple(JOINTS), {"observation.images.front": (3, 48, 64)}, 30, 1.0,
        state_affine=(deployment.state.scale, deployment.state.offset),
    )  # fmt: skip
    builder = ObservationBuilder(spec)
    history = ObservationHistory(1, builder.to_policy_batch)
    history.push({"joints": RAD, "observation.images.front": RGB})
    expected = np.asarray(policy.predict_action_chunk(history.batch()))[0]
    got = np.array([p.positions for p in chunks.messages[0].trajectory.points])
    np.testing.assert_allclose(got, expected, atol=1e-5)
    assert list(chunks.messages[0].trajectory.joint_names) == JOINTS
    # output: each command is a chunk row in radians (clamped to the joint limits)
    spec_limits = get_robot_spec("so101_follower").limits
    lo = np.array([spec_limits[j].lower for j in JOINTS])
    hi = np.array([spec_limits[j].upper for j in JOINTS])
    rows = np.array([p.positions for c in chunks.messages for p in c.trajectory.points])
    allowed = np.clip(deployment.action.to_radians(rows), lo, hi)
    # before the first chunk the node holds the measured position
    moving = [np.array(m.position) for m in cmds.messages if not np.allclose(m.position, RAD, atol=1e-12)]
    assert all(list(m.name) == JOINTS for m in cmds.messages)
    assert len(moving) >= 5, f"{len(cmds.messages)} commands, {len(moving)} not the hold"
    for position in moving:
        assert np.abs(allowed - position).max(axis=1).min() < 1e-9, position
    # and it is not the identity: the same rows read as radians would be other commands
    assert np.abs(np.clip(rows, lo, hi)[:, :5] - allowed[:, :5]).max() > 0.01


def test_radians_contract_against_a_normalized_checkpoint_fails_naming_the_feature(ros_node, tmp_path):
    ckpt, contract = normalized_checkpoint(tmp_path), contract_file(tmp_path, "radians")
    status = MessageCollector(ros_node, PolicyStatus, "policy/status", qos=STATUS_QOS)
    with RosProcess("lerobot_policy_node", "policy", parameters=params(ckpt, contract)) as node:
        assert wait_until(lambda: any(s.state == PolicyStatus.STATE_ERROR for s in status.messages), 30), (
            node.output()
        )
    err = [s for s in status.messages if s.state == PolicyStatus.STATE_ERROR][-1].message
    assert "observation.state" in err and "'normalized'" in err and "'radians'" in err, err


CUBE_TOPIC = "/sim/cube_pose"
CUBE = np.array([0.21, -0.04, 0.0125, 0.96, 0.0, 0.0, -0.27])


def env_state_contract(tmp_path, with_pose=True):
    features = {
        "observation.state": {"topic": STATE_TOPIC, "joints": JOINTS},
        "action": {"topic": "/leader/joint_states", "joints": JOINTS},
    }
    if with_pose:
        features["observation.environment_state"] = {
            "topic": CUBE_TOPIC,
            "type": "geometry_msgs/msg/PoseStamped",
            "prefix": "cube.",
        }
    path = tmp_path / f"env_state_{with_pose}.yaml"
    path.write_text(yaml.safe_dump({"fps": 30, "task": "pick", "units": "radians", "features": features}))
    return path


def test_environment_state_checkpoint_reads_the_pose_topic_of_the_contract(ros_node, tmp_path):
    """A state + environment_state ACT (no camera) deployed on a contract whose environment_state is a
    PoseStamped: the node's chunk is the runtime policy's for that pose; without the pose it is not."""
    from geometry_msgs.msg import PoseStamped

    from .conftest import ACT_ENV_STATE

    contract = env_state_contract(tmp_path)
    js_pub = ros_node.create_publisher(JointState, STATE_TOPIC, 10)
    pose_pub = ros_node.create_publisher(PoseStamped, CUBE_TOPIC, 10)

    def tick():
        stamp = ros_node.get_clock().now().to_msg()
        js = JointState(name=JOINTS, position=RAD.tolist())
        js.header.stamp = stamp
        pose = PoseStamped()
        pose.header.stamp = stamp
        p, o = pose.pose.position, pose.pose.orientation
        p.x, p.y, p.z, o.w, o.x, o.y, o.z = (float(v) for v in CUBE)
        js_pub.publish(js)
        pose_pub.publish(pose)

    chunks = MessageCollector(ros_node, ActionChunk, "policy/action_chunk")
    timer = ros_node.create_timer(1 / 50, tick)
    try:
        with RosProcess("lerobot_policy_node", "policy", parameters=params(ACT_ENV_STATE, contract)) as node:
            assert wait_until(lambda: len(chunks.messages) >= 1, 60), node.output()
    finally:
        timer.cancel()
    policy = load_policy(str(ACT_ENV_STATE))
    obs = {"observation.state": RAD[None].astype(np.float32), "observation.environment_state": CUBE[None]}
    expected = np.asarray(policy.predict_action_chunk(obs))[0]
    got = np.array([p.positions for p in chunks.messages[0].trajectory.points])
    np.testing.assert_allclose(got, expected, atol=1e-5)
    no_pose = dict(obs, **{"observation.environment_state": np.zeros((1, 7))})
    assert np.abs(np.asarray(policy.predict_action_chunk(no_pose))[0] - got).max() > 1e-3


def test_environment_state_checkpoint_on_a_contract_without_it_fails_naming_the_feature(ros_node, tmp_path):
    from .conftest import ACT_ENV_STATE

    status = MessageCollector(ros_node, PolicyStatus, "policy/status", qos=STATUS_QOS)
    contract = env_state_contract(tmp_path, with_pose=False)
    with RosProcess("lerobot_policy_node", "policy", parameters=params(ACT_ENV_STATE, contract)) as node:
        assert wait_until(lambda: any(s.state == PolicyStatus.STATE_ERROR for s in status.messages), 30), (
            node.output()
        )
    err = [s for s in status.messages if s.state == PolicyStatus.STATE_ERROR][-1].message
    assert "observation.environment_state is not a feature of the contract" in err, err
