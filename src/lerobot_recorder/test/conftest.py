"""Shared by the tests that load our datasets with the real LeRobot 0.4.4 (its side venv)."""

import os
from pathlib import Path

import pytest

REF_VENV = Path(os.environ.get("LEROBOT_REF_VENV", "/work/lerobot-ref-venv"))


@pytest.fixture
def lerobot_python() -> Path:
    """The LeRobot 0.4.4 side venv's python; a test failure (not a skip) saying why when it is missing:
    scripts/test.sh builds it and passes on why it could not (LEROBOT_REF_VENV_ERROR)."""
    error = os.environ.get("LEROBOT_REF_VENV_ERROR")
    if error:
        pytest.fail(f"the LeRobot 0.4.4 side venv could not be built: {error}")
    if not (REF_VENV / ".ready").exists():
        pytest.fail(
            f"the LeRobot 0.4.4 side venv {REF_VENV} is not built: run `bash scripts/make-lerobot-ref-venv.sh "
            f"{REF_VENV}` (scripts/test.sh does this itself) or point LEROBOT_REF_VENV at one"
        )
    return REF_VENV / "bin" / "python"
