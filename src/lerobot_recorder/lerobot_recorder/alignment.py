"""Moved to lerobot_core.alignment; this re-export keeps the old import path working."""

from lerobot_core.alignment import *  # noqa: F403
