"""One simulated environment with episode bookkeeping and a monotonic sim clock (ROS-free).

The sim node and the gym bridge are thin ROS adapters around :class:`SimSession`; the benchmark's bare
loop and the tests drive it directly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

import lerobot_sim  # noqa: F401 - registers LeRobotRos/* ids


@dataclass
class EpisodeState:
    """gymnasium-style bookkeeping of the current episode (the fields of lerobot_msgs/EpisodeInfo)."""

    episode_index: int = -1
    seed: int = -1
    step: int = 0
    reward: float = 0.0
    sum_reward: float = 0.0
    max_reward: float = float("-inf")
    is_success: bool = False
    terminated: bool = False
    truncated: bool = False

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated


def episode_outcome(ep: EpisodeState, step_limit: bool = False) -> str:
    """How an episode ended, in a word: success, timeout (the env's time limit, or `step_limit`: the
    caller's), terminated (ended without success), or running."""
    if ep.is_success:
        return "success"
    if ep.truncated or step_limit:
        return "timeout"
    return "terminated" if ep.terminated else "running"


def episode_summary(ep: EpisodeState, fps: float, step_limit: bool = False) -> str:
    """One line on a finished episode: how it ended, after how many steps, with what reward."""
    max_reward = ep.max_reward if math.isfinite(ep.max_reward) else 0.0
    seed = f" (seed {ep.seed})" if ep.seed >= 0 else ""
    return (
        f"episode {ep.episode_index}{seed} ended: {episode_outcome(ep, step_limit)} after {ep.step} steps "
        f"({ep.step / fps:.1f} s), reward sum {ep.sum_reward:.3f}, max {max_reward:.3f}"
    )


@dataclass
class StepResult:
    observation: dict[str, Any]
    episode: EpisodeState
    sim_time_ns: int
    info: dict[str, Any] = field(default_factory=dict)


def import_env_package(env_id: str) -> None:
    """Import the package that registers ``env_id`` (``gym_pusht/PushT-v0`` -> ``gym_pusht``)."""
    namespace = env_id.split("/", 1)[0] if "/" in env_id else ""
    if namespace and env_id not in gym.registry:
        import importlib

        try:
            importlib.import_module(namespace)
        except ImportError as exc:
            raise ValueError(
                f"environment {env_id!r}: its package {namespace!r} is not importable ({exc}); install it"
            ) from exc
    if env_id not in gym.registry:
        known = sorted(k for k in gym.registry if "/" in k)[:20]
        raise ValueError(f"environment {env_id!r} is not registered with gymnasium; some known ids: {known}")


def make_env(env_id: str, env_kwargs: dict[str, Any] | None = None) -> gym.Env:
    import_env_package(env_id)
    return gym.make(env_id, disable_env_checker=True, **(env_kwargs or {}))


def env_fps(env: gym.Env, default: float = 30.0) -> float:
    fps = env.metadata.get("render_fps") or getattr(env.unwrapped, "fps", None) or default
    return float(fps)


class SimSession:
    """Steps a gymnasium env one control period at a time and keeps the episode's reward/success."""

    def __init__(self, env: gym.Env, fps: float | None = None):
        self.env = env
        self.fps = float(fps) if fps else env_fps(env)
        self.period_ns = int(round(1e9 / self.fps))
        self.ticks = 0  # control periods since start, over all episodes: the sim clock
        self.episode = EpisodeState()
        self.last_observation: dict[str, Any] | None = None
        self.max_episode_steps = getattr(env.spec, "max_episode_steps", None) if env.spec else None

    @property
    def sim_time_ns(self) -> int:
        return self.ticks * self.period_ns

    def reset(self, seed: int | None = None) -> StepResult:
        obs, info = self.env.reset(seed=seed)
        self.ticks += 1  # a reset takes one period, so stamps never repeat across episodes
        self.episode = EpisodeState(
            episode_index=self.episode.episode_index + 1,
            seed=-1 if seed is None else int(seed),
            is_success=bool(info.get("is_success", False)),
        )
        self.last_observation = obs
        return StepResult(obs, self.episode, self.sim_time_ns, info)

    def step(self, action: np.ndarray) -> StepResult:
        if self.episode.episode_index < 0:
            raise RuntimeError("SimSession.step called before reset")
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.ticks += 1
        ep = self.episode
        ep.step += 1
        ep.reward = float(reward)
        ep.sum_reward += float(reward)
        ep.max_reward = max(ep.max_reward, float(reward))
        ep.is_success = ep.is_success or bool(info.get("is_success", False))
        ep.terminated = bool(terminated)
        ep.truncated = bool(truncated)
        self.last_observation = obs
        return StepResult(obs, ep, self.sim_time_ns, info)

    def close(self) -> None:
        self.env.close()


def lerobot_observation_keys(obs: dict[str, Any]) -> dict[str, Any]:
    """Map a gym observation to LeRobot's keys (pixels -> observation.image(s), agent_pos -> state...)."""
    out: dict[str, Any] = {}
    pixels = obs.get("pixels") if isinstance(obs, dict) else None
    if isinstance(pixels, dict):
        for cam, img in pixels.items():
            out[f"observation.images.{cam}"] = img
    elif pixels is not None:
        out["observation.image"] = pixels
    for src, dst in (
        ("agent_pos", "observation.state"),
        ("environment_state", "observation.environment_state"),
        ("robot_state", "observation.robot_state"),
    ):
        if isinstance(obs, dict) and src in obs:
            out[dst] = obs[src]
    return out


def camera_images(obs: dict[str, Any], single_camera_name: str = "image") -> dict[str, np.ndarray]:
    """Camera name -> HxWx3 image of an observation (a bare ``pixels`` array gets ``single_camera_name``)."""
    pixels = obs.get("pixels") if isinstance(obs, dict) else None
    if pixels is None:
        return {}
    if isinstance(pixels, dict):
        return dict(pixels)
    return {single_camera_name: pixels}
