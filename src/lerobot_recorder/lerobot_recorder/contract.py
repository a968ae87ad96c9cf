"""Moved to lerobot_core.contract; this re-export keeps the old import path working."""

from lerobot_core.contract import *  # noqa: F403
