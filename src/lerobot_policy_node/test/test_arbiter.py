"""The control arbiter's core: every (mode, input) pair, silence, bumpless switching, alignment."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lerobot_core.control_mode import ControlMode
from lerobot_core.safety import SafetyLimits
from lerobot_policy_node.arbiter import (
    COMMANDS,
    Arbiter,
    ArbiterConfig,
    Source,
    StallMeter,
)

N = 3
STEP = 0.05  # rad per control step
TIMEOUT = 0.25
PRESENT = np.array([0.1, -0.2, 0.3])
POLICY_CMD = np.array([0.12, -0.18, 0.31])
HUMAN_CMD = np.array([0.08, -0.22, 0.29])


def make(mode=ControlMode.POLICY, align=False, lower=None, upper=None) -> Arbiter:
    limits = SafetyLimits.build(N, lower, upper, STEP)
    cfg = ArbiterConfig(
        joint_names=("a", "b", "c"),
        limits=limits,
        source_timeout_s=TIMEOUT,
        initial_mode=mode,
        require_leader_alignment=align,
        alignment_timeout_s=1.0,
    )
    arb = Arbiter(cfg)
    arb.update_present(PRESENT)
    arb.mode = mode  # the table starts from every mode; how the arbiter starts is tested below
    arb._awaiting_start = False
    return arb


def feed(arb: Arbiter, now: float, policy=True, human=True) -> None:
    if policy:
        arb.update_source(Source.POLICY, POLICY_CMD, now)
    if human:
        arb.update_source(Source.HUMAN, HUMAN_CMD, now)


# (start mode, command, policy live, human live) -> (success, mode after, transition event or None)
TABLE = [
    (ControlMode.POLICY, "pause", True, True, True, ControlMode.HOLD, "pause"),
    (ControlMode.POLICY, "takeover", True, True, False, ControlMode.POLICY, None),  # pause first
    (ControlMode.POLICY, "resume", True, True, True, ControlMode.POLICY, None),  # already
    (ControlMode.POLICY, "cycle", True, True, True, ControlMode.HOLD, "pause"),
    (ControlMode.POLICY, "save", True, True, True, ControlMode.HOLD, "save"),
    (ControlMode.POLICY, "rerecord", True, True, True, ControlMode.HOLD, "rerecord"),
    (ControlMode.POLICY, "stop", True, True, True, ControlMode.HOLD, "stop"),
    (ControlMode.HOLD, "pause", True, True, True, ControlMode.HOLD, None),
    (ControlMode.HOLD, "takeover", True, True, True, ControlMode.HUMAN, "takeover"),
    (ControlMode.HOLD, "takeover", True, False, False, ControlMode.HOLD, None),  # no live leader
    (ControlMode.HOLD, "resume", True, True, True, ControlMode.POLICY, "resume"),
    (ControlMode.HOLD, "resume", False, True, False, ControlMode.HOLD, None),  # policy silent
    (ControlMode.HOLD, "cycle", True, True, True, ControlMode.HUMAN, "takeover"),
    (ControlMode.HOLD, "cycle", True, False, False, ControlMode.HOLD, None),
    (ControlMode.HOLD, "save", True, True, True, ControlMode.HOLD, None),
    (ControlMode.HOLD, "rerecord", True, True, True, ControlMode.HOLD, None),
    (ControlMode.HOLD, "stop", True, True, True, ControlMode.HOLD, None),
    (ControlMode.HUMAN, "pause", True, True, True, ControlMode.HOLD, "pause"),
    (ControlMode.HUMAN, "takeover", True, True, True, ControlMode.HUMAN, None),
    (ControlMode.HUMAN, "resume", True, True, True, ControlMode.POLICY, "resume"),
    (ControlMode.HUMAN, "resume", False, True, False, ControlMode.HUMAN, None),
    (ControlMode.HUMAN, "cycle", True, True, True, ControlMode.POLICY, "resume"),
    (ControlMode.HUMAN, "cycle", False, True, False, ControlMode.HUMAN, None),
    (ControlMode.HUMAN, "save", True, True, True, ControlMode.HOLD, "save"),
    (ControlMode.HUMAN, "rerecord", True, True, True, ControlMode.HOLD, "rerecord"),
    (ControlMode.HUMAN, "stop", True, True, True, ControlMode.HOLD, "stop"),
]


def test_table_covers_every_mode_and_command():
    seen = {(m, c) for m, c, *_ in TABLE}
    assert seen == {(m, c) for m in ControlMode for c in COMMANDS}


@pytest.mark.parametrize("start,command,policy_live,human_live,ok,after,event", TABLE)
def test_transition(start, command, policy_live, human_live, ok, after, event):
    arb = make(start)
    feed(arb, 10.0, policy=policy_live, human=human_live)
    before = len(arb.transitions)
    reply = arb.request(command, 10.01)
    assert reply.success is ok
    assert reply.mode == after == arb.mode
    if event is None:
        assert len(arb.transitions) == before
        assert reply.transition is None
    else:
        t = arb.transitions[-1]
        assert (t.previous, t.mode, t.event, t.stamp_s) == (start, after, event, 10.01)
    assert arb.is_intervention == (after == ControlMode.HUMAN)


def test_refusals_say_why():
    arb = make(ControlMode.HOLD)
    feed(arb, 0.0, human=False)
    r = arb.request("takeover", 0.01)
    assert not r.success and "no live leader" in r.message and "keeps holding" in r.message
    assert arb.step(0.02) == pytest.approx(PRESENT)  # the follower keeps holding
    arb2 = make(ControlMode.POLICY)
    r = arb2.request("takeover", 0.0)
    assert not r.success and "pause first" in r.message
    r = make(ControlMode.HOLD).request("resume", 0.0)
    assert not r.success and "policy is silent" in r.message
    r = arb.request("jump", 0.0)
    assert not r.success and "unknown command 'jump'" in r.message


def test_hold_keeps_the_pose_of_the_pause_not_the_sources():
    arb = make(ControlMode.POLICY)
    feed(arb, 0.0)
    arb.step(0.0)
    arb.update_present(PRESENT + 0.01)
    arb.request("pause", 0.01)
    held = arb.step(0.02)
    assert held == pytest.approx(PRESENT + 0.01)
    for k in range(10):  # sources keep publishing, the pose stays
        feed(arb, 0.03 + k * 0.01)
        arb.update_present(PRESENT + 0.02)
        assert arb.step(0.03 + k * 0.01) == pytest.approx(PRESENT + 0.01)


@pytest.mark.parametrize(
    "mode,source", [(ControlMode.POLICY, Source.POLICY), (ControlMode.HUMAN, Source.HUMAN)]
)
def test_silent_source_in_control_holds_not_replays(mode, source):
    arb = make(mode)
    feed(arb, 0.0)
    out = arb.step(0.0)
    assert arb.mode == mode and out is not None
    arb.update_present(out)
    # only the other source keeps publishing
    other = Source.HUMAN if source == Source.POLICY else Source.POLICY
    arb.update_source(other, np.zeros(N), TIMEOUT)
    assert arb.step(TIMEOUT) is not None and arb.mode == mode  # exactly at the timeout: still live
    cmd = arb.step(TIMEOUT + 0.02)
    assert arb.mode == ControlMode.HOLD
    t = arb.transitions[-1]
    assert t.event == f"{source.value}_silent" and "silent for" in t.message
    assert cmd == pytest.approx(out)  # holds the measured pose, not the silent source's command
    # a fresh command from the silent source does not take control back by itself
    arb.update_source(source, np.full(N, 0.5), TIMEOUT + 0.03)
    assert arb.step(TIMEOUT + 0.04) == pytest.approx(out) and arb.mode == ControlMode.HOLD


PERIOD = 0.02
CAP = 2 * PERIOD  # what a control step counts toward silence at most (STALL_PERIODS)


def test_the_callers_stall_does_not_count_as_silence():
    """The caller was stalled: its steps right after the stall have not seen the commands waiting for
    them. The control node's timer can run twice before the subscriptions (the timer's next period
    may come a moment after a long stall): neither step may end the drive."""
    arb = make(ControlMode.POLICY)
    feed(arb, 0.0)
    arb.update_present(arb.step(0.0))
    late = TIMEOUT + 0.5  # the caller's first step after a stall of ~3 timeouts
    out = arb.step(late, stalled_s=late - CAP)
    assert arb.mode == ControlMode.POLICY and not arb.transitions
    assert out is not None  # the policy's last command, through the safety filter
    assert arb.silence_s(Source.POLICY, late) == pytest.approx(CAP)
    assert arb.step(late + 0.0005) is not None and arb.mode == ControlMode.POLICY  # the timer again, at once
    # the commands that waited are taken: received after the stall, they count from then on
    arb.update_source(Source.POLICY, np.full(N, 0.05), late + 0.001)
    assert arb.silence_s(Source.POLICY, late + 0.001) == 0.0
    arb.step(late + 0.02)
    assert arb.mode == ControlMode.POLICY and not arb.transitions
    # a policy that really stopped after that is judged silent after the timeout of awake time
    arb.step(late + 0.001 + TIMEOUT)
    assert arb.mode == ControlMode.POLICY
    arb.step(late + 0.001 + TIMEOUT + 0.01)
    assert arb.mode == ControlMode.HOLD and arb.transitions[-1].event == "policy_silent"
    assert "silent for 0.26" in arb.transitions[-1].message


def test_a_source_that_stopped_before_a_stall_is_judged_after_the_timeout_of_awake_time():
    arb = make(ControlMode.POLICY)
    feed(arb, 0.0)
    arb.update_present(arb.step(0.0))
    arb.step(0.1)  # the policy stops after its command at 0.0; the caller stalls for ~1 s
    late = 1.1
    arb.step(late, stalled_s=late - 0.1 - CAP)
    assert arb.mode == ControlMode.POLICY  # awake for 0.1 + CAP of the timeout so far
    judged = late + TIMEOUT - 0.1 - CAP  # the rest of the timeout, awake
    arb.step(judged - 0.005)
    assert arb.mode == ControlMode.POLICY
    arb.step(judged + 0.005)
    assert arb.mode == ControlMode.HOLD and arb.transitions[-1].event == "policy_silent"


def test_silence_is_judged_when_every_step_runs_late():
    """A starved caller whose every step comes 3 periods late: each counts CAP of awake time, so a
    source that stopped is still judged, after TIMEOUT / CAP steps."""
    arb = make(ControlMode.POLICY)
    feed(arb, 0.0)
    arb.update_present(arb.step(0.0))
    gap = 3 * PERIOD
    now, steps = 0.0, 0
    while arb.mode == ControlMode.POLICY and steps < 100:
        now += gap
        steps += 1
        arb.step(now, stalled_s=gap - CAP)
    assert arb.mode == ControlMode.HOLD and arb.transitions[-1].event == "policy_silent"
    assert steps == int(TIMEOUT / CAP) + 1  # 7 steps, 0.42 s of wall time for a 0.25 s timeout


def test_a_stall_does_not_make_a_never_heard_source_live():
    arb = make(ControlMode.HOLD)
    arb.update_present(PRESENT)
    arb.step(0.0)
    arb.step(2.0, stalled_s=1.9)
    assert math.isinf(arb.silence_s(Source.POLICY, 2.0))
    assert not arb.request("resume", 2.0).success


@pytest.mark.parametrize(
    "initial,source", [(ControlMode.POLICY, Source.POLICY), (ControlMode.HUMAN, Source.HUMAN)]
)
def test_starts_holding_until_the_initial_source_publishes(initial, source):
    arb = Arbiter(ArbiterConfig(("a", "b", "c"), SafetyLimits.build(N, max_step=STEP), initial_mode=initial))
    arb.update_present(PRESENT)
    assert arb.mode == ControlMode.HOLD
    assert arb.step(0.0) == pytest.approx(PRESENT) and arb.transitions == []
    other = Source.HUMAN if source == Source.POLICY else Source.POLICY
    arb.update_source(other, POLICY_CMD, 0.1)  # the other source does not start anything
    assert arb.step(0.1) == pytest.approx(PRESENT) and arb.mode == ControlMode.HOLD
    arb.update_source(source, POLICY_CMD, 0.2)
    cmd = arb.step(0.2)
    assert arb.mode == initial and arb.transitions[-1].event == "start"
    assert np.max(np.abs(cmd - PRESENT)) <= STEP + 1e-12


def test_initial_hold_waits_for_an_input_and_an_input_cancels_the_start():
    arb = Arbiter(
        ArbiterConfig(("a", "b", "c"), SafetyLimits.build(N, max_step=STEP), initial_mode=ControlMode.HOLD)
    )
    arb.update_present(PRESENT)
    feed(arb, 0.0)
    arb.step(0.0)
    assert arb.mode == ControlMode.HOLD and arb.transitions == []
    assert arb.request("resume", 0.01).success and arb.mode == ControlMode.POLICY
    arb2 = Arbiter(ArbiterConfig(("a", "b", "c"), SafetyLimits.build(N, max_step=STEP)))
    arb2.update_present(PRESENT)
    arb2.request("pause", 0.0)  # the operator paused before the policy came up: it stays paused
    feed(arb2, 0.1)
    arb2.step(0.1)
    assert arb2.mode == ControlMode.HOLD
    arb3 = Arbiter(ArbiterConfig(("a", "b", "c"), SafetyLimits.build(N, max_step=STEP)))
    arb3.update_present(PRESENT)
    assert not arb3.request("resume", 0.0).success  # refused (policy silent): the start still happens
    feed(arb3, 0.1)
    arb3.step(0.1)
    assert arb3.mode == ControlMode.POLICY and arb3.transitions[-1].event == "start"


def test_no_pose_no_command():
    arb = Arbiter(ArbiterConfig(("a", "b", "c"), SafetyLimits.build(N, max_step=STEP)))
    arb.update_source(Source.POLICY, POLICY_CMD, 0.0)
    assert arb.step(0.0) is None
    arb.update_present([math.nan, 0, 0])  # a NaN pose is ignored
    assert arb.step(0.01) is None


@pytest.mark.parametrize(
    "sequence", [("pause", "takeover"), ("pause", "resume"), ("pause", "takeover", "resume")]
)
def test_bumpless_switch_starts_from_present_pose_within_step(sequence):
    arb = make(ControlMode.POLICY)
    far = PRESENT + np.array([1.0, -1.0, 0.5])  # the new source starts far away
    t = 0.0
    arb.update_source(Source.POLICY, PRESENT, t)
    arb.update_source(Source.HUMAN, PRESENT, t)
    arb.step(t)
    pose = PRESENT.copy()
    for command in sequence:
        t += 0.01
        arb.update_source(Source.POLICY, far, t)
        arb.update_source(Source.HUMAN, -far, t)
        arb.update_present(pose)
        assert arb.request(command, t).success
        prev = pose
        for _ in range(5):
            t += 0.01
            arb.update_source(Source.POLICY, far, t)
            arb.update_source(Source.HUMAN, -far, t)
            cmd = arb.step(t)
            assert np.max(np.abs(cmd - prev)) <= STEP + 1e-12
            prev = cmd
        pose = prev
    # in control, the filter converges on the source's command
    target = far if arb.mode == ControlMode.POLICY else -far
    for _ in range(200):
        t += 0.01
        arb.update_source(Source.POLICY, far, t)
        arb.update_source(Source.HUMAN, -far, t)
        cmd = arb.step(t)
    assert cmd == pytest.approx(target)


def test_switch_restarts_from_measured_pose_not_last_command():
    arb = make(ControlMode.HUMAN)
    feed(arb, 0.0)
    arb.step(0.0)
    moved = PRESENT + np.array([0.3, 0.0, 0.0])  # the follower is elsewhere (e.g. pushed)
    arb.update_present(moved)
    feed(arb, 0.01)
    arb.request("resume", 0.01)
    cmd = arb.step(0.02)
    assert np.max(np.abs(cmd - moved)) <= STEP + 1e-12


def test_limits_apply_to_every_source():
    arb = make(ControlMode.HOLD, lower=[-0.1, -0.1, -0.1], upper=[0.1, 0.1, 0.1])
    arb.update_present([0.0, 0.0, 0.0])
    for k in range(100):
        arb.update_source(Source.HUMAN, [5.0, -5.0, 0.05], k * 0.01)
        arb.update_source(Source.POLICY, [5.0, -5.0, 0.05], k * 0.01)
        if k == 0:
            assert arb.request("takeover", 0.0).success
        cmd = arb.step(k * 0.01)
    assert cmd == pytest.approx([0.1, -0.1, 0.05])


def test_takeover_waits_for_leader_alignment():
    arb = make(ControlMode.HOLD, align=True)
    feed(arb, 0.0)
    arb.update_leader_alignment(0.2, 0.035)
    r = arb.request("takeover", 0.0)
    assert r.success and "waits" in r.message and arb.mode == ControlMode.HOLD and arb.takeover_pending
    feed(arb, 0.01)
    arb.step(0.01)
    assert arb.mode == ControlMode.HOLD
    arb.update_leader_alignment(0.02, 0.035)
    feed(arb, 0.02)
    arb.step(0.02)
    assert arb.mode == ControlMode.HUMAN and not arb.takeover_pending
    assert arb.transitions[-1].event == "takeover" and arb.transitions[-1].stamp_s == 0.02


def test_pending_takeover_times_out_and_pause_cancels_it():
    arb = make(ControlMode.HOLD, align=True)
    feed(arb, 0.0)
    arb.update_leader_alignment(math.nan, 0.035)
    arb.request("takeover", 0.0)
    feed(arb, 1.5)
    arb.step(1.5)
    assert arb.mode == ControlMode.HOLD and not arb.takeover_pending
    assert arb.transitions[-1].event == "takeover_timeout" and "did not mirror" in arb.transitions[-1].message
    arb.request("takeover", 1.6)
    assert arb.takeover_pending
    arb.request("pause", 1.7)
    assert not arb.takeover_pending


def test_non_finite_and_wrong_shape_commands_are_ignored():
    arb = make(ControlMode.POLICY)
    arb.update_source(Source.POLICY, POLICY_CMD, 0.0)
    arb.update_source(Source.POLICY, [math.nan, 0, 0], 0.05)
    arb.update_source(Source.POLICY, [0.0, 0.0], 0.06)
    assert arb.step(0.07) == pytest.approx(POLICY_CMD)
    assert (
        arb.step(0.0 + TIMEOUT + 0.01) is not None and arb.mode == ControlMode.HOLD
    )  # the bad ones kept nothing alive


def test_full_hil_loop_records_each_transition_once():
    arb = make(ControlMode.POLICY)
    t = 0.0
    events = []
    for command in ("pause", "takeover", "resume", "pause", "resume", "cycle", "cycle", "cycle", "save"):
        feed(arb, t)
        arb.step(t)
        r = arb.request(command, t)
        assert r.success, r.message
        events.append((r.transition.previous, r.transition.mode))
        t += 0.01
    assert events == [
        (ControlMode.POLICY, ControlMode.HOLD),
        (ControlMode.HOLD, ControlMode.HUMAN),
        (ControlMode.HUMAN, ControlMode.POLICY),
        (ControlMode.POLICY, ControlMode.HOLD),
        (ControlMode.HOLD, ControlMode.POLICY),
        (ControlMode.POLICY, ControlMode.HOLD),
        (ControlMode.HOLD, ControlMode.HUMAN),
        (ControlMode.HUMAN, ControlMode.POLICY),
        (ControlMode.POLICY, ControlMode.HOLD),
    ]
    assert len(arb.transitions) == 9


def test_limits_must_match_joints():
    with pytest.raises(ValueError, match="limits for 2 joints, 3 joint names"):
        Arbiter(ArbiterConfig(("a", "b", "c"), SafetyLimits.build(2)))


@pytest.mark.parametrize("mode", [ControlMode.POLICY, ControlMode.HUMAN])
def test_stand_by_holds_the_measured_pose_and_restart_waits_for_a_fresh_source(mode):
    """Lifecycle deactivate / activate: HOLD at the measured pose whoever drove; a command sent
    before the restart does not start the policy, a new one does."""
    arb = make(ControlMode.POLICY)
    arb.mode = mode
    feed(arb, 0.0)
    arb.step(0.0)
    moved = PRESENT + 0.01
    arb.update_present(moved)
    reply = arb.stand_by(0.01)
    assert reply.success and arb.mode == ControlMode.HOLD and arb.transitions[-1].event == "deactivate"
    feed(arb, 0.02)
    np.testing.assert_allclose(arb.step(0.02), moved)  # the pose measured, not a source's command
    np.testing.assert_allclose(arb.step(0.03), moved)
    assert arb.stand_by(0.04).success and arb.transitions[-1].event == "deactivate"  # no second one
    arb.restart()
    np.testing.assert_allclose(arb.step(0.05), moved)  # the pre-restart command is not live
    assert arb.mode == ControlMode.HOLD
    feed(arb, 0.06)
    arb.step(0.06)
    assert arb.mode == ControlMode.POLICY and arb.transitions[-1].event == "start"


def test_stall_meter_counts_only_the_time_beyond_two_periods():
    meter = StallMeter(rate_hz=10.0)  # 0.1 s periods: up to 0.2 s between steps is not a stall
    assert meter.step(1.0) == 0.0  # the first step after a restart has nothing to compare with
    assert meter.step(1.1) == 0.0
    assert meter.step(1.3) == pytest.approx(0.0)
    assert meter.step(2.0) == pytest.approx(0.5)  # 0.7 s after the previous step
    meter.restart()
    assert meter.step(9.0) == 0.0
