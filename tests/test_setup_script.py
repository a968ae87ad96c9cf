"""setup.sh fails loudly and early with a message saying what to do, instead of half-finishing."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FILES = [
    "setup.sh",
    "env.sh",
    "requirements.txt",
    "requirements-ros-wheels.txt",
    "requirements-system-ros.txt",
    "colcon_defaults.yaml",
]


def copy_workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    for f in FILES:
        shutil.copy2(ROOT / f, ws / f)
    return ws


def run(ws: Path, env_extra: dict, timeout: float = 300, args=()) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AMENT_", "COLCON_", "CMAKE_PREFIX"))}
    env.pop("ROS_DISTRO", None)
    env.update(env_extra)
    return subprocess.run(
        ["bash", str(ws / "setup.sh"), *args], env=env, capture_output=True, text=True, timeout=timeout
    )


def test_wrong_python_is_refused_before_anything_is_made(tmp_path):
    ws = copy_workspace(tmp_path)
    out = run(
        ws,
        {
            "PYTHON": shutil.which("python3.10") or "/usr/bin/false",
            "LEROBOT_ROS_VENV": str(tmp_path / "venv"),
        },
    )
    assert out.returncode == 1
    assert "python" in out.stderr.lower() and ("3.11" in out.stderr or "PYTHON=" in out.stderr), out.stderr
    assert not (tmp_path / "venv").exists()


def test_unreachable_package_index_is_named(tmp_path):
    ws = copy_workspace(tmp_path)
    # a closed port on loopback: pip's request is refused at once, no traffic leaves the machine
    out = run(
        ws,
        {
            "LEROBOT_ROS_VENV": str(tmp_path / "venv"),
            "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
            "PIP_FIND_LINKS": "",
            "PIP_RETRIES": "0",
            "PIP_TIMEOUT": "2",
        },
    )
    assert out.returncode == 1
    assert "could not get packages from the package index" in out.stderr, out.stderr[-2000:]
    assert not (tmp_path / "venv" / ".lerobot_ros_pins").exists()  # not marked as set up


@pytest.mark.skipif(
    not (ROOT / ".venv" / ".lerobot_ros_pins").exists(), reason="needs the set-up venv of this checkout"
)
def test_build_error_points_at_the_log(tmp_path):
    ws = copy_workspace(tmp_path)
    pkg = ws / "src" / "broken_pkg"
    pkg.mkdir(parents=True)
    (pkg / "package.xml").write_text(
        '<?xml version="1.0"?><package format="3"><name>broken_pkg</name><version>0.0.0</version>'
        "<description>d</description><maintainer email='a@b.c'>m</maintainer><license>MIT</license>"
        "<buildtool_depend>ament_cmake</buildtool_depend><export><build_type>ament_cmake</build_type></export></package>"
    )
    (pkg / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(broken_pkg NONE)\nthis_is_not_cmake(\n"
    )
    out = run(ws, {"LEROBOT_ROS_VENV": str(ROOT / ".venv")})
    assert out.returncode == 1
    assert "colcon build failed" in out.stderr and "setup-colcon-build.log" in out.stderr, out.stderr[-2000:]
    assert not (ws / "install" / ".lerobot_ros_build").exists()


def test_a_sourced_system_ros_is_used_or_refused_by_distro(tmp_path):
    ws = copy_workspace(tmp_path)
    fake = tmp_path / "opt_ros"
    for distro in ("foxy", "jazzy"):
        (fake / distro).mkdir(parents=True)
    base = {"LEROBOT_ROS_SYSTEM_ROOT": str(fake), "LEROBOT_ROS_VENV": str(tmp_path / "venv")}
    old = run(ws, {**base, "ROS_DISTRO": "foxy", "AMENT_PREFIX_PATH": str(fake / "foxy")})
    assert old.returncode == 1 and "'foxy'" in old.stderr and "not supported" in old.stderr
    # jazzy is taken as the system ROS: it then wants that distro's python (here: a missing one)
    new = run(
        ws,
        {
            **base,
            "ROS_DISTRO": "jazzy",
            "AMENT_PREFIX_PATH": str(fake / "jazzy"),
            "PYTHON": "/nonexistent/python3",
        },
    )
    assert new.returncode == 1 and "'/nonexistent/python3' not found" in new.stderr
    # without AMENT_PREFIX_PATH pointing at it, a stray ROS_DISTRO does not switch away from the wheels
    stray = run(ws, {**base, "ROS_DISTRO": "jazzy", "PYTHON": "/nonexistent/python3"})
    assert "wheels are built for CPython 3.11" in stray.stderr


def test_on_a_system_ros_the_venv_keeps_the_distro_numpy_and_colcon_runs_from_the_venv(tmp_path):
    ws = copy_workspace(tmp_path)
    fake = tmp_path / "opt_ros"
    (fake / "jazzy").mkdir(parents=True)
    venv = tmp_path / "venv"
    env = {
        "LEROBOT_ROS_SYSTEM_ROOT": str(fake),
        "LEROBOT_ROS_VENV": str(venv),
        "ROS_DISTRO": "jazzy",
        "AMENT_PREFIX_PATH": str(fake / "jazzy"),
        "PYTHON": shutil.which("python3.11") or shutil.which("python3"),
    }
    plan = run(ws, env, args=["--plan"])
    assert plan.returncode == 0, plan.stderr
    assert f"ROS from system {fake}/jazzy," in plan.stdout
    assert f"venv {venv} (--system-site-packages" in plan.stdout
    assert (
        f"pip install -r {ws}/requirements-system-ros.txt, then opencv-python-headless==4.10.0.84"
        in plan.stdout
    )
    assert f"{venv}/bin/python -m colcon build --symlink-install" in plan.stdout
    assert not venv.exists()  # --plan changes nothing
    wheels = run(ws, {"LEROBOT_ROS_VENV": str(venv), "PYTHON": env["PYTHON"]}, args=["--plan"])
    assert (
        f"pip install -r {ws}/requirements-ros-wheels.txt -r {ws}/requirements.txt, then opencv-python-headless==4.14.0.94"
        in wheels.stdout
    )


def _pins(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        spec = line.split("#")[0].strip()
        if spec:
            name = spec.split("=")[0].split("<")[0].split(">")[0].strip().lower()
            out[name] = spec
    return out


def test_system_ros_requirements_are_requirements_txt_with_numpy_1_pins():
    common, system = _pins(ROOT / "requirements.txt"), _pins(ROOT / "requirements-system-ros.txt")
    assert system["numpy"] == "numpy<2"
    assert system["opencv-python-headless"] == "opencv-python-headless==4.10.0.84"  # numpy 1.x and 2.x wheels
    changed = {"numpy", "opencv-python-headless"}
    assert {k: v for k, v in system.items() if k not in changed} == {
        k: v for k, v in common.items() if k not in changed
    }
