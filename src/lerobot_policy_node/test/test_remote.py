"""Remote inference rules (ROS-free): which chunk from an inference host the robot host executes, and the
controller's queue fed with them (no model on this side)."""

import numpy as np
import pytest

from lerobot_core.safety import SafetyFilter, SafetyLimits
from lerobot_policy_node.action_queue import ActionScheduler, SchedulerConfig
from lerobot_policy_node.controller import HOLDING, RUNNING, PolicyController
from lerobot_policy_node.observation import ObservationBuilder, ObservationSpec
from lerobot_policy_node.remote import ChunkGate, ChunkRefusedError, ConfigOnlyPolicy, RemoteConfig

from .conftest import ACT_SMALL

JOINTS = ["a", "b"]
S = 1_000_000_000


def gate(**kw):
    return ChunkGate(JOINTS, RemoteConfig(**{"max_chunk_age_s": 0.5, "source_timeout_s": 1.0, **kw}))


def test_another_contract_is_refused_naming_both():
    g = gate()
    with pytest.raises(ChunkRefusedError) as exc:
        g.check("gpu:1", ["a", "c"], np.zeros((4, 2)), 0, 0)
    assert "['a', 'c']" in str(exc.value) and "['a', 'b']" in str(exc.value)
    with pytest.raises(ChunkRefusedError, match=r"shape \(4, 3\).*shape \(steps, 2\)"):
        g.check("gpu:1", JOINTS, np.zeros((4, 3)), 0, 0)
    assert "another contract" in g.hold_reason(0)
    assert g.refused == 2 and g.source == ""  # a wrong publisher never takes the lock


