"""until_shutdown: a stop request ends a spin quietly, a real error does not."""

import pytest
import rclpy
from rclpy.executors import ExternalShutdownException

from lerobot_core.ros.node import until_shutdown


@pytest.fixture
def context():
    ctx = rclpy.Context()
    ctx.init()
    yield ctx
    ctx.try_shutdown()


def test_stop_requests_end_quietly(context):
    for stop in (KeyboardInterrupt(), ExternalShutdownException()):
        with until_shutdown(context):
            raise stop


def test_an_error_while_running_propagates(context):
    with pytest.raises(RuntimeError, match="real"), until_shutdown(context):
        raise RuntimeError("real")


def test_an_error_raised_once_the_context_is_down_is_the_shutdown(context):
    # what rclpy's signal handler does first: the context goes down, then a running take fails
    with until_shutdown(context):
        context.shutdown()
        raise RuntimeError("Unable to convert call argument '0' to Python object")


def test_an_error_raised_while_the_shutdown_is_in_flight_is_the_shutdown(context):
    # rclpy 7 (Jazzy): the take fails while the signal thread is still shutting the context down
    import threading

    threading.Timer(0.1, context.shutdown).start()
    with until_shutdown(context):
        raise RuntimeError("Unable to convert call argument '0' to Python object")
    assert not context.ok()


def test_system_exit_is_not_swallowed_even_during_shutdown(context):
    context.shutdown()
    with pytest.raises(SystemExit), until_shutdown(context):
        raise SystemExit(3)


# ---------------------------------------------------------------- run_node: one main, every exit path
def _node(name="run_node_test", **kwargs):
    from rclpy.node import Node

    return Node(name, **kwargs)


def test_run_node_user_error_exits_2_with_its_message(capsys):
    from lerobot_core.ros.node import run_node

    def make():
        raise ValueError("parameter x=3: use 1 or 2")

    assert run_node(make, [], errors=(ValueError,), error_prefix="thing: error") == 2
    assert "thing: error: parameter x=3: use 1 or 2" in capsys.readouterr().out


def test_run_node_exits_with_a_callbacks_system_exit_after_the_safe_state():
    from lerobot_core.ros.node import run_node

    calls = []

    def make():
        node = _node()
        node.create_timer(0.01, lambda: (_ for _ in ()).throw(SystemExit(5)))
        return node

    assert run_node(make, [], on_exit=lambda node: calls.append(node.get_name())) == 5
    assert calls == ["run_node_test"]


def test_run_node_main_loop_code_and_a_failing_safe_state():
    from lerobot_core.ros.node import run_node

    assert run_node(_node, [], main_loop=lambda node, running: 4) == 4
    assert run_node(_node, [], main_loop=lambda node, running: 0, on_exit=lambda node: 1) == 1


def test_autostart_that_fails_to_configure_exits_1_without_spinning():
    from rclpy.lifecycle import LifecycleNode, TransitionCallbackReturn

    from lerobot_core.ros.node import run_node
    from lerobot_core.ros.params import declare

    class Failing(LifecycleNode):
        def __init__(self):
            super().__init__("failing")
            declare(self, "autostart", True, "configure and activate right after start")

        def on_configure(self, state):
            return TransitionCallbackReturn.FAILURE

    spun = []
    assert run_node(Failing, [], autostart=True, spin=spun.append) == 1
    assert spun == []


def test_declare_builds_the_descriptor_and_returns_the_override(context):
    from rclpy.parameter import Parameter

    from lerobot_core.ros.params import declare, declared_defaults

    node = _node("declare_test", context=context, parameter_overrides=[Parameter("rate_hz", value=20.0)])
    try:
        assert declare(node, "rate_hz", 50.0, "rate [Hz]", range=(1.0, 100.0)) == 20.0
        assert declare(node, "count", 3, "messages", read_only=False, range=(0, 10)) == 3
        rate, count = node.describe_parameters(["rate_hz", "count"])
        assert rate.read_only and rate.description == "rate [Hz]"
        assert (rate.floating_point_range[0].from_value, rate.floating_point_range[0].to_value) == (
            1.0,
            100.0,
        )
        assert not count.read_only and not count.floating_point_range
        assert (count.integer_range[0].from_value, count.integer_range[0].to_value) == (0, 10)
        assert declared_defaults(node) == {
            "rate_hz": 20.0,
            "count": 3,
            "start_type_description_service": True,
        }
    finally:
        node.destroy_node()


