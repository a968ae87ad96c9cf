"""A chunk inferred on the robot's own host is timed from its observation's stamp, as a remote one is: the
actions that fell due since the observation was taken are skipped, not only those due during inference,
and one observation gives one chunk (ROS-free; the real controller threads, a policy that returns a ramp
so the executed action tells which index of its chunk it was)."""

import threading
import time

import numpy as np
import pytest

from lerobot_core.ros.testing import wait_until
from lerobot_core.safety import SafetyFilter, SafetyLimits
from lerobot_policy_node.action_queue import ActionScheduler, SchedulerConfig
from lerobot_policy_node.controller import PolicyController
from lerobot_policy_node.observation import ObservationBuilder, ObservationSpec
from lerobot_runtime import read_policy_config

from .conftest import ACT_SMALL

JOINTS = ["a", "b"]
FPS = 50.0
CHUNK = 20
MS = 1_000_000


class RampPolicy:
    """Action i of every chunk is (i, i): a command's value is its index in the chunk."""

    def __init__(self):
        self.config = read_policy_config(ACT_SMALL)[1]
        self.calls = 0

    def reset(self) -> None:
        pass

    def predict_action_chunk(self, batch):
        self.calls += 1
        return np.repeat(np.arange(CHUNK, dtype=np.float64)[None, :, None], 2, axis=2)


def test_an_observations_age_counts_as_delay():
    sched = ActionScheduler(SchedulerConfig(fps=100, n_action_steps=8, chunk_size=8))
    # 25 ms old at 100 Hz: its actions 0, 1 and 2 fell due before inference began
    ticket = sched.begin_inference(age_s=0.025)
    assert sched.submit(np.arange(8.0)[:, None], ticket) == 3
    assert sched.tick()[0] == 3.0
    sched.reset()
    assert sched.submit(np.arange(8.0)[:, None], sched.begin_inference()) == 0  # a fresh one: none


@pytest.fixture
def running():
    obs = ObservationBuilder(ObservationSpec(tuple(JOINTS), {}, fps=FPS, max_age_s=10.0))
    policy = RampPolicy()
    sent, lock = [], threading.Lock()

    def publish(cmd, held):
        with lock:
            sent.append((float(cmd[0]), held))

    ctl = PolicyController(
        policy,
        obs,
        SchedulerConfig(fps=FPS, n_action_steps=CHUNK, chunk_size=CHUNK),
        SafetyFilter(SafetyLimits.build(2)),
        publish_command=publish,
        control_priority=0,
    )
    obs.push_joints(JOINTS, [0.0, 0.0], time.time_ns() - 100 * MS)  # taken 100 ms ago: 5 periods
    ctl.start()
    yield ctl, obs, policy, sent, lock
    ctl.stop()


def test_a_local_chunk_skips_what_fell_due_since_its_observation_was_taken(running):
    ctl, obs, policy, sent, lock = running
    assert wait_until(lambda: any(not held for _, held in list(sent)))
    with lock:
        first = next(value for value, held in sent if not held)
    # at least the 5 periods of the observation's age (inference is instant: the delay is the age)
    assert first >= 5, sent


def test_one_observation_gives_one_chunk(running):
    ctl, obs, policy, sent, lock = running
    # the queue runs dry (20 actions at 50 Hz, from index 5 on): it asks for a chunk again, but the
    # only observation is the one it had
    assert wait_until(lambda: ctl.stats.message == "action queue empty")
    time.sleep(0.2)
    assert policy.calls == 1, ctl.stats
    obs.push_joints(JOINTS, [0.0, 0.0], time.time_ns())  # a new one: a new chunk
    assert wait_until(lambda: policy.calls == 2), ctl.stats
    assert wait_until(lambda: ctl.stats.state == "running"), ctl.stats
