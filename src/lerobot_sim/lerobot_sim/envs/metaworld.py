"""Meta-World (``metaworld`` 3.x, Sawyer arm) as a gymnasium env with LeRobot's observation keys.

One env = one task (``pick-place-v3``, ...). The observation is LeRobot's ``pixels_agent_pos`` layout:
``pixels`` (the ``corner2`` camera, upright), ``agent_pos`` (hand xyz and gripper opening, 4 values), plus
``environment_state``: Meta-World's full 39-value observation, which its scripted policies read.
Actions are 4 values in [-1, 1] (hand xyz delta, gripper). An episode ends on success (terminated) or
after Meta-World's 500 steps (truncated). ``reset(seed=s)`` places the objects from ``s``: the same seed
gives the same episode.

Task names and groups: the 50 task names, ``mt10`` / ``mt25`` / ``mt50`` (Meta-World's benchmark
sets) and LeRobot's difficulty groups ``easy`` / ``medium`` / ``hard`` / ``very_hard``.
"""

from __future__ import annotations

import threading
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

ACTION_DIM = 4
STATE_DIM = 4  # hand position (3) and gripper opening (1): the first values of Meta-World's observation
FULL_OBS_DIM = 39
MAX_STEPS = 500  # Meta-World's max_path_length; stepping past it is an error in metaworld
FPS = 80  # metaworld's render_fps (LeRobot's metaworld config says the same)

# LeRobot's difficulty groups of the 50 tasks (lerobot/envs/metaworld_config.json, DIFFICULTY_TO_TASKS)
DIFFICULTY_GROUPS: dict[str, tuple[str, ...]] = {
    "easy": (
        "button-press-v3",
        "button-press-topdown-v3",
        "button-press-topdown-wall-v3",
        "button-press-wall-v3",
        "coffee-button-v3",
        "dial-turn-v3",
        "door-close-v3",
        "door-lock-v3",
        "door-open-v3",
        "door-unlock-v3",
        "drawer-close-v3",
        "drawer-open-v3",
        "faucet-close-v3",
        "faucet-open-v3",
        "handle-press-v3",
        "handle-press-side-v3",
        "handle-pull-v3",
        "handle-pull-side-v3",
        "lever-pull-v3",
        "plate-slide-v3",
        "plate-slide-back-v3",
        "plate-slide-back-side-v3",
        "plate-slide-side-v3",
        "reach-v3",
        "reach-wall-v3",
        "window-close-v3",
        "window-open-v3",
        "peg-unplug-side-v3",
    ),
    "medium": (
        "basketball-v3",
        "bin-picking-v3",
        "box-close-v3",
        "coffee-pull-v3",
        "coffee-push-v3",
        "hammer-v3",
        "peg-insert-side-v3",
        "push-wall-v3",
        "soccer-v3",
        "sweep-v3",
        "sweep-into-v3",
    ),
    "hard": (
        "assembly-v3",
        "hand-insert-v3",
        "pick-out-of-hole-v3",
        "pick-place-v3",
        "push-v3",
        "push-back-v3",
    ),
    "very_hard": (
        "shelf-place-v3",
        "disassemble-v3",
        "stick-pull-v3",
        "stick-push-v3",
        "pick-place-wall-v3",
    ),
}


def benchmark_sets() -> dict[str, tuple[str, ...]]:
    """Meta-World's own sets: mt10, mt25, mt50 (task names in the package's order)."""
    from metaworld import env_dict

    return {
        "mt10": tuple(env_dict.MT10_V3),
        "mt25": tuple(env_dict.MT25_V3),
        "mt50": tuple(env_dict.MT50_V3),
    }


def task_names() -> tuple[str, ...]:
    from metaworld import env_dict

    return tuple(env_dict.ALL_V3_ENVIRONMENTS)


def task_groups() -> dict[str, tuple[str, ...]]:
    """Group name -> its tasks: the benchmark sets and LeRobot's difficulty groups."""
    return {**benchmark_sets(), **DIFFICULTY_GROUPS}


def resolve_tasks(spec: str, flag: str = "--tasks") -> list[tuple[str, str]]:
    """``"mt10"``, ``"pick-place-v3,reach-v3"``, ``"easy,push-v3"`` -> [(group, task), ...] in order.

    A single task name is its own group (as in lerobot-eval). An unknown name is a ValueError that lists
    the valid group and task names."""
    groups = task_groups()
    names = task_names()
    out: list[tuple[str, str]] = []
    items = [s.strip() for s in spec.split(",") if s.strip()]
    if not items:
        raise ValueError(f"{flag}: no task or group given")
    for item in items:
        key = item.lower()
        if key in groups:
            out += [(key, task) for task in groups[key]]
        elif item in names:
            out.append((item, item))
        else:
            raise ValueError(
                f"{flag} {item!r}: not a Meta-World task or group. Groups: {', '.join(groups)}. "
                f"Tasks: {', '.join(names)}"
            )
    seen: set[tuple[str, str]] = set()
    return [x for x in out if not (x in seen or seen.add(x))]


