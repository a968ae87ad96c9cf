"""Exact-value tests of the action queue, temporal ensembling and interpolation."""

import threading

import numpy as np
import pytest

from lerobot_policy_node.action_queue import (
    ActionInterpolator,
    ActionQueue,
    ActionScheduler,
    SchedulerConfig,
    TemporalEnsembler,
)


def col(*values):
    return np.array(values, dtype=np.float64)[:, None]


# ---------------------------------------------------------------- against LeRobot's own outputs


def test_ensembler_matches_lerobot(act_reference):
    chunks = act_reference["ensemble.chunks"]  # (steps, 1, chunk, dim)
    ens = TemporalEnsembler(float(act_reference["ensemble.coeff"]), chunks.shape[2])
    got = np.stack([ens.update(c[0]) for c in chunks])
    np.testing.assert_allclose(got, act_reference["ensemble.actions"][:, 0], atol=1e-6, rtol=0)


@pytest.mark.parametrize("tag", ["rtc", "append"])
def test_queue_matches_lerobot_schedule(act_reference, tag):
    # the schedule make_act_fixture.py ran on LeRobot's ActionQueue
    q = ActionQueue(rtc_enabled=tag == "rtc")
    merges = [np.arange(8, dtype=np.float32)[:, None] + 100.0 * (m + 1) for m in range(3)]
    got = []
    q.merge(merges[0], merges[0], real_delay=0, action_index_before_inference=None)
    got += [q.get() for _ in range(3)]
    q.merge(merges[1], merges[1], real_delay=2, action_index_before_inference=None)
    got += [q.get() for _ in range(4)]
    q.merge(merges[2], merges[2], real_delay=3, action_index_before_inference=None)
    while (a := q.get()) is not None:
        got.append(a)
    np.testing.assert_array_equal(np.stack(got)[:, 0], act_reference[f"queue.{tag}.actions"])


# ---------------------------------------------------------------- ensembler by hand


def test_ensembler_weights_by_hand():
    ens = TemporalEnsembler(0.5, 3)
    w = np.exp(-0.5 * np.arange(3))
    assert ens.update(col(1, 2, 3))[0] == 1.0
    # step 2: position 0 holds [2] (1 prediction) and gets 10 with weight w1
    a = ens.update(col(10, 20, 30))[0]
    assert a == pytest.approx((2 * w[0] + 10 * w[1]) / (w[0] + w[1]), abs=1e-6)
    # step 3: position 0 holds avg(3, 20) and gets 100 with weight w2
    b = ens.update(col(100, 200, 300))[0]
    expected = (3 * w[0] + 20 * w[1] + 100 * w[2]) / w.sum()
    assert b == pytest.approx(expected, abs=1e-5)


def test_ensembler_zero_coefficient_is_plain_mean():
    ens = TemporalEnsembler(0.0, 4)
    ens.update(col(0, 4, 8, 12))
    ens.update(col(8, 0, 0, 0))
    assert ens.update(col(2, 0, 0, 0))[0] == pytest.approx((8 + 0 + 2) / 3, abs=1e-6)


def test_ensembler_delayed_chunk_aligns_to_now():
    ens = TemporalEnsembler(0.0, 4)
    ens.add(col(0, 1, 2, 3))
    ens.pop()
    ens.pop()  # two steps passed: position 0 is now the prediction "2"
    ens.add(col(10, 20, 30, 40), delay=2)  # computed two steps ago: its "30" is for now
    assert ens.pop()[0] == pytest.approx((2 + 30) / 2)
    assert ens.pop()[0] == pytest.approx((3 + 40) / 2)
    assert ens.pop() is None


# ---------------------------------------------------------------- queue


def test_queue_basic_accessors():
    q = ActionQueue()
    assert q.empty() and q.qsize() == 0 and q.get() is None and q.get_left_over() is None
    q.merge(col(1, 2, 3), col(10, 20, 30), real_delay=0)
    assert q.qsize() == 3 and q.get()[0] == 10 and q.get_action_index() == 1
    np.testing.assert_array_equal(q.get_left_over()[:, 0], [2, 3])
    np.testing.assert_array_equal(q.get_processed_left_over()[:, 0], [20, 30])
    q.clear()
    assert q.empty()


