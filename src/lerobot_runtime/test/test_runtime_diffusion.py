"""Parity of the native Diffusion Policy with LeRobot 0.4.4 and 0.6.1 (fixtures made by
fixtures/make_diffusion_fixture.py run in each version's side venv)."""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch

from lerobot_runtime import ObservationError, PolicyLoadError, load_policy
from lerobot_runtime.diffusion_sampler import make_betas
from lerobot_runtime.policy import NativeDiffusionPolicy

from .conftest import (
    DIFFUSION_06_DIR,
    DIFFUSION_DIR,
    DIFFUSION_SMALL,
    build_diffusion_variant,
    observation_step,
)

N_STEPS = 3
TOL = 1e-4


def max_diff(a, b) -> float:
    return float(np.abs(np.asarray(a) - np.asarray(b)).max())


@pytest.fixture(scope="module")
def ddpm_policy():
    return load_policy(DIFFUSION_SMALL)


@pytest.fixture
def ckpt_copy(tmp_path):
    dst = tmp_path / "pretrained_model"
    shutil.copytree(DIFFUSION_SMALL, dst)
    return dst


def with_overrides(ckpt, overrides: dict):
    cfg = json.loads((ckpt / "config.json").read_text())
    cfg.update(overrides)
    (ckpt / "config.json").write_text(json.dumps(cfg, indent=4))
    return ckpt


def _history(reference, steps):
    obs = [observation_step(reference, i) for i in steps]
    return {k: np.stack([o[k] for o in obs], axis=1) for k in obs[0]}


def _queue(reference, i: int, n_obs_steps: int):
    """The (B, n_obs_steps, ...) input after control steps 0..i: the last n_obs_steps observations, the
    first repeated to fill the queue, as LeRobot's policy queues (and the node's ObservationHistory) do."""
    return _history(reference, [max(0, j) for j in range(i - n_obs_steps + 1, i + 1)])


@pytest.fixture
def ddim_policy(ckpt_copy, diffusion_reference):
    return load_policy(with_overrides(ckpt_copy, json.loads(str(diffusion_reference["ddim.overrides"]))))


def test_ddpm_sequence_matches_lerobot(ddpm_policy, diffusion_reference):
    """Three control steps: the first observation fills the history, then it shifts; seeded DDPM."""
    ref = diffusion_reference
    diffs = []
    for i in range(N_STEPS):
        torch.manual_seed(int(ref[f"ddpm.seed.{i}"]))
        chunk = ddpm_policy.predict_action_chunk(_queue(ref, i, ddpm_policy.config.n_obs_steps))
        assert chunk.shape == (2, 8, 6) and chunk.dtype == np.float32
        diffs.append(max_diff(chunk, ref[f"ddpm.chunk.{i}"]))
    print(f"DDPM (100 steps) max |native - LeRobot| per step: {diffs}")
    assert max(diffs) < TOL


def test_ddim_with_explicit_noise_matches_lerobot(ddim_policy, diffusion_reference):
    ref = diffusion_reference
    diffs = []
    for i in range(N_STEPS):
        batch = _queue(ref, i, ddim_policy.config.n_obs_steps)
        chunk = ddim_policy.predict_action_chunk(batch, noise=ref[f"ddim.noise.{i}"])
        diffs.append(max_diff(chunk, ref[f"ddim.chunk.{i}"]))
    torch.manual_seed(int(ref["ddim.seed"]))
    diffs.append(
        max_diff(ddim_policy.predict_action_chunk(observation_step(ref, 0)), ref["ddim.seeded_chunk"])
    )
    print(f"DDIM (10 steps) max |native - LeRobot|: {diffs}")
    assert max(diffs) < TOL


