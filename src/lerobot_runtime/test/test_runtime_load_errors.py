"""A checkpoint missing one of its files: the error names the file, for every native policy type."""

import shutil

import pytest

from lerobot_runtime import PolicyLoadError, load_policy

from .conftest import ACT_SMALL, DIFFUSION_SMALL


@pytest.mark.parametrize(
    ("checkpoint", "filename"),
    [
        (ACT_SMALL, "config.json"),
        (ACT_SMALL, "model.safetensors"),
        (ACT_SMALL, "policy_preprocessor.json"),
        (ACT_SMALL, "policy_postprocessor.json"),
        (ACT_SMALL, "policy_preprocessor_step_3_normalizer_processor.safetensors"),
        (DIFFUSION_SMALL, "config.json"),
        (DIFFUSION_SMALL, "model.safetensors"),
        (DIFFUSION_SMALL, "policy_preprocessor.json"),
        (DIFFUSION_SMALL, "policy_postprocessor_step_0_unnormalizer_processor.safetensors"),
    ],
    ids=lambda v: v.parent.name if hasattr(v, "parent") else v,
)
def test_missing_file_is_named(tmp_path, checkpoint, filename):
    ckpt = tmp_path / "pretrained_model"
    shutil.copytree(checkpoint, ckpt)
    (ckpt / filename).unlink()
    with pytest.raises(PolicyLoadError, match=filename.replace(".", r"\.")) as info:
        load_policy(ckpt)
    assert "missing" in str(info.value)


def _act_copy(tmp_path, config_edit=None, card=None):
    import json

    ckpt = tmp_path / "pretrained_model"
    shutil.copytree(ACT_SMALL, ckpt)
    if config_edit:
        cfg = json.loads((ckpt / "config.json").read_text())
        cfg.update(config_edit)
        (ckpt / "config.json").write_text(json.dumps(cfg))
    if card is not None:  # a Hub model card as LeRobot 0.6 renders it (its training table)
        (ckpt / "README.md").write_text(
            f"---\nlibrary_name: lerobot\n---\n\n| Setting | Value |\n|---|---|\n| Steps | 100 |\n"
            f"| LeRobot version | {card} |\n"
        )
    return ckpt


@pytest.mark.parametrize(
    ("config_edit", "card", "version", "field"),
    [
        (None, "0.9.0", "0.9.0", "README.md' (model card), field 'LeRobot version'"),
        ({"lerobot_version": "1.2.0"}, None, "1.2.0", "config.json', field 'lerobot_version'"),
        ({"lerobot_version": "0.3.3"}, None, "0.3.3", "field 'lerobot_version'"),
        ({"lerobot_version": "next"}, None, "next", "field 'lerobot_version'"),
    ],
)
def test_checkpoint_of_an_unknown_lerobot_version_names_version_and_field(
    tmp_path, config_edit, card, version, field
):
    ckpt = _act_copy(tmp_path, config_edit, card)
    with pytest.raises(PolicyLoadError) as info:
        load_policy(ckpt)
    message = str(info.value)
    assert f"saved by LeRobot {version!r}" in message and field in message, message
    assert "0.4, 0.5, 0.6" in message and "--backend lerobot" in message


@pytest.mark.parametrize(
    ("config_edit", "card"), [(None, "0.6.1"), ({"lerobot_version": "0.4.4"}, None), (None, None)]
)
def test_checkpoint_of_a_known_or_unstated_lerobot_version_loads(tmp_path, config_edit, card):
    assert load_policy(_act_copy(tmp_path, config_edit, card)).config.type == "act"


def test_unknown_config_keys_from_newer_versions_are_ignored(tmp_path, act_observations, act_reference):
    """Keys a later LeRobot adds to config.json (0.6 added pretrained_revision and, for Diffusion,
    gradient_checkpointing) change nothing: 0.4.4's draccus would reject them, the runtime ignores them."""
    import numpy as np

    edit = {"pretrained_revision": "main", "some_future_option": {"enabled": True}, "another_new_key": [1, 2]}
    policy = load_policy(_act_copy(tmp_path, edit))
    np.testing.assert_allclose(
        policy.predict_action_chunk(act_observations), act_reference["action_chunk"], atol=1e-4, rtol=0
    )
