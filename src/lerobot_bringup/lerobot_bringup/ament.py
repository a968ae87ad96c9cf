"""Moved to :mod:`lerobot_core.ament`; this path stays for code written against it."""

from lerobot_core.ament import die_with_parent, find_executable, prefixes

__all__ = ["die_with_parent", "find_executable", "prefixes"]
