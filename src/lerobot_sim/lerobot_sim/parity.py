"""Serving adds nothing: one checkpoint, the same seeds, evaluated in-process and through ROS in lockstep.

Both sides run the same :class:`~lerobot_sim.evaluation.CheckpointPolicy` (the policy node's action path:
observation conversion, history, chunk scheduling with the same refill threshold) and the same command
safety (``command.so101_safety``, which the sim node applies to every command). The only difference is
the transport: the env called in this process, or a ``sim`` process in lockstep reached over ROS 2
(images and joint states as messages, commands on ``forward_position_controller/commands``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from lerobot_sim.command import so101_safety
from lerobot_sim.evaluation import (
    CheckpointPolicy,
    EpisodeMetrics,
    EvalSettings,
    LocalEnvTransport,
    RecordingPolicy,
    ScriptedPolicy,
    run_episodes,
)
from lerobot_sim.registration import SO101_CUBE_ID
from lerobot_sim.session import SimSession, make_env

FPS = 30


@dataclass
class ParityReport:
    seeds: list[int]
    steps: list[int]  # per episode, in-process
    max_abs_diff: float  # over all steps and joints (inf when the step counts differ)
    success_local: list[bool]
    success_ros: list[bool]
    eval_s_local: float
    eval_s_ros: float

    @property
    def identical(self) -> bool:
        return self.max_abs_diff <= 1e-5 and self.success_local == self.success_ros

    def summary(self) -> str:
        return (
            f"seeds {self.seeds}, steps {self.steps}: max |a_local - a_ros| = {self.max_abs_diff:.3g}, "
            f"success local {self.success_local} ros {self.success_ros}, "
            f"eval_s local {self.eval_s_local:.1f} ros {self.eval_s_ros:.1f}"
        )


def _run(factory, checkpoint: str, settings: EvalSettings) -> tuple[list[EpisodeMetrics], float, list]:
    inner = ScriptedPolicy(fps=FPS) if checkpoint == "scripted" else CheckpointPolicy(checkpoint, fps=FPS)
    policy = RecordingPolicy(inner)
    episodes, eval_s, _ = run_episodes(factory, policy, settings, log=lambda m: None)
    return episodes, eval_s, policy.episode_actions()


def compare(
    checkpoint: str,
    n_episodes: int = 2,
    seed: int = 0,
    max_steps: int = 0,
    cameras: tuple[str, ...] = ("front",),
    image_size: tuple[int, int] = (48, 64),
) -> ParityReport:
    """Evaluate ``checkpoint`` (or ``"scripted"``: the cube expert) on seeds ``seed .. seed + n_episodes - 1``
    both ways; actions compared per step."""
    os.environ.setdefault("MUJOCO_GL", "egl")
    from lerobot_sim.eval_cli import make_transport_factory, resolve_env

    settings = EvalSettings(n_episodes, seed=seed, max_steps=max_steps)
    h, w = image_size
    kwargs = {  # what the sim node builds from the same parameters (sim_node._env_kwargs)
        "cameras": list(cameras),
        "obs_type": "pixels_agent_pos" if cameras else "state",
        "image_width": w,
        "image_height": h,
        "fps": FPS,
    }

    def local():
        return LocalEnvTransport(SimSession(make_env(SO101_CUBE_ID, kwargs)), safety=so101_safety(FPS))

    local_eps, local_s, local_actions = _run(local, checkpoint, settings)
    factory, _ = make_transport_factory(
        resolve_env("so101_cube", list(cameras)), {"image_height": h, "image_width": w}, log=lambda m: None
    )
    ros_eps, ros_s, ros_actions = _run(factory, checkpoint, settings)
    diff = 0.0
    for a, b in zip(local_actions, ros_actions, strict=True):
        diff = max(diff, float(np.max(np.abs(a - b)))) if a.shape == b.shape else float("inf")
    return ParityReport(
        seeds=[e.seed for e in local_eps],
        steps=[e.steps for e in local_eps],
        max_abs_diff=diff,
        success_local=[e.success for e in local_eps],
        success_ros=[e.success for e in ros_eps],
        eval_s_local=local_s,
        eval_s_ros=ros_s,
    )
