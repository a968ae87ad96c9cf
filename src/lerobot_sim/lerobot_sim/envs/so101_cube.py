"""SO-101 cube lifting in MuJoCo as a gymnasium environment (ROS-free).

Observations follow LeRobot's gym conventions: ``pixels`` (a dict camera name -> HxWx3 uint8),
``agent_pos`` (the six joint positions in radians, LeRobot's joint order) and, for the state observation
types, ``environment_state`` (cube position xyz and quaternion wxyz, metres). Actions are absolute joint
position targets in radians, clipped to the joint limits. ``info["is_success"]`` is set by ``reset`` and
``step``. The episode terminates when the cube is held ``lift_height`` above its start height.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import mujoco
import numpy as np
from gymnasium import spaces

from lerobot_sim.so101_model import CUBE_HALF_SIZE, GRIPPER_OPEN, JOINT_NAMES, JointLimits, so101_cube_xml

OBS_TYPES = ("pixels_agent_pos", "state", "all")
CAMERAS = ("front", "wrist")
HOME_POSE = np.array([0.0, -0.6, 0.9, 1.2, 0.0, GRIPPER_OPEN])  # rad; arm raised above the table


class SO101CubeEnv(gym.Env):
    """Pick the cube off the table with a simulated SO-101."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 30}
    task = "so101_cube_lift"
    task_description = "Pick up the red cube and lift it."

    def __init__(
        self,
        obs_type: str = "pixels_agent_pos",
        cameras: tuple[str, ...] | list[str] = CAMERAS,
        image_height: int = 240,
        image_width: int = 320,
        fps: int = 30,
        lift_height: float = 0.05,
        cube_x_range: tuple[float, float] = (0.17, 0.25),
        cube_y_range: tuple[float, float] = (-0.08, 0.08),
        cube_yaw_range: tuple[float, float] = (-0.6, 0.6),
        render_mode: str | None = "rgb_array",
        max_episode_steps: int = 300,
    ):
        if obs_type not in OBS_TYPES:
            raise ValueError(f"SO101CubeEnv: obs_type {obs_type!r} is not one of {OBS_TYPES}")
        cameras = tuple(cameras)
        unknown = [c for c in cameras if c not in CAMERAS]
        if unknown:
            raise ValueError(f"SO101CubeEnv: unknown camera(s) {unknown}; available: {CAMERAS}")
        if obs_type != "state" and not cameras:
            raise ValueError(f"SO101CubeEnv: obs_type {obs_type!r} needs at least one camera")
        self.obs_type = obs_type
        self.cameras = cameras
        self.image_height = int(image_height)
        self.image_width = int(image_width)
        self.fps = int(fps)
        self.lift_height = float(lift_height)
        self.cube_x_range = cube_x_range
        self.cube_y_range = cube_y_range
        self.cube_yaw_range = cube_yaw_range
        self.render_mode = render_mode
        self._max_episode_steps = int(max_episode_steps)
        self.metadata = {**self.metadata, "render_fps": self.fps}

        self.model = mujoco.MjModel.from_xml_path(so101_cube_xml())
        self.data = mujoco.MjData(self.model)
        control_dt = 1.0 / self.fps
        self.n_substeps = max(1, int(round(control_dt / self.model.opt.timestep)))
        self.model.opt.timestep = control_dt / self.n_substeps  # exact control period

        self.limits = JointLimits.so101()
        self._qpos_idx = np.array([self.model.joint(n).qposadr[0] for n in JOINT_NAMES])
        self._qvel_idx = np.array([self.model.joint(n).dofadr[0] for n in JOINT_NAMES])
        self._act_idx = np.array([self.model.actuator(n).id for n in JOINT_NAMES])
        cube_joint = self.model.joint("cube")
        self._cube_qpos = int(cube_joint.qposadr[0])
        self._cube_qvel = int(cube_joint.dofadr[0])
        self._cube_geom = self.model.geom("cube").id
        self._grasp_site = self.model.site("grasp").id
        self._finger_geoms = {self.model.geom("static_jaw").id, self.model.geom("moving_jaw").id}
        self._renderer: mujoco.Renderer | None = None

        low = np.array(self.limits.lower, dtype=np.float32)
        high = np.array(self.limits.upper, dtype=np.float32)
        self.action_space = spaces.Box(low=low, high=high, dtype=np.float32)
        obs_spaces: dict[str, spaces.Space] = {}
        if obs_type in ("pixels_agent_pos", "all"):
            obs_spaces["pixels"] = spaces.Dict(
                {
                    cam: spaces.Box(0, 255, (self.image_height, self.image_width, 3), dtype=np.uint8)
                    for cam in cameras
                }
            )
        obs_spaces["agent_pos"] = spaces.Box(
            low=low.astype(np.float64), high=high.astype(np.float64), dtype=np.float64
        )
        if obs_type in ("state", "all"):
            big = np.full(7, 1e6)  # finite bounds: gymnasium warns on infinite float64 bounds
            obs_spaces["environment_state"] = spaces.Box(-big, big, dtype=np.float64)
        self.observation_space = spaces.Dict(obs_spaces)

        self._cube_z0 = CUBE_HALF_SIZE
        self._step_count = 0

    # ------------------------------------------------------------------ gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        mujoco.mj_resetData(self.model, self.data)
        self.data.qpos[self._qpos_idx] = HOME_POSE
        self.data.ctrl[self._act_idx] = HOME_POSE
        x = self.np_random.uniform(*self.cube_x_range)
        y = self.np_random.uniform(*self.cube_y_range)
        yaw = self.np_random.uniform(*self.cube_yaw_range)
        q = self._cube_qpos
        self.data.qpos[q : q + 3] = (x, y, CUBE_HALF_SIZE)
        self.data.qpos[q + 3 : q + 7] = (np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2))
        mujoco.mj_forward(self.model, self.data)
        self._cube_z0 = float(self.data.qpos[q + 2])
        self._step_count = 0
        return self._observation(), self._info()

    def step(self, action):
        action = np.asarray(action, dtype=np.float64).reshape(-1)
        if action.shape != (len(JOINT_NAMES),) or not np.all(np.isfinite(action)):
            raise ValueError(
                f"SO101CubeEnv.step: action must be {len(JOINT_NAMES)} finite joint positions "
                f"(rad, order {JOINT_NAMES}), got {action!r}"
            )
        self.data.ctrl[self._act_idx] = np.clip(action, self.limits.lower, self.limits.upper)
        mujoco.mj_step(self.model, self.data, nstep=self.n_substeps)
        self._step_count += 1
        reward = self.compute_reward()
        success = self.is_success()
        return self._observation(), reward, success, False, self._info(success)

    def render(self):
        if not self.cameras:
            return None
        return self._render_camera(self.cameras[0])

    def close(self):
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None

    # ------------------------------------------------------------------ task
    def cube_pose(self) -> np.ndarray:
        """Cube position (m) and orientation quaternion (w, x, y, z)."""
        q = self._cube_qpos
        return self.data.qpos[q : q + 7].copy()

    def environment_state(self) -> np.ndarray:
        return self.cube_pose()

    def joint_positions(self) -> np.ndarray:
        return self.data.qpos[self._qpos_idx].copy()

    def joint_velocities(self) -> np.ndarray:
        return self.data.qvel[self._qvel_idx].copy()

    def joint_efforts(self) -> np.ndarray:
        return self.data.actuator_force[self._act_idx].copy()

    def grasp_position(self) -> np.ndarray:
        return self.data.site_xpos[self._grasp_site].copy()

    def lifted(self) -> float:
        return float(self.data.qpos[self._cube_qpos + 2] - self._cube_z0)

    def fingers_touch_cube(self) -> int:
        touching = set()
        for i in range(self.data.ncon):
            c = self.data.contact[i]
            if c.geom1 == self._cube_geom and c.geom2 in self._finger_geoms:
                touching.add(c.geom2)
            elif c.geom2 == self._cube_geom and c.geom1 in self._finger_geoms:
                touching.add(c.geom1)
        return len(touching)

    def is_success(self) -> bool:
        return self.lifted() >= self.lift_height and self.fingers_touch_cube() > 0

    def compute_reward(self) -> float:
        """Dense reward in [0, 1]: reach (0.25), both jaws on the cube (0.25), lift progress (0.5)."""
        dist = float(np.linalg.norm(self.grasp_position() - self.cube_pose()[:3]))
        reach = 1.0 - np.tanh(10.0 * dist)
        grasp = self.fingers_touch_cube() / 2.0
        lift = float(np.clip(self.lifted() / self.lift_height, 0.0, 1.0)) if grasp > 0 else 0.0
        return float(0.25 * reach + 0.25 * grasp + 0.5 * lift)

    # ------------------------------------------------------------------ internals
    def _render_camera(self, camera: str) -> np.ndarray:
        if self._renderer is None:
            self._renderer = mujoco.Renderer(self.model, self.image_height, self.image_width)
        self._renderer.update_scene(self.data, camera=camera)
        # render() fills a new array on every call (mujoco.Renderer, no ``out``): the observation owns
        # it, and the next render cannot change it, so it is not copied again
        return self._renderer.render()

    def _observation(self) -> dict[str, Any]:
        obs: dict[str, Any] = {}
        if "pixels" in self.observation_space.spaces:
            obs["pixels"] = {cam: self._render_camera(cam) for cam in self.cameras}
        obs["agent_pos"] = self.joint_positions()
        if "environment_state" in self.observation_space.spaces:
            obs["environment_state"] = self.environment_state()
        return obs

    def _info(self, success: bool | None = None) -> dict[str, Any]:
        return {
            "is_success": bool(self.is_success() if success is None else success),
            "lifted_m": self.lifted(),
            "step": self._step_count,
        }
