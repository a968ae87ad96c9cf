"""Leader arm with active motors, across processes: two servo emulators, their motor_bus nodes, the
teleop node (it mirrors the follower onto the leader) and the control_arbiter. On pause the leader's torque goes on and it mirrors the
follower; the takeover waits until it is within 2 degrees per joint, then its torque goes off and
the teleop drives; back to the policy, the leader stays free."""

import math
import time

import numpy as np
import pytest

pytestmark = pytest.mark.ros

rclpy = pytest.importorskip("rclpy")

from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

from lerobot_core.robots import get_robot_spec  # noqa: E402
from lerobot_core.ros.testing import MessageCollector, RosProcess, wait_until  # noqa: E402
from lerobot_drivers.servo_emulator import EmulatorProcess  # noqa: E402
from lerobot_msgs.msg import ControlStatus  # noqa: E402
from lerobot_msgs.srv import ArbiterCommand  # noqa: E402

STATUS_QOS = QoSProfile(
    depth=100, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)
TOLERANCE = math.radians(2.0)


def stamp(m) -> float:
    return m.header.stamp.sec + m.header.stamp.nanosec * 1e-9


def command(node, cmd):
    cli = node.create_client(ArbiterCommand, "/arbiter/command")
    assert cli.wait_for_service(timeout_sec=30)
    fut = cli.call_async(ArbiterCommand.Request(command=cmd))
    assert wait_until(fut.done, 10)
    node.destroy_client(cli)
    return fut.result()


def mirrored(follower_names, follower_pos):
    """Where the leader must stand: body joints as is, the gripper range mapped follower -> leader."""
    lead, fol = get_robot_spec("so101_leader"), get_robot_spec("so101_follower")
    out = {}
    for n, v in zip(follower_names, follower_pos, strict=False):
        if n == "gripper":
            fl, ll = fol.limits[n], lead.limits[n]
            v = ll.lower + (v - fl.lower) * (ll.upper - ll.lower) / (fl.upper - fl.lower)
        out[n] = min(max(v, lead.limits[n].lower), lead.limits[n].upper)
    return out


