import math

import numpy as np
import pytest

from lerobot_core.safety import CommandError, SafetyLimits
from lerobot_sim.command import (
    positions_by_name,
    positions_from_array,
    positions_from_trajectory,
)
from lerobot_sim.so101_model import JOINT_NAMES, JointLimits

PREV = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])


def test_by_name_updates_only_named_joints():
    out = positions_by_name(["elbow_flex", "gripper"], [1.0, -0.1], JOINT_NAMES, PREV)
    assert out.tolist() == [0.1, 0.2, 1.0, 0.4, 0.5, -0.1]
    assert PREV.tolist() == [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]  # not modified in place


@pytest.mark.parametrize(
    ("names", "positions", "needle"),
    [
        (["elbow"], [1.0], "unknown joint"),
        (["elbow_flex"], [1.0, 2.0], "1 names but 2"),
        ([], [], "no joint"),
    ],
)
def test_by_name_rejections_say_why(names, positions, needle):
    with pytest.raises(CommandError, match=needle):
        positions_by_name(names, positions, JOINT_NAMES, PREV)


def test_array_needs_one_value_per_joint():
    assert positions_from_array([0.0] * 6, JOINT_NAMES).shape == (6,)
    with pytest.raises(CommandError, match="expected 6 values"):
        positions_from_array([0.0] * 5, JOINT_NAMES)


def test_trajectory_uses_first_point_like_the_driver():
    out = positions_from_trajectory(["wrist_roll"], [[0.7], [0.9]], JOINT_NAMES, PREV)
    assert out[4] == 0.7
    with pytest.raises(CommandError, match="no points"):
        positions_from_trajectory(["wrist_roll"], [], JOINT_NAMES, PREV)


def test_safety_clamps_to_limits_and_bounds_step():
    lim = JointLimits.so101()
    safety = SafetyLimits.build(6, lim.lower, lim.upper, max_step=0.1)
    out = safety.apply(np.array([5.0, -5.0, 0.35, 0.4, 0.5, 0.6]), PREV)
    assert out[0] == pytest.approx(0.2)  # bounded step from 0.1
    assert out[1] == pytest.approx(0.1)
    assert out[2] == pytest.approx(0.35)
    unbounded = SafetyLimits.build(6, lim.lower, lim.upper, max_step=math.inf)
    out = unbounded.apply(np.array([5.0, -5.0, 0, 0, 0, 9.0]), PREV)
    assert out[0] == pytest.approx(lim.upper[0]) and out[1] == pytest.approx(lim.lower[1])
    assert out[5] == pytest.approx(lim.upper[5])


@pytest.mark.parametrize("bad", [[math.nan] * 6, [0.0, math.inf, 0, 0, 0, 0], [0.0] * 3])
def test_safety_rejects_non_finite_and_wrong_size(bad):
    lim = JointLimits.so101()
    with pytest.raises(CommandError):
        SafetyLimits.build(6, lim.lower, lim.upper, 0.1).apply(np.array(bad), PREV)
