"""setup.sh fails loudly and early with a message saying what to do, instead of half-finishing."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FILES = [
    "setup.sh",
    "env.sh",
    "requirements.txt",
    "requirements-ros-wheels.txt",
    "requirements-ros-wheels-jazzy.txt",
    "requirements-system-ros.txt",
    "requirements-metaworld.txt",
    "colcon_defaults.yaml",
    "scripts/distro.sh",
    "scripts/venv_link.py",
]


def copy_workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    for f in FILES:
        (ws / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, ws / f)
    return ws


def run(ws: Path, env_extra: dict, timeout: float = 300, args=()) -> subprocess.CompletedProcess:
    # a clean shell: no sourced ROS, no lerobot_ros environment of the test run itself
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("AMENT_", "COLCON_", "CMAKE_PREFIX", "LEROBOT_ROS_"))
    }
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


# the environment this test run is in (scripts/test.sh --distro ...): its venv is set up
ACTIVE_VENV = Path(sys.prefix)
ACTIVE_DISTRO = os.environ.get("LEROBOT_ROS_DISTRO", "kilted")
DISTRO_PYTHON = {"kilted": "3.11", "jazzy": "3.12"}
SUFFIX = {"kilted": "", "jazzy": "-jazzy"}


def pyenv_python(minor: str) -> str | None:
    found = sorted((Path.home() / ".pyenv" / "versions").glob(f"{minor}.*/bin/python{minor}"))
    return str(found[-1]) if found else shutil.which(f"python{minor}")


@pytest.mark.skipif(
    not (ACTIVE_VENV / ".lerobot_ros_pins").exists(), reason="runs in the set-up venv of this checkout"
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
    out = run(ws, {"LEROBOT_ROS_VENV": str(ACTIVE_VENV)}, args=["--distro", ACTIVE_DISTRO])
    assert out.returncode == 1
    log = f"log{SUFFIX[ACTIVE_DISTRO]}/setup-colcon-build.log"
    assert "colcon build failed" in out.stderr and log in out.stderr, out.stderr[-2000:]
    assert not (ws / f"install{SUFFIX[ACTIVE_DISTRO]}" / ".lerobot_ros_build").exists()


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
    # a system Jazzy gets Jazzy's own build folders, beside the kilted wheels' ones
    assert (
        f"{venv}/bin/python -m colcon --log-base {ws}/log-jazzy build --build-base {ws}/build-jazzy "
        f"--install-base {ws}/install-jazzy --symlink-install" in plan.stdout
    )
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


def test_each_distro_has_its_own_venv_build_and_install_folders(tmp_path):
    ws = copy_workspace(tmp_path)
    for distro, minor in DISTRO_PYTHON.items():
        py = pyenv_python(minor)
        if py is None:
            pytest.fail(
                f"no Python {minor} here for --distro {distro} (pyenv's is expected on these machines)"
            )
        out = run(ws, {"PYTHON": py}, args=["--distro", distro, "--plan"])
        assert out.returncode == 0, out.stderr
        suffix = SUFFIX[distro]
        assert (
            f"python {minor} ({py}), ROS from PyPI wheels ({distro}), venv {ws}/.venv{suffix}" in out.stdout
        )
        assert f"distro {distro}, build {ws}/build{suffix}, install {ws}/install{suffix}" in out.stdout
        wheels = "requirements-ros-wheels-jazzy.txt" if distro == "jazzy" else "requirements-ros-wheels.txt"
        assert f"pip install -r {ws}/{wheels} -r {ws}/requirements.txt" in out.stdout
        assert f"--build-base {ws}/build{suffix} --install-base {ws}/install{suffix}" in out.stdout
    # without --distro and without a sourced ROS: kilted, as before
    default = run(ws, {"PYTHON": pyenv_python("3.11") or "python3.11"}, args=["--plan"])
    assert f"venv {ws}/.venv\n" in default.stdout and "ROS from PyPI wheels (kilted)" in default.stdout


def test_a_python_of_another_distro_is_refused_naming_both(tmp_path):
    ws = copy_workspace(tmp_path)
    py311 = pyenv_python("3.11")
    out = run(ws, {"PYTHON": py311, "LEROBOT_ROS_VENV": str(tmp_path / "venv")}, args=["--distro", "jazzy"])
    assert out.returncode == 1
    assert "is Python 3.11, but --distro jazzy uses the PyPI ROS 2 jazzy wheels on Python 3.12" in out.stderr
    assert not (tmp_path / "venv").exists()
    unknown = run(ws, {}, args=["--distro", "iron"])
    assert unknown.returncode == 2 and "unknown ROS 2 distro 'iron'" in unknown.stderr
    no_wheels = run(ws, {}, args=["--distro", "humble"])
    assert no_wheels.returncode == 1 and "humble has no PyPI wheels" in no_wheels.stderr


def test_a_sourced_system_ros_of_another_distro_is_refused_naming_both(tmp_path):
    ws = copy_workspace(tmp_path)
    fake = tmp_path / "opt_ros"
    (fake / "kilted").mkdir(parents=True)
    env = {
        "LEROBOT_ROS_SYSTEM_ROOT": str(fake),
        "ROS_DISTRO": "kilted",
        "AMENT_PREFIX_PATH": str(fake / "kilted"),
    }
    out = run(ws, env, args=["--distro", "jazzy"])
    assert out.returncode == 1
    assert f"--distro jazzy was asked for, but the sourced ROS 2 is 'kilted' ({fake}/kilted)" in out.stderr


@pytest.mark.skipif(
    not (ACTIVE_VENV / ".lerobot_ros_pins").exists(), reason="runs in the set-up venv of this checkout"
)
def test_a_venv_with_another_distros_rclpy_is_refused_naming_both(tmp_path):
    """LEROBOT_ROS_VENV at this run's venv, set up for the other distro: refused before pip touches it."""
    ws = copy_workspace(tmp_path)
    other = "jazzy" if ACTIVE_DISTRO == "kilted" else "kilted"
    py = pyenv_python(DISTRO_PYTHON[other])
    assert py, f"no Python {DISTRO_PYTHON[other]} for --distro {other}"
    stamp = (ACTIVE_VENV / ".lerobot_ros_pins").read_text()
    out = run(ws, {"PYTHON": py, "LEROBOT_ROS_VENV": str(ACTIVE_VENV)}, args=["--distro", other])
    assert out.returncode == 1
    mine = {"kilted": "9.", "jazzy": "7."}[ACTIVE_DISTRO]
    theirs = {"kilted": "9.x", "jazzy": "7.x"}[other]
    assert f"holds rclpy {mine}" in out.stderr and f"not ROS 2 {other}'s (rclpy {theirs})" in out.stderr, (
        out.stderr
    )
    assert (ACTIVE_VENV / ".lerobot_ros_pins").read_text() == stamp  # untouched


