"""The stack's user commands are on PATH from install/setup.bash alone, as in any colcon workspace."""

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# this run's workspace: install/ (kilted) or install-<distro>/ (env.sh exports which)
INSTALL = Path(os.environ.get("LEROBOT_ROS_INSTALL", ROOT / "install"))
SETUP = INSTALL / "setup.bash"


def console_scripts() -> dict[str, str]:
    """`lerobot-*` console scripts declared by each package's setup.py -> package."""
    out = {}
    for setup in sorted((ROOT / "src").glob("*/setup.py")):
        for name in re.findall(r'"(lerobot-[a-z0-9-]+) = ', setup.read_text()):
            out[name] = setup.parent.name
    return out


def test_every_user_command_has_a_bin_wrapper_and_no_wrapper_is_orphaned():
    scripts = console_scripts()
    assert scripts, "no lerobot-* console scripts found"
    wrappers = {p.name: p.parent.parent.name for p in (ROOT / "src").glob("*/bin/lerobot-*")}
    assert wrappers == scripts
    for name, pkg in scripts.items():
        text = (ROOT / "src" / pkg / "bin" / name).read_text()
        assert f"/../lib/{pkg}/{name}" in text  # the console script `ros2 run {pkg} {name}` runs


@pytest.mark.skipif(not SETUP.exists(), reason="workspace not built (run ./setup.sh)")
def test_commands_found_by_name_after_sourcing_only_install_setup_bash():
    names = sorted(console_scripts())
    script = f"source {SETUP} >/dev/null; " + "; ".join(f"command -v {n}" for n in names)
    # a clean environment: no env.sh, no venv on PATH, only what the workspace's setup adds
    env = {"HOME": os.environ.get("HOME", "/root"), "PATH": "/usr/bin:/bin"}
    out = subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True)
    found = out.stdout.split()
    assert [Path(p).name for p in found] == names, out.stderr
    assert all(p.startswith(f"{INSTALL}/") and "/bin/" in p for p in found)
    # and a wrapper runs its command
    run = subprocess.run(
        ["bash", "-c", f"source {SETUP} >/dev/null; lerobot-dataset-info --help"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0 and "usage: lerobot-dataset-info" in run.stdout, run.stderr
