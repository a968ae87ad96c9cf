"""LIBERO (``hf-libero``, robosuite's Franka Panda) as a gymnasium env with LeRobot's observation keys.

One env = one task of a suite (``libero_spatial`` task 3, ...). The observation is what LeRobot's LIBERO env
and its processor give a policy:

- ``pixels``: ``image`` (the ``agentview`` camera) and ``image2`` (the wrist camera), turned upright (LIBERO
  renders them upside down; LeRobot's processor flips both axes too);
- ``agent_pos``: 8 values, the hand position (3), its orientation as an axis-angle vector (3) and the two
  gripper finger positions;
- ``environment_state``: the arm's 7 joint positions.

Actions are 7 values in [-1, 1]: the hand's position and rotation deltas and the gripper (-1 open, 1 closed),
LIBERO's default relative control. ``reset(seed=s)`` starts from the task's stored initial state number ``s``
(modulo the 50 a task has), then lets the scene settle with no-op actions, as LeRobot does: the same seed
gives the same episode, and seeds 0..49 are the benchmark's own starts. An episode ends on success
(terminated) or after the suite's step limit (truncated).

LIBERO needs its assets (scenes and object meshes, about 200 MB), which ``hf-libero`` downloads from the
Hugging Face Hub on first use; docs/sim.md says how to install them ahead (no download at run time).
"""

from __future__ import annotations

import math
import os
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

ACTION_DIM = 7
STATE_DIM = 8
JOINTS = 7
NO_OP = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0)  # hold still, gripper open
SETTLE_STEPS = 10  # no-op steps after a reset: objects placed from an initial state settle first
FPS = 20  # LIBERO's control frequency (robosuite's control_freq)
# Step limit per suite: LeRobot's, each above the suite's longest training demonstration
SUITE_MAX_STEPS: dict[str, int] = {
    "libero_spatial": 280,
    "libero_object": 280,
    "libero_goal": 300,
    "libero_10": 520,
    "libero_90": 400,
}
CAMERAS = {"image": "agentview_image", "image2": "robot0_eye_in_hand_image"}


def quat_to_axis_angle(quat_xyzw: np.ndarray) -> np.ndarray:
    """robosuite's (x, y, z, w) quaternion as an axis-angle vector (axis times angle in rad)."""
    q = np.asarray(quat_xyzw, dtype=np.float64)
    w = min(1.0, max(-1.0, float(q[3])))
    sin_half = math.sqrt(max(0.0, 1.0 - w * w))
    if sin_half < 1e-10:
        return np.zeros(3)
    return q[:3] * (2.0 * math.acos(w) / sin_half)


def resolve_tasks(
    spec: str, n_tasks: dict[str, int] | None = None, flag: str = "--tasks"
) -> list[tuple[str, int]]:
    """``"libero_spatial"``, ``"libero_goal:0,3"``, ``"libero_spatial,libero_10"`` -> [(suite, task id), ...].

    `n_tasks` gives each suite's number of tasks (default: LIBERO's benchmark, which must be importable). An
    unknown suite or task number is a ValueError naming the valid ones."""
    items = [s.strip() for s in spec.split(",") if s.strip()]
    if not items:
        raise ValueError(f"{flag}: no LIBERO suite given")
    out: list[tuple[str, int]] = []
    suite = None
    for item in items:
        name, _, ids = item.partition(":")
        if name.isdigit() and suite is not None:  # "libero_goal:0,3": a further task id of that suite
            name, ids = suite, name
        if name not in SUITE_MAX_STEPS:
            raise ValueError(f"{flag} {name!r}: not a LIBERO suite. Suites: {', '.join(SUITE_MAX_STEPS)}")
        suite = name
        count = (n_tasks or suite_sizes())[name]
        if not ids:
            out += [(name, i) for i in range(count)]
            continue
        if not ids.isdigit() or int(ids) >= count:
            raise ValueError(f"{flag} {item!r}: {name} has tasks 0..{count - 1}")
        out.append((name, int(ids)))
    seen: set[tuple[str, int]] = set()
    return [x for x in out if not (x in seen or seen.add(x))]


