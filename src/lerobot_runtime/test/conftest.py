"""The runtime's tests take their checkpoints from fixtures/checkpoints.py (its names and fixtures)."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "lerobot_runtime_checkpoints", Path(__file__).resolve().parent / "fixtures" / "checkpoints.py"
)
_checkpoints = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_checkpoints)
globals().update({k: v for k, v in vars(_checkpoints).items() if not k.startswith("_")})
