"""A policy that outputs NaN is the policy's fault: the evaluation stops with that reason, the sim is
never sent the action and never restarted for it."""

import shutil
from pathlib import Path

import numpy as np
import pytest
from safetensors.torch import load_file, save_file

from lerobot_core.ament import share_path
from lerobot_sim.evaluation import (
    CheckpointPolicy,
    EvalSettings,
    EvaluationError,
    LocalEnvTransport,
    run_episodes,
)
from lerobot_sim.registration import SO101_CUBE_ID
from lerobot_sim.session import SimSession, make_env

ACT_FIXTURE = share_path("lerobot_runtime") / "test" / "fixtures" / "act_small" / "pretrained_model"
KWARGS = {"cameras": ["front"], "obs_type": "pixels_agent_pos", "image_width": 64, "image_height": 48}


class _Counting:
    """The real in-process env transport, counting the sims built and the actions it was sent."""

    def __init__(self):
        self.built = 0
        self.sent: list[np.ndarray] = []

    def __call__(self):
        self.built += 1
        transport = LocalEnvTransport(SimSession(make_env(SO101_CUBE_ID, KWARGS)))
        step = transport.step

        def counted(action):
            self.sent.append(np.asarray(action, dtype=np.float64))
            return step(action)

        transport.step = counted
        return transport


def _diverged(tmp_path) -> Path:
    """An ACT checkpoint whose action head adds inf and -inf: every action is non-finite."""
    ckpt = tmp_path / "pretrained_model"
    shutil.copytree(ACT_FIXTURE, ckpt)
    tensors = load_file(str(ckpt / "model.safetensors"))
    bias = tensors["model.action_head.bias"].clone()
    bias[0], bias[1] = float("inf"), float("-inf")
    tensors["model.action_head.bias"] = bias
    save_file(tensors, str(ckpt / "model.safetensors"))
    return ckpt


class _NanPolicy:
    def reset(self, seed):
        self.steps = 0

    def select_action(self, observation):
        self.steps += 1
        return np.full(6, np.nan) if self.steps > 3 else np.asarray(observation["observation.state"], float)


@pytest.mark.parametrize("which", ["checkpoint", "any_policy"])
def test_nan_actions_are_the_policys_fault_and_never_reach_the_sim(tmp_path, which):
    policy = CheckpointPolicy(str(_diverged(tmp_path))) if which == "checkpoint" else _NanPolicy()
    transport = _Counting()
    logs: list[str] = []
    with pytest.raises(EvaluationError) as info:
        run_episodes(transport, policy, EvalSettings(2, seed=3, max_steps=20), log=logs.append)
    text = str(info.value)
    assert "episode 0 (seed 3)" in text and "not the sim" in text, text
    assert transport.built == 1 and not any("restarting" in m for m in logs), logs
    assert all(np.isfinite(a).all() for a in transport.sent)
    assert len(transport.sent) == (0 if which == "checkpoint" else 3)
