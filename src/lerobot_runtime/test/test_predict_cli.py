"""The offline `lerobot-policy-predict` command, run as its installed console script."""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from .conftest import ACT_SMALL


def predict_cmd():
    exe = shutil.which("lerobot-policy-predict")
    return [exe] if exe else [sys.executable, "-m", "lerobot_runtime.predict_cli"]


def run(*args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.run(
        [*predict_cmd(), *map(str, args)], capture_output=True, text=True, env=env, timeout=120
    )


def test_predict_matches_lerobot(tmp_path, act_observations, act_reference):
    obs = tmp_path / "in.npz"
    np.savez(obs, **act_observations)
    out = tmp_path / "out" / "pred.npz"
    res = run("--policy", ACT_SMALL, "--observations", obs, "--output", out)
    assert res.returncode == 0, res.stderr
    with np.load(out) as data:
        chunk = data["action_chunk"]
    assert chunk.dtype == np.float32 and chunk.shape == (2, 10, 6)
    np.testing.assert_allclose(chunk, act_reference["action_chunk"], atol=1e-4, rtol=0)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda o: o.pop("observation.state"), "'observation.state' is missing"),
        (lambda o: o.__setitem__("observation.state", np.zeros((2, 7), np.float32)), "has shape (2, 7)"),
        (
            lambda o: o.__setitem__("observation.images.front", o["observation.images.front"] * 255.0),
            "must be float in [0, 1]",
        ),
    ],
)
def test_bad_inputs_exit_with_clear_error(tmp_path, act_observations, edit, message):
    obs = dict(act_observations)
    edit(obs)
    path = tmp_path / "in.npz"
    np.savez(path, **obs)
    res = run("--policy", ACT_SMALL, "--observations", path, "--output", tmp_path / "out.npz")
    assert res.returncode == 2
    assert message in res.stderr
    assert not (tmp_path / "out.npz").exists()


def test_unreadable_observation_file(tmp_path):
    bad = tmp_path / "in.npz"
    bad.write_text("not an npz")
    res = run("--policy", ACT_SMALL, "--observations", bad, "--output", tmp_path / "o.npz")
    assert res.returncode == 2 and "in.npz" in res.stderr


def test_missing_policy_dir(tmp_path, act_observations):
    path = tmp_path / "in.npz"
    np.savez(path, **act_observations)
    res = run("--policy", tmp_path / "nope", "--observations", path, "--output", tmp_path / "o.npz")
    assert res.returncode == 2 and "does not exist" in res.stderr


def test_a_device_torch_cannot_use_is_refused_before_loading(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the refusal is for a CPU-only torch")
    res = run(
        "--policy",
        str(tmp_path / "nowhere"),
        "--observations",
        "x.npz",
        "--output",
        "y.npz",
        "--device",
        "cuda",
    )
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "--device cuda: torch" in res.stderr and "has no CUDA" in res.stderr and "use cpu" in res.stderr
    res = run(
        "--policy",
        str(tmp_path / "nowhere"),
        "--observations",
        "x.npz",
        "--output",
        "y.npz",
        "--device",
        "gpu0",
    )
    assert res.returncode == 2 and "--device gpu0: not a torch device name" in res.stderr
