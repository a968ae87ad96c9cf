"""Exact-value tests of the time-alignment core (lerobot_core.alignment)."""

import numpy as np
import pytest

from lerobot_core.alignment import (
    GRID_SLACK_NS,
    Aligner,
    DroppedTick,
    Frame,
    StreamSpec,
    stamp_to_ns,
)

MS = 1_000_000


def ms(x):
    return int(x * MS)


def values(frames, name):
    return [f.values[name] for f in frames]


def as_lists(vals):
    return [None if v is None else np.asarray(v).tolist() for v in vals]


def test_hold_and_interpolate_exact_values():
    al = Aligner(10, [StreamSpec("cam", "hold"), StreamSpec("joints", "interpolate")], history_s=None)
    for t, v in [(0, "a0"), (150, "a1"), (320, "a2")]:
        al.push("cam", v, stamp_ns=ms(t))
    for t, v in [(0, [0.0, 10.0]), (200, [2.0, 30.0]), (400, [4.0, -10.0])]:
        al.push("joints", v, stamp_ns=ms(t))
    frames = al.finish()
    # end defaults to min(last cam 320 ms, last joints 400 ms): ticks 0, 100, 200, 300 ms
    assert [f.time_ns for f in frames] == [0, ms(100), ms(200), ms(300)]
    assert [f.index for f in frames] == [0, 1, 2, 3]
    assert [f.timestamp for f in frames] == [0.0, 0.1, 0.2, 0.3]
    assert values(frames, "cam") == ["a0", "a0", "a1", "a1"]
    assert as_lists(values(frames, "joints")) == [[0.0, 10.0], [1.0, 20.0], [2.0, 30.0], [3.0, 10.0]]
    assert [f.sample_ns["cam"] for f in frames] == [0, 0, ms(150), ms(150)]
    assert al.stats.ticks_emitted == 4 and al.stats.ticks_dropped == 0


