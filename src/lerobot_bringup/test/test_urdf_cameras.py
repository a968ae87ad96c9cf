"""The URDF's camera frames: where the sim's cameras are, and the ROS optical convention (z forward,
x right, y down); the display launch file compiles."""

import py_compile
from pathlib import Path

import mujoco
import numpy as np
import pytest

from lerobot_drivers.kinematics import parse_urdf

BRINGUP = Path(__file__).resolve().parents[1]
URDF = BRINGUP / "urdf" / "so101.urdf"
MJCF = BRINGUP.parent / "lerobot_sim" / "mjcf" / "so101_cube.xml"
POSES = [
    {},
    {"shoulder_pan": 0.7, "shoulder_lift": -0.4, "elbow_flex": 0.9, "wrist_flex": 0.3, "wrist_roll": 1.1},
]


@pytest.fixture(scope="module")
def sim():
    model = mujoco.MjModel.from_xml_path(str(MJCF))
    return model, mujoco.MjData(model)


@pytest.mark.parametrize("pose", POSES)
@pytest.mark.parametrize("camera", ["front", "wrist"])
def test_optical_frames_are_the_sim_cameras_in_the_ros_convention(sim, camera, pose):
    model, data = sim
    data.qpos[:] = model.qpos0
    for joint, q in pose.items():
        data.qpos[model.jnt_qposadr[model.joint(joint).id]] = q
    mujoco.mj_forward(model, data)
    cam = model.camera(camera).id
    mj_rot = data.cam_xmat[cam].reshape(3, 3)  # MuJoCo camera: x right, y up, looks along -z
    frames = parse_urdf(URDF).forward_kinematics(pose)
    optical = frames[f"{camera}_optical_frame"]
    np.testing.assert_allclose(optical[:3, 3], data.cam_xpos[cam], atol=1e-6)
    # ROS optical: x right (MuJoCo x), y down (-MuJoCo y), z forward, into the scene (-MuJoCo z)
    np.testing.assert_allclose(optical[:3, :3], mj_rot @ np.diag([1.0, -1.0, -1.0]), atol=1e-4)
    # the camera link: x forward (= optical z), z up (= -optical y)
    link = frames[f"{camera}_camera_link"]
    np.testing.assert_allclose(link[:3, 0], optical[:3, 2], atol=1e-7)
    np.testing.assert_allclose(link[:3, 2], -optical[:3, 1], atol=1e-7)


def test_front_camera_looks_down_at_the_workspace():
    optical = parse_urdf(URDF).forward_kinematics({})["front_optical_frame"]
    forward, down = optical[:3, 2], optical[:3, 1]
    assert forward[0] < 0 and forward[2] < 0  # toward the robot, downward
    assert down[2] < 0  # image down points toward the table
    to_target = np.array([0.2, 0.0, 0.0]) - optical[:3, 3]
    np.testing.assert_allclose(forward, to_target / np.linalg.norm(to_target), atol=1e-4)


def test_display_launch_file_compiles(tmp_path):
    py_compile.compile(
        str(BRINGUP / "launch" / "display.launch.py"), cfile=str(tmp_path / "d.pyc"), doraise=True
    )
