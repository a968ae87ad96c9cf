"""The scripted corrective human with the ROS-free arbiter, closed loop on the MuJoCo SO-101 env."""

import gymnasium as gym
import numpy as np
import pytest

import lerobot_sim  # noqa: F401
from lerobot_core.control_mode import ControlMode
from lerobot_core.safety import SafetyLimits
from lerobot_policy_node.arbiter import Arbiter, ArbiterConfig, Source
from lerobot_sim.corrector import Corrector, CorrectorConfig
from lerobot_sim.expert import ScriptedExpert
from lerobot_sim.registration import SO101_CUBE_ID
from lerobot_sim.so101_model import JOINT_NAMES, JointLimits

FPS = 30
STEP = 0.1  # rad per control step (3 rad/s at 30 fps): the expert's fastest moves pass unbounded
MODE_NAMES = {ControlMode.POLICY: "policy", ControlMode.HUMAN: "human", ControlMode.HOLD: "hold"}


@pytest.fixture(scope="module")
def env():
    e = gym.make(SO101_CUBE_ID, obs_type="state")
    yield e
    e.close()


@pytest.fixture(scope="module")
def corrector():
    return Corrector(CorrectorConfig(fps=FPS, grasp_deadline_s=4.0))


class StuckPolicy:
    """A policy that wanders off: it drives the shoulder away from the cube and stays there."""

    def act(self, q, cube):
        target = np.asarray(q, dtype=np.float64).copy()
        target[0] = 1.2
        target[1] = -0.5
        return target


class ExpertPolicy:
    def __init__(self):
        self.expert = ScriptedExpert(FPS)

    def act(self, q, cube):
        return self.expert.act(q, cube)


def run_episode(env, corrector, policy, seed, steps=300, human_silent_steps=0):
    """`human_silent_steps`: that many of the human's commands after its takeover never reach the
    arbiter (a starved process)."""
    lim = JointLimits.so101()
    arb = Arbiter(
        ArbiterConfig(
            tuple(JOINT_NAMES),
            SafetyLimits.build(len(JOINT_NAMES), lim.lower, lim.upper, STEP),
            source_timeout_s=0.2,
        )
    )
    obs, _ = env.reset(seed=seed)
    corrector.reset()
    log = []
    lifted_while_human = False
    silent_left = human_silent_steps
    for k in range(steps):
        t = k / FPS
        q = obs["agent_pos"].astype(np.float64)
        cube = env.unwrapped.environment_state()
        arb.update_present(q)
        arb.update_source(Source.POLICY, policy.act(q, cube), t)
        human, request = corrector.step(q, cube, t, MODE_NAMES[arb.mode])
        if arb.mode == ControlMode.HUMAN and silent_left > 0:
            silent_left -= 1
        else:
            arb.update_source(Source.HUMAN, human, t)
        if request is not None:
            arb.request(request, t)
        cmd = arb.step(t)
        if request == "resume" and corrector.lifted(cube):
            lifted_while_human = True  # handed back with the cube grasped and lifting
        log.append((arb.mode, cmd, q))
        obs, _, term, trunc, info = env.step(cmd if cmd is not None else q)
        if term or trunc:
            break
    return arb, log, lifted_while_human


def test_a_failing_policy_is_paused_corrected_and_gets_control_back(env, corrector):
    arb, log, lifted = run_episode(env, corrector, StuckPolicy(), seed=3)
    events = [(t.previous, t.mode, t.event) for t in arb.transitions]
    assert events[:4] == [
        (ControlMode.HOLD, ControlMode.POLICY, "start"),
        (ControlMode.POLICY, ControlMode.HOLD, "pause"),
        (ControlMode.HOLD, ControlMode.HUMAN, "takeover"),
        (ControlMode.HUMAN, ControlMode.POLICY, "resume"),
    ], events
    assert corrector.interventions == 1 and "off the expert's plan" in corrector.reason
    assert lifted  # the human recovered: the cube was grasped and lifting before the hand-back
    # every switch was bumpless: the first command of the new driver is within one step of the
    # measured pose, and the commands of a driver change by at most one step each
    modes = [m for m, _, _ in log]
    switches = [k for k in range(1, len(log)) if modes[k] != modes[k - 1]]
    assert len(switches) >= 3
    for k in switches:
        _, cmd, q = log[k]
        assert np.max(np.abs(cmd - q)) <= STEP + 1e-9, k
    for k in range(1, len(log)):
        if k not in switches:
            assert np.max(np.abs(log[k][1] - log[k - 1][1])) <= STEP + 1e-9, k


def test_a_human_held_for_silence_takes_over_again_and_hands_back(env):
    corrector = Corrector(CorrectorConfig(fps=FPS, grasp_deadline_s=4.0))
    arb, _, lifted = run_episode(env, corrector, StuckPolicy(), seed=3, human_silent_steps=10)
    events = [(t.previous, t.mode, t.event) for t in arb.transitions]
    assert events[:6] == [
        (ControlMode.HOLD, ControlMode.POLICY, "start"),
        (ControlMode.POLICY, ControlMode.HOLD, "pause"),
        (ControlMode.HOLD, ControlMode.HUMAN, "takeover"),
        (ControlMode.HUMAN, ControlMode.HOLD, "human_silent"),
        (ControlMode.HOLD, ControlMode.HUMAN, "takeover"),
        (ControlMode.HUMAN, ControlMode.POLICY, "resume"),
    ], events
    assert corrector.interventions == 1
    assert lifted  # the recovery went on after the silence: the cube was grasped before the hand-back


def test_a_good_policy_is_left_alone(env, corrector):
    arb, _, _ = run_episode(env, corrector, ExpertPolicy(), seed=4, steps=200)
    assert [t.event for t in arb.transitions] == ["start"]
    assert corrector.interventions == 0 and corrector.max_drift_m < corrector.cfg.drift_m


def test_demonstrate_mode_drives_from_the_start(env):
    c = Corrector(CorrectorConfig(fps=FPS, demonstrate=True))
    obs, _ = env.reset(seed=5)
    c.reset()
    q = obs["agent_pos"].astype(np.float64)
    cmd, request = c.step(q, env.unwrapped.environment_state(), 0.0, "human")
    assert request is None and cmd.shape == (6,)


def test_bad_handback_phase_is_refused():
    with pytest.raises(ValueError, match="handback_phase 'dance'"):
        CorrectorConfig(handback_phase="dance")