def test_env_sh_enters_the_chosen_distros_workspace_and_refuses_a_second_one(tmp_path):
    ws = copy_workspace(tmp_path)
    for suffix in ("", "-jazzy"):
        (ws / f".venv{suffix}" / "bin").mkdir(parents=True)
        (ws / f".venv{suffix}" / "bin" / "python").symlink_to(sys.executable)
        (ws / f"install{suffix}").mkdir()
        (ws / f"install{suffix}" / "setup.bash").write_text(f"export LR_TEST_WS=install{suffix}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LEROBOT_ROS_", "AMENT_"))}
    show = 'echo "$LR_TEST_WS $LEROBOT_ROS_DISTRO $LEROBOT_ROS_INSTALL $VIRTUAL_ENV"'

    def shell(script: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=30)

    jazzy = shell(f"source {ws}/env.sh --distro jazzy && {show}")
    assert jazzy.stdout.split() == ["install-jazzy", "jazzy", f"{ws}/install-jazzy", f"{ws}/.venv-jazzy"]
    kilted = shell(f"set -- foo bar; source {ws}/env.sh && {show}")
    assert kilted.stdout.split() == ["install", "kilted", f"{ws}/install", f"{ws}/.venv"]
    both = shell(f"source {ws}/env.sh; source {ws}/env.sh --distro jazzy; echo rc=$?")
    assert "rc=1" in both.stdout and "one distro per shell" in both.stderr


