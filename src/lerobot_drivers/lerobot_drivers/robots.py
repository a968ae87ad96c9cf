"""Moved to lerobot_core.robots; this re-export keeps the old import path working."""

from lerobot_core.robots import *  # noqa: F403
