"""lerobot-ros-dataset-viz: the .rrd it saves loads back with rerun's own dataframe loader with the
episode's values, and the PNG report has the plots and contact sheets, of the right size, not blank."""

import numpy as np
import pytest

from lerobot_recorder.dataset import DatasetWriter
from lerobot_recorder.dataset_viz import main

NAMES = [
    f"{j}.pos" for j in ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
]
H, W, FPS = 48, 64, 10
LENGTHS = (5, 20)


def colour(ep, i):
    return (20 + 10 * i, 200 - 60 * ep, 90)


def state(ep, i):
    return np.array([np.sin(0.3 * i + j) + ep for j in range(6)], dtype=np.float32)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("viz") / "ds"
    w = DatasetWriter.create(
        root,
        fps=FPS,
        features={
            "observation.state": {"dtype": "float32", "shape": (6,), "names": NAMES},
            "action": {"dtype": "float32", "shape": (6,), "names": NAMES},
            "observation.images.front": {"dtype": "video", "shape": (H, W, 3), "names": None},
            "complementary_info.discrete_penalty": {"dtype": "float32", "shape": (1,), "names": None},
            "next.done": {"dtype": "bool", "shape": (1,), "names": None},
        },
        vcodec="libx264",
    )
    for ep, n in enumerate(LENGTHS):
        for i in range(n):
            w.add_frame(
                {
                    "observation.state": state(ep, i),
                    "action": state(ep, i + 2),
                    "observation.images.front": np.full((H, W, 3), colour(ep, i), np.uint8),
                    "complementary_info.discrete_penalty": np.array(
                        [-1.0 if i % 7 == 3 else 0.0], np.float32
                    ),
                    "next.done": np.array([i == n - 1]),
                },
                task="wave",
            )
        w.save_episode()
    w.finalize()
    return root


def test_rrd_holds_the_episode_and_loads_back(dataset, tmp_path):
    import rerun.dataframe as rdf

    rrd = tmp_path / "out" / "ep1.rrd"
    assert main([str(dataset), "--episode", "1", "--save", str(rrd)]) == 0
    recording = rdf.load_recording(str(rrd))
    columns = {f"{c.entity_path}:{c.component}" for c in recording.schema().component_columns()}
    for want in (
        "/state/shoulder_pan:Scalars:scalars",
        "/action/gripper:Scalars:scalars",
        "/flags/complementary_info.discrete_penalty:Scalars:scalars",
        "/flags/next.done:Scalars:scalars",
        "/cameras/front:EncodedImage:blob",
        "/task:TextDocument:text",
    ):
        assert want in columns, sorted(columns)
    table = recording.view(index="frame_index", contents="/**").select().read_all()
    assert table.num_rows == LENGTHS[1]
    assert table.column("frame_index").to_pylist()[:3] == [0, 1, 2]
    pan = np.array([v[0] for v in table.column("/action/shoulder_pan:Scalars:scalars").to_pylist()])
    np.testing.assert_allclose(pan, [state(1, i + 2)[0] for i in range(LENGTHS[1])], rtol=1e-6)
    penalty = [
        v[0] for v in table.column("/flags/complementary_info.discrete_penalty:Scalars:scalars").to_pylist()
    ]
    assert penalty[3] == -1.0 and penalty[4] == 0.0
    assert [v[0] for v in table.column("/flags/next.done:Scalars:scalars").to_pylist()][-2:] == [0.0, 1.0]
    blobs = table.column("/cameras/front:EncodedImage:blob").to_pylist()
    assert all(b is not None for b in blobs)


def test_report_pngs_have_the_right_size_and_content(dataset, tmp_path):
    import cv2

    assert main([str(dataset), "--episode", "1", "--report", str(tmp_path / "rep")]) == 0
    files = sorted(p.name for p in (tmp_path / "rep").iterdir())
    assert files == ["contact_sheet_front.png", "flags.png", "state_action.png"]
    plot = cv2.imread(str(tmp_path / "rep" / "state_action.png"))
    assert plot.shape == (26 + 3 * 200, 2 * 420, 3)  # legend + 3 rows of 2 joint panels
    orange = np.all(np.abs(plot.astype(int) - (14, 127, 255)) < 40, axis=2)
    blue = np.all(np.abs(plot.astype(int) - (180, 119, 31)) < 40, axis=2)
    assert orange.sum() > 1000 and blue.sum() > 1000  # both curves drawn in every panel
    flags = cv2.imread(str(tmp_path / "rep" / "flags.png"))
    assert flags.shape == (200, 2 * 420, 3) and (flags < 250).mean() > 0.01
    sheet = cv2.imread(str(tmp_path / "rep" / "contact_sheet_front.png"))
    # 12 of the 20 frames, 4 a row; 64 px frames enlarged to 160 x 120, a 20 px label, 2 px border
    assert sheet.shape == (3 * (120 + 20 + 4), 4 * (160 + 4), 3)
    first = sheet[2 + 20 + 60, 2 + 80][::-1]  # centre of the first tile, as RGB
    assert np.abs(first.astype(int) - colour(1, 0)).max() < 12
    last = sheet[2 * 144 + 2 + 20 + 60, 3 * 164 + 2 + 80][::-1]  # the last tile is the last frame
    assert np.abs(last.astype(int) - colour(1, LENGTHS[1] - 1)).max() < 12


def test_bad_episode_or_dataset_is_an_error_naming_it(dataset, tmp_path, capsys):
    assert main([str(dataset), "--episode", "2", "--report", str(tmp_path / "r")]) == 2
    assert "--episode 2:" in capsys.readouterr().err and not (tmp_path / "r").exists()
    assert main([str(tmp_path / "nope"), "--episode", "0", "--save", str(tmp_path / "x.rrd")]) == 2
    assert f"DATASET '{tmp_path / 'nope'}'" in capsys.readouterr().err


def test_a_hub_dataset_id_is_read_from_the_cache(dataset, tmp_path):
    """`org/name` at LeRobot's v3.0 tag in the Hugging Face cache (HF_HUB_OFFLINE=1, no network)."""
    import os
    import shutil
    import subprocess
    import sys

    pytest.importorskip("huggingface_hub")
    repo = tmp_path / "hub" / "datasets--someone--waves"
    commit = "89abcdef0123456789abcdef0123456789abcdef"
    shutil.copytree(dataset, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "v3.0").write_text(commit)
    env = dict(
        os.environ,
        HF_HUB_CACHE=str(tmp_path / "hub"),
        HF_HUB_OFFLINE="1",
        PYTHONPATH=os.pathsep.join(sys.path),
    )
    cmd = [sys.executable, "-m", "lerobot_recorder.dataset_viz", "someone/waves", "--episode", "0"]
    res = subprocess.run(
        [*cmd, "--report", str(tmp_path / "rep")], capture_output=True, text=True, env=env, timeout=120
    )
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "rep" / "state_action.png").is_file()
    res = subprocess.run(
        [*cmd[:3], "someone/other", *cmd[4:], "--report", "x"], capture_output=True, text=True, env=env
    )
    assert res.returncode == 2 and "'someone/other' is not a local folder" in res.stderr
