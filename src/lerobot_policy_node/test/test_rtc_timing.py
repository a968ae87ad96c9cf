"""RTC mode against a policy slower than the control period: the real control and inference threads
of `PolicyController`, the real ACT test checkpoint, and command timing as the robot would see it.

The model is made slow the way a big one is: each `predict_action_chunk` takes at least
`INFERENCE_S` (the real ACT runs, then the call waits out the rest). With RTC the next chunk is
inferred while the queue plays out and replaces its remainder minus the actions that fell due, so
a command goes out every control period. Without RTC (LeRobot's synchronous loop) the controller
holds at each chunk's end for the whole inference, then runs the chunk from its first action.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from lerobot_core.safety import SafetyFilter, SafetyLimits
from lerobot_policy_node.action_queue import SchedulerConfig
from lerobot_policy_node.controller import PolicyController
from lerobot_policy_node.observation import ObservationBuilder, ObservationSpec
from lerobot_runtime import load_policy

from .conftest import ACT_SMALL

JOINTS = ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
FRONT = "observation.images.front"
FPS = 15.0
PERIOD_S = 1.0 / FPS
INFERENCE_S = 2.5 * PERIOD_S  # the model: 167 ms per chunk, 2.5 control periods
N_ACTION_STEPS = 10  # the whole chunk: 667 ms of actions
# with RTC: infer when <= 9 actions are left; a chunk then arrives with 3 of its actions due, and its
# 7 others (467 ms) outlast the next inference: RTC keeps up while inference < half a chunk
REFILL_THRESHOLD = 0.9
RUN_S = 4.0
# with RTC no two commands further apart: one period, plus what a loaded machine adds to the control
# thread (both modes see that); the model alone takes 2.5 periods, and nothing waits for it
MAX_GAP_PERIODS = 4.0


class SlowPolicy:
    """The real policy, each chunk taking at least `inference_s` (a model too big for the rate)."""

    def __init__(self, policy, inference_s: float):
        self._policy, self.inference_s = policy, inference_s
        self.calls = 0

    def __getattr__(self, name):
        return getattr(self._policy, name)

    def predict_action_chunk(self, batch):
        t0 = time.perf_counter()
        chunk = self._policy.predict_action_chunk(batch)
        self.calls += 1
        time.sleep(max(0.0, self.inference_s - (time.perf_counter() - t0)))
        return chunk


@pytest.fixture(scope="module")
def act():
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the model must not take the control thread's core
    yield load_policy(ACT_SMALL)
    torch.set_num_threads(threads)


def run(policy, rtc: bool):
    """Run the controller for RUN_S; returns [(monotonic time, held)] per command and the chunks."""
    obs = ObservationBuilder(
        ObservationSpec(state_names=JOINTS, image_shapes={FRONT: (3, 48, 64)}, fps=FPS, max_age_s=60.0)
    )
    image = np.full((48, 64, 3), 128, np.uint8)
    done = threading.Event()

    def camera_and_joints():  # a robot publishing at the control rate: the controller counts their age
        while not done.is_set():
            now = time.time_ns()
            obs.push_joints(list(JOINTS), [0.0] * 6, now)
            obs.push_image(FRONT, image, now)
            done.wait(PERIOD_S)

    feeder = threading.Thread(target=camera_and_joints, daemon=True)
    feeder.start()
    sched = SchedulerConfig(
        fps=FPS,
        n_action_steps=N_ACTION_STEPS,
        chunk_size=10,
        mode="replace",
        refill_threshold=REFILL_THRESHOLD,
        rtc=rtc,
    )
    commands, chunks = [], []
    lock = threading.Lock()

    def publish(cmd, held):
        with lock:
            commands.append((time.monotonic(), held))

    ctl = PolicyController(
        SlowPolicy(policy, INFERENCE_S),
        obs,
        sched,
        SafetyFilter(SafetyLimits.build(6, max_step=10.0)),
        publish_command=publish,
        on_chunk=chunks.append,
        control_priority=0,
    )
    ctl.start()
    try:
        time.sleep(RUN_S)
    finally:
        ctl.stop()
        done.set()
        feeder.join()
    with lock:
        return list(commands), chunks, ctl.stats


def driving(commands):
    """The commands from the first fresh one on (before it, both modes wait for the first chunk)."""
    first = next(i for i, (_, held) in enumerate(commands) if not held)
    return commands[first:]


def fresh_gaps(commands):
    """Times between consecutive fresh (not held) commands, in control periods."""
    t = np.array([c[0] for c in driving(commands) if not c[1]])
    return np.diff(t) / PERIOD_S


def test_rtc_keeps_commands_flowing_at_the_control_rate_with_a_slow_policy(act):
    commands, chunks, stats = run(act, rtc=True)
    cmds = driving(commands)
    held = sum(h for _, h in cmds)
    gaps = fresh_gaps(commands)
    latencies = [c.latency_s for c in chunks]
    summary = (
        f"{len(cmds)} commands, {held} held, {len(chunks)} chunks, latency {np.mean(latencies) * 1e3:.0f} ms, "
        f"skipped {[c.skipped for c in chunks]}, largest gap {gaps.max():.2f} periods"
    )
    assert min(latencies) >= INFERENCE_S, summary  # the policy is slower than the control period
    assert len(chunks) >= 8, summary  # inference ran back to back, ahead of the queue's end
    # merged with the remainder: every chunk after the first arrived with its first actions already due
    assert all(c.skipped >= 1 for c in chunks[1:]), summary
    assert held == 0, summary  # the robot never waited for the model: every tick had a fresh action
    assert gaps.max() <= MAX_GAP_PERIODS, summary
    window = cmds[-1][0] - cmds[0][0]
    assert len(cmds) >= 0.8 * window * FPS, summary  # a command per control period


def test_without_rtc_the_robot_holds_at_each_chunk_end_while_the_policy_infers(act):
    commands, chunks, stats = run(act, rtc=False)
    cmds = driving(commands)
    gaps = fresh_gaps(commands)
    summary = (
        f"{len(cmds)} commands, {sum(h for _, h in cmds)} held, {len(chunks)} chunks, skipped "
        f"{[c.skipped for c in chunks]}, gaps > 1.5 periods {np.round(gaps[gaps > 1.5], 2).tolist()}"
    )
    assert len(chunks) >= 3, summary
    assert all(c.skipped == 0 for c in chunks), summary  # each chunk runs from its first action
    # a wait at every chunk end, at least as long as the inference (2.5 periods)
    waits = gaps[gaps >= INFERENCE_S / PERIOD_S - 0.1]
    ends = len(chunks) - 1  # the chunk ends followed by a new chunk within the run
    assert len(waits) >= ends - 1, summary
    # held commands fill the waits: the robot holds where the last chunk ended
    held_runs = sum(1 for a, b in zip(cmds, cmds[1:], strict=False) if not a[1] and b[1])
    assert held_runs >= ends - 1, summary
