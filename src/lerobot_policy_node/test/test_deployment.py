"""Contract-driven deployment without ROS: conversions both ways with exact values, load-time checks."""

import json
import math
import shutil

import numpy as np
import pytest
import yaml

from lerobot_core.calibration import MotorCalibration, save_calibration
from lerobot_core.contract import Contract, ContractError
from lerobot_core.robots import SO_JOINTS
from lerobot_policy_node.controller import joint_mapper
from lerobot_policy_node.deployment import (
    DeploymentError,
    check_checkpoint,
    dataset_units,
    from_contract,
)
from lerobot_policy_node.observation import ObservationBuilder, ObservationSpec
from lerobot_runtime.policy import read_policy_config

from .conftest import ACT_SMALL

TICK = 2 * math.pi / 4095  # radians per tick of a 4096-step encoder (the driver's zero is mid-range)
JOINTS = list(SO_JOINTS)


def write_calibration(path):
    # every body joint 1000..3000 (mid 2000), the gripper 2000..3000; wrist_flex inverted (drive mode 1)
    cal = {
        name: MotorCalibration(i + 1, int(name == "wrist_flex"), 0, 1000, 3000)
        for i, name in enumerate(JOINTS[:-1])
    }
    cal["gripper"] = MotorCalibration(6, 0, 0, 2000, 3000)
    return save_calibration(path, cal)


def write_contract(tmp_path, units="normalized", calibration_file="so101.json", **features):
    data = {
        "fps": 30,
        "robot_type": "so101_follower",
        "units": units,
        "task": "pick",
        "features": {
            "observation.state": {"topic": "/follower/joint_states", "joints": JOINTS},
            "action": {"topic": "/leader/joint_states", "joints": JOINTS},
            "observation.images.front": {"topic": "/cams/front/image_raw"},
            **features,
        },
    }
    if calibration_file:
        data["calibration_file"] = calibration_file
    path = tmp_path / "contract.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture
def normalized(tmp_path):
    write_calibration(tmp_path / "so101.json")
    return from_contract(Contract.load(write_contract(tmp_path)))


def test_normalized_units_from_the_calibration_file_exact_values(normalized):
    half = 1000 * TICK  # half the calibrated range, in radians
    rad = np.array([0.0, half, -half, half / 2, -half / 2, 0.0])
    np.testing.assert_allclose(normalized.state.to_policy(rad), [0, 100, -100, 50, -50, 50], atol=1e-12)
    # the gripper spans 2000..3000 ticks: RANGE_0_100, 0 at one end, 100 at the other
    grip = np.array([0, 0, 0, 0, 0, 500 * TICK])
    assert normalized.state.to_policy(grip)[5] == pytest.approx(100.0, abs=1e-12)
    assert normalized.state.to_policy(-grip)[5] == pytest.approx(0.0, abs=1e-12)
    # and back: the policy's units -> radians on joint_commands
    np.testing.assert_allclose(
        normalized.action.to_radians(np.array([0, 100, -100, 50, -50, 50])), rad, atol=1e-12
    )
    assert normalized.state.units == normalized.action.units == "normalized"
    assert normalized.state_topic == "/follower/joint_states" and normalized.fps == 30
    assert normalized.image_topics == {"observation.images.front": "/cams/front/image_raw"}
    assert (normalized.task_text, normalized.task_topic) == ("pick", None)


@pytest.mark.parametrize(
    ("units", "rad", "expected"),
    [
        ("degrees", [math.pi / 2, -math.pi, 0, 0, 0, math.pi / 4], [90, -180, 0, 0, 0, 45]),
        ("radians", [0.5, -1.0, 0, 0, 0, 0.25], [0.5, -1.0, 0, 0, 0, 0.25]),
    ],
)
def test_degrees_and_radians_both_ways(tmp_path, units, rad, expected):
    d = from_contract(Contract.load(write_contract(tmp_path, units=units, calibration_file=None)))
    np.testing.assert_allclose(d.state.to_policy(np.array(rad)), expected, atol=1e-12)
    np.testing.assert_allclose(d.action.to_radians(np.array(expected, float)), rad, atol=1e-12)


