"""The mapping contract: YAML -> features, messages -> frames (exact values), clear errors."""

import math
from pathlib import Path

import numpy as np
import pytest

from lerobot_core.alignment import Aligner
from lerobot_core.contract import Contract, ContractError
from lerobot_recorder import bag_io

SO101 = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]


@pytest.mark.parametrize("name", ["so101_one_camera", "so101_two_cameras"])
def test_shipped_contracts_load(name):
    c = Contract.load(name)  # shipped: found by name
    feats = c.features()
    assert feats["observation.state"]["names"] == [f"{j}.pos" for j in SO101]
    assert feats["action"]["shape"] == (6,)
    assert feats["observation.images.front"] == {
        "dtype": "video",
        "shape": (480, 640, 3),
        "names": ["height", "width", "channels"],
    }
    specs = {s.name: s for s in c.stream_specs()}
    assert specs["/joint_states"].policy == "interpolate"
    assert specs["/cameras/front/image_raw"].tolerance_s == 0.02
    assert c.streams["/cameras/front/image_raw"].qos == "sensor"
    assert c.streams["/joint_states"].qos == "reliable" and c.streams["/joint_states"].rate == 100
    if name == "so101_two_cameras":
        assert c.streams["/cameras/wrist/image_raw/compressed"].msgtype == "sensor_msgs/msg/CompressedImage"
        assert c.task_topic == "/task" and not specs["/task"].required


def _contract(**overrides):
    data = {
        "fps": 10,
        "task": "fixed task",
        "features": {
            "observation.state": {
                "topic": "/js",
                "fields": ["position", "velocity", "effort"],
                "joints": ["b", "a"],
            },
            "action": {"topic": "/cmd", "type": "std_msgs/msg/Float64MultiArray", "joints": ["a", "b"]},
        },
    }
    data.update(overrides)
    return Contract.from_dict(data, source="test.yaml")


def test_joint_state_order_fields_and_frame():
    c = _contract()
    assert c.features()["observation.state"]["names"] == [
        "b.pos",
        "a.pos",
        "b.vel",
        "a.vel",
        "b.effort",
        "a.effort",
    ]
    js = bag_io.joint_state(5, ["a", "b", "c"], [1.0, 2.0, 3.0], [0.1, 0.2, 0.3], [-1.0, -2.0, -3.0])
    value, stamp, recv = c.extract("/js", js, receive_ns=9)
    assert stamp == 5 and recv == 9
    cmd_value, cmd_stamp, _ = c.extract("/cmd", bag_io.float64_multi_array([7.0, 8.0]), receive_ns=11)
    assert cmd_stamp is None
    frame, task = c.make_frame({"/js": value, "/cmd": cmd_value})
    assert task == "fixed task"
    assert frame["observation.state"].dtype == np.float32
    assert frame["observation.state"].tolist() == pytest.approx([2.0, 1.0, 0.2, 0.1, -2.0, -1.0])
    assert frame["action"].tolist() == [7.0, 8.0]
    # Float64MultiArray has no header: its stream uses receive time
    assert c.streams["/cmd"].timeline == "receive" and c.streams["/js"].timeline == "header"


def test_degrees_and_normalized_units_exact():
    c = _contract(
        units="degrees",
        features={
            "observation.state": {
                "topic": "/js",
                "fields": ["position", "velocity", "effort"],
                "joints": ["a"],
            }
        },
    )
    frame, _ = c.make_frame(
        {"/js": c.extract("/js", bag_io.joint_state(1, ["a"], [math.pi / 2], [math.pi], [3.0]))[0]}
    )
    assert frame["observation.state"].tolist() == pytest.approx([90.0, 180.0, 3.0])
    n = Contract.from_dict(
        {
            "fps": 10,
            "task": "t",
            "units": "normalized",
            "calibration": {"arm": {"range": [-1.0, 1.0]}, "grip": {"range": [0.0, 2.0], "mode": "0_100"}},
            "features": {"observation.state": {"topic": "/js", "joints": ["arm", "grip"]}},
        }
    )
    values = [
        n.extract("/js", bag_io.joint_state(1, ["arm", "grip"], [p, g]))[0]
        for p, g in [(0.5, 0.5), (-1.0, 2.0)]
    ]
    assert [n.make_frame({"/js": v})[0]["observation.state"].tolist() for v in values] == [
        [50.0, 25.0],
        [-100.0, 100.0],
    ]
    scale, offset = n.unit_conversion("observation.state")
    assert scale.tolist() == [100.0, 50.0] and offset.tolist() == [0.0, 0.0]


