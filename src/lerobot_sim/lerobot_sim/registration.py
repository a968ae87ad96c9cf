"""Gymnasium ids of lerobot_sim's environments."""

from __future__ import annotations

import gymnasium as gym

SO101_CUBE_ID = "LeRobotRos/SO101Cube-v0"


def register_envs() -> None:
    if SO101_CUBE_ID not in gym.registry:
        gym.register(
            id=SO101_CUBE_ID,
            entry_point="lerobot_sim.envs.so101_cube:SO101CubeEnv",
            max_episode_steps=300,
            kwargs={"max_episode_steps": 300},
        )