def test_observation_and_command_paths_use_the_contract_conversion(normalized):
    spec = ObservationSpec(
        state_names=normalized.state.joints,
        image_shapes={},
        fps=30,
        max_age_s=1.0,
        state_affine=(normalized.state.scale, normalized.state.offset),
    )
    half = 1000 * TICK
    batch = ObservationBuilder(spec).to_policy_batch({"joints": np.array([half, 0, 0, 0, 0, 0])})
    np.testing.assert_allclose(batch["observation.state"], [[100, 0, 0, 0, 0, 50]], atol=1e-5)
    # commands in the robot's joint order, whatever the policy's order
    robot_order = list(reversed(JOINTS))
    to_joint = joint_mapper(JOINTS, robot_order, to_radians=normalized.action.to_radians)
    cmd = to_joint(np.array([100.0, 0, 0, 0, 0, 100.0]))
    np.testing.assert_allclose(cmd, [500 * TICK, 0, 0, 0, 0, half], atol=1e-12)


def test_missing_calibration_file_names_the_expected_path(tmp_path):
    with pytest.raises(ContractError) as err:
        Contract.load(write_contract(tmp_path, calibration_file="calib/arm.json"))
    assert str(tmp_path / "calib" / "arm.json") in str(err.value) and "calibration_file" in str(err.value)


def test_normalized_without_calibration_is_an_error(tmp_path):
    with pytest.raises(DeploymentError, match=r"\['shoulder_pan'.*no calibration range"):
        from_contract(Contract.load(write_contract(tmp_path, calibration_file=None)))


def checkpoint(tmp_path, info_units=None, names=None):
    """The ACT fixture (state 6, action 6, front 3x48x64) with a train_config.json naming a dataset."""
    ckpt = tmp_path / "ckpt"
    shutil.copytree(ACT_SMALL, ckpt, ignore=shutil.ignore_patterns("model.safetensors"))
    names = names or [f"{j}.pos" for j in JOINTS]
    feats = {k: {"dtype": "float32", "shape": [6], "names": names} for k in ("observation.state", "action")}
    if info_units:
        for ft in feats.values():
            ft["units"] = info_units
    (tmp_path / "ds" / "meta").mkdir(parents=True)
    (tmp_path / "ds" / "meta" / "info.json").write_text(json.dumps({"features": feats}))
    (ckpt / "train_config.json").write_text(json.dumps({"dataset": {"root": str(tmp_path / "ds")}}))
    return read_policy_config(ckpt)[1]


def test_a_lerobot_recorded_checkpoint_is_taken_as_normalized_and_deploys(tmp_path, normalized):
    pc = checkpoint(tmp_path)  # info.json without units: recorded by LeRobot, its default units
    units, where = dataset_units(pc.path)
    assert units == {"observation.state": "normalized", "action": "normalized"}
    assert where.endswith("info.json")
    check_checkpoint(normalized, pc, units, where)


def test_units_mismatch_names_the_feature(tmp_path, normalized):
    pc = checkpoint(tmp_path, info_units="radians")  # recorded by this stack in radians
    units, where = dataset_units(pc.path)
    with pytest.raises(DeploymentError) as err:
        check_checkpoint(normalized, pc, units, where)
    msg = str(err.value)
    assert "observation.state" in msg and "'radians'" in msg and "'normalized'" in msg and where in msg


def test_name_mismatch_names_the_feature(tmp_path, normalized):
    names = [f"{j}.pos" for j in JOINTS]
    names[1], names[2] = names[2], names[1]
    pc = checkpoint(tmp_path, names=names)
    with pytest.raises(DeploymentError, match=r"observation.state names .* \(first at index 1\)"):
        check_checkpoint(normalized, pc)


def test_shape_and_image_mismatches_name_the_feature(tmp_path):
    write_calibration(tmp_path / "so101.json")
    pc = checkpoint(tmp_path)
    five = from_contract(
        Contract.load(
            write_contract(
                tmp_path, **{"observation.state": {"topic": "/follower/joint_states", "joints": JOINTS[:5]}}
            )
        )
    )
    with pytest.raises(DeploymentError, match=r"observation.state has shape \(6,\) but the contract"):
        check_checkpoint(five, pc)
    path = write_contract(tmp_path)
    data = yaml.safe_load(path.read_text())
    data["features"]["observation.images.wrist"] = data["features"].pop("observation.images.front")
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(DeploymentError, match=r"input observation.images.front is not a feature"):
        check_checkpoint(from_contract(Contract.load(path)), pc)


def test_dataset_root_parameter_and_missing_info(tmp_path):
    pc = checkpoint(tmp_path, info_units="degrees")
    assert dataset_units(pc.path, tmp_path / "ds")[0]["action"] == "degrees"
    assert dataset_units(pc.path, tmp_path / "ds" / "meta" / "info.json")[0]["action"] == "degrees"
    with pytest.raises(DeploymentError, match="nowhere"):
        dataset_units(pc.path, tmp_path / "nowhere")
    assert dataset_units(ACT_SMALL) == ({}, "")
