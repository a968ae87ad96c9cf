"""Gymnasium ids of lerobot_sim's environments."""

from __future__ import annotations

import gymnasium as gym

SO101_CUBE_ID = "LeRobotRos/SO101Cube-v0"
METAWORLD_ID = "LeRobotRos/MetaWorld-v0"  # one Meta-World task: gym.make(METAWORLD_ID, task="reach-v3")
LIBERO_ID = "LeRobotRos/Libero-v0"  # one LIBERO task: gym.make(LIBERO_ID, suite="libero_goal", task_id=3)


def register_envs() -> None:
    if SO101_CUBE_ID not in gym.registry:
        gym.register(
            id=SO101_CUBE_ID,
            entry_point="lerobot_sim.envs.so101_cube:SO101CubeEnv",
            max_episode_steps=300,
            kwargs={"max_episode_steps": 300},
        )
    if METAWORLD_ID not in gym.registry:
        # the metaworld package is imported by make, not here: it is an optional dependency
        gym.register(id=METAWORLD_ID, entry_point="lerobot_sim.envs.metaworld:MetaWorldEnv")
    if LIBERO_ID not in gym.registry:  # hf-libero too is imported by make only
        gym.register(id=LIBERO_ID, entry_point="lerobot_sim.envs.libero:LiberoEnv")
