"""Moved to :mod:`lerobot_core.ros.testing`; this path stays for code written against it."""

from lerobot_core.ros.testing import MessageCollector, RosProcess, wait_for_messages, wait_until

__all__ = ["MessageCollector", "RosProcess", "wait_for_messages", "wait_until"]