# ---------------------------------------------------------------- publishing while a signal shuts down
def _publisher(context):
    from std_msgs.msg import String

    node = _node("publish_test", context=context)
    return node, node.create_publisher(String, "publish_test", 10), String(data="x")


def test_publish_unless_shut_down_publishes_and_reports_a_shut_down_context(context):
    from lerobot_core.ros.node import publish_unless_shut_down

    node, pub, msg = _publisher(context)
    assert publish_unless_shut_down(pub, msg, context)
    with pytest.raises(TypeError):  # a real error, the context up: it propagates
        publish_unless_shut_down(pub, "not a message", context)
    context.shutdown()
    assert not publish_unless_shut_down(pub, msg, context)
    node.destroy_node()


def publish_until_shut_down(publish, rounds=60):
    """`rounds` times: a context shut down from another thread (as rclpy's signal handler does) while
    this thread publishes through `publish(pub, msg, context)` until it says False. Returns the
    errors that escaped."""
    import threading
    import time

    errors = []
    for i in range(rounds):
        ctx = rclpy.Context()
        ctx.init()
        node, pub, msg = _publisher(ctx)
        killer = threading.Timer(0.001 + 0.0001 * (i % 7), ctx.try_shutdown)
        killer.start()
        deadline = time.monotonic() + 5.0
        try:
            while publish(pub, msg, ctx) and time.monotonic() < deadline:
                pass
        except Exception as exc:  # what the safe state would have died of
            errors.append(exc)
        killer.join()
        node.destroy_node()
    return errors


def test_publishing_races_a_shutdown_from_another_thread_without_an_error():
    from lerobot_core.ros.node import publish_unless_shut_down

    assert publish_until_shut_down(publish_unless_shut_down) == []


def test_the_race_is_real_for_a_check_then_publish():
    """The check-then-publish this replaces fails in the same race (what killed the policy node's
    safe state under load: "publisher's context is invalid")."""

    def check_then_publish(pub, msg, context):
        if not context.ok():
            return False
        pub.publish(msg)
        return True

    errors = publish_until_shut_down(check_then_publish)
    assert errors and all(
        "context is invalid" in str(e) or "InvalidHandle" in type(e).__name__ for e in errors
    ), errors


# ------------------------------------------- Ctrl-C: nothing torn down under rclpy's signal thread
_SIGNAL_CHILD = r"""
import os, sys, time
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from lerobot_core.ros.node import run_node

mode = sys.argv[1]
threads_before = set()


def busy(seconds):
    t = time.monotonic()
    while time.monotonic() - t < seconds:
        pass


class Executor(SingleThreadedExecutor):
    def shutdown(self, timeout_sec=None):
        print(f"executor shutdown: context ok={self._context.ok()}", flush=True)
        return super().shutdown(timeout_sec)


class Busy(Node):
    def __init__(self):
        super().__init__("busy")
        if mode == "spin":
            self.create_timer(0.001, self.work)

    def work(self):
        print("busy", flush=True)
        busy(0.05)  # a callback at work, as the scripted expert's in a lockstep run

    def destroy_node(self):
        print(f"destroy_node: context ok={self.context.ok()}", flush=True)
        super().destroy_node()


def make():
    # the threads rclpy.init started (its signal thread) run only when this process's CPU is idle
    cpu = min(os.sched_getaffinity(0))
    for tid in os.listdir("/proc/self/task"):
        os.sched_setaffinity(int(tid), {cpu})
        if tid not in threads_before:
            os.sched_setscheduler(int(tid), os.SCHED_IDLE, os.sched_param(0))
    return Busy()


def main_loop(node, running):
    print("busy", flush=True)
    while running():
        busy(0.05)
    return 0


code = run_node(
    make,
    [],
    before_init=lambda: threads_before.update(os.listdir("/proc/self/task")),
    executor=Executor,
    main_loop=main_loop if mode == "main_loop" else None,
)
print(f"exit {code}", flush=True)
sys.exit(code)
"""


