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
