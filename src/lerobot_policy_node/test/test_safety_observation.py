import numpy as np
import pytest

from lerobot_core.safety import SafetyFilter, SafetyLimits
from lerobot_policy_node.observation import (
    ObservationBuilder,
    ObservationSpec,
    StaleObservationError,
    rgb_to_chw_float,
)

MS = 1_000_000


def test_safety_clamps_and_bounds_steps():
    f = SafetyFilter(SafetyLimits.build(2, lower=[-1, -1], upper=[1, 1], max_step=0.1))
    f.reset(np.array([0.0, 0.95]))
    r = f.apply(np.array([0.5, 2.0]))
    np.testing.assert_allclose(r.command, [0.1, 1.0])
    assert r.clamped and r.rate_limited and not r.held
    r = f.apply(np.array([0.15, 0.9]))
    np.testing.assert_allclose(r.command, [0.15, 0.9])
    assert not (r.clamped or r.rate_limited)


def test_safety_nan_holds_previous_command():
    f = SafetyFilter(SafetyLimits.build(2, max_step=1.0))
    f.reset(np.array([0.2, 0.3]))
    r = f.apply(np.array([np.nan, 0.0]))
    assert r.held and "non-finite" in r.reason
    np.testing.assert_array_equal(r.command, [0.2, 0.3])
    r = f.apply(np.array([np.inf, 0.0]))
    assert r.held


def test_safety_limit_validation():
    with pytest.raises(ValueError, match="expected 3 values"):
        SafetyLimits.build(3, lower=[0, 0])
    with pytest.raises(ValueError, match="exceed"):
        SafetyLimits.build(1, lower=[1], upper=[0])


def spec(**kw):
    base = dict(
        state_names=("a", "b", "c"),
        image_shapes={"observation.images.front": (3, 4, 6)},
        fps=30.0,
        max_age_s=0.1,
    )
    base.update(kw)
    return ObservationSpec(**base)


def test_joint_order_mapped_by_name_and_images_converted():
    b = ObservationBuilder(spec())
    assert not b.push_joints(["c", "a"], [3.0, 1.0], 10 * MS)
    assert b.missing_joints() == ["b"]
    assert b.push_joints(["x", "b", "c", "a"], [9.0, 2.0, 3.5, 1.5], 20 * MS)
    img = np.zeros((8, 12, 3), np.uint8)
    img[..., 0] = 255
    b.push_image("observation.images.front", img, 15 * MS)
    values, stamps = b.sample(30 * MS)
    batch = b.to_policy_batch(values, task="pick")
    np.testing.assert_array_equal(batch["observation.state"], [[1.5, 2.0, 3.5]])
    assert batch["observation.state"].dtype == np.float32
    im = batch["observation.images.front"]
    assert im.shape == (1, 3, 4, 6) and im.dtype == np.float32
    np.testing.assert_allclose(im[0, 0], 1.0)
    np.testing.assert_allclose(im[0, 1:], 0.0)
    assert batch["task"] == ["pick"]
    assert stamps == {"joints": 20 * MS, "observation.images.front": 15 * MS}


def test_joint_states_are_mapped_through_one_plan_per_layout():
    """The policy's observation maps a JointState's names once per layout (lerobot_core.joint_map's
    cached plan), not per message: many messages of one layout build one plan, a new layout one more."""
    from sensor_msgs.msg import JointState

    from lerobot_core import joint_map

    b = ObservationBuilder(spec())
    joint_map._build.cache_clear()
    for k in range(200):  # a new message each time, as rclpy delivers them
        msg = JointState(name=["c", "x", "a", "b"], position=[3.0, 9.0, 1.0, float(k)])
        assert b.push_joints(msg.name, msg.position, (10 + k) * MS)
    assert joint_map.plan_cache_info().misses == 1
    assert b._latest.tolist() == [1.0, 199.0, 3.0]
    msg = JointState(name=["a", "b", "c"], position=[0.5, 0.6, 0.7])
    b.push_joints(msg.name, msg.position, 300 * MS)
    assert joint_map.plan_cache_info().misses == 2 and b._latest.tolist() == [0.5, 0.6, 0.7]


def test_stale_stream_is_reported():
    b = ObservationBuilder(spec())
    b.push_joints(["a", "b", "c"], [0, 0, 0], 0)
    b.push_image("observation.images.front", np.zeros((4, 6, 3), np.uint8), 0)
    b.sample(50 * MS)
    b.push_joints(["a", "b", "c"], [0, 0, 0], 150 * MS)
    with pytest.raises(StaleObservationError) as info:
        b.sample(160 * MS)  # image is 160 ms old, max age 100 ms
    assert info.value.reasons == {"observation.images.front": "stale"}


def test_degrees_conversion():
    b = ObservationBuilder(spec(image_shapes={}, deg=True))
    b.push_joints(["a", "b", "c"], [np.pi, 0.0, -np.pi / 2], 0)
    values, _ = b.sample(MS)
    np.testing.assert_allclose(b.to_policy_batch(values)["observation.state"], [[180, 0, -90]], atol=1e-4)


def test_resize_area_average():
    img = np.zeros((4, 4, 3), np.uint8)
    img[:2, :2] = 200
    out = rgb_to_chw_float(img, (3, 2, 2))
    np.testing.assert_allclose(out[:, 0, 0], 200 / 255, atol=1e-6)
    np.testing.assert_allclose(out[:, 1, 1], 0.0)