def test_interpolation_through_contract_and_aligner():
    c = _contract(features={"observation.state": {"topic": "/js", "joints": ["a"], "policy": "interpolate"}})
    al = Aligner(c.fps, c.stream_specs(), history_s=None)
    for t, v in [(0, 0.0), (200_000_000, 1.0)]:
        al.push("/js", *c.extract("/js", bag_io.joint_state(t + 1_000_000_000, ["a"], [v])))
    frames = al.finish()
    assert [c.make_frame(f.values)[0]["observation.state"].tolist() for f in frames] == [[0.0], [0.5], [1.0]]


def test_joint_trajectory_first_point_and_names():
    c = Contract.from_dict(
        {
            "fps": 30,
            "task": "t",
            "features": {"action": {"topic": "/jt", "type": "trajectory_msgs/msg/JointTrajectory"}},
        }
    )
    assert not c.resolved
    msg = bag_io.joint_trajectory(0, ["x", "y"], [0.25, -0.5])
    c = c.resolve({"/jt": msg})
    assert c.features()["action"]["names"] == ["x.pos", "y.pos"]
    assert c.streams["/jt"].timeline == "receive"  # trajectory stamps are often left at zero
    frame, _ = c.make_frame({"/jt": c.extract("/jt", msg)[0]})
    assert frame["action"].tolist() == [0.25, -0.5]


def test_from_flags_resolves_names_sizes_and_task_topic():
    c = Contract.from_flags(
        30, state="/js", action="/cmd", images={"front": "/cam"}, task_topic="/task", task="fallback"
    )
    js = bag_io.joint_state(1, SO101, np.arange(6) * 0.1)
    cmd = bag_io.float64_multi_array(np.arange(6) * -0.1)
    img = bag_io.image(1, np.zeros((4, 6, 3), np.uint8))
    with pytest.raises(ValueError, match="call resolve"):
        c.features()
    c = c.resolve({"/js": js, "/cam": img, "/cmd": bag_io.joint_state(1, SO101, np.zeros(6))})
    feats = c.features()
    assert feats["observation.state"]["names"] == [f"{j}.pos" for j in SO101]
    assert feats["observation.images.front"]["shape"] == (4, 6, 3)
    values = {
        "/js": c.extract("/js", js)[0],
        "/cmd": c.extract("/cmd", bag_io.joint_state(1, SO101, np.ones(6)))[0],
    }
    values["/cam"] = c.extract("/cam", img)[0]
    values["/task"] = None
    assert c.make_frame(values)[1] == "fallback"
    values["/task"] = c.extract("/task", bag_io.string("stack the blocks"))[0]
    assert c.make_frame(values)[1] == "stack the blocks"
    # a Float64MultiArray action without names borrows the state's joint names when the sizes agree
    c2 = Contract.from_dict(
        {
            "fps": 30,
            "task": "t",
            "features": {
                "observation.state": {"topic": "/js"},
                "action": {"topic": "/cmd", "type": "std_msgs/Float64MultiArray"},
            },
        }
    ).resolve({"/js": js, "/cmd": cmd})
    assert c2.features()["action"]["names"] == [f"{j}.pos" for j in SO101]


def test_images_bgr_and_compressed_to_rgb():
    c = Contract.from_dict(
        {
            "fps": 30,
            "task": "t",
            "features": {
                "observation.images.raw": {"topic": "/raw"},
                "observation.images.png": {"topic": "/cam/compressed"},
            },
        }
    )
    rgb = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    raw = bag_io.image(1, np.ascontiguousarray(rgb[:, :, ::-1]), encoding="bgr8")
    png = bag_io.compressed_image(1, rgb, "png")
    c = c.resolve({"/raw": raw, "/cam/compressed": png})
    frame, _ = c.make_frame(
        {"/raw": c.extract("/raw", raw)[0], "/cam/compressed": c.extract("/cam/compressed", png)[0]}
    )
    assert np.array_equal(frame["observation.images.raw"], rgb)
    assert np.array_equal(frame["observation.images.png"], rgb)
    small = bag_io.image(1, np.zeros((1, 3, 3), np.uint8))
    with pytest.raises(ValueError, match="/raw: image size changed to 3x1"):
        c.make_frame({"/raw": small, "/cam/compressed": png})


