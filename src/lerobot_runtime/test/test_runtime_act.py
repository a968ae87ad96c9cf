"""Parity of the native ACT runtime with LeRobot 0.4.4 and 0.6.1 (fixtures made by fixtures/make_act_fixture.py
run in each version's side venv)."""

import shutil
import sys

import numpy as np
import pytest
import torch

from lerobot_runtime import ObservationError, PolicyLoadError, UnsupportedPolicyError, load_policy
from lerobot_runtime.act import sinusoid_2d
from lerobot_runtime.policy import NativeACTPolicy, lerobot_available

from .conftest import ACT_SMALL, act_lerobot06


@pytest.fixture(scope="module")
def act_policy():
    return load_policy(ACT_SMALL)


def test_act_chunk_matches_lerobot(act_policy, act_observations, act_reference):
    chunk = act_policy.predict_action_chunk(act_observations)
    expected = act_reference["action_chunk"]
    assert chunk.shape == expected.shape == (2, 10, 6)
    assert chunk.dtype == np.float32
    np.testing.assert_allclose(chunk, expected, atol=1e-4, rtol=0)


def test_act_saved_by_lerobot_061_matches_its_chunk(tmp_path):
    """The checkpoint as LeRobot 0.6.1 saves it (its config.json has keys 0.4.4 lacks, e.g.
    pretrained_revision) and the chunk 0.6.1 computes for new inputs."""
    ckpt, ref = act_lerobot06(tmp_path / "act06")
    assert "pretrained_revision" in (ckpt / "config.json").read_text()
    policy = load_policy(ckpt)
    obs = {k[len("obs.") :]: v for k, v in ref.items() if k.startswith("obs.")}
    chunk = policy.predict_action_chunk(obs)
    print(
        f"ACT saved by LeRobot 0.6.1: max |native - LeRobot| {np.abs(chunk - ref['action_chunk']).max():.2e}"
    )
    np.testing.assert_allclose(chunk, ref["action_chunk"], atol=1e-4, rtol=0)


def test_act_runs_without_lerobot_or_torchvision(act_observations, act_reference):
    # the runtime modules must not pull either library in
    code = (
        "import sys, numpy as np\n"
        "sys.modules['lerobot'] = None; sys.modules['torchvision'] = None\n"
        "from lerobot_runtime import load_policy\n"
        f"p = load_policy({str(ACT_SMALL)!r})\n"
        f"r = np.load({str(ACT_SMALL.parent / 'reference.npz')!r})\n"
        "obs = {k[4:]: r[k] for k in r.files if k.startswith('obs.')}\n"
        "print(float(np.abs(p.predict_action_chunk(obs) - r['action_chunk']).max()))\n"
    )
    import os
    import subprocess

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert float(out.stdout.strip()) < 1e-4


def test_act_torch_tensors_and_unbatched_inputs(act_policy, act_observations, act_reference):
    single = {k: torch.from_numpy(v[1]) for k, v in act_observations.items()}
    chunk = act_policy.predict_action_chunk(single)
    assert chunk.shape == (1, 10, 6)
    np.testing.assert_allclose(chunk[0], act_reference["action_chunk"][1], atol=1e-4, rtol=0)


def test_contiguous_convs_give_same_chunk(act_observations, act_reference):
    policy = load_policy(ACT_SMALL)  # channels-last by default on CPU
    policy.set_channels_last(False)
    np.testing.assert_allclose(
        policy.predict_action_chunk(act_observations), act_reference["action_chunk"], atol=1e-4, rtol=0
    )


def test_config_describes_the_policy(act_policy):
    cfg = act_policy.config
    assert (cfg.type, cfg.chunk_size, cfg.n_action_steps, cfg.action_dim) == ("act", 10, 5, 6)
    assert cfg.image_features == {"observation.images.front": (3, 48, 64)}
    assert cfg.state_feature.shape == (6,)
    assert cfg.backend == "native"
    assert isinstance(act_policy, NativeACTPolicy)
    act_policy.reset()  # stateless, but part of the interface


def test_image_input_changes_the_chunk(act_policy, act_observations):
    base = act_policy.predict_action_chunk(act_observations)
    dimmer = dict(
        act_observations, **{"observation.images.front": act_observations["observation.images.front"] * 0.5}
    )
    assert np.abs(act_policy.predict_action_chunk(dimmer) - base).max() > 1e-3


