"""Pushing a dataset to the Hub, up to the network: the plan (files, repo type, card, LeRobot's
version tag) and, with HF_HUB_OFFLINE=1, huggingface_hub's own offline error at its first request.
The upload itself is not tested (no network here)."""

import os
import subprocess
import sys

import numpy as np
import pytest
import yaml

from lerobot_dataset import DatasetWriter
from lerobot_dataset.push import main, plan_push

NAMES = ["a.pos", "b.pos"]


@pytest.fixture
def dataset(tmp_path):
    root = tmp_path / "ds"
    w = DatasetWriter.create(
        root,
        fps=10,
        robot_type="so101_follower",
        vcodec="libx264",
        features={
            "observation.state": {"dtype": "float32", "shape": (2,), "names": NAMES},
            "action": {"dtype": "float32", "shape": (2,), "names": NAMES},
            "observation.images.front": {"dtype": "video", "shape": (16, 16, 3), "names": None},
        },
    )
    for i in range(4):
        w.add_frame(
            {
                "observation.state": np.full(2, i, np.float32),
                "action": np.full(2, -i, np.float32),
                "observation.images.front": np.full((16, 16, 3), 40 * i, np.uint8),
            },
            task="t",
        )
    w.save_episode()
    w.finalize()
    (root / "images" / "observation.images.front").mkdir(parents=True)  # left-over PNGs: never pushed
    (root / "images" / "observation.images.front" / "frame-000000.png").write_bytes(b"png")
    return root


def test_plan_sends_the_dataset_files_to_a_dataset_repo_tagged_v30(dataset):
    plan = plan_push(dataset, "someone/so101_pick", tags=("so101", "teleop"))
    assert plan.repo_type == "dataset" and plan.tag == "v3.0" and plan.branch is None
    assert (
        "meta/info.json" in plan.files
        and "meta/stats.json" in plan.files
        and "meta/tasks.parquet" in plan.files
    )
    assert "data/chunk-000/file-000.parquet" in plan.files
    assert "meta/episodes/chunk-000/file-000.parquet" in plan.files
    assert "videos/observation.images.front/chunk-000/file-000.mp4" in plan.files
    assert not [f for f in plan.files if f.startswith(("images/", ".lerobot_ros"))]
    every_file = {str(p.relative_to(dataset)) for p in dataset.rglob("*") if p.is_file()}
    assert set(plan.files) == {f for f in every_file if not f.startswith(("images/", ".lerobot_ros/"))}
    front, body = plan.card.split("---\n")[1:3]
    header = yaml.safe_load(front)
    assert header["tags"] == ["LeRobot", "so101", "teleop"]
    assert header["task_categories"] == ["robotics"]
    assert header["configs"] == [{"config_name": "default", "data_files": "data/*/*.parquet"}]
    assert '"codebase_version": "v3.0"' in body and 'LeRobotDataset("someone/so101_pick")' in body
    no_videos = plan_push(dataset, "someone/so101_pick", push_videos=False)
    assert not [f for f in no_videos.files if f.startswith("videos/")]


def test_dry_run_lists_the_files(dataset, capsys):
    assert main([str(dataset), "someone/so101_pick", "--dry-run", "--private", "--branch", "b1"]) == 0
    out = capsys.readouterr()
    assert "meta/info.json" in out.out.split()
    assert "dataset repo someone/so101_pick (private), revision b1" in out.err and "tag v3.0" in out.err


def test_bad_arguments_name_them(dataset, tmp_path, capsys):
    assert main([str(dataset), "not-a-repo-id"]) == 2
    assert "REPO_ID 'not-a-repo-id'" in capsys.readouterr().err
    assert main([str(tmp_path / "nope"), "a/b"]) == 2
    assert f"DATASET '{tmp_path / 'nope'}'" in capsys.readouterr().err


def test_push_stops_at_huggingface_hubs_offline_error(dataset):
    pytest.importorskip("huggingface_hub")
    env = dict(
        os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=os.pathsep.join(sys.path), HF_TOKEN="hf_notarealtoken"
    )
    res = subprocess.run(
        [sys.executable, "-m", "lerobot_dataset.push", str(dataset), "someone/so101_pick"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert res.returncode == 1, res.stderr
    assert "pushing to dataset someone/so101_pick: OfflineModeIsEnabled" in res.stderr


def test_info_json_without_features_is_one_line_of_error(dataset, capsys):
    import json

    info = json.loads((dataset / "meta" / "info.json").read_text())
    del info["features"]
    (dataset / "meta" / "info.json").write_text(json.dumps(info))
    assert main([str(dataset), "someone/data", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "info.json: no 'features'" in err, err