def test_finish_takes_the_last_tick_of_a_whole_ns_clock():
    """A lockstep sim stamps step k at k * 33333333 ns: up to k/3 ns before the exact grid tick k.
    The last tick then lies just past every sample; finish() must still settle it (with the sample
    stamped for it), and reach no further than GRID_SLACK_NS past the newest common sample."""
    period = 1_000_000_000 // 30
    specs = [StreamSpec("cam", "hold"), StreamSpec("joints", "interpolate")]
    al = Aligner(30, specs, history_s=None)
    assert al.end_slack_ns == GRID_SLACK_NS == MS // 10
    for k in range(90):
        al.push("cam", f"img{k}", stamp_ns=k * period)
        al.push("joints", [float(k)], stamp_ns=k * period)
    frames = al.finish()
    assert len(frames) == 90 and frames[-1].time_ns == (89 * 1_000_000_000) // 30
    assert frames[-1].time_ns - 89 * period == 29  # the tick lies 29 ns past its sample
    assert values(frames, "cam") == [f"img{k}" for k in range(90)]
    assert as_lists(values(frames, "joints"))[-1] == [89.0]
    # a tick more than the slack past the newest common sample is not settled
    al = Aligner(30, specs, history_s=None)
    for k in range(3):
        al.push("cam", k, stamp_ns=k * period)
        al.push("joints", [float(k)], stamp_ns=k * period)
    al.push("cam", 3, stamp_ns=3 * period - MS // 5)
    al.push("joints", [3.0], stamp_ns=3 * period - MS // 5)
    assert len(al.finish()) == 3
    # at 10 kHz the slack is half a period, so the next tick is never reached
    al = Aligner(10_000, [StreamSpec("j", "hold")], history_s=None)
    assert al.end_slack_ns == MS // 20
    for k in range(5):
        al.push("j", k, stamp_ns=k * MS // 10)
    assert values(al.finish(), "j") == [0, 1, 2, 3, 4]


def test_interpolation_weights_are_exact_at_quarter_points():
    al = Aligner(40, [StreamSpec("j", "interpolate")], history_s=None)  # ticks every 25 ms
    al.push("j", [0.0], stamp_ns=ms(0))
    al.push("j", [8.0], stamp_ns=ms(100))
    al.push("j", [0.0], stamp_ns=ms(200))
    frames = al.finish()
    assert as_lists(values(frames, "j")) == [[x] for x in [0.0, 2.0, 4.0, 6.0, 8.0, 6.0, 4.0, 2.0, 0.0]]


def test_nearest_with_tolerance_and_ties():
    al = Aligner(
        10,
        [StreamSpec("clock", "hold"), StreamSpec("cam", "nearest", tolerance_s=0.03)],
        start_ns=0,
        history_s=None,
    )
    for t in range(0, 701, 10):
        al.push("clock", t, stamp_ns=ms(t))
    # cam's first sample (45 ms) comes after tick 0: tick 0 is before the start, not a drop.
    # tick 100: 90 (10 away) beats 115 (15 away); tick 200: 180 and 220 tie -> the earlier wins;
    # tick 300: only 330 (30 away == tolerance) is ok; tick 400: 330 and 470 both 70 away -> dropped;
    # tick 600: 640 is 40 away -> dropped.
    for t in [45, 90, 115, 180, 220, 330, 470, 500, 640, 700]:
        al.push("cam", f"img{t}", stamp_ns=ms(t))
    frames = al.finish()
    assert [f.time_ns for f in frames] == [ms(100), ms(200), ms(300), ms(500), ms(700)]
    assert values(frames, "cam") == ["img90", "img180", "img330", "img500", "img700"]
    assert [f.tick_index for f in frames] == [1, 2, 3, 5, 7]
    assert [f.index for f in frames] == [0, 1, 2, 3, 4]
    st = al.stats
    assert st.ticks_before_start == 1
    assert st.ticks_dropped == 2 and st.ticks_emitted == 5
    # the settled span runs over emitted and dropped ticks alike: 100 .. 700 ms
    assert (st.first_tick_ns, st.last_tick_ns) == (ms(100), ms(700))
    assert st.streams["cam"].dropped_ticks == 2
    assert st.streams["cam"].drop_reasons == {"out_of_tolerance": 2}
    assert st.streams["clock"].dropped_ticks == 0
    assert [d.tick_index for d in al.drops] == [4, 6]


def test_staleness_drops_and_counts_per_stream():
    dropped = []
    al = Aligner(
        10,
        [StreamSpec("joints", "hold"), StreamSpec("cam", "hold", max_staleness_s=0.12)],
        history_s=None,
        on_drop=dropped.append,
    )
    for t in range(0, 501, 50):
        al.push("joints", t, stamp_ns=ms(t))
    al.push("cam", "c0", stamp_ns=ms(0))
    al.push("cam", "c5", stamp_ns=ms(500))
    frames = al.finish()
    # ages at ticks 0..500: 0, 100 (ok), 200, 300, 400 (stale, > 120), 0
    assert [f.tick_index for f in frames] == [0, 1, 5]
    assert [f.index for f in frames] == [0, 1, 2]
    assert values(frames, "cam") == ["c0", "c0", "c5"]
    assert values(frames, "joints") == [0, 100, 500]
    assert al.stats.ticks_dropped == 3
    assert al.stats.streams["cam"].drop_reasons == {"stale": 3}
    assert al.stats.streams["joints"].dropped_ticks == 0
    assert [d.tick_index for d in dropped] == [2, 3, 4]
    assert all(isinstance(d, DroppedTick) and d.reasons == {"cam": "stale"} for d in dropped)


def test_interpolation_gap_tolerance():
    al = Aligner(10, [StreamSpec("j", "interpolate", tolerance_s=0.2)], history_s=None)
    for t, v in [(0, 0.0), (100, 1.0), (600, 6.0), (700, 7.0)]:
        al.push("j", [v], stamp_ns=ms(t))
    frames = al.finish()
    assert [f.tick_index for f in frames] == [0, 1, 6, 7]
    assert al.stats.streams["j"].drop_reasons == {"gap": 4}


def test_start_waits_for_all_required_streams_optional_do_not_gate():
    al = Aligner(
        10,
        [StreamSpec("joints", "hold"), StreamSpec("cam", "hold"), StreamSpec("task", "hold", required=False)],
        history_s=None,
    )
    for t in range(0, 601, 50):
        al.push("joints", t, stamp_ns=ms(t))
    assert al.pop_ready() == [] and not al.started
    al.push("cam", "first", stamp_ns=ms(250))
    al.push("cam", "second", stamp_ns=ms(600))
    assert al.started
    frames = al.finish()
    # anchor = 250 ms (the last required stream's first sample); the optional stream stays None
    assert [f.time_ns for f in frames] == [ms(250), ms(350), ms(450), ms(550)]
    assert values(frames, "joints") == [250, 350, 450, 550]
    assert values(frames, "task") == [None] * 4
    assert [f.sample_ns["task"] for f in frames] == [None] * 4
    assert al.stats.ticks_dropped == 0 and al.stats.ticks_before_start == 0


def test_explicit_start_anchors_grid_and_counts_ticks_before_start():
    al = Aligner(
        10, [StreamSpec("joints", "hold"), StreamSpec("cam", "hold")], start_ns=ms(1000), history_s=None
    )
    for t in range(900, 1601, 20):
        al.push("joints", t, stamp_ns=ms(t))
    al.push("cam", "late", stamp_ns=ms(1230))
    al.push("cam", "end", stamp_ns=ms(1600))
    frames = al.finish()
    assert [f.time_ns for f in frames] == [ms(t) for t in (1300, 1400, 1500, 1600)]
    assert [f.tick_index for f in frames] == [3, 4, 5, 6]
    assert [f.index for f in frames] == [0, 1, 2, 3]
    assert al.stats.ticks_before_start == 3
    assert values(frames, "joints") == [1300, 1400, 1500, 1600]


def test_grid_is_exact_in_integer_nanoseconds_without_drift():
    al = Aligner(30, [StreamSpec("j", "hold")], history_s=None)
    al.push("j", 0, stamp_ns=0)
    al.push("j", 1, stamp_ns=1000 * 1_000_000_000)
    assert al._tick_ns(1) == 33_333_333
    assert al._tick_ns(2) == 66_666_666
    assert al._tick_ns(3) == 100_000_000
    assert al._tick_ns(30_000) == 1000 * 1_000_000_000
    frames = al.finish()
    assert len(frames) == 30_001
    assert frames[-1].timestamp == 1000.0 and frames[-1].values["j"] == 1
    al2 = Aligner(29.97, [StreamSpec("j", "hold")], history_s=None)
    al2.push("j", 0, stamp_ns=0)
    assert al2._tick_ns(2997) == 100 * 1_000_000_000


def test_receive_timeline_uses_receive_time():
    al = Aligner(10, [StreamSpec("a", "hold", timeline="receive"), StreamSpec("b", "hold")], history_s=None)
    # a's header stamps are garbage (would come first); its receive times decide
    al.push("a", "a-first", stamp_ns=ms(999), receive_ns=ms(0))
    al.push("a", "a-second", stamp_ns=ms(1), receive_ns=ms(100))
    al.push("b", "b", stamp_ns=ms(0))
    al.push("b", "b", stamp_ns=ms(100))
    assert values(al.finish(), "a") == ["a-first", "a-second"]


def test_online_matches_offline_and_memory_stays_bounded():
    rng = np.random.default_rng(7)
    events = []  # (arrival ns, stream, stamp ns, value)
    for i in range(1000):  # 10 s of joints at 100 Hz, stamp jitter +-2 ms, 1-4 ms transport delay
        stamp = ms(10 * i) + int(rng.integers(-2 * MS, 2 * MS))
        events.append((stamp + int(rng.integers(MS, 4 * MS)), "joints", stamp, [i * 0.5, -i * 0.25]))
    for i in range(300):  # 10 s of camera at 30 Hz, 15-25 ms delay
        stamp = ms(5) + (i * 1_000_000_000) // 30
        events.append((stamp + int(rng.integers(15 * MS, 25 * MS)), "cam", stamp, f"frame{i}"))
    events.sort(key=lambda e: e[0])
    specs = [
        StreamSpec("joints", "interpolate", max_staleness_s=0.05),
        StreamSpec("cam", "nearest", tolerance_s=0.02),
    ]
    offline = Aligner(30, specs, history_s=None)
    for _, name, stamp, v in events:
        offline.push(name, v, stamp_ns=stamp)
    expected = offline.finish()

    online = Aligner(30, specs, latency_margin_s=0.1, history_s=2.0)
    got, max_buffered = [], 0
    for arrival, name, stamp, v in events:
        online.push(name, v, stamp_ns=stamp, receive_ns=arrival)
        got += online.pop_ready(now_ns=arrival)
        max_buffered = max(max_buffered, *(len(b.times) for b in online._buffers.values()))
    got += online.finish()
    assert len(expected) > 280
    assert [f.tick_index for f in got] == [f.tick_index for f in expected]
    assert values(got, "cam") == values(expected, "cam")
    assert as_lists(values(got, "joints")) == as_lists(values(expected, "joints"))
    assert online.stats.ticks_dropped == offline.stats.ticks_dropped
    # 100 ms margin: a few joint samples and camera frames in flight, never the whole episode
    assert max_buffered <= 12
    assert online.stats.streams["joints"].rate_hz == pytest.approx(100, rel=0.01)
    assert online.stats.streams["cam"].rate_hz == pytest.approx(30, rel=0.01)


def test_deadline_emission_holds_interpolated_value_and_drops_stale():
    al = Aligner(
        10,
        [StreamSpec("j", "interpolate", max_staleness_s=0.25), StreamSpec("cam", "hold")],
        latency_margin_s=0.05,
    )
    al.push("j", [1.0], stamp_ns=ms(0))
    al.push("cam", "c", stamp_ns=ms(0))
    # tick 0 has samples at 0 from both streams: settled without the clock
    first = al.pop_ready()
    assert [f.tick_index for f in first] == [0]
    # no later joint sample: only the clock can settle ticks (0.05 s margin)
    assert al.pop_ready(now_ns=ms(140)) == []
    frames = al.pop_ready(now_ns=ms(360))
    assert [f.tick_index for f in frames] == [1, 2]  # tick 3 (300 ms) is 300 ms old: stale
    assert as_lists(values(first + frames, "j")) == [[1.0], [1.0], [1.0]]
    assert al.stats.streams["j"].held == 2  # ticks 1, 2 (tick 0 had an exact sample)
    assert al.stats.ticks_dropped == 1 and al.stats.streams["j"].drop_reasons == {"stale": 1}


def test_history_bound_prunes_before_start_and_counts_it():
    al = Aligner(10, [StreamSpec("joints", "hold"), StreamSpec("cam", "hold")], history_s=1.0)
    for i in range(1000):  # 10 s of joints while the camera is silent
        al.push("joints", i, stamp_ns=ms(10 * i))
    buffered = len(al._buffers["joints"].times)
    assert buffered <= 102
    assert al.stats.streams["joints"].pruned == 1000 - buffered
    al.push("cam", "c", stamp_ns=ms(9990))
    frames = al.finish()
    assert values(frames, "joints") == [999] and values(frames, "cam") == ["c"]


def test_late_samples_are_counted():
    al = Aligner(10, [StreamSpec("j", "hold")], history_s=None)
    for t in (0, 100, 200):
        al.push("j", t, stamp_ns=ms(t))
    assert len(al.pop_ready()) == 3
    al.push("j", "late", stamp_ns=ms(150))
    assert al.stats.streams["j"].late == 1


def test_sample_at_does_not_consume():
    al = Aligner(10, [StreamSpec("j", "interpolate"), StreamSpec("cam", "hold", max_staleness_s=0.1)])
    al.push("j", [0.0], stamp_ns=ms(0))
    al.push("j", [10.0], stamp_ns=ms(100))
    al.push("cam", "c", stamp_ns=ms(20))
    obs = al.sample_at(ms(50))
    assert isinstance(obs, Frame) and obs.values["j"].tolist() == [5.0] and obs.values["cam"] == "c"
    stale = al.sample_at(ms(200))
    assert isinstance(stale, DroppedTick) and stale.reasons == {"cam": "stale"}
    assert al.stats.ticks_emitted == 0 and al.stats.streams["j"].held == 0
    assert len(al.pop_ready()) == 1  # tick at 20 ms (cam's first sample anchors the grid)


def test_restart_starts_a_new_episode_with_carried_samples():
    al = Aligner(10, [StreamSpec("j", "hold"), StreamSpec("cam", "hold")], history_s=None)
    for t in range(0, 1001, 100):
        al.push("j", t, stamp_ns=ms(t))
    al.push("cam", "c0", stamp_ns=ms(0))
    al.push("cam", "c1", stamp_ns=ms(450))
    al.push("cam", "c2", stamp_ns=ms(1000))
    ep0 = al.finish(end_ns=ms(500))
    assert [f.time_ns for f in ep0] == [ms(t) for t in range(0, 501, 100)]
    old = al.restart(start_ns=ms(600))
    assert old.ticks_emitted == 6
    ep1 = al.finish()
    assert [f.index for f in ep1] == [0, 1, 2, 3, 4]
    assert [f.time_ns for f in ep1] == [ms(t) for t in range(600, 1001, 100)]
    assert values(ep1, "cam") == ["c1", "c1", "c1", "c1", "c2"]
    assert al.stats.ticks_emitted == 5


def test_stamp_to_ns():
    class T:
        sec, nanosec = 12, 345

    assert stamp_to_ns(T) == 12_000_000_345


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"name": "x", "policy": "linear"}, "policy 'linear' is not one of"),
        ({"name": "x", "timeline": "bag"}, "timeline 'bag' is not one of"),
        ({"name": "x", "tolerance_s": -1}, "tolerance_s must be"),
        ({"name": "x", "max_staleness_s": float("nan")}, "max_staleness_s must be"),
        ({"name": ""}, "must not be empty"),
    ],
)
def test_bad_stream_specs(kwargs, match):
    with pytest.raises(ValueError, match=match):
        StreamSpec(**kwargs)


