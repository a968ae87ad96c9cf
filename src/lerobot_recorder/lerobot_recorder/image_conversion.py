"""Moved to lerobot_core.image_conversion; this re-export keeps the old import path working."""

from lerobot_core.image_conversion import *  # noqa: F403
