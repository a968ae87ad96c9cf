"""The shipped policy-rollout contract: observation from the robot, action from the policy node's
command topic (JointState by name, in any order), camera sizes from the first images."""

import numpy as np
from sensor_msgs.msg import Image, JointState

from lerobot_core.contract import Contract

CONTRACT = "so101_policy_rollout"  # shipped: found by name
SO101 = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]


def _image(h, w, value):
    msg = Image(height=h, width=w, encoding="rgb8", step=3 * w)
    msg.data = bytes([value]) * (3 * w * h)
    return msg


def test_rollout_contract_records_the_policy_command_as_action():
    contract = Contract.load(CONTRACT)
    state = JointState(name=SO101, position=[0.1 * i for i in range(6)])
    command = JointState(name=SO101[::-1], position=[-1.0 - i for i in range(6)])  # policy order may differ
    front, wrist = _image(48, 64, 10), _image(32, 40, 200)
    topics = {
        "/joint_states": state,
        "/joint_commands": command,
        "/cameras/front/image_raw": front,
        "/cameras/wrist/image_raw": wrist,
    }
    contract = contract.resolve(topics)
    feats = contract.features()
    assert feats["action"]["names"] == [f"{j}.pos" for j in SO101]
    assert feats["observation.images.wrist"]["shape"] == (32, 40, 3)
    values = {topic: contract.extract(topic, msg)[0] for topic, msg in topics.items()}
    frame, task = contract.make_frame(values)
    np.testing.assert_allclose(frame["action"], [-6.0, -5.0, -4.0, -3.0, -2.0, -1.0])
    np.testing.assert_allclose(frame["observation.state"], [0.0, 0.1, 0.2, 0.3, 0.4, 0.5], atol=1e-7)
    assert task == "Pick up the cube and place it in the bin"
    assert contract.streams["/joint_commands"].msgtype == "sensor_msgs/msg/JointState"
