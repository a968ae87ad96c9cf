"""Every user CLI checks its numbers before any work (lerobot_core.cli), naming the flag, and its --help
shows the defaults."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(*cmd, timeout=120, cwd=None):
    exe = shutil.which(cmd[0])
    if exe is None:
        pytest.fail(f"{cmd[0]} is not on PATH: source env.sh after ./setup.sh")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.run([exe, *cmd[1:]], capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd)


BAD_NUMBERS = [
    # lerobot-ros-replay --fps -5 used to send every command at once (no pacing)
    (["lerobot-ros-replay", "nowhere", "--episode", "0", "--fps", "-5"], "--fps", "must be >= 0"),
    (
        ["lerobot-ros-replay", "nowhere", "--episode", "0", "--max-step-rad", "0"],
        "--max-step-rad",
        "must be > 0",
    ),
    (["lerobot-bag-import", "nowhere", "-o", "out", "--latency-margin", "-1"], "--latency-margin", ">= 0"),
    (["lerobot-bag-import", "nowhere", "-o", "out", "--jobs", "0"], "--jobs", ">= 1"),
    (["lerobot-bag-import", "nowhere", "-o", "out", "--fps", "nan"], "--fps", "expected an integer"),
    (
        ["lerobot-ros-dataset-viz", "nowhere", "--episode", "0", "--sheet-frames", "0"],
        "--sheet-frames",
        ">= 1",
    ),
    (["lerobot-ros-dataset-viz", "nowhere", "--episode", "0", "--port", "70000"], "--port", "<= 65535"),
    (
        ["lerobot-sim-eval", "--env", "so101_cube", "--policy", "scripted", "--episodes", "0"],
        "--episodes",
        ">= 1",
    ),
    (
        [
            "lerobot-sim-eval",
            "--env",
            "so101_cube",
            "--policy",
            "scripted",
            "--episodes",
            "1",
            "--max-steps",
            "-1",
        ],
        "--max-steps",
        ">= 0",
    ),
    (["lerobot-bag-export", "nowhere", "--episode", "-1", "-o", "out"], "--episode", ">= 0"),
    (
        [
            "lerobot-ros-calibrate",
            "--robot",
            "so101_follower",
            "--port",
            "x",
            "--id",
            "a",
            "--timeout-ms",
            "0",
        ],
        "--timeout-ms",
        "> 0",
    ),
    (["lerobot-servo-emulator", "--tau", "-1"], "--tau", "> 0"),
]


@pytest.mark.parametrize("cmd,flag,why", BAD_NUMBERS, ids=[f"{c[0]} {f}" for c, f, _ in BAD_NUMBERS])
def test_a_bad_number_is_refused_before_any_work_naming_the_flag(cmd, flag, why, tmp_path):
    res = _run(*cmd, cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert f"argument {flag}" in res.stderr and why in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
    assert list(tmp_path.iterdir()) == []  # nothing was made


def _commands():
    out = {}
    for setup in sorted((ROOT / "src").glob("*/setup.py")):
        for name in re.findall(r'"(lerobot-[a-z0-9-]+) = ', setup.read_text()):
            out[name] = setup.parent.name
    return sorted(out)


# lerobot-launch's help lists profiles and their arguments (the profiles' own defaults);
# lerobot-dataset-info has only on/off flags (--check, --repair): nothing with a default to show
NO_DEFAULTS = {"lerobot-launch", "lerobot-dataset-info"}


@pytest.mark.parametrize("name", [n for n in _commands() if n not in NO_DEFAULTS])
def test_help_shows_the_defaults(name):
    res = _run(name, "--help", timeout=60)
    assert res.returncode == 0, res.stderr
    assert "(default: " in " ".join(res.stdout.split()), res.stdout


@pytest.mark.parametrize("script", ["closed_loop.py", "dagger_round.py"])
def test_scripts_help_shows_the_defaults(script):
    res = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / script), "--help"], capture_output=True, text=True, timeout=60
    )
    assert res.returncode == 0, res.stderr
    text = " ".join(res.stdout.split())
    assert "(default: 150)" in text and "0 = the env's own limit" in text  # --max-steps
