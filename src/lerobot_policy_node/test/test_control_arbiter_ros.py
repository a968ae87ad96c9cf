"""The control_arbiter node as its own process: every transition over ROS, the status topic, the
Trigger services, silence -> hold, refusals, and the foot pedal (missing device, FIFO)."""

import os
import re
import signal
import time

import numpy as np
import pytest

pytestmark = pytest.mark.ros

rclpy = pytest.importorskip("rclpy")

from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from lerobot_core.ros.qos import subscription_without_events  # noqa: E402
from lerobot_core.ros.testing import (  # noqa: E402
    MessageCollector,
    RosProcess,
    wait_until,
)
from lerobot_msgs.msg import ControlStatus  # noqa: E402
from lerobot_msgs.srv import ArbiterCommand  # noqa: E402
from lerobot_policy_node.pedal import pack_event  # noqa: E402

JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
STATUS_QOS = QoSProfile(
    depth=50, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)
RATE = 50.0
OUTPUT = [lambda: ""]  # the arbiter process output, for failure messages
STEP = 0.02
PRESENT = np.array([0.0, -0.5, 0.5, 0.2, 0.0, 0.3])
POLICY = PRESENT + 0.1
HUMAN = PRESENT - 0.1


class Sources:
    """The test plays the robot (joint_states: a perfect arm at the last joint_commands received) and
    both sources; each source can be switched off."""

    def __init__(self, node):
        self.node = node
        self.pub_js = node.create_publisher(JointState, "/joint_states", 10)
        self.pub_policy = node.create_publisher(JointState, "/policy/joint_commands", 10)
        self.pub_human = node.create_publisher(JointState, "/teleop/joint_commands", 10)
        self.policy_on = True
        self.human_on = False
        self.policy_target = POLICY
        self.pose = PRESENT.copy()
        # destroyed by close() while the node spins
        self.sub = subscription_without_events(node, JointState, "/joint_commands", self._on_command, 10)
        self.timer = node.create_timer(1.0 / RATE, self._tick)

    def _on_command(self, msg):
        self.pose = np.array(msg.position)

    def _msg(self, values):
        m = JointState(name=list(JOINTS), position=[float(v) for v in values])
        m.header.stamp = self.node.get_clock().now().to_msg()
        return m

    def _tick(self):
        self.pub_js.publish(self._msg(self.pose))
        if self.policy_on:
            self.pub_policy.publish(self._msg(self.policy_target))
        if self.human_on:
            self.pub_human.publish(self._msg(HUMAN))

    def close(self):
        self.node.destroy_timer(self.timer)
        self.node.destroy_subscription(self.sub)


def stamp_s(stamp) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


def assert_no_jump(msgs, start=None):
    """Each command within STEP per control period of the one before (of `start`, a (time, pose)
    the first must ramp from). The arbiter keeps only its newest command (depth 1), so a busy
    receiver may miss one: the bound between two received commands is a STEP for each control
    period between their stamps."""
    t = [stamp_s(m.header.stamp) for m in msgs]
    pos = [np.asarray(m.position) for m in msgs]
    if start is not None:
        t, pos = [start[0], *t], [np.asarray(start[1]), *pos]
    steps = np.abs(np.diff(np.array(pos), axis=0)).max(axis=1)
    periods = np.maximum(1, np.round(np.diff(np.array(t)) * RATE))
    bad = np.flatnonzero(steps > STEP * periods + 1e-9)
    assert not len(bad), [(round(float(steps[i]), 4), float(periods[i])) for i in bad]


def call(node, srv_type, name, request, timeout=10.0):
    cli = node.create_client(srv_type, name)
    assert cli.wait_for_service(timeout_sec=timeout), f"{name} not available"
    fut = cli.call_async(request)
    assert wait_until(fut.done, timeout), f"{name}: no answer ({OUTPUT[0]()})"
    node.destroy_client(cli)
    return fut.result()


def command(node, cmd):
    return call(node, ArbiterCommand, "/arbiter/command", ArbiterCommand.Request(command=cmd))


def accepted(request, timeout=10.0):
    """Call `request()` until the arbiter accepts it (the source it needs was just switched on, and
    the arbiter must have heard it first; on a loaded machine that takes a while) or `timeout`
    passes; the last answer, for the assertion's message."""
    deadline = time.monotonic() + timeout
    while True:
        r = request()
        if r.success or time.monotonic() > deadline:
            return r
        time.sleep(0.1)


