"""Episode state machine: lerobot-record's loop (record, reset, re-record, Esc) with plain numbers for time."""

import math

import pytest

from lerobot_recorder.episode_control import (
    BEGIN,
    END,
    Effect,
    EpisodeConfig,
    EpisodeController,
    EpisodeError,
    SimEpisodes,
    State,
    check_episode_boundaries,
)
from lerobot_recorder.keyboard import ESC, LEFT, RIGHT, START, UNKNOWN, KeyDecoder


def make(episode=10.0, reset=5.0, n=3, task="pick", saved_before=0):
    return EpisodeController(EpisodeConfig(episode, reset, n, task), saved_before=saved_before)


def test_session_records_n_episodes_with_resets_between_not_after_the_last():
    c = make(n=2)
    assert c.start(0.0, c.make_plan(), session=True) == [Effect.BEGIN_EPISODE]
    assert c.state == State.RECORDING and c.episode_index == 0
    assert c.tick(9.99) == []
    assert c.tick(10.0) == [Effect.SAVE_EPISODE]
    assert c.state == State.SAVING
    assert c.saved(10.5, ok=True) == []
    assert c.state == State.RESETTING and c.episode_index == 1
    assert c.tick(15.4) == []
    assert c.tick(15.5) == [Effect.BEGIN_EPISODE]
    assert c.tick(25.5) == [Effect.SAVE_EPISODE]
    assert c.saved(26.0, ok=True) == [Effect.SESSION_DONE]  # no reset after the last episode
    assert c.state == State.IDLE and c.episodes_recorded == 2


def test_right_arrow_ends_episode_early_then_ends_reset_early():
    c = make()
    c.start(0.0, c.make_plan(), session=True)
    assert c.stop(2.0) == [Effect.SAVE_EPISODE]
    c.saved(2.1, ok=True)
    assert c.state == State.RESETTING
    assert c.stop(3.0) == [Effect.BEGIN_EPISODE]  # next episode right away
    assert c.state == State.RECORDING and c.episode_index == 1


def test_left_arrow_discards_and_rerecords_the_same_index_after_a_reset():
    c = make(saved_before=4)
    c.start(0.0, c.make_plan(), session=True)
    assert c.episode_index == 4
    assert c.discard(3.0) == [Effect.DISCARD_EPISODE]
    assert c.state == State.RESETTING and c.rerecord
    assert c.tick(8.0) == [Effect.BEGIN_EPISODE]
    assert c.episode_index == 4 and c.episodes_recorded == 0


def test_discard_with_zero_reset_restarts_at_once():
    c = make(reset=0.0)
    c.start(0.0, c.make_plan(), session=True)
    assert c.discard(1.0) == [Effect.DISCARD_EPISODE, Effect.BEGIN_EPISODE]


def test_esc_saves_the_episode_in_progress_then_finalizes():
    c = make()
    c.start(0.0, c.make_plan(), session=True)
    assert c.finalize(4.0) == [Effect.SAVE_EPISODE]
    assert c.saved(4.2, ok=True) == [Effect.FINALIZE]
    assert c.state == State.FINALIZED and c.episodes_recorded == 1
    assert c.finalize(5.0) == []  # idempotent
    with pytest.raises(EpisodeError, match="finalized"):
        c.start(6.0, c.make_plan())


def test_single_start_returns_to_idle_after_its_reset():
    c = make(reset=2.0)
    c.start(0.0, c.make_plan())
    c.tick(10.0)
    c.saved(10.0, ok=True)
    assert c.state == State.RESETTING
    assert c.tick(12.0) == []
    assert c.state == State.IDLE