def _ctrl_c(tmp_path, child: str, ready: str, *args: str) -> tuple[int, str]:
    """Run `child` (Python source) with `args`, Ctrl-C it once it printed `ready`; its exit code and output."""
    import os
    import signal
    import subprocess
    import sys

    from lerobot_core.ros.testing import wait_until

    script = tmp_path / "child.py"
    script.write_text(child)
    log = tmp_path / "out.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, str(script), *args], stdout=out, stderr=subprocess.STDOUT)
        try:
            assert wait_until(lambda: ready in log.read_text(), 30), log.read_text()
            os.kill(proc.pid, signal.SIGINT)
            proc.wait(30)
        finally:
            proc.kill()
    return proc.returncode, log.read_text()


@pytest.mark.parametrize("mode", ["spin", "main_loop"])
def test_ctrl_c_tears_nothing_down_before_rclpys_signal_thread_is_done(mode, tmp_path):
    """rclpy's signal thread triggers every executor's signal guard condition, then shuts the context
    down; a busy main thread gets its KeyboardInterrupt at once. Shutting the executor down (it destroys
    that guard condition and rclpy's list of them) or destroying the node before the context is down
    freed what the signal thread was still using: the scripted expert died of SIGSEGV in destroy_node
    at shutdown once in four runs of record_sim_so101. Here that thread is made slow (idle priority,
    the main thread busy on the same CPU), so the old order is seen every time."""
    code, text = _ctrl_c(tmp_path, _SIGNAL_CHILD, "busy", mode)
    assert code == 0, text
    assert "executor shutdown: context ok=False" in text, text
    assert "destroy_node: context ok=False" in text, text
    assert "context ok=True" not in text, text


_SAFE_STATE_LOG_CHILD = r"""
import sys
from rclpy.node import Node
from lerobot_core.ros.node import run_node


def make():
    node = Node("safe_state_logger")
    node.create_timer(0.05, lambda: print("spinning", flush=True))
    return node


def safe_state(node):
    node.get_logger().info("shutdown: hold")
    node.get_logger().warning("shutdown: a second line")


sys.exit(run_node(make, [], on_exit=safe_state))
"""


def test_the_safe_state_logs_after_ctrl_c_without_rosout_errors(tmp_path):
    """After Ctrl-C the context is down (rclpy's signal thread) while the safe state still logs: its
    lines reach the console, and none fails on the gone /rosout publisher ("Failed to publish log
    message to rosout: publisher's context is invalid", seen from follower_bus's "shutdown: hold")."""
    code, text = _ctrl_c(tmp_path, _SAFE_STATE_LOG_CHILD, "spinning")
    assert code == 0, text
    assert "[safe_state_logger]: shutdown: hold" in text, text
    assert "[safe_state_logger]: shutdown: a second line" in text, text
    assert "rosout" not in text, text


_HANGING_SAFE_STATE_CHILD = r"""
import sys, time
from rclpy.node import Node
from lerobot_core.ros.node import run_node


def make():
    node = Node("hanging")
    node.create_timer(0.05, lambda: print("spinning", flush=True))
    return node


def stuck_in_the_safe_state(node):
    print("safe state", flush=True)
    time.sleep(60)


sys.exit(run_node(make, [], on_exit=stuck_in_the_safe_state))
"""


def test_a_sigterm_to_a_node_that_does_not_stop_prints_where_it_hangs(tmp_path):
    """lerobot-launch sends SIGTERM (then SIGKILL) to a node still running 10 s after its SIGINT
    ("node 'teleop' did not stop in time"); the node now prints every thread's stack on it, so the log
    says where it hung. Before, rclpy's handler took that SIGTERM and nothing was printed."""
    import os
    import signal
    import subprocess
    import sys

    from lerobot_core.ros.testing import wait_until

    script = tmp_path / "child.py"
    script.write_text(_HANGING_SAFE_STATE_CHILD)
    log = tmp_path / "out.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, str(script)], stdout=out, stderr=subprocess.STDOUT)
        try:
            assert wait_until(lambda: "spinning" in log.read_text(), 30), log.read_text()
            os.kill(proc.pid, signal.SIGINT)
            assert wait_until(lambda: "safe state" in log.read_text(), 30), log.read_text()
            os.kill(proc.pid, signal.SIGTERM)
            assert wait_until(lambda: "in stuck_in_the_safe_state" in log.read_text(), 10), log.read_text()
        finally:
            proc.kill()
            proc.wait(10)


