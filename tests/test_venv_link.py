"""scripts/venv_link.py: a pinned distribution another venv holds arrives as hard links, and pip accepts it.

Real venvs and real pip: the donor is the venv this test runs in, the target a fresh one.
"""

import importlib.util
import os
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "venv_link.py"
DONOR = Path(sys.prefix)
# a small pure distribution of this venv, with its version: what the tests link
DIST = "pytest-timeout"
VERSION = metadata.version(DIST)


def load_script():
    spec = importlib.util.spec_from_file_location("venv_link", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_venv(path: Path, python: str = sys.executable) -> Path:
    # the base interpreter, not this venv's python (a venv made from a venv's python still works, but be plain)
    base = Path(sys.base_prefix) / "bin" / Path(python).name if python == sys.executable else Path(python)
    subprocess.run([str(base), "-m", "venv", str(path)], check=True, timeout=120)
    return path


def link(target: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(target / "bin" / "python"), str(SCRIPT), *args], capture_output=True, text=True, timeout=120
    )


def target_version(target: Path, dist: str) -> str:
    code = f"import importlib.metadata as m; print(m.version({dist!r}))"
    out = subprocess.run([str(target / "bin" / "python"), "-c", code], capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else ""


def module_file(venv: Path) -> Path:
    (site,) = venv.glob("lib/python3.*/site-packages")
    return site / "pytest_timeout.py"


@pytest.fixture(scope="module")
def linked(tmp_path_factory):
    target = make_venv(tmp_path_factory.mktemp("target") / "venv")
    out = link(target, "--pin", f"{DIST}=={VERSION}", "--name", DIST, str(DONOR))
    return target, out


def test_a_pinned_distribution_is_hard_linked_and_pip_finds_it_installed(linked):
    target, out = linked
    assert out.returncode == 0, out.stderr
    assert f"{DIST} {VERSION}" in out.stdout and str(DONOR) in out.stdout, out.stdout
    assert os.stat(module_file(target)).st_ino == os.stat(module_file(DONOR)).st_ino
    assert target_version(target, DIST) == VERSION
    # pip sees the pin satisfied: nothing to download, nothing reinstalled
    pip = subprocess.run(
        [
            str(target / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--no-deps",
            "--no-index",
            f"{DIST}=={VERSION}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert pip.returncode == 0 and "Requirement already satisfied" in pip.stdout, pip.stdout + pip.stderr


def test_uninstalling_in_the_target_leaves_the_donor_whole(linked, tmp_path):
    target, _ = linked
    donor_bytes = module_file(DONOR).read_bytes()
    pip = subprocess.run(
        [str(target / "bin" / "python"), "-m", "pip", "uninstall", "-y", DIST], capture_output=True, text=True
    )
    assert pip.returncode == 0, pip.stderr
    assert not module_file(target).exists() and target_version(target, DIST) == ""
    assert module_file(DONOR).read_bytes() == donor_bytes and metadata.version(DIST) == VERSION


def test_another_version_or_another_python_links_nothing(tmp_path):
    target = make_venv(tmp_path / "venv")
    out = link(target, "--pin", f"{DIST}==0.0.1", "--name", DIST, str(DONOR))
    assert out.returncode == 0 and out.stdout == "", out.stdout + out.stderr
    assert not module_file(target).exists()
    other = "3.12" if sys.version_info[:2] != (3, 12) else "3.11"
    pythons = sorted(
        Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")).glob(
            f"versions/{other}.*/bin/python{other}"
        )
    )
    if not pythons:
        pytest.skip(f"no python{other} on this machine to make a venv of another Python")
    target = make_venv(tmp_path / "other", str(pythons[-1]))
    out = link(target, "--pin", f"{DIST}=={VERSION}", "--name", DIST, str(DONOR))
    assert out.returncode == 0 and out.stdout == "", out.stdout + out.stderr
    assert target_version(target, DIST) == ""


def write_dist(site: Path, name: str, version: str, requires: list[str]) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    lines += [f"Requires-Dist: {r}" for r in requires]
    (info / "METADATA").write_text("\n".join(lines) + "\n")


def test_the_binary_dependencies_follow_with_the_extras_asked_for(tmp_path):
    vl = load_script()
    site = tmp_path / "site"
    write_dist(site, "torch", "2.11.0", [
        "filelock",
        'cuda-toolkit[cublas]==13.0.2; platform_system == "Linux"',
        'triton==3.6.0; platform_system == "Linux"',
        'nvidia-nccl-cu13==2.28.9; platform_system == "Windows"',
    ])  # fmt: skip
    write_dist(
        site,
        "cuda-toolkit",
        "13.0.2",
        ['nvidia-cublas==13.1; extra == "cublas"', 'nvidia-cufft; extra == "cufft"'],
    )
    for name in ("triton", "nvidia-cublas", "nvidia-cufft", "nvidia-nccl-cu13", "filelock"):
        write_dist(site, name, "1.0", [])
    dists = vl.installed(site)
    # Linux (the markers are evaluated here): triton and the cublas extra follow; Windows' nccl, the extra
    # that was not asked for (cufft) and the pure filelock do not
    assert sorted(vl.closure(dists, "torch")) == ["cuda-toolkit", "nvidia-cublas", "torch", "triton"]
    # a dependency the donor lacks: nothing to link from it
    del dists["nvidia-cublas"]
    assert vl.closure(dists, "torch") is None


def test_pins_come_from_requirement_files_with_their_markers(tmp_path):
    vl = load_script()
    req = tmp_path / "requirements.txt"
    req.write_text(
        textwrap.dedent(f"""\
        torch==2.13.0; python_version < "{sys.version_info[0]}.{sys.version_info[1]}"   # not this Python
        torch==2.11.0; python_version >= "{sys.version_info[0]}.{sys.version_info[1]}"  # this one
        numpy==2.0.0
        triton>=3
        -r other.txt
    """)
    )
    assert vl.exact_pins([req], {"torch", "triton"}) == {"torch": "2.11.0"}