def modes(status):
    return [m.mode for m in status.messages]


def arbiter(**params):
    base = {
        "rate_hz": RATE,
        "max_step_rad": STEP,
        "source_timeout_s": 0.5,
        "robot": "so101_follower",
        "autostart": True,
    }
    base.update(params)
    return RosProcess("lerobot_policy_node", "control_arbiter", parameters=base)


def test_every_transition_over_ros(ros_node):
    status = MessageCollector(ros_node, ControlStatus, "/arbiter/status", STATUS_QOS)
    out = MessageCollector(ros_node, JointState, "/joint_commands")
    src = Sources(ros_node)
    # a source is silent after 1.5 s here: 0.5 s (the default) let one stall of a busy 2-core machine
    # end the policy's drive between `resume` and `save`, and a save while holding is no transition
    with arbiter(source_timeout_s=1.5) as proc:
        OUTPUT[0] = proc.output
        try:
            # start: the policy publishes, so it drives; the first command is within a step of the pose
            assert wait_until(lambda: ControlStatus.MODE_POLICY in modes(status), 30), proc.output()
            assert wait_until(lambda: len(out.messages) > 5, 10)
            first = np.array(out.messages[0].position)
            assert np.max(np.abs(first - PRESENT)) <= STEP + 1e-9
            assert wait_until(lambda: np.allclose(out.messages[-1].position, POLICY, atol=1e-6), 10)

            # takeover straight from the policy is refused; pause holds the measured pose
            r = command(ros_node, "takeover")
            assert not r.success and "pause first" in r.message and r.mode == ControlStatus.MODE_POLICY
            r = command(ros_node, "pause")
            assert r.success and r.mode == ControlStatus.MODE_HOLD
            n = len(out.messages)
            assert wait_until(lambda: len(out.messages) > n + 5, 5)
            assert np.allclose(out.messages[-1].position, POLICY, atol=1e-9)

            # no live leader: takeover refused, the follower keeps holding
            r = command(ros_node, "takeover")
            assert not r.success and "no live leader" in r.message and r.mode == ControlStatus.MODE_HOLD
            # the leader comes: takeover, bumpless from the present pose towards the human's command
            src.human_on = True
            r = accepted(lambda: call(ros_node, Trigger, "/arbiter/takeover", Trigger.Request()))
            assert r.success, r.message
            assert wait_until(lambda: status.messages[-1].mode == ControlStatus.MODE_HUMAN, 5)
            assert status.messages[-1].is_intervention and status.messages[-1].event == "takeover"
            assert wait_until(lambda: np.allclose(out.messages[-1].position, HUMAN, atol=1e-6), 10)
            assert_no_jump(out.messages)  # no jump anywhere

            # the human goes silent while driving: hold, not replay
            src.human_on = False
            assert wait_until(lambda: status.messages[-1].mode == ControlStatus.MODE_HOLD, 10)
            assert status.messages[-1].event == "human_silent"
            # resume: the policy again
            r = call(ros_node, Trigger, "/arbiter/resume", Trigger.Request())
            assert r.success, r.message
            assert wait_until(lambda: status.messages[-1].mode == ControlStatus.MODE_POLICY, 5)
            # the policy goes silent: hold
            src.policy_on = False
            assert wait_until(lambda: status.messages[-1].event == "policy_silent", 10)
            for _ in range(3):  # asked again and again (the corrective human at an episode start)
                r = command(ros_node, "resume")
                assert not r.success and "policy is silent" in r.message
            r = command(ros_node, "fly")
            assert not r.success and "unknown command 'fly'" in r.message
            # episode controls hold and are forwarded (no recorder here: a warning, no crash)
            src.policy_on = True
            r = accepted(lambda: command(ros_node, "resume"))
            assert r.success, r.message
            r = command(ros_node, "save")
            assert r.success and r.mode == ControlStatus.MODE_HOLD
            assert r.message == "save: episode ended, holding", (r.message, proc.output())
            assert proc.wait_for_output("recorder/stop_episode is not available", 5)
            # the recorder warning is logged before the status goes out, and the status is another
            # topic than the service's answer: wait for the status itself before the arbiter stops
            assert wait_until(lambda: status.messages[-1].event == "save", 5), [
                m.event for m in status.messages[-5:]
            ]
        finally:
            src.close()
    events = [m.event for m in status.messages]
    transitions = [
        e
        for i, e in enumerate(events)
        if i == 0 or status.messages[i].transitions != status.messages[i - 1].transitions
    ]
    for e in ("start", "pause", "takeover", "human_silent", "resume", "policy_silent", "save"):
        assert e in transitions, transitions
    assert proc.returncode == 0, proc.output()
    # a refusal repeated word for word is logged once; the next other reply counts the rest
    before_fly, fly, after = proc.output().partition("]: fly: unknown command 'fly'")
    assert fly, proc.output()
    silent = before_fly[before_fly.index("policy_silent") :]  # from the policy's silence on
    assert silent.count("]: resume: resume refused: the policy is silent") == 1, silent
    assert re.match(r"[^\n]* \(after 2 more 'resume: resume refused: the policy is silent", after), after[
        :300
    ]


