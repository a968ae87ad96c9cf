"""Hugging Face Hub ids for checkpoints, offline from a real cache layout the test fills itself.

The cache is what huggingface_hub writes after `hf download lerobot-ros/act_small`:
models--lerobot-ros--act_small/{blobs/<sha256>, snapshots/<commit>/<file> -> ../../blobs/<sha256>,
refs/main = <commit>}, with the files of our ACT fixture. HF_HUB_OFFLINE=1: nothing touches the
network; huggingface_hub itself finds the snapshot (no mock).
"""

import hashlib
import os
import subprocess
import sys

import numpy as np
import pytest

from .conftest import ACT_SMALL
from .test_predict_cli import predict_cmd

pytest.importorskip("huggingface_hub")
REPO_ID = "lerobot-ros/act_small"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def fill_cache(cache, repo_id=REPO_ID, source=ACT_SMALL, commit=COMMIT):
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    (repo / "blobs").mkdir(parents=True)
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for f in sorted(source.iterdir()):
        data = f.read_bytes()
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        (snapshot / f.name).symlink_to(os.path.relpath(blob, snapshot))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    return snapshot


def hub_env(cache):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1")
    env.pop("HF_HOME", None)
    return env


def test_predict_takes_a_hub_id_from_the_cache(tmp_path, act_observations, act_reference):
    fill_cache(tmp_path / "hub")
    obs = tmp_path / "in.npz"
    np.savez(obs, **act_observations)
    out = tmp_path / "pred.npz"
    res = subprocess.run(
        [*predict_cmd(), "--policy", REPO_ID, "--observations", str(obs), "--output", str(out)],
        capture_output=True,
        text=True,
        env=hub_env(tmp_path / "hub"),
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    with np.load(out) as data:
        np.testing.assert_allclose(data["action_chunk"], act_reference["action_chunk"], atol=1e-4, rtol=0)


def test_load_policy_resolves_to_the_snapshot(tmp_path):
    snapshot = fill_cache(tmp_path / "hub")
    code = (
        "from lerobot_core.hub import resolve_pretrained\n"
        "from lerobot_runtime import load_policy\n"
        f"print(resolve_pretrained({REPO_ID!r}))\n"
        f"print(load_policy({REPO_ID!r}).config.type)\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=hub_env(tmp_path / "hub"),
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == [str(snapshot), "act"]


def test_a_hub_id_missing_from_the_cache_says_where_it_looked(tmp_path, act_observations):
    fill_cache(tmp_path / "hub")
    obs = tmp_path / "in.npz"
    np.savez(obs, **act_observations)
    res = subprocess.run(
        [
            *predict_cmd(),
            "--policy",
            "lerobot-ros/not_cached",
            "--observations",
            str(obs),
            "--output",
            "x.npz",
        ],
        capture_output=True,
        text=True,
        env=hub_env(tmp_path / "hub"),
        timeout=120,
        cwd=tmp_path,
    )
    assert res.returncode == 2
    assert "'lerobot-ros/not_cached' is not a local folder" in res.stderr
    assert (
        f"not in the Hugging Face cache {tmp_path / 'hub'}" in res.stderr and "HF_HUB_OFFLINE" in res.stderr
    )
    assert "hf download lerobot-ros/not_cached" in res.stderr


def test_a_local_folder_shaped_like_a_hub_id_wins(tmp_path, monkeypatch):
    from lerobot_core.hub import is_repo_id, resolve_pretrained

    monkeypatch.chdir(tmp_path)
    assert is_repo_id("org/name")
    (tmp_path / "org" / "name").mkdir(parents=True)
    assert not is_repo_id("org/name")
    assert resolve_pretrained("org/name") == tmp_path.joinpath("org", "name").relative_to(tmp_path)
    for not_an_id in ("./org/name", "/abs/path", "a/b/c", "~/x", "name"):
        assert not is_repo_id(not_an_id)
