"""lerobot-ros-dataset-viz: the .rrd it saves loads back with rerun's own dataframe loader with the
episode's values, and the PNG report has the plots and contact sheets, of the right size, not blank."""

import numpy as np
import pytest

from lerobot_dataset import DatasetWriter
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
    assert plot.shape == (28 + 26 + 3 * 200, 2 * 420, 3)  # title + legend + 3 rows of 2 joint panels
    orange = np.all(np.abs(plot.astype(int) - (14, 127, 255)) < 40, axis=2)
    blue = np.all(np.abs(plot.astype(int) - (180, 119, 31)) < 40, axis=2)
    assert orange.sum() > 1000 and blue.sum() > 1000  # both curves drawn in every panel
    flags = cv2.imread(str(tmp_path / "rep" / "flags.png"))
    assert flags.shape == (28 + 200, 2 * 420, 3) and (flags < 250).mean() > 0.01
    sheet = cv2.imread(str(tmp_path / "rep" / "contact_sheet_front.png"))
    # 12 of the 20 frames, 4 a row; 64 px frames enlarged to 160 x 120, a 20 px label, 2 px border
    assert sheet.shape == (28 + 3 * (120 + 20 + 4), 4 * (160 + 4), 3)
    sheet = sheet[28:]  # below the title
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


# ---------------------------------------------------------------- the viewer: no display, loopback
def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _viz(args, env_changes, timeout=60):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "WAYLAND_SOCKET")}
    env.update(env_changes, PYTHONPATH=os.pathsep.join(sys.path))
    cmd = [sys.executable, "-m", "lerobot_recorder.dataset_viz", *args]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)


def test_without_a_display_the_viewer_is_refused_at_once_with_what_to_do(dataset):
    import time

    t0 = time.monotonic()
    res = _viz([str(dataset), "--episode", "1"], {})
    took = time.monotonic() - t0
    assert res.returncode == 2, res.stderr
    assert "no display here" in res.stderr and "--save" in res.stderr and "--report" in res.stderr
    assert "Traceback" not in res.stderr and took < 10  # was: 11 s, then a gRPC traceback
    assert "Listening" not in res.stderr  # no viewer was started


@pytest.mark.parametrize("bind", [None, "127.0.0.2"])
def test_the_viewer_listens_on_loopback_unless_asked(dataset, bind):
    """DISPLAY names no X server: the real rerun viewer starts its gRPC server (and logs where), then
    cannot open its window; the tool reports that in one line of its own, without a traceback."""
    port = _free_port()
    args = [str(dataset), "--episode", "1", "--port", str(port)] + (["--bind", bind] if bind else [])
    res = _viz(args, {"DISPLAY": ":99"})
    want = bind or "127.0.0.1"
    assert f"Listening for gRPC connections on {want}:{port}" in res.stderr, res.stderr
    assert "0.0.0.0" not in res.stderr
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert "lerobot-ros-dataset-viz: error: the rerun viewer" in res.stderr


# ---------------------------------------------------------------- the report: titles, units, marks
@pytest.fixture(scope="module")
def hil_dataset(tmp_path_factory):
    """A HIL-like episode: joints in radians, the cube's pose, a human-driven stretch (frames 30-49) and
    a sim reset at frame 70 (the arm back at its start pose in one frame)."""
    root = tmp_path_factory.mktemp("hil") / "ds"
    cube = ["cube.x", "cube.y", "cube.z", "cube.qw", "cube.qx", "cube.qy", "cube.qz"]
    w = DatasetWriter.create(
        root,
        fps=30,
        robot_type="so101_follower",
        features={
            "observation.state": {"dtype": "float32", "shape": (6,), "names": NAMES, "units": "radians"},
            "action": {"dtype": "float32", "shape": (6,), "names": NAMES, "units": "radians"},
            "observation.environment_state": {
                "dtype": "float32",
                "shape": (7,),
                "names": cube,
                "units": ["metres"] * 3 + ["quaternion"] * 4,
            },
            "complementary_info.is_intervention": {"dtype": "bool", "shape": (1,), "names": None},
        },
    )
    for i in range(120):
        k = i if i < 70 else i - 70
        q = (0.02 * k * np.array([1, -1, 1, 0.5, 0.2, 0.3])).astype(np.float32)
        w.add_frame(
            {
                "observation.state": q,
                "action": q + np.float32(0.02),
                "observation.environment_state": np.array([0.2 + 0.001 * k, 0, 0.02, 1, 0, 0, 0], np.float32),
                "complementary_info.is_intervention": np.array([30 <= i < 50]),
            },
            task="pick",
        )
    w.save_episode()
    w.finalize()
    return root