def test_a_stall_of_the_arbiter_itself_does_not_end_the_drive(ros_node):
    """The arbiter's process is stopped (SIGSTOP) for three times the source timeout while the policy
    keeps publishing: its first control steps after SIGCONT see only commands from before the stall
    (rclpy runs a ready timer before ready subscriptions, and the timer's next period may follow at
    once; CI once saw two such steps). The drive goes on, and the log says why; a policy that really
    stops is still judged silent. Five stalls of slightly different lengths, so the timer's phase at
    SIGCONT varies."""
    status = MessageCollector(ros_node, ControlStatus, "/arbiter/status", STATUS_QOS)
    src = Sources(ros_node)
    try:
        with arbiter(source_timeout_s=0.3) as proc:
            OUTPUT[0] = proc.output
            assert wait_until(lambda: ControlStatus.MODE_POLICY in modes(status), 30), proc.output()
            for i in range(5):
                before = len(status.messages)
                proc.signal(signal.SIGSTOP)
                time.sleep(0.9 + 0.0043 * i)
                proc.signal(signal.SIGCONT)
                assert proc.wait_for_output("the process was stalled", 10), proc.output()[-2000:]
                wait_until(lambda: False, 1.0)  # a wrong HOLD would come within a control period or two
                events = [m.event for m in status.messages[before:]]
                assert "policy_silent" not in events, (events, proc.output()[-2000:])
                assert status.messages[-1].mode == ControlStatus.MODE_POLICY
            src.policy_on = False
            assert wait_until(lambda: status.messages[-1].event == "policy_silent", 10), proc.output()[-2000:]
        assert proc.returncode == 0, proc.output()[-2000:]
    finally:
        src.close()


def test_missing_pedal_is_an_error_at_start_naming_the_path(tmp_path):
    path = tmp_path / "usb-PCsensor_FootSwitch-event-kbd"
    with arbiter(pedal_device=str(path)) as proc:
        assert wait_until(lambda: proc.returncode is not None, 30), proc.output()
    assert proc.returncode == 2
    assert f"pedal device {path} does not exist" in proc.output()


def test_pedal_presses_from_a_fifo_pause_and_resume(ros_node, tmp_path):
    fifo = tmp_path / "pedal"
    os.mkfifo(fifo)
    status = MessageCollector(ros_node, ControlStatus, "/arbiter/status", STATUS_QOS)
    src = Sources(ros_node)
    try:
        with arbiter(pedal_device=str(fifo), pedal_keys=["KEY_A:pause", "KEY_C:resume"]) as proc:
            assert wait_until(lambda: ControlStatus.MODE_POLICY in modes(status), 30), proc.output()
            fd = os.open(fifo, os.O_WRONLY)
            try:
                os.write(fd, pack_event(30))  # KEY_A down
                assert wait_until(lambda: status.messages[-1].mode == ControlStatus.MODE_HOLD, 5), (
                    proc.output()
                )
                assert status.messages[-1].event == "pause"
                os.write(fd, pack_event(46) + pack_event(46, 0))  # KEY_C down, up
                assert wait_until(lambda: status.messages[-1].mode == ControlStatus.MODE_POLICY, 5)
                assert status.messages[-1].event == "resume"
            finally:
                os.close(fd)
    finally:
        src.close()