def _package_dir() -> str | None:
    """The installed ``libero/libero`` folder (BDDL files, initial states, assets), found without importing
    LIBERO (its import asks on stdin); None when it is not installed."""
    import importlib.util

    spec = importlib.util.find_spec("libero")
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.join(list(spec.submodule_search_locations)[0], "libero")


def ensure_libero_config() -> str:
    """Write LIBERO's path file when it is missing, and return its path.

    On its first import LIBERO asks on stdin where its files go and writes ``$LIBERO_CONFIG_PATH/config.yaml``
    (default ``~/.libero``); a sim process has no terminal, and that question would end it with EOFError.
    The file written here holds LIBERO's own defaults: the folders inside the installed package."""
    folder = os.environ.get("LIBERO_CONFIG_PATH", os.path.expanduser("~/.libero"))
    path = os.path.join(folder, "config.yaml")
    if os.path.exists(path):
        return path
    root = _package_dir()
    if root is None:
        raise ModuleNotFoundError("LIBERO is not installed (pip package hf-libero); see docs/sim.md, LIBERO")
    paths = {
        "benchmark_root": root,
        "bddl_files": os.path.join(root, "bddl_files"),
        "init_states": os.path.join(root, "init_files"),
        "datasets": os.path.join(os.path.dirname(root), "datasets"),
        "assets": os.path.join(root, "assets"),
    }
    os.makedirs(folder, exist_ok=True)
    with open(path, "w") as f:
        f.writelines(f"{key}: {value}\n" for key, value in paths.items())
    return path


ASSET_FOLDERS = (
    "articulated_objects",
    "stable_scanned_objects",
    "turbosquid_objects",
    "stable_hope_objects",
    "scenes",
)


def find_assets() -> str | None:
    """Where LIBERO's assets are installed, or None. Looks where ``hf-libero`` does (the ``assets`` folder of the
    package, then its download folder ``~/.cache/libero/assets``) but never downloads: hf-libero would fetch
    them from the Hub on first use, and nothing here goes to the network at run time."""
    package = _package_dir()
    roots = [os.path.join(package, "assets")] if package else []
    roots.append(os.path.join(os.path.expanduser("~"), ".cache", "libero", "assets"))
    for root in roots:
        if all(os.path.isdir(os.path.join(root, sub)) for sub in ASSET_FOLDERS):
            return root
    return None


def suite_sizes() -> dict[str, int]:
    """Number of tasks of each suite, from LIBERO's benchmark."""
    ensure_libero_config()
    from libero.libero import benchmark

    suites = benchmark.get_benchmark_dict()
    return {name: suites[name]().n_tasks for name in SUITE_MAX_STEPS if name in suites}


def load_init_states(path: str) -> np.ndarray:
    """A task's initial states (``*.pruned_init``: a numpy array saved with torch.save), read with torch's
    restricted unpickler that may rebuild only numpy arrays: no code from the file can run."""
    import torch

    try:
        from numpy._core.multiarray import _reconstruct
    except ImportError:  # numpy 1
        from numpy.core.multiarray import _reconstruct
    # LIBERO's files were written with numpy 1 (numpy.core), files written now name numpy 2's numpy._core
    allowed = [
        (_reconstruct, f"{module}.multiarray._reconstruct") for module in ("numpy.core", "numpy._core")
    ]
    allowed += [np.ndarray, np.dtype]
    allowed.append(type(np.dtype(np.float64)))  # numpy 2's dtype classes (numpy.dtypes.Float64DType)
    with torch.serialization.safe_globals(allowed):
        states = torch.load(path, weights_only=True)
    states = np.asarray(states, dtype=np.float64)
    if states.ndim != 2 or len(states) == 0:
        raise ValueError(f"{path}: expected a (n, state) array of initial states, got shape {states.shape}")
    return states


