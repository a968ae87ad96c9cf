"""add_constant_features: demonstrations without the HIL extras, marked, then HIL episodes resumed into them;
keep_frames: only the frames the human drove, each run of them an episode (HG-DAgger's training data).

This is the data step of a DAgger round (scripts/dagger_round.py): the copy must take a resume with the
HIL features, and the combined dataset must load in LeRobot (one schema for every meta/episodes file).
"""

import json
import os
import subprocess
from pathlib import Path

import av
import numpy as np
import pyarrow.parquet as pq
import pytest

from lerobot_dataset import DatasetError, DatasetReader, DatasetWriter
from lerobot_dataset.check import check_dataset
from lerobot_dataset.edit import add_constant_features, keep_frames

FLAG = "complementary_info.is_intervention"
MODE = "complementary_info.control_mode"
HUMAN_DROVE = {FLAG: ({"dtype": "bool", "shape": (1,)}, True), MODE: ({"dtype": "int64", "shape": (1,)}, 1)}
NAMES = [
    f"{j}.pos" for j in ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
]
CAM = "observation.images.front"
H, W = 24, 32
CHECK = Path(__file__).resolve().parent / "fixtures" / "check_hil_with_lerobot.py"


def features(extras: bool) -> dict:
    feats = {
        "observation.state": {"dtype": "float32", "shape": (6,), "names": NAMES},
        "action": {"dtype": "float32", "shape": (6,), "names": NAMES},
        CAM: {"dtype": "video", "shape": (H, W, 3), "names": ["height", "width", "channels"]},
    }
    if extras:
        feats |= {k: dict(spec) for k, (spec, _) in HUMAN_DROVE.items()}
    return feats


def frame(ep: int, i: int, flag: bool | None = None) -> dict:
    state = np.full(6, ep * 100 + i, dtype=np.float32)
    f = {"observation.state": state, "action": -state, CAM: np.full((H, W, 3), 10 * i % 250, np.uint8)}
    if flag is not None:
        f[FLAG] = np.array([flag])
        f[MODE] = np.array([int(flag)], dtype=np.int64)
    return f


def demos(root: Path, lengths=(5, 7)) -> Path:
    w = DatasetWriter.create(
        root, fps=10, features=features(False), robot_type="so101_follower", vcodec="libx264"
    )
    for ep, n in enumerate(lengths):
        for i in range(n):
            w.add_frame(frame(ep, i), task="pick the cube")
        w.save_episode()
    w.finalize()
    return root


def test_marked_demos_take_hil_episodes_and_keep_one_metadata_schema(tmp_path):
    src = demos(tmp_path / "demos")
    before = json.loads((src / "meta" / "info.json").read_text())
    combined = tmp_path / "combined"
    add_constant_features(src, combined, HUMAN_DROVE)
    assert json.loads((src / "meta" / "info.json").read_text()) == before  # the demos stay as they were

    flags = [False, False, True, True, True, False]  # policy, then the human, then the policy again
    w = DatasetWriter.resume(combined)
    for i, flag in enumerate(flags):
        w.add_frame(frame(2, i, flag), task="pick the cube")
    w.save_episode()
    w.finalize()

    r = DatasetReader(combined)
    assert r.num_episodes == 3
    per_episode = [np.asarray(r.episode(e)[FLAG]).reshape(-1).tolist() for e in range(3)]
    assert per_episode == [[True] * 5, [True] * 7, flags]
    assert np.asarray(r.episode(1)[MODE]).reshape(-1).tolist() == [1] * 7
    np.testing.assert_array_equal(np.asarray(r.episode(1)["observation.state"])[:, 0], 100 + np.arange(7))

    info = json.loads((combined / "meta" / "info.json").read_text())
    assert info["features"][FLAG] == {"dtype": "bool", "shape": [1], "names": None}
    assert info["total_frames"] == 5 + 7 + 6
    # LeRobot reads every meta/episodes file with one schema: the demos' rows carry the new stats too
    files = sorted((combined / "meta" / "episodes").glob("*/*.parquet"))
    assert len(files) == 2  # the demos' file and the one the resumed writer opened
    columns = [{f.name: str(f.type) for f in pq.read_schema(p)} for p in files]
    assert columns[0] == columns[1] and f"stats/{FLAG}/mean" in columns[0]
    stats = json.loads((combined / "meta" / "stats.json").read_text())
    assert stats[FLAG]["count"] == [18]
    assert stats[FLAG]["mean"][0] == pytest.approx((5 + 7 + 3) / 18)
    assert stats["observation.state"]["count"] == [18]


