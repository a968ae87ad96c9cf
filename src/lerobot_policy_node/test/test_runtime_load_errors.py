"""A checkpoint missing one of its files: the error names the file, for every native policy type."""

import shutil

import pytest

from lerobot_policy_node.runtime import PolicyLoadError, load_policy

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
