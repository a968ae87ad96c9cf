"""A scripted corrective "human" for human-in-the-loop runs in simulation (ROS-free).

It watches the policy's rollout like an operator would, with the privileged view of the sim (joint
positions and the cube pose), and decides when to intervene:

* deadline: the cube is not lifted (grasped) ``grasp_deadline_s`` after the episode start;
* drift: the grasp point is more than ``drift_m`` away from where the scripted expert's plan
  would put it, for ``drift_steps`` control steps in a row.

When it intervenes it asks for a pause, then a takeover, drives with a fresh
:class:`~lerobot_sim.expert.ScriptedExpert` from wherever the arm is (recovery and correction),
and hands back once the expert has reached ``handback_phase`` (by default ``lift``: and the cube
is lifted ``lift_m``), or after ``max_intervention_s``. Should the arbiter hold while it drives
(its commands fell silent for longer than the arbiter's ``source_timeout_s``), it takes over again
and goes on with the recovery. While it does not drive it reports the follower's
own pose, as a leader arm mirroring the follower would, so a takeover starts where the robot is.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lerobot_sim.expert import PHASES, ScriptedExpert, SO101Kinematics

WATCH, WANT_PAUSE, WANT_TAKEOVER, DRIVING, WANT_RESUME, DONE = (
    "watch",
    "want_pause",
    "want_takeover",
    "driving",
    "want_resume",
    "done",
)


@dataclass(frozen=True)
class CorrectorConfig:
    fps: int = 30
    grasp_deadline_s: float = 6.0  # the cube must be lifted by then
    lift_m: float = 0.02  # cube raised this much above its start = grasped
    drift_m: float = 0.08  # grasp point farther than this from the expert's plan = drifting
    drift_steps: int = 15  # ... for this many steps in a row
    handback_phase: str = "lift"  # the expert reached this phase: hand back to the policy
    max_intervention_s: float = 8.0
    max_interventions: int = 1  # per episode
    demonstrate: bool = False  # drive the whole episode (demonstrations through the same graph)

    def __post_init__(self):
        names = [p.name for p in PHASES]
        if self.handback_phase not in names:
            raise ValueError(f"handback_phase {self.handback_phase!r}: use one of {', '.join(names)}")


class Corrector:
    """``step(q, cube, t_s, mode)`` per observation -> (command for teleop, request or None)."""

    def __init__(self, cfg: CorrectorConfig, kinematics: SO101Kinematics | None = None):
        self.cfg = cfg
        self.kin = kinematics or SO101Kinematics()
        self.shadow = ScriptedExpert(cfg.fps, self.kin)  # the plan the policy is compared to
        self.driver = ScriptedExpert(cfg.fps, self.kin)  # the "human" hands
        self.reset()

    def reset(self) -> None:
        self.shadow.reset()
        self.driver.reset()
        self.state = DRIVING if self.cfg.demonstrate else WATCH
        self.interventions = 0
        self.reason = ""
        self._cube_z0: float | None = None
        self._drift_run = 0
        self._t_takeover: float | None = None
        self.max_drift_m = 0.0

    def lifted(self, cube: np.ndarray) -> bool:
        return self._cube_z0 is not None and float(cube[2]) - self._cube_z0 > self.cfg.lift_m

    def drift(self, q: np.ndarray, plan: np.ndarray) -> float:
        here, _ = self.kin.forward(q[:5])
        there, _ = self.kin.forward(plan[:5])
        return float(np.linalg.norm(here - there))

    def step(self, q, cube, t_s: float, mode: str) -> tuple[np.ndarray, str | None]:
        """``mode``: the arbiter's mode (policy | human | hold). Returns (teleop command, request)."""
        q = np.asarray(q, dtype=np.float64)
        cube = np.asarray(cube, dtype=np.float64)
        if self._cube_z0 is None:
            self._cube_z0 = float(cube[2])
        plan = self.shadow.act(q, cube)
        if self.cfg.demonstrate:
            return self.driver.act(q, cube), None
        if self.state == WATCH:
            if mode == "policy":
                d = self.drift(q, plan)
                self.max_drift_m = max(self.max_drift_m, d)
                self._drift_run = self._drift_run + 1 if d > self.cfg.drift_m else 0
            if mode == "policy" and self.interventions < self.cfg.max_interventions:
                if not self.lifted(cube) and t_s > self.cfg.grasp_deadline_s:
                    self._intervene(f"cube not grasped {t_s:.1f} s into the episode")
                elif self._drift_run >= self.cfg.drift_steps:
                    self._intervene(f"gripper {d * 100:.0f} cm off the expert's plan")
            return q.copy(), None
        if self.state == WANT_PAUSE:
            if mode == "hold":
                self.state = WANT_TAKEOVER
                return q.copy(), "takeover"
            return q.copy(), "pause"
        if self.state == WANT_TAKEOVER:
            if mode == "human":
                self.state = DRIVING
                if self._t_takeover is None:  # max_intervention_s counts from the first takeover
                    self._t_takeover = t_s
                self.driver.reset()  # (again) from wherever the arm is
            else:
                return q.copy(), "takeover"
        if self.state == DRIVING:
            if mode == "policy":  # control was handed to the policy: watch again
                self.state = WATCH
                return q.copy(), None
            if mode == "hold":
                # the arbiter held while the human drove (its commands fell silent for a moment,
                # e.g. a starved process): the recovery is not done, take the arm back
                self.state = WANT_TAKEOVER
                return q.copy(), "takeover"
            action = self.driver.act(q, cube)
            reached = [p.name for p in PHASES].index(self.driver.phase) >= [p.name for p in PHASES].index(
                self.cfg.handback_phase
            )
            if self.cfg.handback_phase in ("lift", "hold"):
                reached = reached and self.lifted(cube)  # hand back a grasped cube, not a closing gripper
            if reached or t_s - self._t_takeover > self.cfg.max_intervention_s:
                self.state = WANT_RESUME
                return action, "resume"
            return action, None
        if self.state == WANT_RESUME:
            if mode == "policy":
                self.state = WATCH
                self._drift_run = 0
                self.shadow.reset()  # the plan restarts from where the human left the arm
                return q.copy(), None
            return q.copy(), "resume"
        return q.copy(), None

    def _intervene(self, why: str) -> None:
        self.state = WANT_PAUSE
        self._t_takeover = None
        self.interventions += 1
        self.reason = why
