"""The gymnasium env: registration, LeRobot-style observations, seeding, success of the scripted expert."""

import gymnasium as gym
import numpy as np
import pytest

import lerobot_sim  # noqa: F401
from lerobot_sim.expert import ScriptedExpert
from lerobot_sim.registration import SO101_CUBE_ID
from lerobot_sim.session import lerobot_observation_keys


def _rollout(env, expert, seed, steps=None):
    obs, info = env.reset(seed=seed)
    expert.reset()
    trace = [obs["agent_pos"].copy()]
    term = trunc = False
    n = 0
    while not (term or trunc):
        action = expert.act(obs["agent_pos"], env.unwrapped.environment_state())
        obs, reward, term, trunc, info = env.step(action)
        trace.append(obs["agent_pos"].copy())
        n += 1
        if steps and n >= steps:
            break
    return np.array(trace), info, term, trunc, n


@pytest.fixture(scope="module")
def state_env():
    env = gym.make(SO101_CUBE_ID, obs_type="state")
    yield env
    env.close()


def test_registered_and_lerobot_attributes():
    env = gym.make(SO101_CUBE_ID, cameras=("front",), image_height=48, image_width=64)
    try:
        u = env.unwrapped
        assert env.spec.max_episode_steps == 300 and u._max_episode_steps == 300
        assert u.task and u.task_description
        obs, info = env.reset(seed=0)
        assert "is_success" in info and info["is_success"] is False
        assert set(obs) == {"pixels", "agent_pos"}
        assert obs["pixels"]["front"].shape == (48, 64, 3) and obs["pixels"]["front"].dtype == np.uint8
        assert obs["pixels"]["front"].std() > 5  # a rendered scene, not a blank frame
        assert env.observation_space.contains(obs)
        keys = lerobot_observation_keys(obs)
        assert set(keys) == {"observation.images.front", "observation.state"}
    finally:
        env.close()


def test_same_seed_same_trajectory_and_images():
    env = gym.make(SO101_CUBE_ID, obs_type="all", cameras=("front", "wrist"), image_height=48, image_width=64)
    try:
        runs = []
        for _ in range(2):
            obs, _ = env.reset(seed=11)
            env.action_space.seed(3)
            frames, states = [obs["pixels"]["wrist"]], [obs["environment_state"]]
            for _ in range(15):
                obs, *_ = env.step(env.action_space.sample())
                frames.append(obs["pixels"]["wrist"])
                states.append(np.concatenate([obs["agent_pos"], obs["environment_state"]]))
            runs.append((frames, states))
        for a, b in zip(runs[0][0], runs[1][0], strict=True):
            assert np.array_equal(a, b)
        for a, b in zip(runs[0][1], runs[1][1], strict=True):
            assert np.array_equal(a, b)
        other, _ = env.reset(seed=12)
        assert not np.allclose(other["environment_state"][:3], runs[0][1][0][:3])
    finally:
        env.close()


def test_an_observation_holds_the_rendered_frame_itself_and_keeps_it():
    """The camera frame of an observation is the renderer's own output (not a copy of it), and a later
    render does not change a frame the caller keeps."""
    env = gym.make(SO101_CUBE_ID, cameras=("front",), image_height=48, image_width=64)
    try:
        obs, _ = env.reset(seed=5)
        renderer = env.unwrapped._renderer
        rendered, render = [], renderer.render

        def recording_render(*args, **kwargs):  # the real render, its result noted
            rendered.append(render(*args, **kwargs))
            return rendered[-1]

        renderer.render = recording_render
        kept = []
        for _ in range(5):
            obs, *_ = env.step(np.full(6, 0.3))
            kept.append((obs["pixels"]["front"], obs["pixels"]["front"].copy()))
        assert len(rendered) == 5
        for (frame, snapshot), out in zip(kept, rendered, strict=True):
            assert np.shares_memory(frame, out)  # no copy between the renderer and the observation
            assert np.array_equal(frame, snapshot)  # and no later render wrote into it
        assert not np.array_equal(kept[0][1], kept[-1][1])  # the arm moved: the frames differ
    finally:
        env.close()


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4, 5])
def test_scripted_expert_lifts_the_cube_and_terminates(state_env, seed):
    trace, info, term, trunc, n = _rollout(state_env, ScriptedExpert(), seed)
    assert term and not trunc, f"seed {seed}: not terminated after {n} steps"
    assert info["is_success"] and info["lifted_m"] >= 0.05
    assert n < 150
    assert state_env.unwrapped.fingers_touch_cube() == 2


def test_expert_is_deterministic(state_env):
    a, *_ = _rollout(state_env, ScriptedExpert(), 21)
    b, *_ = _rollout(state_env, ScriptedExpert(), 21)
    assert np.array_equal(a, b)


def test_doing_nothing_fails_and_truncates_at_the_limit():
    env = gym.make(SO101_CUBE_ID, obs_type="state", max_episode_steps=20)
    env = gym.wrappers.TimeLimit(env.unwrapped, max_episode_steps=20)
    try:
        obs, _ = env.reset(seed=0)
        hold = obs["agent_pos"].copy()
        for _ in range(20):
            obs, reward, term, trunc, info = env.step(hold)
            assert 0.0 <= reward <= 1.0
        assert trunc and not term and not info["is_success"]
    finally:
        env.close()


def test_bad_action_is_a_clear_error(state_env):
    state_env.reset(seed=0)
    with pytest.raises(ValueError, match="6 finite joint positions"):
        state_env.step(np.zeros(5))
    with pytest.raises(ValueError, match="finite"):
        state_env.step(np.full(6, np.nan))


def test_constructor_validates_arguments():
    with pytest.raises(ValueError, match="unknown camera"):
        gym.make(SO101_CUBE_ID, cameras=("top",))
    with pytest.raises(ValueError, match="obs_type"):
        gym.make(SO101_CUBE_ID, obs_type="pixels")


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_scripted_expert_copes_with_a_sim_running_ahead(state_env, seed):
    """Realtime on a busy machine: the sim steps 1-3 times per expert answer; the closed-loop phase ends
    (arm at its waypoint, jaws stopped) still get the cube up within the episode."""
    rng = np.random.default_rng(seed)
    expert = ScriptedExpert()
    obs, _ = state_env.reset(seed=100 + seed)
    expert.reset()
    term = trunc = False
    while not (term or trunc):
        action = expert.act(obs["agent_pos"], obs["environment_state"])
        for _ in range(int(rng.integers(1, 4))):
            obs, _, term, trunc, info = state_env.step(action)
            if term or trunc:
                break
    assert term and info["is_success"], f"seed {seed}: truncated after {info['step']} steps"
