"""The evaluator's checkpoint policy feeds history policies (diffusion, a lerobot-backed type) one
observation per env step."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from lerobot_core.ament import share_path
from lerobot_runtime import UnsupportedPolicyError, read_policy_config
from lerobot_runtime.policy import LeRobotBackendPolicy, lerobot_available
from lerobot_sim.evaluation import CheckpointPolicy, EvaluationError, make_policy

DIFFUSION_FIXTURE = share_path("lerobot_runtime") / "test" / "fixtures" / "diffusion_small"


def _obs(t: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(t)
    return {
        "observation.images.front": rng.integers(0, 256, (48, 64, 3), dtype=np.uint8),
        "observation.state": rng.normal(size=6).astype(np.float32),
    }


@pytest.mark.skipif(
    not (DIFFUSION_FIXTURE / "pretrained_model").is_dir(),
    reason="lerobot_runtime's diffusion test checkpoint is not in this tree",
)
def test_history_is_the_last_consecutive_steps():
    from lerobot_runtime import load_policy

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


@pytest.fixture
def vqbet_checkpoint(tmp_path):
    """A checkpoint whose type has no native implementation and that needs 3 observation steps."""
    from safetensors.torch import save_file

    ckpt = tmp_path / "pretrained_model"
    ckpt.mkdir()
    config = {
        "type": "vqbet",
        "n_obs_steps": 3,
        "n_action_pred_token": 3,
        "action_chunk_size": 5,
        "input_features": {
            "observation.images.front": {"type": "VISUAL", "shape": [3, 48, 64]},
            "observation.state": {"type": "STATE", "shape": [6]},
        },
        "output_features": {"action": {"type": "ACTION", "shape": [6]}},
    }
    (ckpt / "config.json").write_text(json.dumps(config))
    save_file({"vqbet.action_head.weight": torch.zeros(6, 6)}, ckpt / "model.safetensors")
    return ckpt


@pytest.mark.skipif(lerobot_available(), reason="lerobot is importable, so the checkpoint would load")
def test_non_native_history_checkpoint_names_the_missing_library(vqbet_checkpoint):
    with pytest.raises(EvaluationError, match="'vqbet'.*needs the lerobot package") as info:
        make_policy(str(vqbet_checkpoint))
    assert "config.json" in str(info.value) and "observe" not in str(info.value)


@pytest.mark.skipif(lerobot_available(), reason="lerobot is importable: the backend call would run")
def test_non_native_history_checkpoint_builds_the_history_up_to_the_backend_call(vqbet_checkpoint):
    """The evaluator's path with the lerobot backend (not loaded: lerobot is imported at its first call)."""
    ckpt, config = read_policy_config(vqbet_checkpoint)
    cp = CheckpointPolicy(str(ckpt), policy=LeRobotBackendPolicy(ckpt, config))
    assert (cp.config.n_obs_steps, cp.config.backend) == (3, "lerobot")
    cp.reset(0)
    for t in range(5):
        # the backend validates the (1, 3, ...) history against the config before it needs lerobot, so a
        # wrong history would raise ObservationError here instead
        with pytest.raises(UnsupportedPolicyError, match="'vqbet'.*needs the lerobot package") as info:
            cp.select_action(_obs(t))
        assert "observe" not in str(info.value)
        assert cp.path.scheduler.needs_inference()  # the failed inference left the queue asking again
        batch = cp.path.history.batch()
        steps = [max(0, s) for s in range(t - 2, t + 1)]  # the first observation fills the history
        assert batch["observation.state"].shape == (1, 3, 6)
        np.testing.assert_array_equal(
            batch["observation.state"][0], np.stack([_obs(s)["observation.state"] for s in steps])
        )
        assert batch["observation.images.front"].shape == (1, 3, 3, 48, 64)
        np.testing.assert_allclose(
            batch["observation.images.front"][0],
            np.stack([_obs(s)["observation.images.front"].transpose(2, 0, 1) / 255.0 for s in steps]),
            atol=1e-6,
        )


ACT_FIXTURE = DIFFUSION_FIXTURE.parent / "act_small" / "pretrained_model"


def test_chunks_are_scheduled_by_the_shared_action_queue(tmp_path):
    """ACT (chunk 10, n_action_steps 5): 5 actions of a chunk, then a chunk from that step's observation;
    a checkpoint tuned with temporal ensembling gets a chunk every step, as in LeRobot."""
    from lerobot_runtime import load_policy

    cp = CheckpointPolicy(str(ACT_FIXTURE))
    cp.reset(0)
    got = np.stack([cp.select_action(_obs(t)) for t in range(7)])
    assert cp.path.chunks == 2 and cp.path.scheduler.cfg.mode == "replace"
    ref = load_policy(ACT_FIXTURE)
    first, second = (ref.predict_action_chunk(cp._batch(_obs(t)))[0] for t in (0, 5))
    np.testing.assert_allclose(got, np.concatenate([first[:5], second[:2]]), atol=1e-6)

    ensembled = tmp_path / "pretrained_model"
    ensembled.mkdir()
    for f in ACT_FIXTURE.iterdir():
        (ensembled / f.name).write_bytes(f.read_bytes())
    cfg = json.loads((ensembled / "config.json").read_text())
    (ensembled / "config.json").write_text(json.dumps({**cfg, "temporal_ensemble_coeff": 0.01}))
    cp = CheckpointPolicy(str(ensembled))
    cp.reset(0)
    assert np.allclose(cp.select_action(_obs(0)), first[0], atol=1e-6)
    for t in range(1, 4):
        cp.select_action(_obs(t))
    assert cp.path.chunks == 4 and cp.path.scheduler.cfg.mode == "ensemble"


@pytest.mark.timeout(900)
def test_lerobot_backend_against_the_real_lerobot(lerobot_python, lerobot_version, tmp_path):
    """fixtures/check_backend_history.py in each LeRobot side venv: diffusion_small through the lerobot
    backend vs LeRobot's chunks and the native policy, and a random VQ-BeT (no native implementation)
    saved by that LeRobot version, served by the lerobot backend through lerobot-sim-eval's path, vs
    LeRobot's own select_action. With 0.6.1 the VQ-BeT checkpoint is a 0.6 one (its config.json has
    pretrained_revision, which 0.4.4 would reject)."""
    src = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(PYTHONPATH=str(src / "lerobot_core"), HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"))
    script = Path(__file__).parent / "fixtures" / "check_backend_history.py"
    out = subprocess.run(
        [str(lerobot_python), str(script), str(DIFFUSION_FIXTURE)],
        capture_output=True,
        text=True,
        env=env,
        timeout=850,
    )
    print(out.stdout)
    assert out.returncode == 0, f"LeRobot {lerobot_version}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    assert "vqbet (n_obs_steps 3) via lerobot-sim-eval's path vs select_action" in out.stdout
