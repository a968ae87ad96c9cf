"""The closed loop and the DAgger round, each one command, end to end at toy size.

scripts/closed_loop.py records demos through ROS (lockstep sim, scripted expert, recorder), trains an
ACT with LeRobot 0.4.4's own lerobot-train (the side venv), and evaluates the checkpoint through ROS;
scripts/dagger_round.py then drives the HIL sim profile with that checkpoint, fine-tunes it and
evaluates both. A few training steps only: what is checked is that every stage runs on what the
previous one wrote and that the figures the scripts print come from real runs (0 dropped ticks, the
expert's success, the interventions the HIL dataset holds), not the policies' quality
(docs/closed_loop.md has the measured figures).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from lerobot_core.ros.testing.pytest_plugin import ref_venv_python

REPO = Path(__file__).resolve().parents[1]


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    res = subprocess.run(
        [sys.executable, *args, "--lerobot-python", str(ref_venv_python())],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
    )
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    return res


@pytest.fixture(scope="module")
def closed_loop(tmp_path_factory):
    out = tmp_path_factory.mktemp("closed_loop") / "run"
    res = _run(
        [
            "scripts/closed_loop.py",
            *("--demos", "2", "--steps", "6", "--save-freq", "3", "--batch-size", "8"),
            *("--eval-episodes", "1", "--max-steps", "120", "--num-workers", "0", "--out", str(out)),
        ],
        timeout=900,
    )
    return out, res.stdout


def test_closed_loop_records_trains_and_evaluates(closed_loop):
    out, stdout = closed_loop
    metrics = json.loads((out / "metrics.json").read_text())
    info = json.loads((out / "dataset" / "meta" / "info.json").read_text())
    # one demo = one sim episode, recorded in lockstep: every frame there, each episode one pick
    assert metrics["demos"] == info["total_episodes"] == 2
    assert metrics["record_dropped_ticks"] == 0
    assert 2 * 80 <= info["total_frames"] <= 2 * 301, info["total_frames"]
    assert "observation.environment_state" in info["features"]
    assert not any(f["dtype"] == "video" for f in info["features"].values())
    # LeRobot trained it: two checkpoints, each served through ROS on the unseen seed 1000
    assert set(metrics["eval"]) == {"act_step_3", "act_step_6", "scripted", "random"}
    assert metrics["eval_seeds"] == [1000, 1000]
    assert metrics["eval"]["scripted"]["pc_success"] == 100.0
    config = json.loads(
        (out / "train" / "checkpoints" / "last" / "pretrained_model" / "config.json").read_text()
    )
    assert config["input_features"]["observation.environment_state"]["shape"] == [7]
    assert config["normalization_mapping"]["ENV"] == "MEAN_STD"
    assert "pc_success on seeds 1000..1000:" in stdout and "act_step_6" in stdout


def test_dagger_round_adds_hil_episodes_and_fine_tunes(closed_loop, tmp_path):
    out, _ = closed_loop
    v0 = out / "train" / "checkpoints" / "last" / "pretrained_model"
    res = _run(
        [
            "scripts/dagger_round.py",
            *("--v0", str(v0), "--demos", str(out / "dataset"), "--hil-episodes", "1"),
            *("--hil-episode-time", "10.0", "--steps", "3", "--batch-size", "8"),
            *("--eval-episodes", "1", "--max-steps", "60", "--out", str(tmp_path / "dagger")),
        ],
        timeout=900,
    )
    metrics = json.loads((tmp_path / "dagger" / "metrics.json").read_text())
    info = json.loads((tmp_path / "dagger" / "dataset" / "meta" / "info.json").read_text())
    assert info["total_episodes"] == 3  # the 2 demos (marked human-driven) + 1 HIL episode
    assert "complementary_info.is_intervention" in info["features"]
    iv = metrics["intervention"]
    assert iv["hil_episodes"] == 1 and iv["hil_frames"] > 0
    # a 6-step policy does not lift the cube: the scripted human takes over at its deadline
    assert iv["episodes_with_intervention"] == 1 and 0 < iv["intervention_frames"] < iv["hil_frames"]
    assert set(metrics["eval"]) == {"v0", "v1"}
    assert (tmp_path / "dagger" / "finetune" / "checkpoints" / "last" / "pretrained_model").exists()
    assert "v1 - v0:" in res.stdout
    assert metrics["hil_frames"] == "all" and metrics["train_frames"] == info["total_frames"]

    # HG-DAgger on the same HIL episodes: only the frames the human drove, v0's figure reused
    hil_log = tmp_path / "dagger" / "hil.log"
    recorded = hil_log.stat().st_mtime_ns
    res = _run(
        [
            "scripts/dagger_round.py",
            *("--v0", str(v0), "--demos", str(out / "dataset"), "--hil-episodes", "1"),
            *("--hil-episode-time", "10.0", "--steps", "3", "--batch-size", "8"),
            *("--eval-episodes", "1", "--max-steps", "60", "--out", str(tmp_path / "dagger")),
            *("--hil-frames", "interventions", "--keep"),
        ],
        timeout=900,
    )
    assert hil_log.stat().st_mtime_ns == recorded  # the HIL episodes were not recorded again
    hg = json.loads((tmp_path / "dagger" / "metrics_interventions.json").read_text())
    assert hg["hil_frames"] == "interventions"
    assert hg["intervention"] == iv
    human = tmp_path / "dagger" / "dataset_interventions"
    kept = json.loads((human / "meta" / "info.json").read_text())
    # the demos (every frame human-driven) and the HIL frames with is_intervention, nothing else
    assert hg["train_frames"] == kept["total_frames"] == metrics["demo_frames"] + iv["intervention_frames"]
    assert kept["total_episodes"] >= 3
    flags = pq.read_table(human / "data", columns=["complementary_info.is_intervention"]).column(0)
    assert all(flags.to_pylist())
    assert (tmp_path / "dagger" / "finetune_interventions" / "checkpoints" / "last").exists()
    assert hg["eval"]["v0"] == metrics["eval"]["v0"] and "reused" in res.stdout
    assert (tmp_path / "dagger" / "eval_v1_interventions.json").exists()
    assert json.loads((tmp_path / "dagger" / "metrics.json").read_text()) == metrics  # "all" untouched


def test_closed_loop_trains_diffusion_on_images(tmp_path):
    """--policy diffusion --observation images: camera demos recorded through ROS, LeRobot's Diffusion
    Policy trained by lerobot-train with the script's flags (small UNet, 7/8 crop, DDIM when served),
    and the checkpoint served natively by lerobot-sim-eval on the unseen seed 1000."""
    out = tmp_path / "run"
    res = _run(
        [
            "scripts/closed_loop.py",
            *("--policy", "diffusion", "--observation", "images", "--image-size", "48", "64"),
            *("--demos", "1", "--steps", "2", "--save-freq", "2", "--batch-size", "4", "--num-workers", "0"),
            *("--eval-episodes", "1", "--max-steps", "40", "--out", str(out)),
        ],
        timeout=900,
    )
    metrics = json.loads((out / "metrics.json").read_text())
    info = json.loads((out / "dataset" / "meta" / "info.json").read_text())
    assert metrics["demos"] == info["total_episodes"] == 1 and metrics["record_dropped_ticks"] == 0
    cams = {k: f["shape"] for k, f in info["features"].items() if f["dtype"] == "video"}
    assert cams and all(shape[:2] == [48, 64] for shape in cams.values()), cams
    config = json.loads(
        (out / "train" / "checkpoints" / "last" / "pretrained_model" / "config.json").read_text()
    )
    assert config["type"] == "diffusion" and config["crop_shape"] == [42, 56]
    assert config["down_dims"] == [128, 256, 512] and config["n_action_steps"] == 8
    assert config["noise_scheduler_type"] == "DDIM" and config["num_inference_steps"] == 10
    assert set(metrics["eval"]) == {"diffusion_step_2", "scripted", "random"}
    served = json.loads((out / "eval_diffusion_000002.json").read_text())
    assert [e["seed"] for e in served["per_episode"]] == [1000]
    assert "diffusion_step_2" in res.stdout


def test_closed_loop_refuses_a_learning_rate_schedule_for_diffusion():
    res = subprocess.run(
        [sys.executable, "scripts/closed_loop.py", "--policy", "diffusion", "--lr-schedule", "cosine"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert "--lr-schedule is ACT's" in res.stderr


def test_closed_loop_on_a_metaworld_task(tmp_path):
    """--env metaworld: demos of reach-v3's scripted policy recorded through ROS (record_sim_metaworld),
    ACT trained by lerobot-train on them (state only), and every policy evaluated by lerobot-sim-eval
    --env metaworld on the unseen seed 1000."""
    pytest.importorskip(
        "metaworld", reason="metaworld is installed by ./setup.sh; this venv was set up without it"
    )
    out = tmp_path / "run"
    res = _run(
        [
            "scripts/closed_loop.py",
            *("--env", "metaworld", "--task", "reach-v3", "--demos", "2", "--steps", "2", "--save-freq", "2"),
            *("--eval-episodes", "1", "--max-steps", "20", "--num-workers", "0", "--out", str(out)),
        ],
        timeout=600,
    )
    metrics = json.loads((out / "metrics.json").read_text())
    info = json.loads((out / "dataset" / "meta" / "info.json").read_text())
    assert metrics["demos"] == info["total_episodes"] == 2 and metrics["record_dropped_ticks"] == 0
    assert info["fps"] == 80
    assert {
        k: f["shape"] for k, f in info["features"].items() if k.startswith(("observation", "action"))
    } == {
        "observation.state": [4],
        "observation.environment_state": [39],
        "action": [4],
    }
    config = json.loads(
        (out / "train" / "checkpoints" / "last" / "pretrained_model" / "config.json").read_text()
    )
    assert config["input_features"]["observation.environment_state"]["shape"] == [39]
    assert set(metrics["eval"]) == {"act_step_2", "scripted", "random"}
    evaluated = json.loads((out / "eval_act_000002.json").read_text())
    assert evaluated["meta"]["env"] == "metaworld" and evaluated["meta"]["tasks"] == "reach-v3"
    assert [e["seed"] for e in evaluated["overall"]["per_episode"]] == [1000]
    assert "pc_success on seeds 1000..1000:" in res.stdout


def test_closed_loop_refuses_a_bad_metaworld_task():
    pytest.importorskip(
        "metaworld", reason="metaworld is installed by ./setup.sh; this venv was set up without it"
    )
    res = subprocess.run(
        [sys.executable, "scripts/closed_loop.py", "--env", "metaworld", "--task", "reach-v9"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert "--task 'reach-v9' is not a Meta-World task; tasks: " in res.stderr and "reach-v3" in res.stderr
