"""The node's ObservationHistory feeding the native Diffusion Policy (n_obs_steps 2): the first
observation fills the history, then it shifts; the policy itself keeps no state."""

import json
import shutil

import numpy as np
import pytest
import torch

from lerobot_policy_node.action_path import ObservationHistory
from lerobot_runtime import ObservationError, load_policy

from .conftest import DIFFUSION_SMALL, observation_step


def max_diff(a, b) -> float:
    return float(np.abs(np.asarray(a) - np.asarray(b)).max())


@pytest.fixture
def ddim_policy(tmp_path, diffusion_reference):
    ckpt = tmp_path / "pretrained_model"
    shutil.copytree(DIFFUSION_SMALL, ckpt)
    cfg = json.loads((ckpt / "config.json").read_text())
    cfg.update(json.loads(str(diffusion_reference["ddim.overrides"])))
    (ckpt / "config.json").write_text(json.dumps(cfg, indent=4))
    return load_policy(ckpt)


def _history(reference, steps):
    obs = [observation_step(reference, i) for i in steps]
    return {k: np.stack([o[k] for o in obs], axis=1) for k in obs[0]}


def test_observation_history_semantics(ddim_policy, diffusion_reference):
    ref = diffusion_reference
    p = ddim_policy  # the history does not depend on the sampler; DDIM's 10 steps keep this quick
    history = ObservationHistory(p.config.n_obs_steps, dict)
    with pytest.raises(ObservationError, match="no observation yet"):
        history.batch()

    def run(batch=None):
        batch = history.batch() if batch is None else batch
        return p.predict_action_chunk(batch, generator=torch.Generator().manual_seed(5))

    # the first observation fills the history, as a single observation does
    history.push(observation_step(ref, 0))
    filled = run()
    np.testing.assert_array_equal(filled, run(_history(ref, [0, 0])))
    np.testing.assert_array_equal(filled, run(observation_step(ref, 0)))
    # then it shifts: after o0, o1, o2 the history is [o1, o2]
    history.push(observation_step(ref, 1))
    np.testing.assert_array_equal(run(), run(_history(ref, [0, 1])))
    history.push(observation_step(ref, 2))
    shifted = run()
    np.testing.assert_array_equal(shifted, run(_history(ref, [1, 2])))
    assert max_diff(shifted, filled) > 1e-3
    # the policy keeps no state: another history in between changes nothing
    run(_history(ref, [0, 0]))
    np.testing.assert_array_equal(run(), shifted)
    history.clear()
    history.push({k: v[:1] for k, v in observation_step(ref, 0).items()})
    assert run().shape == (1, 8, 6)
