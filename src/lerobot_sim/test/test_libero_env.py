"""lerobot_sim.envs.libero: LeRobot's LIBERO observation, task names, and initial states read without pickle's
code execution. The env itself needs LIBERO and its assets (docs/sim.md says why they are not on this machine)."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

from lerobot_sim.envs.libero import SUITE_MAX_STEPS, load_init_states, quat_to_axis_angle, resolve_tasks

SIZES = {"libero_spatial": 10, "libero_object": 10, "libero_goal": 10, "libero_10": 10, "libero_90": 90}


def test_the_hand_orientation_is_the_quaternions_rotation_as_an_axis_angle_vector():
    from scipy.spatial.transform import Rotation

    rng = np.random.default_rng(0)
    for q in rng.normal(size=(200, 4)):
        q /= np.linalg.norm(q)
        vec = quat_to_axis_angle(q)
        same = Rotation.from_rotvec(vec).inv() * Rotation.from_quat(q)  # scipy's quaternions are (x, y, z, w)
        assert same.magnitude() < 1e-9, (q, vec)
        if q[3] >= 0:  # robosuite's convention: the angle is 2 acos(w), in [0, pi] for w >= 0 as scipy's
            np.testing.assert_allclose(vec, Rotation.from_quat(q).as_rotvec(), atol=1e-9)
    np.testing.assert_array_equal(quat_to_axis_angle([0.0, 0.0, 0.0, 1.0]), np.zeros(3))


def test_suites_and_task_numbers_resolve_and_unknown_ones_name_the_valid_ones():
    assert resolve_tasks("libero_goal", SIZES) == [("libero_goal", i) for i in range(10)]
    assert resolve_tasks("libero_goal:3,7, libero_10:0", SIZES) == [
        ("libero_goal", 3),
        ("libero_goal", 7),
        ("libero_10", 0),
    ]
    assert len(resolve_tasks("libero_spatial,libero_spatial:2", SIZES)) == 10  # no task twice
    with pytest.raises(ValueError, match="--tasks 'libero_100': not a LIBERO suite. Suites: libero_spatial"):
        resolve_tasks("libero_100", SIZES)
    with pytest.raises(ValueError, match=r"libero_goal has tasks 0\.\.9"):
        resolve_tasks("libero_goal:10", SIZES)
    with pytest.raises(ValueError, match="no LIBERO suite"):
        resolve_tasks(" , ", SIZES)
    assert set(SIZES) == set(SUITE_MAX_STEPS)


def test_initial_states_load_as_arrays_and_a_file_that_would_run_code_is_refused(tmp_path):
    import torch

    states = np.random.default_rng(1).normal(size=(50, 92))
    good = tmp_path / "task.pruned_init"
    torch.save(states, good)  # how LIBERO's init files were written
    np.testing.assert_array_equal(load_init_states(str(good)), states)

    marker = tmp_path / "ran"

    class RunsCode:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    bad = tmp_path / "bad.pruned_init"
    torch.save(RunsCode(), bad)
    with pytest.raises(pickle.UnpicklingError):
        load_init_states(str(bad))
    assert not marker.exists()

    flat = tmp_path / "flat.pruned_init"
    torch.save(np.zeros(5), flat)
    with pytest.raises(ValueError, match=r"flat.pruned_init: expected a \(n, state\) array"):
        load_init_states(str(flat))


def test_libero_never_asks_for_its_paths_on_stdin(tmp_path, monkeypatch):
    """LIBERO's first import asks where its files go (input()): a sim process has no terminal."""
    from lerobot_sim.envs.libero import ensure_libero_config

    monkeypatch.setenv("LIBERO_CONFIG_PATH", str(tmp_path / "cfg"))
    try:
        path = ensure_libero_config()
    except ModuleNotFoundError as exc:
        assert "hf-libero" in str(exc)  # said in the words of the package to install
        return
    text = open(path).read()
    assert text.startswith("benchmark_root: ") and "assets: " in text and "init_files" in text
    assert ensure_libero_config() == path and open(path).read() == text  # kept as it is


def _libero_runs() -> str:
    """Why LIBERO cannot run in this venv, or '' when it can."""
    try:
        from lerobot_sim.envs.libero import ensure_libero_config

        ensure_libero_config()
        from libero.libero import get_libero_path  # noqa: F401
    except Exception as exc:  # LIBERO's import can fail in many ways: say which
        return f"LIBERO is not installed in this venv ({type(exc).__name__}: {exc}); docs/sim.md, LIBERO"
    from lerobot_sim.envs.libero import find_assets

    if find_assets() is None:
        return "LIBERO's assets are not installed (scripts/install-libero.sh); docs/sim.md, LIBERO"
    probe = os.path.join(
        find_assets(), "scenes", "kitchen_background", "visual", "kitchen_background_vis.msh"
    )
    if not os.path.exists(probe):
        return f"LIBERO's assets are incomplete ({probe} is missing); docs/sim.md, LIBERO"
    return ""


@pytest.mark.skipif(bool(_libero_runs()), reason=_libero_runs() or "-")
def test_a_libero_task_gives_lerobots_keys_and_the_same_seed_gives_the_same_episode():
    from lerobot_sim.envs.libero import LiberoEnv

    env = LiberoEnv("libero_spatial", 0, observation_height=64, observation_width=64)
    try:
        first, info = env.reset(seed=3)
        assert set(first) == {"pixels", "agent_pos", "environment_state"} and info["is_success"] is False
        assert first["pixels"]["image"].shape == first["pixels"]["image2"].shape == (64, 64, 3)
        assert first["agent_pos"].shape == (8,) and first["environment_state"].shape == (7,)
        rollout = [env.step(np.array([0.3, 0, 0, 0, 0, 0, -1]))[0]["agent_pos"] for _ in range(5)]
        assert rollout[-1][0] != pytest.approx(first["agent_pos"][0], abs=1e-4)  # the hand moved
        again, _ = env.reset(seed=3)
        np.testing.assert_array_equal(again["agent_pos"], first["agent_pos"])
        np.testing.assert_array_equal(again["pixels"]["image"], first["pixels"]["image"])
        other, _ = env.reset(seed=4)
        assert not np.array_equal(
            other["environment_state"], first["environment_state"]
        ) or not np.array_equal(other["pixels"]["image"], first["pixels"]["image"])
    finally:
        env.close()


def test_lerobot_sim_eval_names_the_valid_suites_and_what_to_install(tmp_path, capsys):
    from lerobot_sim.eval_cli import main

    out = tmp_path / "m.json"
    common = ["--env", "libero", "--episodes", "1", "--policy", "random", "--output", str(out)]
    assert main([*common, "--tasks", "libero_100"]) == 2
    err = capsys.readouterr().err
    assert "--tasks 'libero_100': not a LIBERO suite. Suites: libero_spatial, libero_object" in err, err
    assert main([*common]) == 2
    assert "--env libero needs --tasks" in capsys.readouterr().err
    why = _libero_runs()
    if "not installed" in why:  # LIBERO or its assets missing: said at once, naming what installs them
        assert main([*common, "--tasks", "libero_goal:1"]) == 2
        err = capsys.readouterr().err
        assert "scripts/install-libero.sh" in err and "Traceback" not in err, err
    assert not out.exists()


def test_libero_has_no_scripted_policy_to_evaluate():
    from lerobot_sim.eval_cli import TaskPolicies
    from lerobot_sim.evaluation import EvaluationError

    with pytest.raises(EvaluationError, match="--policy scripted: --env libero has no scripted policy"):
        TaskPolicies("scripted", None, 20, 1, env="libero")