def test_leader_mirrors_the_follower_before_its_torque_goes_off(ros_node, tmp_path):
    follower_names = list(get_robot_spec("so101_follower").joint_names)
    status = MessageCollector(ros_node, ControlStatus, "/arbiter/status", STATUS_QOS)
    lead_js = MessageCollector(ros_node, JointState, "/leader/joint_states")
    fol_js = MessageCollector(ros_node, JointState, "/joint_states")
    policy_pub = ros_node.create_publisher(JointState, "/policy/joint_commands", 10)
    target = {"pose": None}

    def publish_policy():
        if target["pose"] is not None:
            m = JointState(name=follower_names, position=list(target["pose"]))
            m.header.stamp = ros_node.get_clock().now().to_msg()
            policy_pub.publish(m)

    timer = ros_node.create_timer(1 / 30, publish_policy)
    common = {"autostart": True, "rate_hz": 100.0, "timeout_ms": 200.0}
    try:
        with (
            EmulatorProcess(
                "so101_leader", str(tmp_path / "leader"), tau_s=0.05, hand_motion_ticks=300.0
            ) as leader,
            EmulatorProcess("so101_follower", str(tmp_path / "follower"), tau_s=0.02),
            RosProcess(
                "lerobot_drivers",
                "motor_bus",
                name="leader_bus",
                namespace="leader",
                parameters={
                    **common,
                    "robot": "so101_leader",
                    "port": leader.port,
                    "read_only": True,
                    "command_timeout_s": 0.0,
                },
            ) as leader_bus,
            RosProcess(
                "lerobot_drivers",
                "motor_bus",
                name="follower_bus",
                parameters={**common, "robot": "so101_follower", "port": str(tmp_path / "follower")},
            ),
            RosProcess(
                "lerobot_drivers",
                "teleop",
                parameters={"autostart": True, "rate_hz": 30.0, "mirror_follower": True},
                remappings={
                    "leader_joint_states": "/leader/joint_states",
                    "joint_commands": "/teleop/joint_commands",
                    "follower_joint_states": "/joint_states",
                    "leader_joint_commands": "/leader/joint_commands",
                    "leader_mirror_error": "/teleop/leader_mirror_error",
                },
            ),
            RosProcess(
                "lerobot_policy_node",
                "control_arbiter",
                parameters={
                    "rate_hz": 30.0,
                    "max_step_rad": 0.05,
                    "initial_mode": "hold",
                    "mirror_leader": True,
                    # not under test here: long enough that a loaded machine does not make the
                    # test's own 30 Hz policy publisher look silent (that holds, torque on)
                    "source_timeout_s": 2.0,
                    "alignment_timeout_s": 20.0,
                    "autostart": True,
                },
            ) as arb,
        ):
            assert wait_until(lambda: len(fol_js.messages) > 20 and len(lead_js.messages) > 20, 90), (
                arb.output()
            )
            # the policy drives the follower to a pose away from its start
            start = np.array(fol_js.messages[-1].position)
            target["pose"] = start + np.array([0.3, -0.2, 0.25, 0.2, -0.3, 0.2])
            assert wait_until(
                lambda: status.messages
                and status.messages[-1].leader_live
                and status.messages[-1].policy_live,
                30,
            ), arb.output()
            assert command(ros_node, "resume").success
            assert wait_until(
                lambda: np.max(np.abs(np.array(fol_js.messages[-1].position) - target["pose"])) < 0.05, 30
            ), (fol_js.messages[-1].position, arb.output())
            assert not any(leader.call("torque").values())  # free while the policy drives

            # pause: the follower holds, the leader's torque goes on and it moves to the follower
            assert command(ros_node, "pause").success
            assert wait_until(lambda: all(leader.call("torque").values()), 10), leader_bus.output()
            r = command(ros_node, "takeover")  # waits for the alignment
            assert r.success and "waits" in r.message, r.message
            assert wait_until(lambda: status.messages[-1].mode == ControlStatus.MODE_HUMAN, 30), arb.output()
            t_switch = (
                status.messages[-1].transition_stamp.sec + status.messages[-1].transition_stamp.nanosec * 1e-9
            )

            # before the switch, the leader stood within 2 degrees of the follower, joint by joint;
            # first let the samples stamped before the switch arrive (the status can overtake them)
            assert wait_until(
                lambda: stamp(lead_js.messages[-1]) > t_switch and stamp(fol_js.messages[-1]) > t_switch, 10
            ), "no joint_states after the switch"
            fol = [m for m in fol_js.messages if stamp(m) <= t_switch][-1]
            want = mirrored(fol.name, fol.position)
            lead_before = [m for m in lead_js.messages if t_switch - 0.25 <= stamp(m) <= t_switch]
            assert lead_before, [round(stamp(m) - t_switch, 3) for m in lead_js.messages[-20:]]
            for m in lead_before[-3:]:
                got = dict(zip(m.name, m.position, strict=False))
                err = {n: abs(got[n] - v) for n, v in want.items()}
                assert max(err.values()) <= TOLERANCE, {n: math.degrees(e) for n, e in err.items()}
            print(
                "leader - follower at the switch [deg]:",
                {n: round(math.degrees(e), 2) for n, e in err.items()},
            )

            # takeover: torque off, the "hand" moves the leader, the teleop drives the follower
            assert wait_until(lambda: not any(leader.call("torque").values()), 10), leader_bus.output()
            held = np.array(fol.position)
            assert wait_until(
                lambda: np.max(np.abs(np.array(fol_js.messages[-1].position) - held)) > 0.1, 30
            ), "the follower did not follow the leader after the takeover"

            # back to the policy: the leader stays free, the policy drives again
            assert command(ros_node, "resume").success
            assert wait_until(lambda: status.messages[-1].mode == ControlStatus.MODE_POLICY, 10)
            time.sleep(0.5)
            torque = leader.call("torque")
            last = status.messages[-1]
            assert last.mode == ControlStatus.MODE_POLICY, (last.event, last.message)
            assert not any(torque.values()), torque
            assert wait_until(
                lambda: np.max(np.abs(np.array(fol_js.messages[-1].position) - target["pose"])) < 0.05, 30
            )
    finally:
        timer.cancel()  # the fixture's executor may wait on it: the fixture destroys the node
    events = [m.event for m in status.messages]
    assert "pause" in events and "takeover" in events and "resume" in events