class LiberoEnv(gym.Env):
    """One LIBERO task; see the module docstring."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": FPS}

    def __init__(
        self,
        suite: str = "libero_spatial",
        task_id: int = 0,
        obs_type: str = "pixels_agent_pos",
        observation_height: int = 256,
        observation_width: int = 256,
        max_episode_steps: int | None = None,
        render_mode: str = "rgb_array",
    ):
        super().__init__()
        if suite not in SUITE_MAX_STEPS:
            raise ValueError(f"LIBERO suite {suite!r} is unknown; suites: {', '.join(SUITE_MAX_STEPS)}")
        if obs_type not in ("pixels_agent_pos", "state"):
            raise ValueError(f"obs_type {obs_type!r}: expected 'pixels_agent_pos' or 'state'")
        ensure_libero_config()
        if find_assets() is None:
            raise FileNotFoundError(
                "LIBERO's assets are not installed (scenes and object meshes, about 200 MB): "
                "scripts/install-libero.sh installs them; see docs/sim.md, LIBERO"
            )
        from libero.libero import benchmark, get_libero_path

        task_suite = benchmark.get_benchmark_dict()[suite]()
        if not 0 <= task_id < task_suite.n_tasks:
            raise ValueError(f"{suite} has tasks 0..{task_suite.n_tasks - 1}, not {task_id}")
        task = task_suite.get_task(task_id)
        self.suite, self.task_id, self.task = suite, task_id, task.name
        self.task_description = task.language
        self.obs_type = obs_type
        self.render_mode = render_mode
        self.max_episode_steps = max_episode_steps or SUITE_MAX_STEPS[suite]
        self._bddl = os.path.join(get_libero_path("bddl_files"), task.problem_folder, task.bddl_file)
        self._init_states = load_init_states(
            os.path.join(get_libero_path("init_states"), task.problem_folder, task.init_states_file)
        )
        self._size = (observation_height, observation_width)
        self._env = None  # made on the first reset: LIBERO's renderer belongs to the process that steps it
        obs_spaces: dict[str, spaces.Space] = {
            "agent_pos": spaces.Box(-np.inf, np.inf, (STATE_DIM,), np.float64),
            "environment_state": spaces.Box(-np.inf, np.inf, (JOINTS,), np.float64),
        }
        if obs_type == "pixels_agent_pos":
            image = spaces.Box(0, 255, (observation_height, observation_width, 3), np.uint8)
            obs_spaces["pixels"] = spaces.Dict({name: image for name in CAMERAS})
        self.observation_space = spaces.Dict(obs_spaces)
        self.action_space = spaces.Box(-1.0, 1.0, (ACTION_DIM,), np.float32)
        self._steps = 0
        self._last: dict[str, Any] | None = None

    def _inner(self):
        if self._env is None:
            from libero.libero.envs import OffScreenRenderEnv

            self._env = OffScreenRenderEnv(
                bddl_file_name=self._bddl, camera_heights=self._size[0], camera_widths=self._size[1]
            )
        return self._env

    def _observation(self, raw: dict[str, Any]) -> dict[str, Any]:
        agent_pos = np.concatenate(
            [raw["robot0_eef_pos"], quat_to_axis_angle(raw["robot0_eef_quat"]), raw["robot0_gripper_qpos"]]
        ).astype(np.float64)
        obs: dict[str, Any] = {
            "agent_pos": agent_pos,
            "environment_state": np.asarray(raw["robot0_joint_pos"], dtype=np.float64).copy(),
        }
        if self.obs_type == "pixels_agent_pos":  # upright: LIBERO's cameras render rotated by 180 degrees
            obs["pixels"] = {
                name: np.ascontiguousarray(raw[key][::-1, ::-1]) for name, key in CAMERAS.items()
            }
        return obs

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        env = self._inner()
        start = 0 if seed is None else int(seed)
        env.seed(start)
        env.reset()
        raw = env.set_init_state(self._init_states[start % len(self._init_states)])
        for _ in range(SETTLE_STEPS):
            raw, _, _, _ = env.step(list(NO_OP))
        self._steps = 0
        self._last = raw
        return self._observation(raw), {"is_success": False, "task": self.task}

    def step(self, action):
        action = np.clip(np.asarray(action, dtype=np.float64).reshape(ACTION_DIM), -1.0, 1.0)
        raw, reward, _done, info = self._inner().step(action.tolist())
        self._steps += 1
        self._last = raw
        success = bool(self._env.check_success())
        info = {**info, "is_success": success, "task": self.task}
        return self._observation(raw), float(reward), success, self._steps >= self.max_episode_steps, info

    def render(self) -> np.ndarray:
        if self._last is None:
            raise RuntimeError("render() before reset()")
        return np.ascontiguousarray(self._last[CAMERAS["image"]][::-1, ::-1])

    def close(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None
