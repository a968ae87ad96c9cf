"""How a node process of the stack ends: quietly when it is asked to stop, loudly on a real error."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import rclpy
from rclpy.executors import Executor, ExternalShutdownException
from rclpy.utilities import get_default_context


@contextmanager
def until_shutdown(context=None) -> Iterator[None]:
    """Run the body (a spin) until Ctrl-C, SIGTERM or ``rclpy.shutdown``; real errors still propagate.

    rclpy's signal handler shuts the context down the moment the signal arrives, so a take or wait
    the executor is in can fail with some other error (e.g. a RuntimeError from the bindings) before
    the KeyboardInterrupt is raised. An error raised once the context is down is that race: the
    process was stopping, and it must still leave through its safe state with exit code 0.
    """
    try:
        yield
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception:
        if (context if context is not None else get_default_context()).ok():
            raise


def spin_until_shutdown(
    node, before_destroy: Callable[[], None] | None = None, executor: Executor | None = None
) -> int:
    """Spin `node` (on `executor` when given, the node already added) until shutdown; then run
    `before_destroy` (the node's safe state), destroy the node and shut rclpy down. Returns 0."""
    try:
        with until_shutdown():
            if executor is None:
                rclpy.spin(node)
            else:
                executor.spin()
    finally:
        if before_destroy is not None:
            before_destroy()
        node.destroy_node()
        rclpy.try_shutdown()
    return 0