def test_bad_aligner_setup_and_input():
    with pytest.raises(ValueError, match="fps"):
        Aligner(0, [StreamSpec("a")])
    with pytest.raises(ValueError, match="declared twice"):
        Aligner(10, [StreamSpec("a"), StreamSpec("a")])
    with pytest.raises(ValueError, match="at least one stream must be required"):
        Aligner(10, [StreamSpec("a", required=False)])
    with pytest.raises(ValueError, match="history_s"):
        Aligner(10, [StreamSpec("a", "nearest", tolerance_s=2.0)], history_s=1.0)
    al = Aligner(10, [StreamSpec("a", "interpolate"), StreamSpec("b", timeline="receive")])
    with pytest.raises(ValueError, match="unknown stream 'c'"):
        al.push("c", 1, stamp_ns=1)
    with pytest.raises(ValueError, match="no header stamp"):
        al.push("a", [1.0])
    with pytest.raises(ValueError, match="receive time"):
        al.push("b", 1, stamp_ns=5)
    with pytest.raises(ValueError, match="must be numeric"):
        al.push("a", "text", stamp_ns=1)
    al.push("a", [1.0, 2.0], stamp_ns=1)
    with pytest.raises(ValueError, match=r"shape \(3,\) differs"):
        al.push("a", [1.0, 2.0, 3.0], stamp_ns=2)
    al.push("b", 1, receive_ns=1)
    with pytest.raises(ValueError, match="different timelines"):
        al.pop_ready(now_ns=10**18)
    al.finish()
    with pytest.raises(RuntimeError, match="restart"):
        al.push("a", [1.0, 2.0], stamp_ns=3)


def test_latched_stream_gates_start_but_not_settlement_or_end():
    al = Aligner(10, [StreamSpec("j", "hold"), StreamSpec("task", "hold", latched=True)], history_s=None)
    al.push("task", "pick", stamp_ns=ms(50))
    for t in range(0, 501, 100):
        al.push("j", t, stamp_ns=ms(t))
    # settled without any later task message; the grid starts once the task is known (50 ms)
    assert [f.time_ns for f in al.pop_ready()] == [ms(50 + 100 * k) for k in range(5)]
    assert al.finish() == []  # end = last j sample (500 ms), not the task's 50 ms
    with pytest.raises(ValueError, match="required and not latched"):
        Aligner(10, [StreamSpec("task", latched=True)])
