"""The evaluator's checkpoint policy feeds a history policy (diffusion) one observation per env step."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from lerobot_sim.evaluation import CheckpointPolicy

DIFFUSION_FIXTURE = (
    Path(__file__).resolve().parents[2] / "lerobot_policy_node" / "test" / "fixtures" / "diffusion_small"
)


def _obs(t: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(t)
    return {
        "observation.images.front": rng.integers(0, 256, (48, 64, 3), dtype=np.uint8),
        "observation.state": rng.normal(size=6).astype(np.float32),
    }


@pytest.mark.skipif(
    not (DIFFUSION_FIXTURE / "pretrained_model").is_dir(),
    reason="lerobot_policy_node's diffusion test checkpoint is not in this tree",
)
def test_history_is_the_last_consecutive_steps():
    from lerobot_policy_node.runtime import load_policy

    cp = CheckpointPolicy(str(DIFFUSION_FIXTURE / "pretrained_model"))
    n_obs, n_act = int(cp.config.n_obs_steps), int(cp.config.n_action_steps)
    assert n_obs == 2 and n_act > 1
    cp.reset(0)
    for t in range(n_act):  # the first chunk is inferred at t=0 and lasts n_action_steps steps
        cp.select_action(_obs(t))
    torch.manual_seed(7)
    got = cp.select_action(_obs(n_act))  # the queue is empty: a new chunk from the last two steps

    ref = load_policy(DIFFUSION_FIXTURE / "pretrained_model")
    hist = {}
    for key in ("observation.images.front", "observation.state"):
        steps = [_obs(t)[key] for t in (n_act - 1, n_act)]
        if key.startswith("observation.images"):
            steps = [s.transpose(2, 0, 1).astype(np.float32) / 255.0 for s in steps]
        hist[key] = np.stack(steps)[None].astype(np.float32)  # (1, n_obs_steps, ...)
    torch.manual_seed(7)
    expected = np.asarray(ref.predict_action_chunk(hist))[0, 0]
    np.testing.assert_allclose(got, expected, atol=1e-5)
