"""The controller's observation history for n_obs_steps > 1 (diffusion fixture), without ROS."""

import json
import shutil
import time

import numpy as np
import pytest
import torch

from lerobot_core.safety import SafetyFilter, SafetyLimits
from lerobot_policy_node.action_path import ObservationHistory
from lerobot_policy_node.action_queue import SchedulerConfig
from lerobot_policy_node.controller import PolicyController
from lerobot_policy_node.observation import ObservationBuilder, ObservationSpec
from lerobot_runtime import load_policy

from .conftest import DIFFUSION_SMALL

MS = 1_000_000
JOINTS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
FRONT = "observation.images.front"


@pytest.fixture(scope="module")
def fast_diffusion(tmp_path_factory):
    """The fixture with 10 DDIM steps instead of 100 DDPM steps (same weights), for quick threads tests."""
    dst = tmp_path_factory.mktemp("ddim") / "pretrained_model"
    shutil.copytree(DIFFUSION_SMALL, dst)
    cfg = json.loads((dst / "config.json").read_text())
    cfg.update(noise_scheduler_type="DDIM", num_inference_steps=10)
    (dst / "config.json").write_text(json.dumps(cfg))
    return load_policy(dst)


class Clock:
    def __init__(self):
        self.t = 1_000 * MS

    def __call__(self):
        return self.t


def make_controller(policy, clock, multiplier=1, publish=None):
    obs = ObservationBuilder(
        ObservationSpec(state_names=JOINTS, image_shapes={FRONT: (3, 48, 64)}, fps=30.0, max_age_s=0.1)
    )
    sched = SchedulerConfig(
        fps=30.0, n_action_steps=8, chunk_size=8, mode="replace", interpolation_multiplier=multiplier
    )
    return PolicyController(
        policy,
        obs,
        sched,
        SafetyFilter(SafetyLimits.build(6, max_step=0.05)),
        publish_command=publish or (lambda cmd, held: None),
        now_ns=clock,
        run_inference=False,
    )


def push(ctl, clock, k):
    """Observation k: joints all k/10, image filled with 10*k."""
    ctl.obs.push_joints(list(JOINTS), [k / 10.0] * 6, clock.t)
    ctl.obs.push_image(FRONT, np.full((48, 64, 3), 10 * k, np.uint8), clock.t)


def states(ctl):
    return [float(f.values["joints"][0]) for f in ctl.path.history.frames()]


def test_history_fills_shifts_and_restarts(fast_diffusion):
    clock = Clock()
    ctl = make_controller(fast_diffusion, clock)
    assert ctl.n_obs_steps == 2
    assert ctl.path.history.frames() == []
    push(ctl, clock, 1)
    ctl.control_step()
    assert states(ctl) == [0.1, 0.1]  # the first observation fills the history
    for k in (2, 3):
        clock.t += 33 * MS
        push(ctl, clock, k)
        ctl.control_step()
    assert states(ctl) == [0.2, 0.3]
    clock.t += 500 * MS  # no data for 0.5 s: stale, the history restarts
    ctl.control_step()
    assert ctl.path.history.frames() == []
    push(ctl, clock, 4)
    ctl.control_step()
    assert states(ctl) == [0.4, 0.4]


def test_history_is_taken_at_the_policy_fps(fast_diffusion):
    clock = Clock()
    ctl = make_controller(fast_diffusion, clock, multiplier=3)  # control at 90 Hz, policy at 30 Hz
    for k in range(1, 8):
        push(ctl, clock, k)
        ctl.control_step()
        clock.t += 11 * MS
    assert states(ctl) == [0.4, 0.7]  # ticks 1, 4, 7 were kept


def test_history_batch_feeds_the_policy(fast_diffusion):
    clock = Clock()
    ctl = make_controller(fast_diffusion, clock)
    for k in (1, 2):
        push(ctl, clock, k)
        ctl.control_step()
        clock.t += 33 * MS
    batch = ctl.path.history.batch()
    assert batch["observation.state"].shape == (1, 2, 6)
    assert batch[FRONT].shape == (1, 2, 3, 48, 64)
    np.testing.assert_allclose(batch["observation.state"][0, :, 0], [0.1, 0.2], rtol=1e-6)
    np.testing.assert_allclose(batch[FRONT][0, :, 0, 0, 0], [10 / 255, 20 / 255], rtol=1e-6)
    # the stacked history gives what pushing the two converted steps one by one gives
    noise = torch.randn((1, 16, 6), generator=torch.Generator().manual_seed(0))
    direct = fast_diffusion.predict_action_chunk(batch, noise=noise)
    steps = ObservationHistory(2, dict)
    for i in range(2):
        steps.push({k: v[:, i] for k, v in batch.items()})
    np.testing.assert_array_equal(fast_diffusion.predict_action_chunk(steps.batch(), noise=noise), direct)


