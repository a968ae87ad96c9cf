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