def test_message_errors_name_the_topic():
    c = _contract()
    with pytest.raises(ValueError, match="/js: joint 'b' is not in the message"):
        c.extract("/js", bag_io.joint_state(1, ["a"], [1.0], [1.0], [1.0]))
    with pytest.raises(ValueError, match=r"/js: the message has 0 velocity values"):
        c.extract("/js", bag_io.joint_state(1, ["a", "b"], [1.0, 2.0]))
    with pytest.raises(ValueError, match="/cmd: Float64MultiArray has 3 values"):
        c.extract("/cmd", bag_io.float64_multi_array([1, 2, 3]))
    with pytest.raises(ValueError, match="not in the contract"):
        c.extract("/other", bag_io.string("x"))
    with pytest.raises(ValueError, match="/js has message type sensor_msgs/msg/Image"):
        c.check_msgtype("/js", "sensor_msgs/Image")
    ci = Contract.from_dict(
        {"fps": 5, "task": "t", "features": {"observation.images.c": {"topic": "/c", "encoding": "rgb8"}}}
    )
    with pytest.raises(ValueError, match="/c: encoding 'bgr8' does not match the contract's 'rgb8'"):
        ci.extract("/c", bag_io.image(1, np.zeros((2, 2, 3), np.uint8), "bgr8"))
    # 16UC1 is a depth camera now (test_depth.py); an encoding neither RGB nor depth is named
    with pytest.raises(ValueError, match="/c: encoding '16SC1' cannot be recorded"):
        Contract.from_dict(
            {"fps": 5, "task": "t", "features": {"observation.images.c": {"topic": "/c"}}}
        ).extract("/c", bag_io.image(1, np.zeros((2, 2), np.int16), "16SC1"))


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (None, r"test.yaml: \(top level\): the contract is empty"),
        ({"task": "t", "features": {}}, "test.yaml: fps: missing"),
        ({"fps": 2.5, "task": "t", "features": {}}, "test.yaml: fps: expected a positive integer"),
        ({"fps": 30, "task": "t", "features": {}}, "test.yaml: features: missing or empty"),
        (
            {"fps": 30, "task": "t", "featurs": {}},
            r"test.yaml: \(top level\): unknown key\(s\) \['featurs'\]",
        ),
        ({"fps": 30, "features": {"action": {"topic": "/a"}}}, "test.yaml: task: missing"),
        (
            {"fps": 30, "task": "t", "features": {"action": {"topic": "/a", "policy": "cubic"}}},
            "test.yaml: features.action.policy: 'cubic' is not one of hold, nearest, interpolate",
        ),
        (
            {
                "fps": 30,
                "task": "t",
                "features": {"action": [{"topic": "/a"}, {"topic": "/b", "fields": ["pos"]}]},
            },
            r"test.yaml: features.action\[1\].fields: 'pos' is not one of position, velocity, effort",
        ),
        (
            {
                "fps": 30,
                "task": "t",
                "features": {
                    "action": {"topic": "/a", "type": "std_msgs/Float64MultiArray", "timeline": "header"}
                },
            },
            "test.yaml: features.action.timeline: std_msgs/msg/Float64MultiArray has no header",
        ),
        (
            {
                "fps": 30,
                "task": "t",
                "features": {"action": {"topic": "/a", "type": "geometry_msgs/msg/Twist"}},
            },
            "test.yaml: features.action.type: 'geometry_msgs/msg/Twist' is not one of",
        ),
        (
            {
                "fps": 30,
                "task": "t",
                "features": {"observation.images.c": {"topic": "/c", "policy": "interpolate"}},
            },
            "test.yaml: features.observation.images.c.policy: interpolate needs numeric values",
        ),
        (
            {"fps": 30, "task": "t", "features": {"observation.images.c": {"topic": "/c", "height": 480}}},
            "test.yaml: features.observation.images.c: give both height and width",
        ),
        (
            {
                "fps": 30,
                "task": "t",
                "units": "normalized",
                "features": {"action": {"topic": "/a", "joints": ["j"]}},
            },
            "test.yaml: calibration: joint 'j' of action .* no calibration range",
        ),
        (
            {
                "fps": 30,
                "task": "t",
                "calibration": {"j": {"range": [1.0, -1.0]}},
                "features": {"action": {"topic": "/a", "joints": ["j"]}},
            },
            r"test.yaml: calibration.j.range: expected \[min, max\]",
        ),
        (
            {
                "fps": 30,
                "task": "t",
                "features": {"action": [{"topic": "/a", "joints": ["j"]}, {"topic": "/b", "joints": ["j"]}]},
            },
            r"test.yaml: features.action: duplicate names \['j.pos'\]",
        ),
        (
            {
                "fps": 30,
                "task": "t",
                "features": {
                    "action": {"topic": "/a", "policy": "hold"},
                    "observation.state": {"topic": "/a", "policy": "interpolate"},
                },
            },
            "test.yaml: features.observation.state: topic /a is used twice with different",
        ),
        (
            {"fps": 30, "task": "t", "features": {"action": {"topic": "/a", "required": False}}},
            "test.yaml: features.action.required: feature sources are always required",
        ),
        (
            {
                "fps": 30,
                "task": "t",
                "defaults": {"required": False},
                "features": {"action": {"topic": "/a"}},
            },
            r"test.yaml: defaults: unknown key\(s\) \['required'\]",
        ),
        (
            {"fps": 30, "task": "t", "features": {"timestamp": {"topic": "/a"}}},
            "test.yaml: features.timestamp: 'timestamp' is filled by the dataset writer",
        ),
        (
            {"fps": 30, "task": "t", "features": {"action": {"topic": "/a", "max_staleness": -1}}},
            "test.yaml: features.action.max_staleness: must be > 0",
        ),
    ],
)
def test_bad_contracts_name_file_and_key(data, match):
    with pytest.raises(ContractError, match=match):
        Contract.from_dict(data, source="test.yaml")


