"""lerobot_dataset.episode_actions (what the replay reads) against DatasetReader itself and the
contract's unit conversion: same actions, back to radians from every unit a contract can record."""

from pathlib import Path

import numpy as np
import pytest

from lerobot_core.contract import Contract
from lerobot_dataset import DatasetError, DatasetReader, DatasetWriter
from lerobot_dataset.episode_actions import load_episode_actions, to_radians

LEROBOT_FIXTURE = Path(__file__).resolve().parent / "fixtures" / "lerobot_v30_small"
JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]


def test_reads_every_episode_of_a_lerobot_dataset_like_the_reader():
    reader = DatasetReader(LEROBOT_FIXTURE)
    for ep in range(reader.num_episodes):
        got = load_episode_actions(LEROBOT_FIXTURE, ep)
        cols = reader.episode(ep)
        np.testing.assert_array_equal(got.values, cols["action"].astype(np.float64))
        np.testing.assert_allclose(got.timestamps, cols["timestamp"])
        assert got.names == tuple(JOINTS)
        assert got.fps == reader.fps and got.episode_index == ep
    state = load_episode_actions(LEROBOT_FIXTURE, 1, feature="observation.state")
    np.testing.assert_array_equal(state.values, reader.episode(1)["observation.state"])


@pytest.mark.parametrize(
    "root, episode, feature, message",
    [
        ("missing", 0, "action", "does not exist"),
        ("empty", 0, "action", "not a LeRobot dataset \\(meta/info.json is missing\\)"),
        ("fixture", 3, "action", "episode 3 is not in .* \\(it has episodes 0..2\\)"),
        ("fixture", -1, "action", "episode -1: episode indices start at 0"),
        (
            "fixture",
            0,
            "observation.effort",
            "no feature 'observation.effort'.*'action', 'observation.state'",
        ),
    ],
)
def test_errors_name_the_dataset_episode_or_feature(tmp_path, root, episode, feature, message):
    (tmp_path / "empty").mkdir()
    path = {"missing": tmp_path / "missing", "empty": tmp_path / "empty", "fixture": LEROBOT_FIXTURE}[root]
    with pytest.raises(DatasetError, match=message):
        load_episode_actions(path, episode, feature)


def _contract(units: str) -> Contract:
    data = {
        "fps": 10,
        "task": "t",
        "units": units,
        "features": {"action": {"topic": "/leader/joint_states", "joints": JOINTS}},
    }
    if units == "normalized":
        data["calibration"] = {
            j: {"range": [-1.5 - i * 0.1, 1.2 + i * 0.2], "mode": "0_100" if j == "gripper" else "m100_100"}
            for i, j in enumerate(JOINTS)
        }
    return Contract.from_dict(data)


@pytest.mark.parametrize("units", ["radians", "degrees", "normalized"])
def test_a_recorded_episode_goes_back_to_radians(tmp_path, units):
    """Radians through the contract into the dataset (as the recorder stores them), read back
    and converted with the contract's own (scale, offset): the radians come back."""
    contract = _contract(units)
    scale, offset = contract.unit_conversion("action")
    rng = np.random.default_rng(3)
    radians = rng.uniform(-1.2, 1.1, size=(12, len(JOINTS)))
    writer = DatasetWriter.create(
        tmp_path / "ds",
        fps=10,
        features={"action": {"dtype": "float32", "shape": (6,), "names": [f"{j}.pos" for j in JOINTS]}},
    )
    for _ in range(2):  # the second episode is the one replayed: its rows start mid-file
        for row in radians:
            writer.add_frame({"action": (row * scale + offset).astype(np.float32)}, task="t")
        writer.save_episode()
    writer.finalize()
    episode = load_episode_actions(tmp_path / "ds", 1)
    assert episode.num_frames == 12
    back = to_radians(episode.values, scale=scale, offset=offset)
    np.testing.assert_allclose(back, radians, atol=2e-5)  # float32 storage
    if units != "normalized":
        np.testing.assert_allclose(to_radians(episode.values, units), back, atol=1e-12)
    else:
        with pytest.raises(DatasetError, match="normalized.*calibration"):
            to_radians(episode.values, units)
