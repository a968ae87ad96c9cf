"""The policy node's normalized units equal the driver's: both from the same LeRobot calibration file.

The driver converts servo ticks (Normalizer.normalize); the policy node converts the driver's radians
through a contract with ``calibration_file`` (lerobot_core.calibration + lerobot_core.units). Same file,
same values, inverted drive mode included.
"""

import numpy as np
import pytest
import yaml

from lerobot_core.calibration import MotorCalibration, load_calibration, save_calibration
from lerobot_core.contract import Contract
from lerobot_core.robots import get_robot_spec
from lerobot_drivers.calibration import Normalizer


@pytest.mark.parametrize("drive_mode", [0, 1])
def test_contract_from_the_calibration_file_matches_the_driver(tmp_path, drive_mode):
    spec = get_robot_spec("so101_follower")
    ranges = [(721, 3395), (812, 3110), (905, 3100), (870, 3170), (90, 4000), (2020, 3340)]
    cal = {
        m.name: MotorCalibration(m.id, drive_mode if m.name in ("wrist_flex", "gripper") else 0, 0, *r)
        for m, r in zip(spec.motors, ranges, strict=True)
    }
    path = save_calibration(tmp_path / "follower.json", cal)
    driver = Normalizer(spec, load_calibration(path, spec))
    joints = list(spec.joint_names)
    contract = Contract.from_dict(
        {
            "fps": 30,
            "robot_type": "so101_follower",
            "units": "normalized",
            "calibration_file": str(path),
            "task": "t",
            "features": {"observation.state": {"topic": "/joint_states", "joints": joints}},
        }
    )
    scale, offset = contract.unit_conversion("observation.state")
    rng = np.random.default_rng(0)
    for _ in range(20):
        raw = [int(rng.integers(lo, hi + 1)) for lo, hi in ranges]
        rad = np.array([driver.to_radians(n, r) for n, r in zip(joints, raw, strict=True)])
        expected = [driver.normalize(n, r) for n, r in zip(joints, raw, strict=True)]
        np.testing.assert_allclose(rad * scale + offset, expected, atol=1e-9)
    assert (
        contract.calibration["gripper"][2] == "0_100" and contract.calibration["elbow_flex"][2] == "m100_100"
    )
    assert yaml.safe_load(yaml.safe_dump(contract.features()))["observation.state"]["units"] == "normalized"
