"""SimSession bookkeeping and LeRobot's observation mapping on the installed gym packages."""

import numpy as np
import pytest

from lerobot_sim.session import (
    EpisodeState,
    SimSession,
    camera_images,
    episode_summary,
    import_env_package,
    lerobot_observation_keys,
    make_env,
)


def test_mapping_follows_lerobot():
    img = np.zeros((2, 2, 3), np.uint8)
    assert set(lerobot_observation_keys({"pixels": img, "agent_pos": [1]})) == {
        "observation.image",
        "observation.state",
    }
    keys = lerobot_observation_keys({"pixels": {"top": img}, "environment_state": [0], "robot_state": [1]})
    assert set(keys) == {"observation.images.top", "observation.environment_state", "observation.robot_state"}
    assert set(camera_images({"pixels": img}, "cam")) == {"cam"}


def test_unknown_env_is_a_clear_error():
    with pytest.raises(ValueError, match="not importable"):
        import_env_package("no_such_pkg/Foo-v0")
    with pytest.raises(ValueError, match="not registered"):
        import_env_package("NoSuchEnv-v9")


@pytest.mark.parametrize(
    ("env_id", "state_dim", "cams"),
    [("gym_pusht/PushT-v0", 2, {"image"}), ("gym_aloha/AlohaInsertion-v0", 14, {"top"})],
)
def test_gym_packages_through_a_session(env_id, state_dim, cams):
    session = SimSession(make_env(env_id, {"obs_type": "pixels_agent_pos"}))
    try:
        first = session.reset(seed=3)
        assert first.episode.episode_index == 0 and first.episode.seed == 3 and first.episode.step == 0
        assert set(camera_images(first.observation)) == cams
        assert np.asarray(first.observation["agent_pos"]).shape == (state_dim,)
        t0 = first.sim_time_ns
        session.env.action_space.seed(0)
        rewards = []
        for _ in range(3):
            r = session.step(session.env.action_space.sample())
            rewards.append(r.episode.reward)
        assert r.episode.step == 3 and r.sim_time_ns == t0 + 3 * session.period_ns
        assert r.episode.sum_reward == pytest.approx(sum(rewards))
        assert r.episode.max_reward == pytest.approx(max(rewards))
        again = session.reset(seed=4)
        assert again.episode.episode_index == 1 and again.sim_time_ns > r.sim_time_ns  # clock never repeats
    finally:
        session.close()


@pytest.mark.parametrize(
    ("flags", "ended"),
    [
        (dict(is_success=True, terminated=True), "success"),
        (dict(truncated=True), "timeout"),
        (dict(terminated=True), "terminated"),
    ],
)
def test_episode_summary_says_how_it_ended(flags, ended):
    ep = EpisodeState(episode_index=3, seed=7, step=150, sum_reward=12.5, max_reward=1.0, **flags)
    assert episode_summary(ep, fps=30.0) == (
        f"episode 3 (seed 7) ended: {ended} after 150 steps (5.0 s), reward sum 12.500, max 1.000"
    )