def test_record_control_sends_arbiter_inputs(ros_node):
    status = MessageCollector(ros_node, ControlStatus, "/arbiter/status", STATUS_QOS)
    src = Sources(ros_node)
    try:
        with arbiter(source_timeout_s=2.0) as proc:  # a loaded machine must not make the policy "silent"
            assert wait_until(lambda: ControlStatus.MODE_POLICY in modes(status), 30), proc.output()
            with RosProcess(
                "lerobot_recorder",
                "lerobot-record-control",
                args=["--arbiter", "--command", "pause"],
                ros_args=False,
            ) as tool:
                assert wait_until(lambda: tool.returncode is not None, 30), tool.output()
            assert tool.returncode == 0 and "ok: " in tool.output() and "paused" in tool.output(), (
                tool.output()
            )
            assert wait_until(lambda: status.messages[-1].mode == ControlStatus.MODE_HOLD, 5)
            # without --arbiter the tool says what is missing
            with RosProcess(
                "lerobot_recorder", "lerobot-record-control", args=["--command", "takeover"], ros_args=False
            ) as tool:
                assert wait_until(lambda: tool.returncode is not None, 30), tool.output()
            assert tool.returncode == 1 and "takeover needs --arbiter" in tool.output(), tool.output()
    finally:
        src.close()


def change_state(node, transition_id):
    from lifecycle_msgs.msg import Transition
    from lifecycle_msgs.srv import ChangeState

    req = ChangeState.Request(transition=Transition(id=transition_id))
    return call(node, ChangeState, "/control_arbiter/change_state", req).success


def test_lifecycle_deactivate_while_the_policy_drives_holds(ros_node):
    """configure -> activate (the policy drives) -> deactivate: HOLD at the present pose, the commands
    stop following the policy; inputs are refused while inactive; activate again -> the policy again."""
    from lifecycle_msgs.msg import Transition

    status = MessageCollector(ros_node, ControlStatus, "/arbiter/status", STATUS_QOS)
    out = MessageCollector(ros_node, JointState, "/joint_commands")
    reported = MessageCollector(ros_node, JointState, "/joint_states")
    src = Sources(ros_node)
    policy_b = PRESENT + np.array([0.3, -0.2, 0.2, -0.3, 0.25, 0.1])  # a second, distinct policy target
    try:
        with arbiter(autostart=False, source_timeout_s=2.0) as proc:
            OUTPUT[0] = proc.output
            # unconfigured: the status says so, the inputs are refused, nothing reaches the robot
            assert wait_until(lambda: len(status.messages) > 0, 30), proc.output()
            r = command(ros_node, "pause")
            assert not r.success and "unconfigured, not active" in r.message, r.message
            assert change_state(ros_node, Transition.TRANSITION_CONFIGURE)
            assert wait_until(lambda: False, 0.5) is False
            assert not out.messages, "an inactive arbiter sent commands"
            r = command(ros_node, "resume")
            assert not r.success and "inactive, not active" in r.message, r.message

            # activate: HOLD until the policy publishes (it does), then the policy drives
            assert change_state(ros_node, Transition.TRANSITION_ACTIVATE)
            assert wait_until(lambda: status.messages[-1].mode == ControlStatus.MODE_POLICY, 10), (
                proc.output()
            )
            assert wait_until(lambda: np.allclose(out.messages[-1].position, POLICY, atol=1e-6), 10)
            # the arm reports the pose it reached (the arbiter holds what the arm reports)
            n_js = len(reported.messages)
            assert wait_until(
                lambda: sum(np.allclose(m.position, POLICY, atol=1e-9) for m in reported.messages[n_js:])
                >= 5,
                10,
            )

            # deactivate while the policy drives, with the policy moving away: hold the present pose
            n_before = len(status.messages)
            assert change_state(ros_node, Transition.TRANSITION_DEACTIVATE)
            src.policy_target = policy_b
            assert wait_until(lambda: any(m.event == "deactivate" for m in status.messages[n_before:]), 5)
            deact = [m for m in status.messages[n_before:] if m.event == "deactivate"][-1]
            assert deact.mode == ControlStatus.MODE_HOLD and not deact.is_intervention
            # by the arbiter's stamps (delivery may lag under load): one hold command after the
            # transition, then none for 50 control periods
            t_deact = deact.transition_stamp.sec + deact.transition_stamp.nanosec * 1e-9

            def after():
                return [
                    m for m in out.messages if m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 >= t_deact
                ]

            assert wait_until(lambda: len(after()) >= 1, 10), "no hold command after deactivate"
            held = np.array(after()[0].position)
            # a pose the arm reported, one control step from where the policy left it: no jump, and
            # not the policy's new target
            assert any(np.allclose(held, m.position, atol=1e-9) for m in reported.messages), held
            assert np.max(np.abs(held - POLICY)) <= STEP + 1e-9, held
            assert wait_until(lambda: False, 1.0) is False  # 50 control periods
            assert len(after()) == 1, f"{len(after())} commands after deactivate"
            r = command(ros_node, "resume")
            assert not r.success and "not active" in r.message
            assert status.messages[-1].mode == ControlStatus.MODE_HOLD

            # activate again: starts in HOLD, the policy (still publishing) drives, bumplessly
            n = len(out.messages)
            assert change_state(ros_node, Transition.TRANSITION_ACTIVATE)
            assert wait_until(lambda: np.allclose(out.messages[-1].position, policy_b, atol=1e-6), 10)
            events = [m.event for m in status.messages]
            last_activate = len(events) - 1 - events[::-1].index("activate")
            # from the held pose at the activation on, a STEP per period at most
            assert_no_jump(
                out.messages[n:], start=(stamp_s(status.messages[last_activate].transition_stamp), held)
            )
            assert status.messages[last_activate].mode == ControlStatus.MODE_HOLD  # starts in hold
            assert "start" in events[last_activate:], events

            # deactivate, cleanup, configure again, shutdown: each transition succeeds
            for tid in (
                Transition.TRANSITION_DEACTIVATE,
                Transition.TRANSITION_CLEANUP,
                Transition.TRANSITION_CONFIGURE,
                Transition.TRANSITION_INACTIVE_SHUTDOWN,
            ):
                assert change_state(ros_node, tid), (tid, proc.output())
            assert status.messages[-1].mode == ControlStatus.MODE_HOLD
    finally:
        src.close()