@pytest.mark.parametrize("variant", ["separate_sample_linear", "batchnorm_resize_ddim", "env_state_ddim"])
def test_variant_matches_lerobot(tmp_path, variant):
    """Per-camera encoders / FiLM bias only / x0 prediction / linear betas / n_obs_steps 3;
    batch-norm trunk / resize + crop_ratio / scaled_linear betas / no clipping / DDIM / n_obs_steps 1;
    no camera, environment state (MIN_MAX) / three UNet levels."""
    ckpt, ref = build_diffusion_variant(variant, tmp_path / variant)
    policy = load_policy(ckpt)
    kind = policy.config.raw["noise_scheduler_type"].lower()
    diffs = []
    for i in range(N_STEPS):
        torch.manual_seed(int(ref[f"{kind}.seed.{i}"]))
        chunk = policy.predict_action_chunk(_queue(ref, i, policy.config.n_obs_steps))
        assert chunk.shape == ref[f"{kind}.chunk.{i}"].shape
        diffs.append(max_diff(chunk, ref[f"{kind}.chunk.{i}"]))
    print(f"{variant} ({kind}) max |native - LeRobot| per step: {diffs}")
    assert max(diffs) < TOL


@pytest.mark.timeout(900)  # horizon 64, two ResNets, 100 DDPM steps, three control steps: minutes under load
@pytest.mark.parametrize("variant", ["defaults_ddpm", "defaults_ddim", "groupnorm_shared_encoder"])
def test_saved_by_lerobot_061_matches_its_chunks(tmp_path, variant):
    """Checkpoints LeRobot 0.6.1 saved with its defaults (horizon 64, n_action_steps 32, batch norm, one
    encoder per camera; two cameras), with DDPM and with DDIM, and with GroupNorm + a shared encoder:
    three control steps, seeded, against 0.6.1's chunks."""
    ckpt, ref = build_diffusion_variant(variant, tmp_path / variant, root=DIFFUSION_06_DIR)
    raw = json.loads((ckpt / "config.json").read_text())
    assert (raw["horizon"], raw["n_action_steps"]) == (64, 32) and "pretrained_revision" in raw
    policy = load_policy(ckpt)
    kind = raw["noise_scheduler_type"].lower()
    diffs = []
    for i in range(N_STEPS):
        torch.manual_seed(int(ref[f"{kind}.seed.{i}"]))
        chunk = policy.predict_action_chunk(_queue(ref, i, policy.config.n_obs_steps))
        assert chunk.shape == ref[f"{kind}.chunk.{i}"].shape == (2, 32, 6)
        diffs.append(max_diff(chunk, ref[f"{kind}.chunk.{i}"]))
    print(f"LeRobot 0.6.1 {variant} ({kind}) max |native - LeRobot| per step: {diffs}")
    assert max(diffs) < TOL


def test_config_describes_the_policy(ddpm_policy):
    cfg = ddpm_policy.config
    assert isinstance(ddpm_policy, NativeDiffusionPolicy)
    assert (cfg.type, cfg.backend, cfg.n_obs_steps) == ("diffusion", "native", 2)
    # predict_action_chunk returns n_action_steps actions, not the horizon (16)
    assert (cfg.chunk_size, cfg.n_action_steps, cfg.action_dim) == (8, 8, 6)
    assert cfg.image_features == {"observation.images.front": (3, 48, 64)}


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda o: o.__setitem__("observation.state", np.zeros((2, 3, 6), np.float32)), r"or \(B, 2, 6\)"),
        (
            lambda o: o.__setitem__("observation.state", np.zeros((2, 2, 6), np.float32)),
            "mix single steps and histories",
        ),
        (lambda o: o.pop("observation.images.front"), "'observation.images.front' is missing"),
        (lambda o: o.__setitem__("observation.state", np.full((2, 6), np.inf, np.float32)), "infinite"),
    ],
)
def test_bad_observations_get_clear_errors(ddpm_policy, diffusion_reference, edit, message):
    obs = observation_step(diffusion_reference, 0)
    edit(obs)
    ddpm_policy.reset()
    with pytest.raises(ObservationError, match=message):
        ddpm_policy.predict_action_chunk(obs)


