"""The shipped contracts: one folder (lerobot_core/config/contracts), each found by name and loadable,
a path always taken as a path, an unknown name refused naming the shipped ones. Plain pytest, no ROS."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

import lerobot_core
from lerobot_core.contract import CONTRACTS_DIR, Contract, ContractError, find_contract, shipped_contracts

NAMES = shipped_contracts()


def test_the_shipped_contracts_are_the_yaml_files_of_one_folder():
    assert Path(lerobot_core.__file__).resolve().parent / "config" / "contracts" == CONTRACTS_DIR
    assert sorted(p.stem for p in CONTRACTS_DIR.iterdir() if p.is_file()) == NAMES
    assert {"so101_one_camera", "so101_sim_contract", "so101_sim_robot"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_every_shipped_contract_loads_by_name(name):
    path = str(CONTRACTS_DIR / f"{name}.yaml")
    assert find_contract(name) == path
    assert find_contract(f"{name}.yaml") == path
    contract = Contract.load(name)
    assert contract.source == path
    assert contract.fps > 0 and "observation.state" in contract.vectors and "action" in contract.vectors
    assert contract.stream_specs()  # one alignment stream per topic
    if contract.resolved:  # else image sizes come from the first messages
        assert set(contract.features()) >= {"observation.state", "action"}


def test_no_two_shipped_contracts_are_the_same_contract():
    parsed = {name: Contract.load(name) for name in NAMES}
    for i, a in enumerate(NAMES):
        for b in NAMES[i + 1 :]:
            other = replace(parsed[b], source=parsed[a].source)
            assert other != parsed[a], f"{a} and {b} are the same contract: keep one"


def test_a_path_is_taken_as_a_path(tmp_path, monkeypatch):
    # a file of the user's in the working directory wins over a shipped contract of the same name
    monkeypatch.chdir(tmp_path)
    text = (CONTRACTS_DIR / "so101_one_camera.yaml").read_text().replace("fps: 30", "fps: 15")
    Path("so101_one_camera.yaml").write_text(text)
    assert find_contract("so101_one_camera.yaml") == "so101_one_camera.yaml"
    assert Contract.load("so101_one_camera.yaml").fps == 15
    assert Contract.load("so101_one_camera").fps == 30  # no such file here: the shipped one
    # anything with a folder part is a path, even when it does not exist
    assert find_contract("configs/so101_one_camera") == "configs/so101_one_camera"
    with pytest.raises(ContractError) as err:
        Contract.load("configs/so101_one_camera")
    assert str(err.value).startswith("configs/so101_one_camera: cannot read the contract")
    assert "shipped" not in str(err.value)


def test_an_unknown_name_is_refused_naming_the_shipped_ones(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert find_contract("so101_one_camra") == "so101_one_camra"
    with pytest.raises(ContractError) as err:
        Contract.load("so101_one_camra")
    message = str(err.value)
    assert message.startswith("so101_one_camra: cannot read the contract"), message
    assert "nor a shipped contract" in message and ", ".join(NAMES) in message, message


def test_found_without_ament_or_colcon(tmp_path):
    """As in a LeRobot venv with lerobot_core pip-installed (the plugins' presets): no ROS environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AMENT", "COLCON", "ROS_"))}
    env["PYTHONPATH"] = str(Path(lerobot_core.__file__).resolve().parents[1])
    code = "from lerobot_core.contract import Contract; print(Contract.load('so101_sim_robot').source)"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(CONTRACTS_DIR / "so101_sim_robot.yaml")
