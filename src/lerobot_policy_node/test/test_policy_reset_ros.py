"""policy/reset: the policy restarts from the present state (empty action queue, fresh observation
history) without leaving the active state; refused with a reason when the policy is not running."""

import numpy as np
import pytest

from .conftest import ACT_SMALL
from .test_policy_node_ros import STATUS_QOS, EmulatedRobot, policy_params

pytestmark = pytest.mark.ros

rclpy = pytest.importorskip("rclpy")

from sensor_msgs.msg import JointState  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from lerobot_core.ros.testing import MessageCollector, RosProcess, wait_until  # noqa: E402
from lerobot_msgs.msg import ActionChunk, PolicyStatus  # noqa: E402


def call_reset(node):
    cli = node.create_client(Trigger, "policy/reset")
    assert cli.wait_for_service(timeout_sec=30)
    fut = cli.call_async(Trigger.Request())
    # the node answers once its start-up (loading the checkpoint) is through: slow on a loaded machine
    assert wait_until(fut.done, 60), "policy/reset: no answer within 60 s"
    node.destroy_client(cli)
    return fut.result()


def test_reset_restarts_a_running_policy_from_the_present_state(ros_node):
    status = MessageCollector(ros_node, PolicyStatus, "policy/status", qos=STATUS_QOS)
    chunks = MessageCollector(ros_node, ActionChunk, "policy/action_chunk")
    cmds = MessageCollector(ros_node, JointState, "joint_commands")
    states = MessageCollector(ros_node, JointState, "joint_states")
    with EmulatedRobot(), RosProcess("lerobot_policy_node", "policy", parameters=policy_params()) as node:
        chunks.wait(6, timeout=60)
        before = max(c.chunk_index for c in chunks.messages)
        assert before >= 5
        n_chunks, n_cmds = len(chunks.messages), len(cmds.messages)
        r = call_reset(ros_node)
        assert r.success and "reset" in r.message, (r.message, node.output())
        # a fresh start: chunk numbering from the first again, and the first command after the reset is
        # within one step of where the arm was
        assert wait_until(lambda: len(chunks.messages) > n_chunks + 3, 30), node.output()
        assert min(c.chunk_index for c in chunks.messages[n_chunks:]) == 1  # numbering restarted
        assert wait_until(lambda: len(cmds.messages) > n_cmds + 3, 10)
        assert any(s.state == PolicyStatus.STATE_RUNNING for s in status.messages[-5:]) or wait_until(
            lambda: status.messages[-1].state == PolicyStatus.STATE_RUNNING, 10
        )
        after = np.array(cmds.messages[n_cmds + 1].position)
        present = np.array(states.messages[-1].position)
        assert np.max(np.abs(after - present)) < 0.5


def test_reset_of_a_policy_that_is_not_running_is_refused(ros_node):
    params = policy_params(policy_path=str(ACT_SMALL), run_on_activate=False)
    with EmulatedRobot(), RosProcess("lerobot_policy_node", "policy", parameters=params) as node:
        r = call_reset(ros_node)
        assert not r.success and "not running" in r.message, node.output()
