"""Moved to :mod:`lerobot_core.safety` (the LeRobot plugins use it too); re-exported here."""

from lerobot_core.safety import SafetyFilter, SafetyLimits, SafetyResult

__all__ = ["SafetyFilter", "SafetyLimits", "SafetyResult"]
