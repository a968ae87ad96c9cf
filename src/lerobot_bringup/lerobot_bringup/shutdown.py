"""How a node process of the stack ends: quietly when it is asked to stop, loudly on a real error."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rclpy.executors import ExternalShutdownException
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