def test_rtc_replace_skips_delay_and_large_delay_empties():
    q = ActionQueue(rtc_enabled=True)
    q.merge(col(1, 2, 3, 4), col(1, 2, 3, 4), real_delay=0)
    q.get()
    skipped = q.merge(col(5, 6, 7, 8), col(5, 6, 7, 8), real_delay=2)
    assert skipped == 2
    assert [q.get()[0] for _ in range(2)] == [7, 8]
    assert q.merge(col(1, 2), col(1, 2), real_delay=5) == 2 and q.empty()


def test_append_drops_consumed_and_keeps_order():
    q = ActionQueue(rtc_enabled=False)
    q.merge(col(1, 2, 3), col(1, 2, 3), real_delay=0)
    q.get()
    q.merge(col(4, 5), col(4, 5), real_delay=3)
    np.testing.assert_array_equal(q.get_processed_left_over()[:, 0], [2, 3, 4, 5])
    assert q.get_action_index() == 0


def test_delay_mismatch_is_counted():
    q = ActionQueue()
    q.merge(col(1, 2, 3), col(1, 2, 3), 0)
    before = q.get_action_index()
    q.get()
    q.merge(col(1, 2, 3), col(1, 2, 3), real_delay=1, action_index_before_inference=before)
    assert q.delay_mismatches == 0
    q.merge(col(1, 2, 3), col(1, 2, 3), real_delay=2, action_index_before_inference=0)
    assert q.delay_mismatches == 1


def test_queue_thread_safety():
    q = ActionQueue(rtc_enabled=False)
    got = []

    def consumer():
        for _ in range(2000):
            a = q.get()
            if a is not None:
                got.append(a[0])

    t = threading.Thread(target=consumer)
    t.start()
    for m in range(200):
        chunk = np.arange(m * 10, m * 10 + 10, dtype=np.float64)[:, None]
        q.merge(chunk, chunk, 0, None)
    t.join()
    while (a := q.get()) is not None:
        got.append(a[0])
    assert got == list(range(2000))


# ---------------------------------------------------------------- interpolator (LeRobot's exact values)


def test_interpolator_2x_and_3x():
    it = ActionInterpolator(2)
    it.add(np.array([0.0, 0.0]))
    np.testing.assert_array_equal(it.get(), [0, 0])
    assert it.needs_new_action()
    it.add(np.array([2.0, 4.0]))
    np.testing.assert_array_equal(it.get(), [1, 2])
    np.testing.assert_array_equal(it.get(), [2, 4])
    assert it.get() is None
    it3 = ActionInterpolator(3)
    it3.add(np.array([0.0, 0.0]))
    it3.get()
    it3.add(np.array([3.0, 6.0]))
    np.testing.assert_allclose([it3.get() for _ in range(3)], [[1, 2], [2, 4], [3, 6]])


def test_interpolator_sequence_and_count():
    it = ActionInterpolator(2)
    out = []
    for a in (0.0, 4.0, 10.0):
        it.add(np.array([a]))
        while (v := it.get()) is not None:
            out.append(float(v[0]))
    assert out == [0, 2, 4, 7, 10]
    assert len(out) == 1 + (3 - 1) * 2


@pytest.mark.parametrize(("m", "interval"), [(1, 1 / 30), (2, 1 / 60), (3, 1 / 90), (4, 1 / 120)])
def test_interpolator_interval(m, interval):
    assert ActionInterpolator(m).get_control_interval(30) == pytest.approx(interval)
    assert ActionInterpolator(m).enabled == (m > 1)


def test_interpolator_rejects_bad_multiplier():
    with pytest.raises(ValueError, match="multiplier"):
        ActionInterpolator(0)


# ---------------------------------------------------------------- scheduler


def chunk_of(start, n=6):
    return np.arange(start, start + n, dtype=np.float64)[:, None]


def test_scheduler_refill_threshold_and_delay_skip():
    s = ActionScheduler(SchedulerConfig(fps=30, n_action_steps=4, chunk_size=6, refill_threshold=0.5))
    assert s.needs_inference()
    t = s.begin_inference()
    assert not s.needs_inference()  # one inference at a time
    assert s.tick() is None and s.starved_ticks == 1  # nothing yet: caller holds
    skipped = s.submit(chunk_of(0), t)  # one tick elapsed -> action 0 was due already
    assert skipped == 1
    assert [s.tick()[0] for _ in range(1)] == [1]
    assert s.queue_length() == 2 and s.needs_inference()  # 2 <= 0.5 * 4
    t = s.begin_inference()
    assert s.tick()[0] == 2
    assert s.tick()[0] == 3
    assert s.submit(chunk_of(100), t) == 2  # two ticks during inference
    assert [s.tick()[0] for _ in range(2)] == [102, 103]  # n_action_steps=4: 104, 105 not used
    assert s.tick() is None