def test_lifecycle_configure_fails_on_a_missing_pedal_naming_the_path(ros_node, tmp_path):
    """Without autostart the process stays up: configure returns failure and logs the path."""
    from lifecycle_msgs.msg import Transition

    path = tmp_path / "usb-PCsensor_FootSwitch-event-kbd"
    with arbiter(autostart=False, pedal_device=str(path)) as proc:
        OUTPUT[0] = proc.output
        assert not change_state(ros_node, Transition.TRANSITION_CONFIGURE)
        assert proc.wait_for_output(f"pedal device {path} does not exist", 10), proc.output()
        assert proc.returncode is None
        # the device appears (a FIFO here): configure succeeds
        os.mkfifo(path)
        assert change_state(ros_node, Transition.TRANSITION_CONFIGURE), proc.output()


@pytest.mark.parametrize("priority", [0, 10])
def test_control_priority_puts_every_thread_of_the_arbiter_on_sched_fifo(ros_node, priority):
    """control_priority > 0: the executor and the DDS threads of the arbiter's process all run
    SCHED_FIFO at that priority (an input must not wait for a CPU behind other work); 0: none do."""
    status = MessageCollector(ros_node, ControlStatus, "/arbiter/status", STATUS_QOS)
    with arbiter(control_priority=priority, initial_mode="hold") as proc:
        assert wait_until(lambda: len(status.messages) > 0, 30), proc.output()
        if priority and "SCHED_FIFO not permitted" in proc.output():
            pytest.skip(f"this machine refuses SCHED_FIFO: {proc.output()[-300:]}")
        tids = [int(t) for t in os.listdir(f"/proc/{proc.pid}/task")]
        assert len(tids) > 3  # the executor and the middleware's threads
        policies = {tid: os.sched_getscheduler(tid) for tid in tids}
        want = os.SCHED_FIFO if priority else os.SCHED_OTHER
        assert set(policies.values()) == {want}, (policies, proc.output())
        if priority:
            assert {os.sched_getparam(tid).sched_priority for tid in tids} == {priority}
