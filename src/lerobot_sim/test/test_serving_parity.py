"""Serving adds nothing: one checkpoint on the same seeds, in-process and through ROS in lockstep.

Both sides run lerobot_sim.evaluation.CheckpointPolicy (the policy node's action path) and the sim node's
command safety; only the transport differs (lerobot_sim.parity). The checkpoint is the ACT fixture made by
src/lerobot_policy_node/test/fixtures/make_act_fixture.py (front camera 48x64 and the 6 joints: the sim's
layout).
"""

import numpy as np
import pytest

from lerobot_core.ament import share_path
from lerobot_sim.command import so101_safety
from lerobot_sim.evaluation import (
    CheckpointPolicy,
    EvalSettings,
    LocalEnvTransport,
    RecordingPolicy,
    run_episodes,
)
from lerobot_sim.parity import compare
from lerobot_sim.registration import SO101_CUBE_ID
from lerobot_sim.session import SimSession, make_env

ACT_FIXTURE = share_path("lerobot_runtime") / "test" / "fixtures" / "act_small" / "pretrained_model"
pytestmark = pytest.mark.skipif(
    not ACT_FIXTURE.is_dir(), reason="lerobot_runtime's ACT fixture is not in this tree"
)


@pytest.mark.ros
def test_in_process_and_ros_served_actions_agree_step_by_step():
    report = compare(str(ACT_FIXTURE), n_episodes=2, seed=3, max_steps=30)
    assert report.steps == [30, 30]
    assert report.max_abs_diff <= 1e-5, report.summary()
    assert report.success_local == report.success_ros, report.summary()


def test_in_process_side_applies_the_sim_nodes_command_safety():
    # without the sim node's safety the in-process env would be stepped with other targets than over ROS
    kwargs = {"cameras": ["front"], "obs_type": "pixels_agent_pos", "image_width": 64, "image_height": 48}
    safety = so101_safety(30)
    runs = []
    for s in (safety, None):
        policy = RecordingPolicy(CheckpointPolicy(str(ACT_FIXTURE)))
        transport = lambda s=s: LocalEnvTransport(SimSession(make_env(SO101_CUBE_ID, kwargs)), safety=s)  # noqa: E731
        run_episodes(transport, policy, EvalSettings(1, seed=3, max_steps=10), log=lambda m: None)
        runs.append(policy.episode_actions()[0])
    safe, raw = runs
    assert safe.shape == raw.shape == (10, 6)
    assert np.abs(np.diff(safe, axis=0)).max() > 0  # the policy's actions change from step to step
    assert np.abs(safe - raw).max() > 1e-3  # the bounded targets changed what the policy saw next


class _Seen:
    """A policy that keeps what it was served."""

    def __init__(self):
        self.seen: list[dict] = []

    def reset(self, seed):
        pass

    def select_action(self, observation):
        self.seen.append(observation)
        return np.zeros(6)


def test_codec_roundtrip_policy_serves_each_camera_through_its_own_stream():
    from lerobot_dataset.roundtrip import CodecRoundTrip
    from lerobot_sim.evaluation import CodecRoundTripPolicy

    rng = np.random.default_rng(1)
    frames = [rng.integers(0, 255, (48, 64, 3), dtype=np.uint8) for _ in range(3)]
    state = np.arange(6, dtype=np.float32)
    inner = _Seen()
    policy = CodecRoundTripPolicy(inner)
    policy.reset(0)
    for f in frames:
        policy.select_action(
            {
                "observation.images.front": f,
                "observation.images.wrist": f[::-1].copy(),
                "observation.state": state,
            }
        )
    policy.reset(1)  # a new episode is a new video: its first frame a keyframe again
    policy.select_action({"observation.images.front": frames[1], "observation.state": state})

    front, wrist = CodecRoundTrip(), CodecRoundTrip()
    for i, f in enumerate(frames):
        got = inner.seen[i]
        assert np.array_equal(got["observation.images.front"], front(f))
        assert np.array_equal(got["observation.images.wrist"], wrist(f[::-1].copy()))
        assert not np.array_equal(got["observation.images.front"], f)  # lossy: not the raw frame
        assert got["observation.state"] is state  # only images change
    assert np.array_equal(inner.seen[3]["observation.images.front"], CodecRoundTrip()(frames[1]))


def test_codec_roundtrip_flag_is_refused_with_tasks(capsys):
    from lerobot_sim.eval_cli import main

    rc = main(["--env", "metaworld", "--episodes", "1", "--policy", "random", "--image-codec-roundtrip"])
    assert rc == 2
    assert "--image-codec-roundtrip: only with a single-task env" in capsys.readouterr().err
