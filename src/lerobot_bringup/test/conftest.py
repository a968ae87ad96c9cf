"""What the profile tests share: running `lerobot-launch PROFILE` to its end, and reading its log."""

from __future__ import annotations

import os
import re
import subprocess

from lerobot_core.ament import find_executable


def launch_profile(profile: str, *args: str, timeout: float = 300) -> str:
    """`lerobot-launch PROFILE ARGS...` run to its end (discovery on this host, EGL rendering); its output.
    A non-zero exit fails the test with the end of that output."""
    launcher = find_executable("lerobot_bringup", "lerobot-launch")
    env = dict(
        os.environ, ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST", MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl")
    )
    out = subprocess.run(
        [str(launcher), profile, *args], env=env, capture_output=True, text=True, timeout=timeout
    )
    log = out.stdout + out.stderr
    assert out.returncode == 0, log[-4000:]
    return log


def sim_episodes(log: str) -> list[tuple[int, int]]:
    """(seed, steps) of each sim episode the sim node reported ended, in order."""
    return [
        (int(m.group(1)), int(m.group(2)))
        for m in re.finditer(r"sim episode \d+ \(seed (-?\d+)\) ended after (\d+) steps", log)
    ]


def dropped_ticks(log: str) -> list[int]:
    """Dropped ticks of each episode the recorder reported saved, in order."""
    return [int(m.group(1)) for m in re.finditer(r"episode \d+ saved: .*?, (\d+) dropped ticks", log)]
