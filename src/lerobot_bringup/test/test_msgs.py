"""lerobot_msgs interfaces are generated and work between processes: topic, service and action."""

import subprocess
import sys
from pathlib import Path

import pytest

from lerobot_core.ros.testing import MessageCollector, wait_until

pytestmark = pytest.mark.ros


@pytest.fixture
def peer():
    proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("msgs_peer.py"))])
    yield proc
    proc.terminate()
    proc.wait(10)


def test_interfaces_across_processes(ros_node, peer):
    from rclpy.action import ActionClient

    from lerobot_msgs.action import RecordEpisode
    from lerobot_msgs.msg import ActionChunk
    from lerobot_msgs.srv import ResetSim

    chunks = MessageCollector(ros_node, ActionChunk, "policy/action_chunk")
    first = chunks.wait(3, timeout=30)
    assert [m.chunk_index for m in first] == sorted(m.chunk_index for m in first)
    assert first[0].trajectory.joint_names == ["a.pos", "b.pos"] and first[0].policy_type == "act"

    client = ros_node.create_client(ResetSim, "sim/reset")
    assert client.wait_for_service(timeout_sec=20)
    resp = client.call(ResetSim.Request(use_seed=True, seed=1234), timeout_sec=10)
    assert (
        resp.success
        and resp.info.seed == 1234
        and resp.info.episode_index == 7
        and resp.message == "seed 1234"
    )

    action = ActionClient(ros_node, RecordEpisode, "recorder/record_episode")
    assert action.wait_for_server(timeout_sec=20)
    feedback = []
    goal = action.send_goal_async(
        RecordEpisode.Goal(task="pick"), feedback_callback=lambda f: feedback.append(f.feedback)
    )
    assert wait_until(goal.done, 10)
    result = goal.result().get_result_async()
    assert wait_until(result.done, 10)
    res = result.result().result
    assert (
        res.result_code == RecordEpisode.Result.RESULT_SAVED
        and res.frames == 30
        and res.message == "task=pick"
    )
    assert wait_until(lambda: len(feedback) == 3, 5)
    assert [f.frames for f in feedback] == [10, 20, 30] and feedback[2].streams[0].received == 3


def test_constants_are_generated():
    from lerobot_msgs.msg import PolicyStatus, RecorderStatus

    assert (RecorderStatus.STATE_IDLE, RecorderStatus.STATE_RECORDING, RecorderStatus.STATE_ERROR) == (
        1,
        2,
        6,
    )
    assert PolicyStatus.STATE_HOLDING == 3