def test_report_names_units_resets_and_interventions(hil_dataset, tmp_path):
    import cv2

    from lerobot_dataset import DatasetReader
    from lerobot_recorder.dataset_report import SHADE, _labels, reset_frames

    reader = DatasetReader(hil_dataset)
    cols = reader.episode(0)
    assert reset_frames(reader, cols) == [70]  # the jump; steady motion at 0.6 rad/s is no reset
    assert _labels(reader, "observation.environment_state", 7)[:4] == [
        "cube.x [m]",
        "cube.y [m]",
        "cube.z [m]",
        "cube.qw [quat]",
    ]
    assert _labels(reader, "observation.state", 6)[0] == "shoulder_pan.pos [rad]"
    assert main([str(hil_dataset), "--episode", "0", "--report", str(tmp_path)]) == 0
    plot = cv2.imread(str(tmp_path / "state_action.png"))
    first = plot[28 + 26 : 28 + 26 + 200, :420]  # the first joint's panel
    tinted = np.all(np.abs(first.astype(int) - SHADE) < 8, axis=2).any(axis=0)
    columns = np.flatnonzero(tinted)
    # 46 px .. 410 px span 0 .. 119 frames: the shade covers frames 30-49 only
    x_of = lambda i: 46 + i / 119 * (410 - 46)  # noqa: E731
    assert abs(columns.min() - x_of(29.5)) <= 3 and abs(columns.max() - x_of(49.5)) <= 3
    red = np.all(np.abs(first.astype(int) - (40, 40, 214)) < 30, axis=2).sum(axis=0)
    assert abs(int(np.argmax(red)) - x_of(70)) <= 2  # the reset line
    flags = cv2.imread(str(tmp_path / "flags.png"))
    assert flags.shape == (28 + 4 * 200, 840, 3)  # is_intervention + 7 cube values: 4 rows


# ---------------------------------------------------------------- damaged data: one line, no traceback
def _load_damage():
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location("damage", Path(__file__).with_name("damage.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


damage = _load_damage()


@pytest.mark.parametrize("case", damage.CASES)
def test_damaged_dataset_is_one_line_of_error(dataset, tmp_path, case):
    bad = damage.damaged_copy(dataset, tmp_path / "bad", case)
    res = _viz([str(bad), "--episode", "1", "--report", str(tmp_path / "rep")], {})
    if case in ("episode_gap", "truncated_mp4") and res.returncode == 0:
        return  # read as far as it goes: the report of what is there (no traceback either way)
    assert res.returncode != 0, res.stderr
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert "Traceback" not in res.stderr and len(lines) == 1, res.stderr
    assert lines[0].startswith("lerobot-ros-dataset-viz: error:")


def test_a_dataset_missing_from_the_cache_gets_the_download_command_with_its_revision(tmp_path):
    """LeRobot reads datasets at the v3.0 tag: a download of main would not be found there."""
    pytest.importorskip("huggingface_hub")
    (tmp_path / "hub").mkdir()
    res = _viz(
        ["someone/missing", "--episode", "0", "--report", str(tmp_path / "r")],
        {"HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"},
    )
    assert res.returncode == 2, res.stderr
    assert "`hf download someone/missing --repo-type dataset --revision v3.0`" in res.stderr, res.stderr