def test_sinusoid_2d_layout():
    pe = sinusoid_2d(4, 2, 3)
    assert pe.shape == (1, 8, 2, 3)
    # channel 0 is sin of the y position scaled to (0, 2pi]: row 0 -> 1/2 * 2pi
    assert pe[0, 0, 0, 0].item() == pytest.approx(np.sin(0.5 * 2 * np.pi / (1 + 1e-6 / 2)), abs=1e-5)
    # channel 4 is sin of x: column 1 of 3 -> 2/3 * 2pi
    assert pe[0, 4, 0, 1].item() == pytest.approx(np.sin(2 / 3 * 2 * np.pi), abs=1e-5)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda o: o.pop("observation.state"), "observation.state' is missing"),
        (lambda o: o.__setitem__("observation.state", np.zeros((2, 5), np.float32)), "expected (B, 6)"),
        (
            lambda o: o.__setitem__("observation.images.front", np.zeros((2, 3, 40, 64), np.float32)),
            "expected (B, 3, 48, 64)",
        ),
        (lambda o: o.__setitem__("observation.state", np.zeros((3, 6), np.float32)), "batch size"),
        (lambda o: o.__setitem__("observation.state", np.full((2, 6), np.nan, np.float32)), "NaN"),
    ],
)
def test_bad_observations_get_clear_errors(act_policy, act_observations, mutate, message):
    obs = dict(act_observations)
    mutate(obs)
    with pytest.raises(ObservationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        act_policy.predict_action_chunk(obs)


@pytest.fixture
def ckpt_copy(tmp_path):
    dst = tmp_path / "pretrained_model"
    shutil.copytree(ACT_SMALL, dst)
    return dst


@pytest.mark.parametrize(
    ("filename", "content", "message"),
    [
        ("model.safetensors", b"\x00\x01garbage", "corrupt"),
        ("config.json", b"{not json", "not valid JSON"),
        ("policy_postprocessor.json", b"[1, 2]", "JSON object"),
        ("policy_postprocessor_step_0_unnormalizer_processor.safetensors", b"abc", "corrupt"),
    ],
)
def test_corrupt_file_is_named(ckpt_copy, filename, content, message):
    (ckpt_copy / filename).write_bytes(content)
    with pytest.raises(PolicyLoadError, match=message) as info:
        load_policy(ckpt_copy)
    assert filename in str(info.value)


def test_truncated_weights_are_reported(ckpt_copy):
    path = ckpt_copy / "model.safetensors"
    path.write_bytes(path.read_bytes()[: 1 << 20])
    with pytest.raises(PolicyLoadError, match="model.safetensors"):
        load_policy(ckpt_copy)


def test_weights_missing_a_tensor(ckpt_copy):
    from safetensors.torch import load_file, save_file

    state = load_file(ckpt_copy / "model.safetensors")
    del state["model.backbone.layer3.1.bn2.running_var"]
    save_file(state, ckpt_copy / "model.safetensors")
    with pytest.raises(PolicyLoadError, match=r"layer3\.1\.bn2\.running_var"):
        load_policy(ckpt_copy)


def test_missing_directory():
    with pytest.raises(PolicyLoadError, match="does not exist"):
        load_policy("/nonexistent/checkpoint")


def test_training_checkpoint_dir_is_accepted(tmp_path, act_observations, act_reference):
    shutil.copytree(ACT_SMALL, tmp_path / "last" / "pretrained_model")
    policy = load_policy(tmp_path / "last")
    np.testing.assert_allclose(
        policy.predict_action_chunk(act_observations), act_reference["action_chunk"], atol=1e-4, rtol=0
    )


@pytest.mark.skipif(lerobot_available(), reason="lerobot is importable, so other types load through it")
def test_unknown_type_without_lerobot_names_the_type(ckpt_copy):
    cfg = (ckpt_copy / "config.json").read_text().replace('"type": "act"', '"type": "smolvla"')
    (ckpt_copy / "config.json").write_text(cfg)
    with pytest.raises(UnsupportedPolicyError, match="'smolvla'.*lerobot"):
        load_policy(ckpt_copy)


def test_native_backend_rejects_other_types(ckpt_copy):
    cfg = (ckpt_copy / "config.json").read_text().replace('"type": "act"', '"type": "pi0"')
    (ckpt_copy / "config.json").write_text(cfg)
    with pytest.raises(UnsupportedPolicyError, match="'pi0'"):
        load_policy(ckpt_copy, backend="native")


def test_unsupported_processor_step_is_named(ckpt_copy):
    import json

    path = ckpt_copy / "policy_preprocessor.json"
    data = json.loads(path.read_text())
    data["steps"].insert(1, {"registry_name": "tokenizer_processor", "config": {}})
    path.write_text(json.dumps(data))
    with pytest.raises(PolicyLoadError, match="tokenizer_processor"):
        load_policy(ckpt_copy, backend="native")


def test_act_with_environment_state_matches_lerobot():
    """No camera, observation.environment_state as a second 1-D token (the closed loop's privileged-state
    policy): the chunk equals LeRobot's for the same inputs, and the environment state matters."""
    from .conftest import ACT_ENV_STATE

    policy = load_policy(ACT_ENV_STATE)
    ref = np.load(ACT_ENV_STATE.parent / "reference.npz")
    obs = {k[4:]: ref[k] for k in ref.files if k.startswith("obs.")}
    assert not policy.config.image_features
    assert policy.config.input_features["observation.environment_state"].shape == (7,)
    chunk = policy.predict_action_chunk(obs)
    assert np.abs(chunk - ref["action_chunk"]).max() <= 1e-4, np.abs(chunk - ref["action_chunk"]).max()
    moved = dict(obs, **{"observation.environment_state": obs["observation.environment_state"] + 0.1})
    assert np.abs(policy.predict_action_chunk(moved) - chunk).max() > 1e-3