def _python_package(ws: Path, name: str, commands: dict[str, str]) -> None:
    """A minimal ament_python package `name` whose console scripts `commands` (name -> module) print the
    package's name, with a bin/ wrapper for each, as the stack's packages have."""
    pkg = ws / "src" / name
    if pkg.exists():
        shutil.rmtree(pkg)
    (pkg / name).mkdir(parents=True)
    (pkg / "resource").mkdir()
    (pkg / "resource" / name).touch()
    (pkg / name / "__init__.py").write_text("")
    (pkg / name / "cli.py").write_text(f"def main():\n    print({name!r})\n")
    (pkg / "package.xml").write_text(
        f'<?xml version="1.0"?><package format="3"><name>{name}</name><version>0.0.0</version>'
        "<description>d</description><maintainer email='a@b.c'>m</maintainer><license>MIT</license>"
        "<export><build_type>ament_python</build_type></export></package>"
    )
    (pkg / "setup.cfg").write_text(
        f"[develop]\nscript_dir=$base/lib/{name}\n[install]\ninstall_scripts=$base/lib/{name}\n"
    )
    (pkg / "bin").mkdir()
    for cmd in commands:
        (pkg / "bin" / cmd).write_text(f'#!/bin/sh\nexec {cmd}-impl "$@"\n')
    scripts = ", ".join(f'"{c} = {name}.cli:main"' for c in commands)
    (pkg / "setup.py").write_text(
        "from glob import glob\nfrom setuptools import setup\n"
        f"setup(name={name!r}, version='0.0.0', packages=[{name!r}],\n"
        f"      data_files=[('share/ament_index/resource_index/packages', ['resource/{name}']),\n"
        f"                  ('share/{name}', ['package.xml']), ('bin', sorted(glob('bin/*')))],\n"
        f"      entry_points={{'console_scripts': [{scripts}]}})\n"
    )


@pytest.mark.skipif(
    not (ACTIVE_VENV / ".lerobot_ros_pins").exists(), reason="runs in the set-up venv of this checkout"
)
def test_a_command_moved_to_another_package_is_rebuilt_not_left_behind(tmp_path):
    """A command (and its bin/ wrapper) that moves from one package to another: before, the second build
    failed on the dangling link --symlink-install had left for the wrapper ("can't copy .../bin/...: doesn't
    exist"), and once past that, the old package's stale console script was the one on PATH."""
    ws = copy_workspace(tmp_path)
    _python_package(ws, "pkg_a", {"lerobot-moved": "", "lerobot-stays": ""})
    env = {"LEROBOT_ROS_VENV": str(ACTIVE_VENV)}
    args = ["--distro", ACTIVE_DISTRO]
    first = run(ws, env, args=args)
    assert first.returncode == 0, first.stderr[-2000:]
    install = ws / f"install{SUFFIX[ACTIVE_DISTRO]}"
    assert (install / "pkg_a" / "lib" / "pkg_a" / "lerobot-moved").is_file()
    # the command moves to a new package pkg_b
    _python_package(ws, "pkg_a", {"lerobot-stays": ""})
    _python_package(ws, "pkg_b", {"lerobot-moved": ""})
    second = run(ws, env, args=args)
    assert second.returncode == 0, second.stderr[-2000:] + second.stdout[-2000:]
    assert not (install / "pkg_a" / "lib" / "pkg_a" / "lerobot-moved").exists()
    assert (install / "bin" / "lerobot-moved").resolve() == (
        install / "pkg_b" / "lib" / "pkg_b" / "lerobot-moved"
    )
    assert (install / "bin" / "lerobot-stays").resolve().parent.name == "pkg_a"
