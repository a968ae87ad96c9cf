"""The policy node's `rtc` parameter, as a user sets it, with the real ACT test checkpoint run at a
control rate it cannot keep up with (250 Hz: one inference, 11-25 ms on a 2-core machine, takes
3-6 periods; at 100 Hz too few of them took more than 2 periods and the test skipped in 2 of 5 quiet
full runs). With rtc the chunks arrive with the actions that fell due during inference skipped (the
merge with the queue's remainder); without it every chunk runs from its first action and the
robot's command is held at chunk ends while the model runs."""

import numpy as np
import pytest

from .test_policy_node_ros import EmulatedRobot, policy_params

pytestmark = pytest.mark.ros

rclpy = pytest.importorskip("rclpy")

from sensor_msgs.msg import JointState  # noqa: E402

from lerobot_core.ros.testing import MessageCollector, RosProcess, wait_until  # noqa: E402
from lerobot_msgs.msg import ActionChunk  # noqa: E402

FPS = 250.0
PERIOD_S = 1.0 / FPS
N_CHUNKS = 12


def run(ros_node, rtc: bool):
    chunks = MessageCollector(ros_node, ActionChunk, "policy/action_chunk")
    cmds = MessageCollector(ros_node, JointState, "joint_commands")
    params = policy_params(fps=FPS, rtc=rtc, n_action_steps=10, max_observation_age_s=1.0)
    with EmulatedRobot(), RosProcess("lerobot_policy_node", "policy", parameters=params) as node:
        assert wait_until(lambda: len(chunks.messages) >= N_CHUNKS, 90), node.output()
        log = node.output()
    # slow = an inference that took more than 2 control periods (the point of the test)
    slow = [c for c in chunks.messages[1:] if c.inference_latency_s > 2 * PERIOD_S]
    if len(slow) < 3:
        latencies = sorted(round(c.inference_latency_s / PERIOD_S, 1) for c in chunks.messages[1:])
        pytest.skip(
            f"only {len(slow)} of {len(chunks.messages) - 1} inferences of the ACT checkpoint took more than "
            f"2 periods of {FPS:g} Hz in this run (latencies in periods: {latencies}); the test needs 3"
        )
    return chunks.messages, slow, [np.array(m.position) for m in cmds.messages], log


def test_rtc_on_merges_each_chunk_with_the_queue_remainder(ros_node):
    chunks, slow, _, log = run(ros_node, rtc=True)
    assert "rtc on" in log
    summary = [(round(c.inference_latency_s / PERIOD_S, 1), c.actions_skipped) for c in chunks]
    # the actions that fell due while the model ran are skipped: inference ran while the queue played
    assert all(c.actions_skipped >= 1 for c in slow), summary


def test_rtc_off_holds_at_chunk_ends_and_runs_each_chunk_from_its_start(ros_node):
    chunks, slow, commands, log = run(ros_node, rtc=False)
    assert "rtc off" in log
    summary = [(round(c.inference_latency_s / PERIOD_S, 1), c.actions_skipped) for c in chunks]
    assert all(c.actions_skipped == 0 for c in chunks), summary
    # the held command repeats the last one exactly: at least one hold per slow inference
    repeats = sum(
        1
        for a, b, c in zip(commands, commands[1:], commands[2:], strict=False)
        if not np.array_equal(a, b) and np.array_equal(b, c)
    )
    assert repeats >= len(slow) - 1, (repeats, summary)