def test_threads_drive_with_history(fast_diffusion):
    clock = time.time_ns
    sent = []
    obs_spec = ObservationSpec(state_names=JOINTS, image_shapes={FRONT: (3, 48, 64)}, fps=30.0, max_age_s=0.5)
    ctl = PolicyController(
        fast_diffusion,
        ObservationBuilder(obs_spec),
        # 10 Hz control: a chunk of 8 lasts 0.8 s, so a loaded machine's slower inference still leaves
        # actions to execute (the rest of the chunk is skipped as consumed during the delay)
        SchedulerConfig(fps=10.0, n_action_steps=8, chunk_size=8),
        SafetyFilter(SafetyLimits.build(6, max_step=0.05)),
        publish_command=lambda cmd, held: sent.append((cmd.copy(), held)),
        now_ns=clock,
    )
    ctl.obs.push_joints(list(JOINTS), [0.0] * 6, clock())
    ctl.start()
    try:
        deadline = time.monotonic() + 20
        k = 0
        while time.monotonic() < deadline and (ctl.stats.chunks < 3 or ctl.stats.steps == 0):
            k += 1
            ctl.obs.push_joints(list(JOINTS), [0.01 * (k % 10)] * 6, clock())
            ctl.obs.push_image(FRONT, np.full((48, 64, 3), k % 255, np.uint8), clock())
            time.sleep(0.02)
    finally:
        ctl.stop()
    assert ctl.stats.chunks >= 3 and ctl.stats.inference_errors == 0, ctl.stats.message
    moved = [c for c, held in sent if not held]
    assert moved and all(np.all(np.isfinite(c)) for c in moved), (ctl.stats.message, ctl.stats.held_steps)


def _inference_nice(fast_diffusion, control_priority):
    """The Linux nice of the running inference thread once it produced a chunk, and the note on the
    control thread's scheduling."""
    import os

    clock = time.time_ns
    obs_spec = ObservationSpec(state_names=JOINTS, image_shapes={FRONT: (3, 48, 64)}, fps=30.0, max_age_s=0.5)
    ctl = PolicyController(
        fast_diffusion,
        ObservationBuilder(obs_spec),
        SchedulerConfig(fps=10.0, n_action_steps=8, chunk_size=8),
        SafetyFilter(SafetyLimits.build(6, max_step=0.05)),
        publish_command=lambda cmd, held: None,
        now_ns=clock,
        control_priority=control_priority,
    )
    ctl.start()
    try:
        deadline = time.monotonic() + 30
        k = 0
        while time.monotonic() < deadline and ctl.stats.chunks < 1:
            k += 1
            ctl.obs.push_joints(list(JOINTS), [0.01 * (k % 10)] * 6, clock())
            ctl.obs.push_image(FRONT, np.full((48, 64, 3), k % 255, np.uint8), clock())
            time.sleep(0.02)
        assert ctl.stats.chunks >= 1, ctl.stats.message
        inference = next(t for t in ctl._threads if t.name == "policy-inference")
        return os.getpriority(os.PRIO_PROCESS, inference.native_id), ctl.priority_note
    finally:
        ctl.stop()


def test_inference_yields_to_a_normal_control_thread_but_not_to_the_machine(fast_diffusion):
    import os

    base = os.getpriority(os.PRIO_PROCESS, 0)
    nice, _ = _inference_nice(fast_diffusion, control_priority=0)
    assert nice == 10 or (base > 10 and nice == base)  # the model yields to the control loop
    nice, note = _inference_nice(fast_diffusion, control_priority=10)
    if "SCHED_FIFO not permitted" in note:
        pytest.skip(note)
    # a SCHED_FIFO control thread preempts the model anyway: a niced model would only starve behind
    # every other process of a loaded machine
    assert nice == base, note
