"""Moved to lerobot_core.ament; this re-export keeps the old import path working."""

from lerobot_core.ament import die_with_parent, find_executable, prefixes  # noqa: F401
