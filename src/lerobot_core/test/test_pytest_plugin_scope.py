"""The lerobot_core pytest plugin (loaded by pytest11 wherever lerobot_core is installed) changes the
environment only in this project's test runs: another project's pytest keeps its ROS_DOMAIN_ID."""

import os
import subprocess
import sys

from lerobot_core.ros.testing.pytest_plugin import in_this_project

PROBE = """
import os
def test_env():
    print("DOMAIN", os.environ.get("ROS_DOMAIN_ID"), os.environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE"))
"""


def _pytest_in(folder, env) -> subprocess.CompletedProcess:
    """A pytest run of the tests in `folder`, rooted there, with `env`."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-s",
            "-p",
            "no:cacheprovider",
            "--rootdir",
            str(folder),
            str(folder),
        ],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _domain_seen(tmp_path, **env):
    (tmp_path / "test_probe.py").write_text(PROBE)
    run_env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("ROS_AUTOMATIC_DISCOVERY_RANGE", "LEROBOT_ROS_TEST_PLUGIN")
    }
    run_env.update(ROS_DOMAIN_ID="7", **env)
    out = _pytest_in(tmp_path, run_env)
    assert out.returncode == 0, out.stdout + out.stderr
    return next(line.split()[1:] for line in out.stdout.splitlines() if line.startswith("DOMAIN"))


def test_another_projects_run_keeps_its_domain(tmp_path):
    assert not in_this_project(tmp_path)
    assert _domain_seen(tmp_path) == ["7", "None"]


def test_asked_for_outside_the_checkout_it_isolates_the_run(tmp_path):
    domain, discovery = _domain_seen(tmp_path, LEROBOT_ROS_TEST_PLUGIN="1")
    assert domain != "7" and 110 <= int(domain) < 200 and discovery == "LOCALHOST"


def test_this_checkout_is_this_project():
    assert in_this_project(__import__("pathlib").Path(__file__).resolve().parent)
    assert 110 <= int(os.environ["ROS_DOMAIN_ID"]) < 200  # this run: the plugin gave it a domain


CHDIR = """
import os
def test_leaves_it(tmp_path):
    os.chdir(tmp_path)
def test_restores_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
def test_after():
    print("CWD", os.getcwd())
"""


def test_a_test_that_leaves_the_working_directory_changed_is_an_error_and_it_is_put_back(tmp_path):
    (tmp_path / "test_chdir.py").write_text(CHDIR)
    out = _pytest_in(tmp_path, dict(os.environ, LEROBOT_ROS_TEST_PLUGIN="1"))
    assert out.returncode == 1, out.stdout + out.stderr
    assert (
        "1 error" in out.stdout and "test_chdir.py::test_leaves_it left the working directory" in out.stdout
    )
    assert "ERROR at teardown of test_restores_it" not in out.stdout
    assert f"CWD {tmp_path}" in out.stdout  # the next test runs where the run started
