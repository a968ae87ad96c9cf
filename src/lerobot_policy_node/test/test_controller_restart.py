"""After a stale hold the controller starts over from where the arm is (ROS-free): the queue planned before
the gap is dropped, holds and per-step bounds count from the measured position, and a chunk whose
inference began before the restart is dropped when it comes. Measured on the realtime sim (an episode
reset is such a gap: the sim holds 1 s, then the arm is home): docs/remote_inference.md."""

import numpy as np

from lerobot_policy_node.action_queue import ActionScheduler, SchedulerConfig
from lerobot_policy_node.controller import HOLDING, RUNNING

from .test_remote import JOINTS
from .test_remote import controller as remote_controller

MS = 1_000_000
STEP = 0.1  # per-step bound [rad]


def controller():
    c, gate, sent, now = remote_controller(chunk_size=40, max_age_s=0.05, max_step=STEP)
    return c, gate, c.obs, sent, now


def tick(c, obs, now, joints=None):
    """10 ms later; with `joints`, a fresh joint state taken then."""
    now[0] += 10 * MS
    if joints is not None:
        obs.push_joints(JOINTS, joints, now[0])
    c.control_step()


def feed(c, gate, value, now, steps=40):
    chunk = np.full((steps, 2), value)
    return c.submit_remote(chunk, gate.check("gpu", JOINTS, chunk, now[0], now[0]))


def test_fresh_observations_after_a_stale_hold_start_over_from_the_measured_position():
    c, gate, obs, sent, now = controller()
    feed(c, gate, 1.0, now)
    for _ in range(3):
        tick(c, obs, now, joints=[0.0, 0.0])
    assert [round(cmd[0], 6) for cmd, _ in sent] == [0.1, 0.2, 0.3]  # bounded toward 1.0
    for _ in range(10):  # 100 ms without a joint state: after the 50 ms bound, hold the last command
        tick(c, obs, now)
    assert c.stats.state == HOLDING and c.stats.message.startswith("stale observation")
    last = [cmd for cmd, held in sent if not held][-1]
    assert sent[-1][1] and np.allclose(sent[-1][0], last) and last[0] < 1.0
    # the arm comes back somewhere else (an episode reset, a hand): 27 actions of the old chunk are left,
    # planned before the gap; they are dropped and the hold is where the arm is, not the old command
    tick(c, obs, now, joints=[-2.0, -2.0])
    assert c.stats.restarts == 1 and c.scheduler.queue_length() == 0
    assert c.stats.state == HOLDING and sent[-1][1] and np.allclose(sent[-1][0], -2.0)
    assert c.stats.message.startswith("started over after a stale observation"), c.stats.message
    # the next chunk's commands are bounded from the measured position
    feed(c, gate, 0.0, now)
    tick(c, obs, now, joints=[-2.0, -2.0])
    assert c.stats.state == RUNNING and not sent[-1][1] and np.allclose(sent[-1][0], -2.0 + STEP)


def test_a_fresh_gap_shorter_than_the_age_bound_changes_nothing():
    c, gate, obs, sent, now = controller()
    feed(c, gate, 1.0, now)
    for k in range(6):  # a joint state every other tick: 20 ms gaps, within the 50 ms bound
        tick(c, obs, now, joints=[0.0, 0.0] if k % 2 else None)
    assert c.stats.restarts == 0 and not any(held for _, held in sent)
    assert [round(cmd[0], 6) for cmd, _ in sent] == [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]


def test_a_chunk_whose_inference_began_before_a_reset_is_dropped():
    sched = ActionScheduler(SchedulerConfig(fps=10, n_action_steps=8, chunk_size=8))
    before = sched.begin_inference()
    sched.reset()
    assert sched.submit(np.ones((8, 2)), before) == 8  # every action skipped: nothing queued
    assert sched.queue_length() == 0 and sched.needs_inference() and sched.tick() is None
    assert sched.submit(np.full((8, 2), 2.0), sched.begin_inference()) == 0
    assert sched.tick()[0] == 2.0


def test_waiting_for_the_first_observation_is_not_a_restart():
    c, gate, obs, sent, now = controller()
    now[0] = 200 * MS  # the start's joint state (t = 0) is already too old: hold, stale
    c.control_step()
    assert c.stats.message.startswith("stale observation")
    feed(c, gate, 1.0, now)
    tick(c, obs, now, joints=[0.0, 0.0])
    assert c.stats.restarts == 0 and c.stats.state == RUNNING and np.allclose(sent[-1][0], STEP)


def test_a_stale_gap_before_any_chunk_keeps_the_links_reason():
    """The CI case: the arm's joint states paused under load before the inference host sent anything. There
    was no queue to drop, so the hold says what the link says, not that it started over."""
    c, gate, obs, sent, now = controller()
    tick(c, obs, now, joints=[0.0, 0.0])
    for _ in range(10):
        tick(c, obs, now)
    assert c.stats.message.startswith("stale observation")
    tick(c, obs, now, joints=[0.0, 0.0])
    assert c.stats.state == HOLDING and c.stats.message.startswith("waiting for the first chunk"), (
        c.stats.message
    )


def test_after_a_restart_the_hold_also_names_a_silent_host():
    c, gate, obs, sent, now = controller()
    feed(c, gate, 1.0, now)
    tick(c, obs, now, joints=[0.0, 0.0])
    for _ in range(10):
        tick(c, obs, now)
    now[0] += int(gate.cfg.source_timeout_s * 1e9) + 1
    tick(c, obs, now, joints=[0.0, 0.0])
    msg = c.stats.message
    assert msg.startswith("started over after a stale observation") and "policy host silent" in msg, msg