def test_bad_files(tmp_path):
    with pytest.raises(ContractError, match="missing.yaml: cannot read the contract"):
        Contract.load(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("fps: [30\n")
    with pytest.raises(ContractError, match="bad.yaml: not valid YAML"):
        Contract.load(bad)


def test_docs_example_contract_parses_and_resolves():
    import yaml

    docs = Path(__file__).resolve().parents[3] / "docs" / "recording.md"
    block = docs.read_text().split("## The mapping contract")[1].split("```yaml")[1].split("```")[0]
    c = Contract.from_dict(yaml.safe_load(block), source=str(docs))
    left = bag_io.joint_trajectory(0, [f"j{i}" for i in range(6)], np.arange(6.0))
    wrist = bag_io.compressed_image(1, np.zeros((8, 8, 3), np.uint8), "jpeg")
    c = c.resolve(
        {
            "/left/joint_trajectory_controller/joint_trajectory": left,
            "/cameras/wrist/image_raw/compressed": wrist,
        }
    )
    names = c.features()["action"]["names"]
    assert names[:2] == ["right_shoulder_pan.pos", "right_shoulder_lift.pos"] and names[6:8] == [
        "left_j0.pos",
        "left_j1.pos",
    ]
    assert c.features()["observation.images.wrist"]["shape"] == (8, 8, 3)


def test_rclpy_messages_work_like_rosbags_ones():
    """The live recorder hands rclpy messages to the same contract code."""
    sensor_msgs = pytest.importorskip("sensor_msgs.msg", reason="rclpy message packages not importable")
    std_msgs = pytest.importorskip("std_msgs.msg")
    trajectory_msgs = pytest.importorskip("trajectory_msgs.msg")
    from lerobot_core.contract import msgtype_of
    from lerobot_core.image_conversion import encode_compressed, fill_image_msg

    js = sensor_msgs.JointState(name=["b", "a"], position=[2.0, 1.0])
    js.header.stamp.sec, js.header.stamp.nanosec = 3, 5
    cmd = std_msgs.Float64MultiArray(data=[0.5, -0.5])
    traj = trajectory_msgs.JointTrajectory(joint_names=["a", "b"])
    traj.points = [trajectory_msgs.JointTrajectoryPoint(positions=[7.0, 8.0])]
    rgb = np.arange(2 * 2 * 3, dtype=np.uint8).reshape(2, 2, 3)
    img = fill_image_msg(sensor_msgs.Image(), rgb, "rgb8")
    fmt, data = encode_compressed(rgb, "png")
    comp = sensor_msgs.CompressedImage(format=fmt, data=data)
    assert (
        msgtype_of(js) == "sensor_msgs/msg/JointState" and msgtype_of(cmd) == "std_msgs/msg/Float64MultiArray"
    )
    c = Contract.from_dict(
        {
            "fps": 30,
            "task": {"topic": "task"},
            "features": {
                "observation.state": {"topic": "joint_states", "joints": ["a", "b"]},
                "action": [
                    {
                        "topic": "cmd",
                        "type": "std_msgs/msg/Float64MultiArray",
                        "joints": ["a", "b"],
                        "prefix": "c_",
                    },
                    {"topic": "traj", "type": "trajectory_msgs/msg/JointTrajectory", "prefix": "t_"},
                ],
                "observation.images.raw": {"topic": "cameras/raw/image_raw"},
                "observation.images.comp": {"topic": "cameras/comp/image_raw/compressed"},
            },
        }
    )
    first = {"joint_states": js, "cmd": cmd, "traj": traj, "cameras/raw/image_raw": img}
    first["cameras/comp/image_raw/compressed"] = comp
    c = c.resolve(first)
    values = {topic: c.extract(topic, msg, receive_ns=1)[0] for topic, msg in first.items()}
    assert c.extract("joint_states", js)[1] == 3_000_000_005
    values["task"] = c.extract("task", std_msgs.String(data="wave"))[0]
    frame, task = c.make_frame(values)
    assert task == "wave"
    assert frame["observation.state"].tolist() == [1.0, 2.0]
    assert frame["action"].tolist() == [0.5, -0.5, 7.0, 8.0]
    assert np.array_equal(frame["observation.images.raw"], rgb) and np.array_equal(
        frame["observation.images.comp"], rgb
    )


def test_pose_stamped_is_an_environment_state_as_published():
    """An object's PoseStamped (e.g. the sim's cube) -> observation.environment_state: position in
    metres and orientation quaternion, unconverted even when the joints' units are degrees."""
    from geometry_msgs.msg import PoseStamped

    c = Contract.from_dict(
        {
            "fps": 30,
            "task": "t",
            "units": "degrees",
            "features": {
                "observation.state": {"topic": "/js", "joints": ["a"]},
                "observation.environment_state": {
                    "topic": "/cube",
                    "type": "geometry_msgs/msg/PoseStamped",
                    "prefix": "cube.",
                },
            },
        },
        source="test.yaml",
    )
    feat = c.features()["observation.environment_state"]
    assert feat["names"] == ["cube.x", "cube.y", "cube.z", "cube.qw", "cube.qx", "cube.qy", "cube.qz"]
    assert feat["shape"] == (7,)
    assert c.feature_units("observation.environment_state") == ["metres"] * 3 + ["quaternion"] * 4
    assert c.feature_units("observation.state") == "degrees"
    msg = PoseStamped()
    msg.header.stamp.sec, msg.header.stamp.nanosec = 2, 500
    p, o = msg.pose.position, msg.pose.orientation
    p.x, p.y, p.z, o.w, o.x, o.y, o.z = 0.2, -0.05, 0.0125, 0.9, 0.1, 0.2, 0.3
    c = c.resolve({"/cube": msg})
    value, stamp, _ = c.extract("/cube", msg, receive_ns=7)
    assert stamp == 2_000_000_500  # stamped: aligned on its header like joint_states and images
    js = bag_io.joint_state(5, ["a"], [math.pi / 2], [0.0], [0.0])
    frame, _ = c.make_frame({"/cube": value, "/js": c.extract("/js", js)[0]})
    assert frame["observation.environment_state"].tolist() == pytest.approx(
        [0.2, -0.05, 0.0125, 0.9, 0.1, 0.2, 0.3], abs=1e-7
    )
    assert frame["observation.state"].tolist() == pytest.approx([90.0])
    # a subset of the components, in the contract's order
    c2 = Contract.from_dict(
        {
            "fps": 30,
            "task": "t",
            "features": {
                "observation.environment_state": {
                    "topic": "/cube",
                    "type": "geometry_msgs/msg/PoseStamped",
                    "joints": ["z", "x"],
                }
            },
        }
    )
    assert c2.make_frame({"/cube": c2.extract("/cube", msg)[0]})[0][
        "observation.environment_state"
    ].tolist() == pytest.approx([0.0125, 0.2])


@pytest.mark.parametrize(
    "source, match",
    [
        ({"fields": ["position"]}, r"features.observation.environment_state.fields: a PoseStamped carries"),
        ({"units": "degrees"}, r"features.observation.environment_state.units: a PoseStamped is recorded as"),
        ({"joints": ["x", "roll"]}, r"features.observation.environment_state.joints: .*roll"),
    ],
)
def test_bad_pose_sources_name_the_key(source, match):
    with pytest.raises(ContractError, match=match):
        Contract.from_dict(
            {
                "fps": 30,
                "task": "t",
                "features": {
                    "observation.environment_state": {
                        "topic": "/cube",
                        "type": "geometry_msgs/msg/PoseStamped",
                        **source,
                    }
                },
            },
            source="test.yaml",
        )
