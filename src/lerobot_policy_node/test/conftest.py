from pathlib import Path

import numpy as np
import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"
ACT_SMALL = FIXTURES / "act_small" / "pretrained_model"
ACT_ENV_STATE = FIXTURES / "act_env_state" / "pretrained_model"  # state + environment_state, no camera
ACT_06_DIR = FIXTURES / "act_small_lerobot06"  # act_small's weights saved by LeRobot 0.6.1


def act_lerobot06(dst):
    """ACT_06_DIR's checkpoint, complete: LeRobot 0.6.1 wrote act_small's model.safetensors byte for byte
    (fixtures/make_act_fixture.py checks it), so that file is copied in rather than committed twice."""
    import shutil

    shutil.copytree(ACT_06_DIR / "pretrained_model", dst)
    shutil.copy(ACT_SMALL / "model.safetensors", dst / "model.safetensors")
    return dst, load_reference(ACT_06_DIR / "reference.npz")


@pytest.fixture(scope="session")
def act_reference():
    with np.load(FIXTURES / "act_small" / "reference.npz") as data:
        return {k: data[k] for k in data.files}


@pytest.fixture(scope="session")
def act_observations(act_reference):
    return {k[len("obs.") :]: v for k, v in act_reference.items() if k.startswith("obs.")}


DIFFUSION_DIR = FIXTURES / "diffusion_small"
DIFFUSION_SMALL = DIFFUSION_DIR / "pretrained_model"
DIFFUSION_06_DIR = FIXTURES / "diffusion_small_lerobot06"  # checkpoints LeRobot 0.6.1 saved, as variants


def load_reference(path) -> dict:
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


def observation_step(reference: dict, i: int) -> dict:
    """Step i of a diffusion reference: images are stored as uint8, the policy input is uint8 / 255."""
    prefix = f"obs.{i}."
    out = {}
    for key, value in reference.items():
        if key.startswith(prefix):
            out[key[len(prefix) :]] = (
                value.astype(np.float32) / np.float32(255.0) if value.dtype == np.uint8 else value
            )
    return out


def build_diffusion_variant(name: str, dst, root=None):
    """Rebuild a variant checkpoint: its files + model.safetensors from its delta and the base weights.
    root: the folder of the variants (default the 0.4.4 fixture's variants/; DIFFUSION_06_DIR for 0.6.1's)."""
    import json
    import shutil

    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    src = (DIFFUSION_DIR / "variants" if root is None else root) / name
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("model_delta.safetensors", "reference.npz"))
    delta_path = src / "model_delta.safetensors"
    delta = load_file(delta_path)
    with safe_open(str(delta_path), "pt") as f:
        keys = json.loads(f.metadata()["keys"])
    base = load_file(DIFFUSION_SMALL / "model.safetensors")

    def base_name(key):
        parts = key.split(".")
        if parts[:2] == ["diffusion", "rgb_encoder"] and parts[2].isdigit():
            del parts[2]
        return ".".join(parts)

    save_file(
        {k: delta[k] if k in delta else base[base_name(k)].clone() for k in keys}, dst / "model.safetensors"
    )
    return dst, load_reference(src / "reference.npz")


@pytest.fixture(scope="session")
def diffusion_reference():
    return load_reference(DIFFUSION_DIR / "reference.npz")
