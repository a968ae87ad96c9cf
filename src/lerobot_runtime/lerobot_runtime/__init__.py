"""ROS-free policy runtime: load LeRobot checkpoints, predict action chunks, schedule actions."""

from .errors import (
    DeviceError,
    NonFiniteActionError,
    ObservationError,
    PolicyLoadError,
    UnsupportedPolicyError,
)
from .policy import PolicyConfig, load_policy, read_policy_config

__all__ = [
    "DeviceError",
    "NonFiniteActionError",
    "ObservationError",
    "PolicyConfig",
    "PolicyLoadError",
    "UnsupportedPolicyError",
    "load_policy",
    "read_policy_config",
]
