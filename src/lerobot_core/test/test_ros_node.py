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
