"""Scripted expert for the SO-101 cube task: waypoints solved with damped least-squares IK (ROS-free).

It reads only what a privileged observer of the sim sees: the joint positions (``agent_pos``) and the
cube pose (``environment_state``), and outputs absolute joint position targets (rad). Deterministic:
the same observations give the same actions, so seeded episodes replay exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from lerobot_sim.so101_model import GRIPPER_CLOSED, GRIPPER_OPEN, JOINT_NAMES, JointLimits, so101_cube_xml

ARM_JOINTS = JOINT_NAMES[:5]


@dataclass(frozen=True)
class Phase:
    name: str
    steps: int  # duration at 30 fps; scaled with the control rate


PHASES = (
    Phase("approach", 30),  # grasp point 6 cm above the cube, jaws open
    Phase("descend", 20),  # grasp point at the cube centre
    Phase("close", 14),  # close the jaws on the cube
    Phase("lift", 30),  # lift 10 cm
    Phase("hold", 10_000),
)
APPROACH_HEIGHT = 0.06
GRASP_ABOVE_CENTRE = 0.004
SETTLE_TOLERANCE = 0.03  # rad: arm joints this close to a waypoint count as arrived
SETTLE_MAX_STEPS = 30  # extra steps (at 30 fps) a phase may wait for the arm before moving on
LIFT_HEIGHT = 0.10


class SO101Kinematics:
    """Forward kinematics and IK of the sim's MJCF (grasp site = point between the jaws)."""

    def __init__(self, xml_path: str | None = None):
        self.model = mujoco.MjModel.from_xml_path(xml_path or so101_cube_xml())
        self.data = mujoco.MjData(self.model)
        self._qpos = np.array([self.model.joint(n).qposadr[0] for n in ARM_JOINTS])
        self._dof = np.array([self.model.joint(n).dofadr[0] for n in ARM_JOINTS])
        self._site = self.model.site("grasp").id
        limits = JointLimits.so101()
        self.lower = np.array(limits.lower[:5])
        self.upper = np.array(limits.upper[:5])

    def forward(self, q_arm: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        self.data.qpos[self._qpos] = q_arm
        mujoco.mj_kinematics(self.model, self.data)
        mujoco.mj_comPos(self.model, self.data)
        return self.data.site_xpos[self._site].copy(), self.data.site_xmat[self._site].reshape(3, 3).copy()

    def solve(
        self,
        target_pos: np.ndarray,
        target_rot: np.ndarray,
        q_init: np.ndarray,
        rot_weight: float = 0.3,
        iterations: int = 300,
        damping: float = 1e-3,
    ) -> tuple[np.ndarray, float]:
        """Joint positions (5 arm joints) putting the grasp site at ``target_pos`` with ``target_rot``.

        Returns the solution and its remaining position error in metres.
        """
        q = np.clip(np.asarray(q_init, dtype=np.float64).copy(), self.lower, self.upper)
        jacp = np.zeros((3, self.model.nv))
        jacr = np.zeros((3, self.model.nv))
        err_p = np.full(3, np.inf)
        for _ in range(iterations):
            pos, rot = self.forward(q)
            err_p = target_pos - pos
            err_r = 0.5 * sum(np.cross(rot[:, i], target_rot[:, i]) for i in range(3))
            if np.linalg.norm(err_p) < 2e-4 and np.linalg.norm(err_r) < 2e-3:
                break
            mujoco.mj_jacSite(self.model, self.data, jacp, jacr, self._site)
            jac = np.vstack([jacp[:, self._dof], rot_weight * jacr[:, self._dof]])
            err = np.concatenate([err_p, rot_weight * err_r])
            dq = jac.T @ np.linalg.solve(jac @ jac.T + damping * np.eye(6), err)
            q = np.clip(q + np.clip(dq, -0.2, 0.2), self.lower, self.upper)
        return q, float(np.linalg.norm(err_p))


def top_down_rotation(cube_quat_wxyz: np.ndarray, approach_dir_xy: np.ndarray) -> np.ndarray:
    """Grasp frame: tool axis (x) pointing down, jaw closing axis (y) along the cube face normal that is
    closest to the arm's natural closing direction (perpendicular to the approach direction)."""
    w, x, y, z = cube_quat_wxyz
    yaw = np.arctan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
    natural = np.array([-approach_dir_xy[1], approach_dir_xy[0]])
    normals = [np.array([np.cos(yaw + k * np.pi / 2), np.sin(yaw + k * np.pi / 2)]) for k in range(4)]
    n = max(normals, key=lambda v: float(v @ natural))
    x_axis = np.array([0.0, 0.0, -1.0])
    y_axis = np.array([n[0], n[1], 0.0])
    return np.column_stack([x_axis, y_axis, np.cross(x_axis, y_axis)])


def _smoothstep(s: float) -> float:
    s = min(max(s, 0.0), 1.0)
    return s * s * (3.0 - 2.0 * s)


class ScriptedExpert:
    """Approach, descend, close, lift. Call ``reset()`` at each episode start, then ``act(...)`` per step."""

    def __init__(self, fps: int = 30, kinematics: SO101Kinematics | None = None):
        self.fps = int(fps)
        self.kin = kinematics or SO101Kinematics()
        self.reset()

    def reset(self) -> None:
        self._phase = 0
        self._t = 0
        self._start: np.ndarray | None = None
        self._goal: np.ndarray | None = None
        self._cube0: np.ndarray | None = None
        self._rot: np.ndarray | None = None
        self._previous: np.ndarray | None = None

    @property
    def phase(self) -> str:
        return PHASES[self._phase].name

    def _steps(self, phase: Phase) -> int:
        return max(1, int(round(phase.steps * self.fps / 30)))

    def _plan(self, current: np.ndarray, env_state: np.ndarray) -> None:
        name = PHASES[self._phase].name
        if self._cube0 is None:
            self._cube0 = np.asarray(env_state, dtype=np.float64).copy()
            cube_xy = self._cube0[:2]
            approach = cube_xy / max(np.linalg.norm(cube_xy), 1e-6)
            self._rot = top_down_rotation(self._cube0[3:7], approach)
        cube = self._cube0[:3]
        start = current.copy() if self._goal is None else self._goal.copy()
        goal = start.copy()
        if name == "approach":
            goal[:5], _ = self.kin.solve(cube + [0, 0, APPROACH_HEIGHT], self._rot, start[:5])
            goal[5] = GRIPPER_OPEN
        elif name == "descend":
            # a little above the cube's centre keeps the jaw tips (1.5 cm past the grasp site) off the table
            goal[:5], _ = self.kin.solve(cube + [0, 0, GRASP_ABOVE_CENTRE], self._rot, start[:5])
            goal[5] = GRIPPER_OPEN
        elif name == "close":
            goal[5] = GRIPPER_CLOSED
        elif name == "lift":
            goal[:5], _ = self.kin.solve(cube + [0, 0, LIFT_HEIGHT], self._rot, start[:5])
            goal[5] = GRIPPER_CLOSED
        self._start, self._goal = start, goal

    def act(self, agent_pos: np.ndarray, environment_state: np.ndarray) -> np.ndarray:
        agent_pos = np.asarray(agent_pos, dtype=np.float64)
        if self._t == 0 and self._start is None:
            self._plan(agent_pos, environment_state)
        n = self._steps(PHASES[self._phase])
        self._t += 1
        action = self._start + _smoothstep(self._t / n) * (self._goal - self._start)
        if self._t >= n and self._phase < len(PHASES) - 1 and self._settled(agent_pos, self._t - n):
            self._phase += 1
            self._t = 0
            self._plan(agent_pos, environment_state)
        self._previous = agent_pos
        return action.astype(np.float64)

    def _settled(self, q: np.ndarray, waited: int) -> bool:
        """Closed loop on top of the timing: a phase ends when the arm has reached its waypoint (or the
        jaws stopped closing), so a lagging arm (realtime sim on a busy machine) still grasps."""
        if waited >= self._steps(Phase("wait", SETTLE_MAX_STEPS)):
            return True
        if PHASES[self._phase].name == "close":
            return self._previous is not None and abs(q[5] - self._previous[5]) < 0.002
        return float(np.max(np.abs(q[:5] - self._goal[:5]))) < SETTLE_TOLERANCE