def test_wrong_noise_shape(ddim_policy, diffusion_reference):
    with pytest.raises(ObservationError, match=r"noise must have shape \(2, 16, 6\)"):
        ddim_policy.predict_action_chunk(observation_step(diffusion_reference, 0), noise=np.zeros((2, 8, 6)))


def test_ddim_is_deterministic(ddim_policy, diffusion_reference):
    ref = diffusion_reference
    batch = _history(ref, [0, 1])
    noise = ref["ddim.noise.1"]
    torch.manual_seed(1)
    a = ddim_policy.predict_action_chunk(batch, noise=noise)
    torch.manual_seed(2)  # DDIM (eta 0) draws nothing once the initial noise is given
    b = ddim_policy.predict_action_chunk(batch, noise=noise)
    np.testing.assert_array_equal(a, b)
    g1 = ddim_policy.predict_action_chunk(batch, generator=torch.Generator().manual_seed(3))
    g2 = ddim_policy.predict_action_chunk(batch, generator=torch.Generator().manual_seed(3))
    np.testing.assert_array_equal(g1, g2)
    assert max_diff(a, g1) > 1e-3


def test_ddpm_draws_from_the_global_generator(ddpm_policy, diffusion_reference):
    batch = _history(diffusion_reference, [0, 1])
    torch.manual_seed(7)
    a = ddpm_policy.predict_action_chunk(batch)
    torch.manual_seed(7)
    b = ddpm_policy.predict_action_chunk(batch)
    c = ddpm_policy.predict_action_chunk(batch)
    np.testing.assert_array_equal(a, b)
    assert max_diff(a, c) > 1e-3


def test_beta_schedules():
    np.testing.assert_allclose(
        make_betas("linear", 5, 0.1, 0.5).numpy(), [0.1, 0.2, 0.3, 0.4, 0.5], atol=1e-7
    )
    np.testing.assert_allclose(
        make_betas("scaled_linear", 3, 0.01, 0.09).numpy(), [0.01, 0.04, 0.09], rtol=1e-6
    )
    cos = make_betas("squaredcos_cap_v2", 100, 0, 0).numpy()
    assert cos.shape == (100,) and cos[-1] == pytest.approx(0.999) and 0 < cos[0] < 1e-3
    with pytest.raises(ValueError, match="sigmoid"):
        make_betas("sigmoid", 10, 0, 0)


