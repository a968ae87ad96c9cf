"""Moved to :mod:`lerobot_core.ros.node`; this path stays for code written against it."""

from lerobot_core.ros.node import spin_until_shutdown, until_shutdown

__all__ = ["spin_until_shutdown", "until_shutdown"]
