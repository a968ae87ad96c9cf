"""The replay plan (ROS-free): a ramp from the present pose within the step bound, then the episode
through the safety filter."""

import numpy as np
import pytest

from lerobot_core.safety import SafetyLimits
from lerobot_policy_node.replay import plan_replay, ramp


@pytest.mark.parametrize(
    "start, target, step, n",
    [
        ([0.0, 0.0], [1.0, -0.5], 0.1, 10),  # the longest way sets the count
        ([0.0, 0.0], [0.3, 0.0], 0.1, 3),  # exactly 3 steps (not 4 from float rounding)
        ([0.0, 0.0], [0.0, 0.0], 0.1, 0),  # already there
        ([0.0, 0.0], [0.05, 0.0], 0.1, 1),
        ([0.0, 0.0], [1.0, 1.0], [0.1, 0.5], 10),  # per-joint bounds
    ],
)
def test_ramp_is_linear_ends_on_target_and_respects_the_step(start, target, step, n):
    points = ramp(np.array(start), np.array(target), step)
    assert points.shape == (n, 2)
    if n:
        np.testing.assert_allclose(points[-1], target)
        steps = np.abs(np.diff(np.vstack([start, points]), axis=0))
        assert np.all(steps <= np.asarray(step) + 1e-12)
        np.testing.assert_allclose(steps, np.broadcast_to(steps[0], steps.shape))  # constant rate


def test_plan_ramps_then_replays_within_limits_and_step():
    limits = SafetyLimits.build(3, [-1.0, -1.0, 0.0], [1.0, 1.0, 1.5], max_step=0.05)
    present = np.array([0.0, 0.5, 0.2])
    t = np.linspace(0, 1, 40)[:, None]
    actions = np.hstack([0.8 - 0.4 * t, -0.3 + 0 * t, 2.0 - t])  # the 3rd joint starts above its limit
    plan = plan_replay(present, actions, limits)
    assert plan.ramp_steps == 26  # joint 3 has the longest way: 0.2 -> its 1.5 limit at 0.05 rad/step
    full = np.vstack([present, plan.commands])
    assert np.all(np.abs(np.diff(full, axis=0)) <= 0.05 + 1e-12)
    assert np.all(plan.commands >= limits.lower) and np.all(plan.commands <= limits.upper)
    np.testing.assert_allclose(plan.commands[plan.ramp_steps - 1], [0.8, -0.3, 1.5])
    np.testing.assert_allclose(plan.final, [0.4, -0.3, 1.0], atol=1e-12)  # the episode's last action
    assert plan.clamped_steps > 0 and plan.rate_limited_steps == 0
    assert len(plan.commands) == plan.ramp_steps + len(actions)


def test_plan_refuses_non_finite_actions_naming_the_frame():
    limits = SafetyLimits.build(2, None, None, max_step=0.1)
    actions = np.zeros((5, 2))
    actions[3, 1] = np.nan
    with pytest.raises(ValueError, match="frame 3 has a non-finite action"):
        plan_replay(np.zeros(2), actions, limits)


def test_plan_explains_per_joint_which_commands_were_clamped_and_why():
    """Before: '75 commands clamped' and a 0.82 rad final error, with no joint and no reason named."""
    limits = SafetyLimits.build(3, [-1.0, -1.0, 0.0], [1.0, 1.0, 1.5], max_step=0.05)
    t = np.linspace(0, 1, 40)[:, None]
    # joint a: inside; joint b: one jump the per-step bound slows; joint c: above its limit to the end
    b = np.where(t < 0.5, -0.3, 0.3)
    actions = np.hstack([0.2 + 0 * t, b, 1.9 + 0 * t])
    plan = plan_replay(np.array([0.2, -0.3, 1.5]), actions, limits)
    lines = plan.explain(["a", "b", "c"], limits)
    assert (
        "c: 40 of 40 actions clamped to its joint limits [0.000, 1.500] rad (recorded up to 0.4000 rad past a limit)"
        in lines
    )
    assert any(
        line.startswith("b: ") and "slowed by the per-step bound (0.05 rad per step" in line for line in lines
    )
    assert (
        "c: the last action (1.900 rad) was sent as 1.500 rad (0.400 rad short: outside its joint limits)"
        in lines
    )
    assert not any(line.startswith("a: ") for line in lines)
    assert list(plan.clamped_per_joint) == [0, 0, 40]