def test_bad_requests_are_refused_with_reasons():
    c = make()
    with pytest.raises(EpisodeError, match="nothing to stop"):
        c.stop(0.0)
    with pytest.raises(EpisodeError, match="no episode to discard"):
        c.discard(0.0)
    c.start(0.0, c.make_plan())
    with pytest.raises(EpisodeError, match="already being recorded"):
        c.start(1.0, c.make_plan())
    with pytest.raises(EpisodeError, match="NaN"):
        c.make_plan(episode_time_s=math.nan)
    with pytest.raises(EpisodeError, match="no task"):
        make(task="").make_plan()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"episode_time_s": -1.0}, "episode_time_s"),
        ({"episode_time_s": 0.0}, "episode_time_s"),
        ({"reset_time_s": -0.5}, "reset_time_s"),
        ({"reset_time_s": math.inf}, "reset_time_s"),
        ({"num_episodes": 0}, "num_episodes"),
    ],
)
def test_config_rejects_negative_or_nonsense_durations(kwargs, match):
    with pytest.raises(EpisodeError, match=match):
        EpisodeConfig(**kwargs)


def test_request_values_fall_back_to_parameters():
    c = make(episode=7.0, reset=3.0, task="default task")
    plan = c.make_plan("", 0.0, -1.0)
    assert (plan.task, plan.episode_time_s, plan.reset_time_s) == ("default task", 7.0, 3.0)
    plan = c.make_plan("other", 2.5, 0.0)
    assert (plan.task, plan.episode_time_s, plan.reset_time_s) == ("other", 2.5, 0.0)


def test_failed_save_rerecords_same_index():
    c = make()
    c.start(0.0, c.make_plan(), session=True)
    c.stop(1.0)
    c.saved(1.0, ok=False)
    assert c.state == State.RESETTING and c.episode_index == 0 and c.rerecord


@pytest.mark.parametrize(
    "data, keys",
    [
        (b"\x1b[C", [RIGHT]),
        (b"\x1b[D", [LEFT]),
        (b"\x1bOC\x1bOD", [RIGHT, LEFT]),
        (b"q", [ESC]),
        (b" ", [START]),
        (b"\x1b[A", [UNKNOWN]),
        (b"x\x1b[C", [UNKNOWN, RIGHT]),
    ],
)
def test_key_decoder(data, keys):
    assert KeyDecoder().feed(data) == keys


def test_lone_escape_waits_for_the_rest_of_a_sequence_then_counts_as_esc():
    d = KeyDecoder()
    assert d.feed(b"\x1b", more_pending=True) == []
    assert d.feed(b"[C") == [RIGHT]
    assert d.feed(b"\x1b", more_pending=True) == []
    assert d.flush() == [ESC]


# ------------------------------------------------------------------ sim episode boundaries
def test_sim_episodes_report_each_reset_and_done_step_once():
    sim = SimEpisodes()
    assert not sim.at_start and sim.start_ns is None
    assert sim.update(100, 0, 0, False) == [(BEGIN, 100)]
    assert sim.at_start and sim.start_ns == 100
    assert sim.update(100, 0, 0, False) == []  # a lockstep keep-alive repeats the step: no new event
    assert sim.update(200, 0, 1, False) == [] and not sim.at_start
    assert sim.update(300, 0, 2, True) == [(END, 300)]
    assert sim.update(250, 0, 1, False) == []  # stale: older than what was taken in
    assert sim.update(400, 1, 0, False) == [(BEGIN, 400)] and sim.episode_index == 1
    assert sim.newest_ns == 400


def test_sim_episodes_joined_mid_episode_know_no_start_until_the_next_reset():
    sim = SimEpisodes()
    assert sim.update(500, 3, 7, False) == []
    assert sim.start_ns is None and not sim.at_start
    assert sim.update(600, 3, 8, True) == [(END, 600)]  # its end is seen, its start was not
    assert sim.update(700, 4, 0, False) == [(BEGIN, 700)] and sim.at_start


@pytest.mark.parametrize("value", ["time", "sim"])
def test_episode_boundaries_accepts_time_and_sim(value):
    assert check_episode_boundaries(value) == value


@pytest.mark.parametrize("value", ["", "Sim", "steps"])
def test_episode_boundaries_rejects_anything_else_naming_the_parameter(value):
    with pytest.raises(
        EpisodeError, match=r"parameter 'episode_boundaries' must be one of \('time', 'sim'\)"
    ):
        check_episode_boundaries(value)