_MT1_LOCK = threading.Lock()


def benchmark_for(task: str):
    """Meta-World's MT1 benchmark of `task` with LeRobot's fixed seed (42), one at a time: MT1 seeds and
    draws numpy's global random state to make its 50 goals, so two tasks built at once in parallel
    evaluation would interleave their draws (other goals than a serial run, or Meta-World's "Only
    generated 49 unique goals" error)."""
    import metaworld

    with _MT1_LOCK:
        return metaworld.MT1(task, seed=42)


class MetaWorldEnv(gym.Env):
    """One Meta-World task; see the module docstring."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": FPS}

    def __init__(
        self,
        task: str = "pick-place-v3",
        obs_type: str = "pixels_agent_pos",
        camera_name: str = "corner2",
        observation_height: int = 480,
        observation_width: int = 480,
        render_mode: str = "rgb_array",
    ):
        super().__init__()
        if task not in task_names():
            raise ValueError(f"Meta-World task {task!r} is unknown; tasks: {', '.join(task_names())}")
        if obs_type not in ("pixels_agent_pos", "state"):
            raise ValueError(f"obs_type {obs_type!r}: expected 'pixels_agent_pos' or 'state'")

        self.task = task
        self.obs_type = obs_type
        self.camera_name = camera_name
        self.render_mode = render_mode
        # a fixed benchmark seed picks the task's parameters, as LeRobot does; object placement is then
        # drawn per episode from the reset seed
        mt1 = benchmark_for(task)
        self._env = mt1.train_classes[task](
            render_mode="rgb_array",
            camera_name=camera_name,
            width=observation_width,
            height=observation_height,
        )
        self._env.set_task(mt1.train_tasks[0])
        if camera_name == "corner2":  # LeRobot's framing of this camera
            self._env.model.cam_pos[2] = [0.75, 0.075, 0.7]
        self._env._freeze_rand_vec = False  # a new placement per episode ...
        self._env.seeded_rand_vec = True  # ... drawn from the env's seeded generator
        obs_spaces: dict[str, spaces.Space] = {
            "agent_pos": spaces.Box(-np.inf, np.inf, (STATE_DIM,), np.float64),
            "environment_state": spaces.Box(-np.inf, np.inf, (FULL_OBS_DIM,), np.float64),
        }
        if obs_type == "pixels_agent_pos":
            obs_spaces["pixels"] = spaces.Box(0, 255, (observation_height, observation_width, 3), np.uint8)
        self.observation_space = spaces.Dict(obs_spaces)
        self.action_space = spaces.Box(-1.0, 1.0, (ACTION_DIM,), np.float32)
        self._steps = 0

    def _image(self) -> np.ndarray:
        image = self._env.render()
        if self.camera_name == "corner2":  # this camera renders upside down and mirrored
            image = np.flip(image, (0, 1))
        return np.ascontiguousarray(image, dtype=np.uint8)

    def _observation(self, raw: np.ndarray) -> dict[str, Any]:
        raw = np.asarray(raw, dtype=np.float64)
        obs: dict[str, Any] = {"agent_pos": raw[:STATE_DIM].copy(), "environment_state": raw.copy()}
        if self.obs_type == "pixels_agent_pos":
            obs["pixels"] = self._image()
        return obs

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self._env.seed(int(seed))
        raw, _ = self._env.reset()
        self._steps = 0
        return self._observation(raw), {"is_success": False, "task": self.task}

    def step(self, action):
        action = np.asarray(action, dtype=np.float64).reshape(ACTION_DIM)
        raw, reward, _terminated, truncated, info = self._env.step(action)
        self._steps += 1
        success = bool(info.get("success", 0.0))
        info = {**info, "is_success": success, "task": self.task}
        truncated = bool(truncated) or self._steps >= MAX_STEPS
        return self._observation(raw), float(reward), success, truncated, info

    def render(self) -> np.ndarray:
        return self._image()

    def close(self) -> None:
        self._env.close()


class MetaWorldExpert:
    """Meta-World's scripted policy of one task, on the full 39-value observation
    (``observation.environment_state``)."""

    def __init__(self, task: str):
        from metaworld.policies import ENV_POLICY_MAP

        if task not in ENV_POLICY_MAP:
            raise ValueError(f"Meta-World has no scripted policy for {task!r}")
        self.task = task
        self._policy = ENV_POLICY_MAP[task]()

    def reset(self, seed: int | None = None) -> None:
        """Meta-World's scripted policies keep no state between steps."""

    def select_action(self, observation: dict[str, Any]) -> np.ndarray:
        state = observation.get("observation.environment_state")
        if state is None or np.asarray(state).size != FULL_OBS_DIM:
            raise ValueError(
                f"the Meta-World scripted policy needs observation.environment_state ({FULL_OBS_DIM} values)"
            )
        action = self._policy.get_action(np.asarray(state, dtype=np.float64))
        return np.clip(np.asarray(action, dtype=np.float64), -1.0, 1.0)