@pytest.mark.parametrize("mode", ["replace", "append"])
def test_scheduler_without_rtc_waits_for_each_chunk_at_its_end(mode):
    """RTC off (LeRobot's synchronous loop): no chunk is asked for while actions remain, the caller
    holds until it comes, and it is executed from its first action however long inference took."""
    s = ActionScheduler(
        SchedulerConfig(fps=30, n_action_steps=4, chunk_size=6, refill_threshold=0.5, mode=mode, rtc=False)
    )
    t = s.begin_inference()
    assert s.submit(chunk_of(0), t) == 0
    out = []
    for _ in range(4):
        out.append(s.needs_inference())
        s.tick()
    assert out == [False] * 4  # with rtc the threshold would have asked at 2 left
    assert s.needs_inference() and s.queue_length() == 0
    t = s.begin_inference()
    assert [s.tick() for _ in range(3)] == [None] * 3 and s.starved_ticks == 3  # waits (holds)
    assert s.submit(chunk_of(100), t) == 0  # three ticks passed: nothing skipped
    assert [s.tick()[0] for _ in range(4)] == [100, 101, 102, 103]


def test_scheduler_with_rtc_merges_the_new_chunk_with_the_remainder():
    """RTC on: inference is asked for while actions remain; the ones due meanwhile are skipped and
    the control loop never starves if the chunk comes before the remainder is used up."""
    s = ActionScheduler(SchedulerConfig(fps=30, n_action_steps=6, chunk_size=6, refill_threshold=0.5))
    s.submit(chunk_of(0), s.begin_inference())
    got = [s.tick()[0] for _ in range(3)]
    assert s.needs_inference()  # 3 left <= 0.5 * 6
    t = s.begin_inference()
    got += [s.tick()[0] for _ in range(2)]  # inference takes 2 ticks
    assert s.submit(chunk_of(100), t) == 2
    got += [s.tick()[0] for _ in range(4)]
    assert got == [0, 1, 2, 3, 4, 102, 103, 104, 105] and s.starved_ticks == 0


def test_scheduler_interpolation_counts_policy_steps():
    s = ActionScheduler(SchedulerConfig(fps=10, n_action_steps=3, chunk_size=3, interpolation_multiplier=2))
    t = s.begin_inference()
    s.submit(np.array([[0.0], [2.0], [4.0]]), t)
    out = [s.tick() for _ in range(6)]
    assert [None if o is None else float(o[0]) for o in out] == [0, 1, 2, 3, 4, None]
    t = s.begin_inference()
    for _ in range(3):
        s.tick()
    assert s.delay_steps(t) == 2  # 3 control ticks at 2x = 1.5 policy steps, rounded up


def test_scheduler_ensemble_mode():
    s = ActionScheduler(
        SchedulerConfig(fps=30, n_action_steps=1, chunk_size=3, mode="ensemble", ensemble_coeff=0.0)
    )
    t = s.begin_inference()
    s.submit(np.array([[0.0], [3.0], [6.0]]), t)
    assert s.needs_inference()
    t = s.begin_inference()
    assert s.tick()[0] == 0.0
    s.submit(np.array([[9.0], [5.0], [1.0]]), t)  # one step late: its 5 pairs with 3
    assert s.tick()[0] == pytest.approx(4.0)
    assert s.tick()[0] == pytest.approx(3.5)  # (6 + 1) / 2


def test_scheduler_config_validation():
    with pytest.raises(ValueError, match="queue mode"):
        SchedulerConfig(fps=30, n_action_steps=1, chunk_size=1, mode="bogus")
    with pytest.raises(ValueError, match="n_action_steps"):
        SchedulerConfig(fps=30, n_action_steps=5, chunk_size=4)
    with pytest.raises(ValueError, match="ensemble.*needs rtc"):
        SchedulerConfig(fps=30, n_action_steps=1, chunk_size=1, mode="ensemble", rtc=False)
