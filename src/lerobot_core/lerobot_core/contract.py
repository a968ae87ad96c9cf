"""TEMPORARY shim until the contract moves here (issue 11): re-exports lerobot_recorder.contract."""

from lerobot_recorder.contract import *  # noqa: F403
from lerobot_recorder.contract import Contract, ContractError, msgtype_of, normalize_msgtype  # noqa: F401
