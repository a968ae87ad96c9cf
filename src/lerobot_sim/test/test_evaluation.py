"""Evaluation core without ROS: metrics maths, the loop, restarts, videos."""

import json
import math

import av
import numpy as np
import pytest

from lerobot_sim.evaluation import (
    EpisodeMetrics,
    EvalSettings,
    EvaluationError,
    LocalEnvTransport,
    RandomPolicy,
    ScriptedPolicy,
    SimUnavailableError,
    aggregate,
    make_policy,
    metrics_document,
    run_episodes,
    write_metrics,
)
from lerobot_sim.registration import SO101_CUBE_ID
from lerobot_sim.session import SimSession, make_env


def _local(**kwargs):
    kwargs.setdefault("obs_type", "state")
    return LocalEnvTransport(SimSession(make_env(SO101_CUBE_ID, kwargs)))


def test_aggregate_is_lerobots_formula():
    eps = [
        EpisodeMetrics(0, 5, sum_reward=10.0, max_reward=1.0, success=True, steps=3, duration_s=1.0),
        EpisodeMetrics(1, 6, sum_reward=2.0, max_reward=0.5, success=False, steps=3, duration_s=1.0),
        EpisodeMetrics(2, 7, sum_reward=3.0, max_reward=0.0, success=True, steps=3, duration_s=1.0),
    ]
    agg = aggregate(eps, eval_s=6.0)
    assert agg == {
        "avg_sum_reward": pytest.approx(5.0),
        "avg_max_reward": pytest.approx(0.5),
        "pc_success": pytest.approx(200.0 / 3),
        "eval_s": 6.0,
        "eval_ep_s": 2.0,
    }
    doc = metrics_document(eps, 6.0, [], {"env": "x"})
    assert [e["seed"] for e in doc["per_episode"]] == [5, 6, 7]
    assert set(doc["per_episode"][0]) >= {"sum_reward", "max_reward", "success", "seed"}
    assert math.isnan(aggregate([], 1.0)["pc_success"])


def test_write_metrics_is_atomic_json(tmp_path):
    path = tmp_path / "sub" / "metrics.json"
    write_metrics(str(path), {"aggregated": {"pc_success": 50.0}})
    assert json.loads(path.read_text())["aggregated"]["pc_success"] == 50.0
    assert not (tmp_path / "sub" / "metrics.json.tmp").exists()


def test_scripted_loop_succeeds_and_same_seed_same_metrics():
    runs = []
    for _ in range(2):
        eps, eval_s, _ = run_episodes(_local, ScriptedPolicy(), EvalSettings(3, seed=40), log=lambda m: None)
        runs.append(eps)
        assert eval_s > 0
    assert [e.success for e in runs[0]] == [True, True, True]
    assert [e.ended for e in runs[0]] == ["success"] * 3
    assert [e.seed for e in runs[0]] == [40, 41, 42]
    assert [e.sum_reward for e in runs[0]] == [e.sum_reward for e in runs[1]]
    assert all(0 < e.max_reward <= 1.0 for e in runs[0])


def test_random_policy_is_seeded_per_episode():
    transport = _local()
    results = []
    for _ in range(2):
        policy = RandomPolicy(transport.session.env.action_space)
        lines = []
        eps, _, _ = run_episodes(
            lambda: _local(), policy, EvalSettings(2, seed=3, max_steps=10), log=lines.append
        )
        results.append([e.sum_reward for e in eps])
        assert [e.ended for e in eps] == ["timeout", "timeout"]  # --max-steps ends them
        assert lines[0].startswith("episode 0 seed 3: timeout, success=False") and "steps=10" in lines[0]
    assert results[0] == results[1]
    assert results[0][0] != results[0][1]
    transport.close()


class _CrashingTransport:
    """A real local sim that dies (like a killed process) at a given step of its first life."""

    lives = 0

    def __init__(self, crash_at):
        type(self).lives += 1
        self.inner = _local()
        self.fps = self.inner.fps
        self.crash_at = crash_at if type(self).lives == 1 else None
        self.steps = 0

    def reset(self, seed):
        return self.inner.reset(seed)

    def step(self, action):
        self.steps += 1
        if self.crash_at is not None and self.steps == self.crash_at:
            raise SimUnavailableError("sim process exited with code -9")
        return self.inner.step(action)

    def close(self):
        self.inner.close()


def test_crashed_sim_is_restarted_and_the_episode_rerun():
    _CrashingTransport.lives = 0
    messages = []
    eps, _, _ = run_episodes(
        lambda: _CrashingTransport(crash_at=20),
        ScriptedPolicy(),
        EvalSettings(2, seed=7),
        log=messages.append,
    )
    clean, _, _ = run_episodes(_local, ScriptedPolicy(), EvalSettings(2, seed=7), log=lambda m: None)
    assert _CrashingTransport.lives == 2
    assert [e.restarts for e in eps] == [1, 0]
    assert any("restarting" in m for m in messages)
    assert [e.sum_reward for e in eps] == [e.sum_reward for e in clean]  # rerun from its seed: identical


def test_a_sim_that_keeps_crashing_gives_a_clear_error():
    class Always(_CrashingTransport):
        def __init__(self):
            super().__init__(crash_at=1)
            self.crash_at = 1

    with pytest.raises(EvaluationError, match="failed 3 times"):
        run_episodes(Always, ScriptedPolicy(), EvalSettings(1, seed=0, max_restarts=2), log=lambda m: None)


def test_videos_one_mp4_per_episode_with_every_frame(tmp_path):
    def factory():
        return _local(
            obs_type="pixels_agent_pos", cameras=("front", "wrist"), image_height=48, image_width=64
        )

    class FixedPolicy:
        def reset(self, seed):
            pass

        def select_action(self, obs):
            return np.asarray(obs["observation.state"])

    eps, _, videos = run_episodes(
        factory, FixedPolicy(), EvalSettings(2, 0, 12, str(tmp_path)), log=lambda m: None
    )
    assert [p.rsplit("/", 1)[-1] for p in videos] == ["eval_episode_0.mp4", "eval_episode_1.mp4"]
    with av.open(videos[0]) as container:
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    assert len(frames) == 13  # reset frame + 12 steps
    assert frames[0].shape == (48, 128, 3)  # two cameras side by side


def test_make_policy_errors():
    with pytest.raises(EvaluationError, match="checkpoint directory"):
        make_policy("/nonexistent/dir")
    with pytest.raises(EvaluationError, match="action space"):
        make_policy("random")
    with pytest.raises(EvaluationError, match="n_episodes"):
        run_episodes(_local, ScriptedPolicy(), EvalSettings(0), log=lambda m: None)


def test_eval_output_defaults_to_a_file_named_by_env_policy_and_seed():
    """lerobot-sim-eval --output is optional (the docs' commands leave it out)."""
    from lerobot_sim.eval_cli import build_parser, default_output

    ckpt = "outputs/closed_loop/train/checkpoints/002000/pretrained_model"
    assert default_output("so101_cube", ckpt, 1000) == "outputs/eval/so101_cube-train-002000-seed1000.json"
    assert default_output("so101_cube", "scripted", 0) == "outputs/eval/so101_cube-scripted-seed0.json"
    assert default_output("gym_pusht/PushT-v0", "lerobot/diffusion_pusht", 3) == (
        "outputs/eval/gym_pusht_PushT-v0-lerobot_diffusion_pusht-seed3.json"
    )
    args = build_parser().parse_args(["--env", "so101_cube", "--policy", "scripted", "--episodes", "2"])
    assert args.output is None and args.episodes == 2