_LATE_CTRL_C_CHILD = r"""
import os, signal, sys, time
from rclpy.node import Node
from lerobot_core.ros.node import run_node


class EndsOnItsOwn(Node):
    signalled = False

    def destroy_node(self):
        # lerobot-launch's SIGINT reaches a node that is ending by itself, while it destroys itself
        if not self.signalled:
            self.signalled = True
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.5)
        print("destroying", flush=True)
        super().destroy_node()


sys.exit(run_node(lambda: EndsOnItsOwn("ends_on_its_own"), [], spin=lambda node: None))
"""


def test_a_ctrl_c_while_a_node_destroys_itself_is_no_traceback(tmp_path):
    """joint_state_tf (no tf2_msgs) ends at once; under load lerobot-launch's SIGINT came while it
    destroyed its node and a KeyboardInterrupt traceback ended the teleop demo's log (2 of 45 runs)."""
    import subprocess
    import sys

    script = tmp_path / "child.py"
    script.write_text(_LATE_CTRL_C_CHILD)
    res = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out
    assert "destroying" in out


_ORPHAN_NODE_CHILD = r"""
import sys, threading, time
from rclpy.node import Node
from lerobot_core.ros.node import run_node


def make():
    node = Node("orphan")
    # a thread that never ends: the interpreter's own exit waits for it for ever (a hang after teardown)
    threading.Thread(target=time.sleep, args=(3600,), name="never-ends").start()
    node.create_timer(0.05, lambda: print("spinning", flush=True))
    return node


def safe_state(node):
    print("safe state", flush=True)


sys.exit(run_node(make, [], on_exit=safe_state))
"""

_LAUNCHER = r"""
import subprocess, sys, time
from lerobot_core.ament import die_with_parent

with open(sys.argv[2], "wb") as out:
    node = subprocess.Popen(
        [sys.executable, sys.argv[1]], stdout=out, stderr=subprocess.STDOUT,
        start_new_session=True, preexec_fn=die_with_parent,
    )
print(node.pid, flush=True)
time.sleep(3600)
"""


def test_a_node_whose_launcher_is_killed_ends_after_its_safe_state_even_if_its_exit_hangs(tmp_path):
    """A launcher SIGKILLed: die_with_parent's SIGINT stops the node, and the orphan ends its process
    within ORPHAN_TEARDOWN_S of its safe state, although a thread that never ends would hold the
    interpreter's exit for ever and no launcher is left to send SIGTERM (CI: the skeleton's monitor
    outlived its killed launcher). Fails before: the node ran on."""
    import subprocess
    import sys

    import psutil

    from lerobot_core.ros.node import ORPHAN_TEARDOWN_S
    from lerobot_core.ros.testing import wait_until

    node_script, launcher = tmp_path / "node.py", tmp_path / "launcher.py"
    node_script.write_text(_ORPHAN_NODE_CHILD)
    launcher.write_text(_LAUNCHER)
    log = tmp_path / "node.log"
    proc = subprocess.Popen(
        [sys.executable, str(launcher), str(node_script), str(log)], stdout=subprocess.PIPE, text=True
    )
    node = None
    try:
        node = psutil.Process(int(proc.stdout.readline()))
        assert wait_until(lambda: "spinning" in log.read_text(), 30), log.read_text()
        proc.kill()  # SIGKILL: the launcher forwards nothing
        proc.wait(10)
        assert wait_until(lambda: "safe state" in log.read_text(), 30), log.read_text()
        node.wait(ORPHAN_TEARDOWN_S + 10)  # psutil.TimeoutExpired: the orphan ran on
    finally:
        proc.kill()
        if node is not None and node.is_running():
            node.kill()
    assert "Traceback" not in log.read_text(), log.read_text()
