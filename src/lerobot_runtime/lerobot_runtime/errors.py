"""Errors raised by the policy runtime; each names the file or input it is about."""


class PolicyLoadError(RuntimeError):
    """A checkpoint directory cannot be loaded (missing or corrupt file, unsupported content)."""


class DeviceError(PolicyLoadError):
    """The torch device asked for is not usable here (CUDA on a CPU build of torch, a malformed name)."""


class UnsupportedPolicyError(PolicyLoadError):
    """The checkpoint's policy type has no native implementation and lerobot is not importable."""


class ObservationError(ValueError):
    """An observation batch does not match the policy's input features (missing key, wrong shape)."""


class NonFiniteActionError(RuntimeError):
    """The policy produced NaN or inf actions; they are never returned or sent (the policy's fault)."""