def test_runs_without_lerobot_torchvision_or_diffusers(diffusion_reference):
    code = (
        "import sys, numpy as np, torch\n"
        "for m in ('lerobot', 'torchvision', 'diffusers', 'einops'): sys.modules[m] = None\n"
        "from lerobot_runtime import load_policy\n"
        f"p = load_policy({str(DIFFUSION_SMALL)!r})\n"
        f"r = np.load({str(DIFFUSION_DIR / 'reference.npz')!r})\n"
        "obs = {k[6:]: (r[k].astype(np.float32) / np.float32(255) if r[k].dtype == np.uint8 else r[k])"
        " for k in r.files if k.startswith('obs.0.')}\n"
        "torch.manual_seed(int(r['ddpm.seed.0']))\n"
        "print(float(np.abs(p.predict_action_chunk(obs) - r['ddpm.chunk.0']).max()))\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert float(out.stdout.strip()) < TOL


# ------------------------------------------------------------------ load errors


def test_corrupt_weights_are_named(ckpt_copy):
    path = ckpt_copy / "model.safetensors"
    path.write_bytes(path.read_bytes()[: 1 << 20])
    with pytest.raises(PolicyLoadError, match=r"model\.safetensors.*corrupt"):
        load_policy(ckpt_copy)


@pytest.mark.parametrize(
    "key",
    [
        "diffusion.rgb_encoder.backbone.6.1.bn2.weight",  # a GroupNorm of the trunk
        "diffusion.rgb_encoder.pool.nets.weight",
        "diffusion.unet.up_modules.0.2.weight",
        "diffusion.unet.final_conv.1.bias",
    ],
)
def test_weights_missing_a_tensor(ckpt_copy, key):
    from safetensors.torch import load_file, save_file

    state = load_file(ckpt_copy / "model.safetensors")
    del state[key]
    save_file(state, ckpt_copy / "model.safetensors")
    with pytest.raises(PolicyLoadError, match=r"model\.safetensors") as info:
        load_policy(ckpt_copy)
    assert key in str(info.value)


@pytest.mark.parametrize(
    ("key", "shape"),
    [
        ("diffusion.unet.mid_modules.0.cond_encoder.1.weight", (128, 10)),
        ("diffusion.rgb_encoder.backbone.5.0.downsample.0.weight", (128, 64, 3, 3)),
        ("diffusion.rgb_encoder.backbone.4.0.bn1.bias", (32,)),
    ],
)
def test_weights_with_a_wrong_shape(ckpt_copy, key, shape):
    from safetensors.torch import load_file, save_file

    state = load_file(ckpt_copy / "model.safetensors")
    state[key] = torch.zeros(shape)
    save_file(state, ckpt_copy / "model.safetensors")
    with pytest.raises(PolicyLoadError, match=r"model\.safetensors") as info:
        load_policy(ckpt_copy)
    assert key in str(info.value) and "shape" in str(info.value)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"noise_scheduler_type": "DPMSolver"}, "noise_scheduler_type"),
        ({"beta_schedule": "sigmoid"}, "beta_schedule"),
        ({"prediction_type": "v_prediction"}, "prediction_type"),
        ({"num_inference_steps": 500}, "num_inference_steps"),
        ({"horizon": 10}, "multiple"),
        ({"n_action_steps": 16}, "n_action_steps"),
        ({"vision_backbone": "resnet50"}, "resnet50"),
        ({"crop_shape": [64, 64]}, "crop_shape"),
    ],
)
def test_unsupported_config_is_named(ckpt_copy, overrides, message):
    with pytest.raises(PolicyLoadError, match=message) as info:
        load_policy(with_overrides(ckpt_copy, overrides))
    assert "config.json" in str(info.value)


# ------------------------------------------------------------------ lerobot-policy-predict
def _cli(tmp_path, batch, *extra):
    from .test_predict_cli import run

    path = tmp_path / "in.npz"
    np.savez(path, **batch)
    out = tmp_path / "out.npz"
    res = run("--policy", DIFFUSION_SMALL, "--observations", path, "--output", out, *extra)
    chunk = None
    if out.exists():
        with np.load(out) as data:
            chunk = data["action_chunk"]
    return res, chunk


def test_predict_cli_single_observation_is_repeated(tmp_path, diffusion_reference):
    ref = diffusion_reference
    res, chunk = _cli(tmp_path, observation_step(ref, 0), "--seed", int(ref["ddpm.seed.0"]))
    assert res.returncode == 0, res.stderr
    assert chunk.shape == (2, 8, 6)
    assert max_diff(chunk, ref["ddpm.chunk.0"]) < TOL  # LeRobot's first step: the history is [o0, o0]


def test_predict_cli_history_input(tmp_path, diffusion_reference):
    ref = diffusion_reference
    res, chunk = _cli(tmp_path, _history(ref, [0, 1]), "--seed", int(ref["ddpm.seed.1"]))
    assert res.returncode == 0, res.stderr
    assert max_diff(chunk, ref["ddpm.chunk.1"]) < TOL  # LeRobot's second step: [o0, o1]


def test_predict_cli_wrong_history_length(tmp_path, diffusion_reference):
    res, chunk = _cli(tmp_path, _history(diffusion_reference, [0, 1, 2]))
    assert res.returncode == 2 and chunk is None
    assert "expected (B, 3, 48, 64) or (B, 2, 3, 48, 64) for a history of n_obs_steps=2" in res.stderr
