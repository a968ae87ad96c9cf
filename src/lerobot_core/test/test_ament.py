"""lerobot_core.ament: installed files found through AMENT_PREFIX_PATH, as `ros2 run` and
`get_package_share_directory` find them (what tests use for another package's fixtures)."""

import os

import pytest

from lerobot_core.ament import find_executable, share_path


def _prefix(root, package, executable=None):
    """A minimal install prefix holding `package` in its ament index (and one executable)."""
    (root / "share" / "ament_index" / "resource_index" / "packages").mkdir(parents=True)
    (root / "share" / "ament_index" / "resource_index" / "packages" / package).touch()
    (root / "share" / package).mkdir(parents=True)
    if executable:
        exe = root / "lib" / package / executable
        exe.parent.mkdir(parents=True)
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
    return root


def test_share_path_is_the_first_prefix_that_indexes_the_package(tmp_path, monkeypatch):
    first = _prefix(tmp_path / "a", "pkg_a")
    second = _prefix(tmp_path / "b", "pkg_b", "tool")
    monkeypatch.setenv("AMENT_PREFIX_PATH", os.pathsep.join([str(first), str(second)]))
    assert share_path("pkg_a") == first / "share" / "pkg_a"
    assert share_path("pkg_b") == second / "share" / "pkg_b"
    assert find_executable("pkg_b", "tool") == second / "lib" / "pkg_b" / "tool"


def test_a_package_not_indexed_is_named_with_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("AMENT_PREFIX_PATH", str(_prefix(tmp_path / "a", "pkg_a", "tool")))
    for call in (lambda: share_path("pkg_x"), lambda: find_executable("pkg_x", "tool")):
        with pytest.raises(
            FileNotFoundError, match=r"package 'pkg_x' is not in the ament index.*\./setup\.sh"
        ):
            call()
    with pytest.raises(
        FileNotFoundError, match=r"package 'pkg_a' has no executable 'other' \(available: tool\)"
    ):
        find_executable("pkg_a", "other")


def test_the_workspace_installs_the_fixtures_other_packages_tests_use():
    """The runtime's test checkpoints and the dataset library's LeRobot checks are in their share folders."""
    assert (share_path("lerobot_runtime") / "test" / "fixtures" / "act_small" / "pretrained_model").is_dir()
    assert (share_path("lerobot_dataset") / "test" / "fixtures" / "check_with_lerobot.py").is_file()
    assert (share_path("lerobot_bringup") / "urdf" / "so101.urdf").is_file()
