"""The test checkpoints and their LeRobot references are lerobot_runtime's test fixtures; the node's tests
load their module (fixtures/checkpoints.py) from that package's share folder."""

import importlib.util

from lerobot_core.ament import share_path

_spec = importlib.util.spec_from_file_location(
    "lerobot_runtime_checkpoints", share_path("lerobot_runtime") / "test" / "fixtures" / "checkpoints.py"
)
_checkpoints = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_checkpoints)

ACT_SMALL = _checkpoints.ACT_SMALL
ACT_ENV_STATE = _checkpoints.ACT_ENV_STATE
DIFFUSION_SMALL = _checkpoints.DIFFUSION_SMALL
observation_step = _checkpoints.observation_step
act_reference = _checkpoints.act_reference
act_observations = _checkpoints.act_observations
diffusion_reference = _checkpoints.diffusion_reference