def test_one_source_at_a_time_until_it_goes_silent():
    g = gate()
    assert g.check("gpu:1", JOINTS, np.zeros((4, 2)), 0, 0) == 0.0
    with pytest.raises(ChunkRefusedError, match="second command source refused: gpu:2 publishes while gpu:1"):
        g.check("gpu:2", JOINTS, np.zeros((4, 2)), S // 2, S // 2)
    g.check("gpu:1", JOINTS, np.zeros((4, 2)), S // 2, S // 2)  # the first one keeps driving
    # gpu:1 silent for longer than source_timeout_s: gpu:2 takes over
    assert g.check("gpu:2", JOINTS, np.zeros((4, 2)), 2 * S, 2 * S) == 0.0
    assert g.source == "gpu:2"


def test_age_is_counted_on_the_robot_clock_and_bounded():
    g = gate()
    assert g.check("gpu", JOINTS, np.zeros((4, 2)), 10 * S, 10 * S + S // 4) == pytest.approx(0.25)
    with pytest.raises(
        ChunkRefusedError, match=r"chunk too old: its observation is 0\.600 s old > max_chunk_age_s 0\.5"
    ):
        g.check("gpu", JOINTS, np.zeros((4, 2)), 10 * S, 10 * S + 6 * S // 10)
    with pytest.raises(ChunkRefusedError, match="in the future of this robot's clock"):
        g.check("gpu", JOINTS, np.zeros((4, 2)), 12 * S, 11 * S)


def test_hold_reasons_name_the_cause():
    g = gate()
    assert "waiting for the first chunk on policy/remote_chunk" in g.hold_reason(0)
    g.check("gpu", JOINTS, np.zeros((4, 2)), 0, S // 10, latency_s=0.04)
    assert "chunks arrive late (last one 0.100 s old, of which inference 0.040 s" in g.hold_reason(S // 5)
    assert "policy host silent: no chunk from gpu for 2.0 s" in g.hold_reason(S // 10 + 2 * S)
    with pytest.raises(ChunkRefusedError):
        g.check("gpu", JOINTS, np.zeros((4, 2)), 0, 3 * S)
    assert g.hold_reason(3 * S).startswith("remote chunk refused: chunk too old")
    # refusals stop too: the host is silent, whatever it sent last
    assert g.hold_reason(5 * S).startswith("policy host silent: no chunk from gpu for 4.9 s")


@pytest.mark.parametrize("mult", [1, 3])
def test_actions_due_since_the_observation_are_skipped(mult):
    sched = ActionScheduler(
        SchedulerConfig(fps=10, n_action_steps=8, chunk_size=8, interpolation_multiplier=mult)
    )
    chunk = np.arange(8.0)[:, None]
    # 0.25 s at 10 Hz: actions 0, 1 (t = 0, 0.1, 0.2 due) ... ceil(2.5) = 3 policy steps skipped
    assert sched.submit(chunk, sched.ticket_for_age(0.25)) == 3
    assert sched.tick()[0] == 3.0


def controller(
    chunk_size=6,
    fps=100.0,
    mode="replace",
    max_age_s=10.0,
    max_step=float("inf"),
    max_chunk_age_s=float("inf"),
):
    """A robot-side controller fed by the test (no model), driven tick by tick (never by its threads)."""
    from lerobot_runtime import read_policy_config

    policy = ConfigOnlyPolicy(read_policy_config(ACT_SMALL)[1])
    obs = ObservationBuilder(ObservationSpec(tuple(JOINTS), {}, fps=fps, max_age_s=max_age_s))
    sent = []
    now = [0]
    g = gate(max_chunk_age_s=0.05)
    c = PolicyController(
        policy,
        obs,
        SchedulerConfig(fps=fps, n_action_steps=chunk_size, chunk_size=chunk_size, mode=mode),
        SafetyFilter(SafetyLimits.build(2, None, None, max_step)),
        publish_command=lambda cmd, held: sent.append((cmd.copy(), held)),
        now_ns=lambda: now[0],
        run_inference=False,
        starved_reason=g.hold_reason,
        max_chunk_age_s=max_chunk_age_s,
    )
    obs.push_joints(JOINTS, [0.0, 0.0], 0)
    c.path.reset(obs.latest_joints())
    return c, g, sent, now


def feed(c, g, value, stamp_ns, now_ns, steps=6):
    age = g.check("gpu", JOINTS, np.full((steps, 2), value), stamp_ns, now_ns)
    return c.submit_remote(np.full((steps, 2), value), age)


def test_a_chunk_older_than_the_bound_is_never_executed_and_fresh_ones_resume():
    c, g, sent, now = controller()
    for k in range(3):  # a chunk (value 7) whose observation is 60 ms old, bound 50 ms: never queued
        now[0] = k * S // 100
        with pytest.raises(ChunkRefusedError):
            feed(c, g, 7.0, now[0] - 60_000_000, now[0])
        c.control_step()
    assert all(held for _, held in sent) and not any((cmd == 7.0).any() for cmd, _ in sent)
    assert c.stats.state == HOLDING and c.stats.message.startswith("remote chunk refused: chunk too old")
    # a fresh one (20 ms old at 100 Hz: 2 actions were due) is executed from its third action, by itself
    now[0] = 3 * S // 100
    assert feed(c, g, 1.0, now[0] - 20_000_000, now[0]) == 2
    for _ in range(4):
        now[0] += S // 100
        c.control_step()
    assert c.stats.state == RUNNING and [cmd[0] for cmd, held in sent[-4:]] == [1.0] * 4
    # the queue (4 left) runs dry: hold, with the link's reason; 2 s of silence: the host is silent
    for _ in range(2):
        now[0] += S // 100
        c.control_step()
    assert c.stats.state == HOLDING and "chunks arrive late" in c.stats.message
    now[0] += 2 * S
    c.control_step()
    assert c.stats.message.startswith("policy host silent: no chunk from gpu")


def test_append_mode_takes_a_remote_chunk_only_when_the_queue_asks():
    c, g, sent, now = controller(mode="append")
    assert feed(c, g, 1.0, 0, 0) == 0
    assert feed(c, g, 2.0, 0, 0) is None  # 6 queued, threshold 3: not taken
    assert c.scheduler.queue_length() == 6


def test_the_config_only_policy_cannot_infer():
    from lerobot_runtime import read_policy_config

    with pytest.raises(RuntimeError, match="inference runs on the inference host"):
        ConfigOnlyPolicy(read_policy_config(ACT_SMALL)[1]).predict_action_chunk({})


def ramp(base: float, steps: int) -> np.ndarray:
    """A chunk whose action i is base + i (both joints): a command's value tells its chunk and index."""
    return np.repeat((base + np.arange(steps, dtype=np.float64))[:, None], 2, axis=1)


def test_a_remote_chunk_is_taken_when_the_queue_asks_the_newest_one():
    """A local inference starts when the queue asks (at refill_threshold); a remote chunk is taken then too,
    so the robot plays a chunk's head as it does locally, although the inference host infers back to back
    (taken on arrival, each chunk would replace the queue after one action). The newest waiting chunk is
    taken, the actions due since its observation skipped (its age on arrival plus its wait)."""
    c, g, sent, now = controller()  # 100 Hz, 6 actions a chunk, asks at 3
    assert c.submit_remote(ramp(10, 6), 0.0) == 0  # the queue is empty: taken
    assert c.submit_remote(ramp(20, 6), 0.0) is None  # 6 queued: waits
    assert c.submit_remote(ramp(30, 6), 0.0) is None  # ... and replaces the one waiting
    for _ in range(4):
        now[0] += S // 100
        c.control_step()
    # 10, 11, 12 played; then the queue (3 left) asks: the newest chunk, 40 ms after it came, from action 4
    assert [cmd[0] for cmd, _ in sent] == [10.0, 11.0, 12.0, 34.0]
    assert c.stats.chunks == 2


def test_a_remote_chunk_that_waited_past_the_age_bound_is_never_executed():
    c, g, sent, now = controller(chunk_size=12, max_chunk_age_s=0.05)  # asks at 6 left: after 60 ms
    assert c.submit_remote(ramp(10, 12), 0.0) == 0
    assert c.submit_remote(ramp(50, 12), 0.0) is None
    for _ in range(8):
        now[0] += S // 100
        c.control_step()
    # asked at 70 ms: the waiting chunk is then 70 ms old > 50 ms, dropped; the first one plays on
    assert [cmd[0] for cmd, _ in sent] == [10.0 + k for k in range(8)]
    assert c.stats.chunks == 1
