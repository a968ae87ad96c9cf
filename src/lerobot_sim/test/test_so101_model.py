"""The MJCF implements the kinematic table and the robot spec's joint limits."""

import math
import xml.etree.ElementTree as ET

import mujoco
import numpy as np
import pytest

from lerobot_core.ament import share_path
from lerobot_core.robots import get_robot_spec
from lerobot_sim.so101_model import (
    JOINT_LIMITS,
    JOINT_NAMES,
    JOINT_ORIGINS,
    so101_cube_xml,
    to_lerobot_units,
)


@pytest.fixture(scope="module")
def model():
    return mujoco.MjModel.from_xml_path(so101_cube_xml())


def test_joint_names_are_lerobot_spelling_and_spec_order():
    assert tuple(get_robot_spec("so101_follower").joint_names) == JOINT_NAMES


@pytest.mark.parametrize("name", JOINT_NAMES)
def test_mjcf_joint_and_actuator_ranges_equal_the_robot_spec(model, name):
    spec = get_robot_spec("so101_follower").limits[name]
    joint = model.joint(name)
    assert joint.range == pytest.approx([spec.lower, spec.upper], abs=1e-5)
    assert model.actuator(name).ctrlrange == pytest.approx([spec.lower, spec.upper], abs=1e-5)
    assert JOINT_LIMITS[name] == (spec.lower, spec.upper)


@pytest.mark.parametrize("name", JOINT_NAMES)
def test_mjcf_joint_origins_and_axes_follow_the_kinematic_table(model, name):
    origin, axis = JOINT_ORIGINS[name]
    joint = model.joint(name)
    body = model.body(joint.bodyid[0])
    assert body.pos == pytest.approx(origin, abs=1e-6)
    assert joint.axis == pytest.approx(axis, abs=1e-9)
    assert model.jnt_type[joint.id] == mujoco.mjtJoint.mjJNT_HINGE


def test_actuators_are_position_servos_in_joint_order(model):
    for i, name in enumerate(JOINT_NAMES):
        assert model.actuator(i).name == name
        assert model.actuator_trnid[i, 0] == model.joint(name).id
        assert model.actuator_gaintype[i] == mujoco.mjtGain.mjGAIN_FIXED
        assert model.actuator_gainprm[i, 0] > 0  # kp
        assert model.actuator_biasprm[i, 1] == pytest.approx(-model.actuator_gainprm[i, 0])


def test_zero_pose_grasp_site_follows_the_table(model):
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    # all rpy are 0 and every joint is at 0: frames are translated only, so the site is a plain sum
    chain = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll")
    expected = sum(np.array(JOINT_ORIGINS[n][0]) for n in chain) + model.site("grasp").pos
    assert data.site("grasp").xpos == pytest.approx(expected, abs=1e-9)


URDF = share_path("lerobot_bringup") / "urdf" / "so101.urdf"


@pytest.mark.skipif(not URDF.exists(), reason="lerobot_bringup/urdf/so101.urdf is not in this tree")
def test_kinematic_table_equals_the_project_urdf():
    robot = ET.parse(URDF).getroot()
    joints = {j.get("name"): j for j in robot.findall("joint")}
    for name in JOINT_NAMES:
        j = joints[name]
        xyz = [float(v) for v in j.find("origin").get("xyz").split()]
        rpy = [float(v) for v in j.find("origin").get("rpy", "0 0 0").split()]
        axis = [float(v) for v in j.find("axis").get("xyz").split()]
        lim = j.find("limit")
        assert xyz == pytest.approx(JOINT_ORIGINS[name][0], abs=1e-6), name
        assert rpy == pytest.approx([0, 0, 0]), name
        assert axis == pytest.approx(JOINT_ORIGINS[name][1]), name
        assert float(lim.get("lower")) == pytest.approx(JOINT_LIMITS[name][0], abs=1e-4), name
        assert float(lim.get("upper")) == pytest.approx(JOINT_LIMITS[name][1], abs=1e-4), name


def test_lerobot_units_virtual_calibration():
    lims = [JOINT_LIMITS[n] for n in JOINT_NAMES]
    assert to_lerobot_units([0.0] * 5 + [lims[5][0]]) == pytest.approx([0.0] * 6)
    upper = to_lerobot_units([hi for _, hi in lims])
    assert upper == pytest.approx([100.0] * 6)
    assert to_lerobot_units([-math.radians(110), 0, 0, 0, 0, 0])[0] == pytest.approx(-100.0)
