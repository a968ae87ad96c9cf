"""The contracts shipped with lerobot_ros, found by name.

They live in one folder, ``lerobot_core/config/contracts/`` (package data of lerobot_core, the bottom of
the package graph), so every user finds the same file under the same name without ament or colcon: the
recorder and policy nodes' ``contract`` parameter, the lerobot-launch profiles' ``contract:=NAME``, the
LeRobot plugins' presets, bag import and export, the replay tool. :meth:`Contract.load` resolves a name
here; a path (an existing file, or anything with a folder part) is taken as it is.
"""

from __future__ import annotations

import os
from pathlib import Path

# beside the package's modules, as config/*.xml (lerobot_core.dds_transport): colcon's symlink install,
# an editable pip install in a LeRobot venv and a wheel all keep it there
CONTRACTS_DIR = Path(os.path.realpath(__file__)).parents[1] / "config" / "contracts"

_SUFFIXES = (".yaml", ".yml")


def shipped_contracts() -> list[str]:
    """Names of the shipped contracts (file names without .yaml), sorted."""
    return sorted(p.stem for p in CONTRACTS_DIR.glob("*.yaml"))


def is_contract_name(value: str | os.PathLike) -> bool:
    """True when ``value`` is read as a name (no folder part, not an existing file) rather than a path."""
    text = os.fspath(value)
    return bool(text) and os.sep not in text and "/" not in text and not os.path.exists(text)


def find_contract(value: str | os.PathLike) -> str:
    """The file a contract argument means: ``value`` itself when it is a path, else the shipped
    contract of that name (``so101_one_camera`` or ``so101_one_camera.yaml``); ``value`` unchanged when
    no contract has that name, so that loading it fails naming what the user gave."""
    text = os.fspath(value)
    if not is_contract_name(text):
        return text
    names = [text] if text.endswith(_SUFFIXES) else [text + ".yaml", text]
    for name in names:
        path = CONTRACTS_DIR / name
        if path.is_file():
            return str(path)
    return text


__all__ = ["CONTRACTS_DIR", "find_contract", "is_contract_name", "shipped_contracts"]