def test_refused_when_the_feature_exists_or_the_copy_would_overwrite(tmp_path):
    src = demos(tmp_path / "demos", lengths=(3,))
    add_constant_features(src, tmp_path / "marked", HUMAN_DROVE)
    with pytest.raises(DatasetError, match="exists; give a new folder"):
        add_constant_features(src, tmp_path / "marked", HUMAN_DROVE)
    with pytest.raises(DatasetError, match=f"already has feature '{FLAG}'"):
        add_constant_features(tmp_path / "marked", tmp_path / "twice", HUMAN_DROVE)
    assert not (tmp_path / "twice").exists()


def test_marked_demos_plus_hil_load_in_lerobot(tmp_path, lerobot_python):
    combined = tmp_path / "combined"
    add_constant_features(demos(tmp_path / "demos"), combined, HUMAN_DROVE)
    w = DatasetWriter.resume(combined)
    for i, flag in enumerate([False, True, True, False]):
        w.add_frame(frame(2, i, flag), task="pick the cube")
    w.save_episode()
    w.finalize()
    out = subprocess.run(
        [str(lerobot_python), str(CHECK), str(combined)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "ok:" in out.stdout


# ------------------------------------------------------------------------------------ keep_frames
STATE_ONLY = {k: v for k, v in features(True).items() if k != CAM}


def hil_like(root: Path, flags_per_episode) -> Path:
    """No camera, one episode per list of flags; observation.state[0] = 100 * episode + frame."""
    w = DatasetWriter.create(root, fps=10, features=STATE_ONLY, robot_type="so101_follower")
    for ep, flags in enumerate(flags_per_episode):
        for i, flag in enumerate(flags):
            f = frame(ep, i, flag)
            del f[CAM]
            w.add_frame(f, task=f"task {ep % 2}")
        w.save_episode()
    w.finalize()
    return root


def human_drove(columns) -> np.ndarray:
    return np.asarray(columns[FLAG]).reshape(-1).astype(bool)


T, F = True, False
FLAGS = [[T] * 5, [F, F, T, T, F, T, T, T], [F, F, F], [T, F, T]]


def test_keep_frames_splits_runs_into_episodes_renumbered_with_consistent_metadata(tmp_path):
    src = hil_like(tmp_path / "hil", FLAGS)
    out = keep_frames(src, tmp_path / "human", human_drove)

    # runs: ep 0 whole, ep 1 frames 2-3 and 5-7, ep 2 none, ep 3 frame 0 and frame 2
    assert out["episodes"] == [(0, 0, 5), (1, 2, 2), (1, 5, 3), (3, 0, 1), (3, 2, 1)]
    kept_states = [0, 1, 2, 3, 4, 102, 103, 105, 106, 107, 300, 302]
    r = DatasetReader(tmp_path / "human")
    assert r.num_episodes == 5 and len(r) == 12
    info = json.loads((tmp_path / "human" / "meta" / "info.json").read_text())
    assert (info["total_episodes"], info["total_frames"], info["total_tasks"]) == (5, 12, 2)
    assert info["features"] == json.loads((src / "meta" / "info.json").read_text())["features"]
    states, index = [], []
    for e, (_, _, n) in enumerate(out["episodes"]):
        cols = r.episode(e)
        assert cols["frame_index"].tolist() == list(range(n))
        assert cols["episode_index"].tolist() == [e] * n
        np.testing.assert_allclose(cols["timestamp"], np.arange(n) / 10)
        assert cols[FLAG].reshape(-1).all()
        assert r.episode_meta(e)["length"] == n
        states += cols["observation.state"][:, 0].tolist()
        index += cols["index"].tolist()
    assert states == kept_states
    assert index == list(range(12))
    assert [r.episode(e)["task"][0] for e in range(5)] == ["task 0", "task 1", "task 1", "task 1", "task 1"]
    stats = json.loads((tmp_path / "human" / "meta" / "stats.json").read_text())
    assert stats["observation.state"]["count"] == [12]
    assert stats["observation.state"]["mean"][0] == pytest.approx(np.mean(kept_states))
    assert stats[FLAG]["mean"][0] == pytest.approx(1.0)
    assert check_dataset(tmp_path / "human") == []
    assert check_dataset(src) == []  # the source is untouched


def test_keep_frames_refuses_bad_predicates_and_empty_results(tmp_path):
    src = hil_like(tmp_path / "hil", FLAGS)
    with pytest.raises(DatasetError, match="exists; give a new folder"):
        keep_frames(src, src, human_drove)
    with pytest.raises(DatasetError, match="must return 5 bools for episode 0"):
        keep_frames(src, tmp_path / "a", lambda cols: np.ones(3, bool))
    with pytest.raises(DatasetError, match="no frame of .* matches"):
        keep_frames(src, tmp_path / "b", lambda cols: np.zeros(len(cols["index"]), bool))
    assert not any((tmp_path / d).exists() for d in "ab")


def level(ep: int, i: int) -> int:
    """The grey level of frame i of episode ep in the camera datasets below (20 apart, survives h264)."""
    return (30 + 40 * i + 20 * ep) % 250


def hil_with_camera(root: Path, flags_per_episode) -> Path:
    w = DatasetWriter.create(
        root, fps=10, features=features(True), robot_type="so101_follower", vcodec="libx264"
    )
    for ep, flags in enumerate(flags_per_episode):
        for i, flag in enumerate(flags):
            f = frame(ep, i, flag)
            f[CAM] = np.full((H, W, 3), level(ep, i), np.uint8)
            w.add_frame(f, task="pick the cube")
        w.save_episode()
    w.finalize()
    return root


def test_keep_frames_cuts_the_videos_with_the_rows(tmp_path):
    src = hil_with_camera(tmp_path / "hil", [[F, T, T, F, T], [T, T, F]])
    out = keep_frames(src, tmp_path / "human", human_drove)
    assert out["episodes"] == [(0, 1, 2), (0, 4, 1), (1, 0, 2)]
    kept = [(0, 1), (0, 2), (0, 4), (1, 0), (1, 1)]
    r = DatasetReader(tmp_path / "human")
    levels, states = [], []
    for e in range(r.num_episodes):
        frames = r.video_frames(CAM, e)
        assert len(frames) == r.episode_meta(e)["length"]
        levels += [float(f.mean()) for f in frames]
        states += r.episode(e)["observation.state"][:, 0].tolist()
    assert states == [100 * ep + i for ep, i in kept]
    np.testing.assert_allclose(levels, [level(ep, i) for ep, i in kept], atol=3)  # each row its own frame
    assert check_dataset(tmp_path / "human") == []
    keep_frames(src, tmp_path / "av1", human_drove, video={"vcodec": "libsvtav1"})
    # the source's codec by default, or the caller's; info.json says what the videos hold
    for root, codec in ((tmp_path / "human", "h264"), (tmp_path / "av1", "av1")):
        assert DatasetReader(root).info["features"][CAM]["info"]["video.codec"] == codec
        with av.open(str(next((root / "videos").rglob("*.mp4")))) as container:
            assert container.streams.video[0].codec_context.codec.canonical_name == codec


def test_keep_frames_names_a_video_shorter_than_its_rows_and_writes_nothing(tmp_path):
    src = hil_with_camera(tmp_path / "hil", [[T, T, T, T, T, T]])
    mp4 = next((src / "videos").rglob("*.mp4"))
    cut = mp4.with_name("cut.mp4")
    with av.open(str(mp4)) as inp, av.open(str(cut), "w") as outp:  # the same stream, its last 2 packets gone
        stream = outp.add_stream_from_template(inp.streams.video[0])
        packets = [p for p in inp.demux(inp.streams.video[0]) if p.size]
        for p in packets[:-2]:
            p.stream = stream
            outp.mux(p)
    cut.replace(mp4)
    with pytest.raises(DatasetError, match=f"episode 0: camera '{CAM}' has no frame 4"):
        keep_frames(src, tmp_path / "human", human_drove)
    assert not (tmp_path / "human").exists()


@pytest.mark.parametrize("camera", [False, True])
def test_kept_interventions_load_in_lerobot(tmp_path, lerobot_python, camera):
    """With a camera: libx264 (B-frames) and one-frame episodes, read frame by frame by LeRobot."""
    if camera:
        src = hil_with_camera(tmp_path / "hil", FLAGS)
        keep_frames(src, tmp_path / "human", human_drove)
    else:
        keep_frames(hil_like(tmp_path / "hil", FLAGS), tmp_path / "human", human_drove)
    out = subprocess.run(
        [str(lerobot_python), str(CHECK), str(tmp_path / "human")],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"},
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "ok: 5 episode(s), 12 frames, 12 intervention frame(s)" in out.stdout


@pytest.mark.parametrize("case", ["missing_mp4", "truncated_mp4", "missing_tasks"])
def test_keep_frames_on_damaged_data_is_a_dataset_error_naming_the_file(tmp_path, case):
    """Was an av.error.FileNotFoundError / InvalidDataError or an IndexError out of keep_frames."""
    import glob
    import shutil

    src = demos(tmp_path / "demos", lengths=(30, 30))
    mp4 = Path(glob.glob(str(src / "videos" / "*" / "*" / "*.mp4"))[0])
    if case == "missing_mp4":
        mp4.unlink()
        want = "the video file is missing"
    elif case == "truncated_mp4":
        raw = mp4.read_bytes()
        mp4.write_bytes(raw[: len(raw) // 2])
        want = r"cannot decode the video|has no frame"
    else:
        (src / "meta" / "tasks.parquet").unlink()
        want = r"task_index 0 is not in meta/tasks.parquet"
    with pytest.raises(DatasetError, match=want):
        keep_frames(src, tmp_path / "kept", lambda cols: np.ones(len(cols["index"]), bool))
    assert not (tmp_path / "kept").exists()
    shutil.rmtree(src)
