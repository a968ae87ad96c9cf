"""The one way the driver nodes run: spin until Ctrl-C / external shutdown, then clean up."""

from __future__ import annotations

from collections.abc import Callable

import rclpy

from lerobot_bringup.shutdown import until_shutdown


def spin_until_shutdown(node, before_destroy: Callable[[], None] | None = None) -> int:
    """Spin `node`; on exit run `before_destroy` (the node's safe state), destroy it, shut rclpy down."""
    try:
        with until_shutdown():
            rclpy.spin(node)
    finally:
        if before_destroy is not None:
            before_destroy()
        node.destroy_node()
        rclpy.try_shutdown()
    return 0
