"""lerobot-record-control's errors speak in its flags."""

import subprocess
import sys

import pytest

pytestmark = pytest.mark.ros


def test_no_recorder_names_the_flag_that_chooses_it():
    cmd = [
        sys.executable,
        "-m",
        "lerobot_recorder.record_control",
        "--recorder",
        "nowhere",
        "--command",
        "stop",
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "error: service nowhere/stop_episode not available" in res.stdout, res.stdout
    assert "--recorder gives ('nowhere')" in res.stdout, res.stdout


def test_without_a_terminal_it_says_the_keys_are_off():
    """Started by a profile from a script (stdin not a terminal), it says so and exits cleanly instead
    of listing keys that cannot be typed."""
    cmd = [sys.executable, "-m", "lerobot_recorder.record_control"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "stdin is not a terminal, so the keys are off (recording goes on)" in res.stdout, res.stdout
    assert "keys: ->" not in res.stdout, res.stdout
