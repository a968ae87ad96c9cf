"""Reliability probes: damaged datasets and faults, each on a copy of a small dataset.

Every probe asserts the exit code, the message, and that the data already on disk is byte-identical
afterwards (md5 of every file). The figures in docs/reliability.md count these probes.

The base dataset is imported from real rosbag2 files by lerobot-bag-import: two episodes of 5 frames
at 10 fps, joint state and action (6 joints each), a front camera (48x64) and a wrist camera (32x48).
"""

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from rosbags.rosbag2 import StoragePlugin, Writer

from lerobot_dataset import DatasetError, DatasetWriter
from lerobot_dataset.info import main as dataset_info
from lerobot_dataset.push import main as dataset_push
from lerobot_recorder import bag_io
from lerobot_recorder.bag_import_cli import main as bag_import

JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
T0 = 1_700_000_000 * 1_000_000_000
MS = 1_000_000
FRONT, WRIST = "/cameras/front/image_raw", "/cameras/wrist/image_raw"
DATA = "data/chunk-000/file-000.parquet"
FRONT_MP4 = "videos/observation.images.front/chunk-000/file-000.mp4"
WRIST_MP4 = "videos/observation.images.wrist/chunk-000/file-000.mp4"


def write_bag(path: Path, seconds: float, t0: int, state=None) -> Path:
    """Joint states at 100 Hz (follower 0.01 * i, leader -0.01 * i), two cameras at 30 Hz."""
    events = []
    for i in range(int(seconds * 100)):
        t = t0 + i * 10 * MS
        pos = np.full(6, 0.01 * i) if state is None else state(i)
        events.append((t + MS, "/joint_states", bag_io.joint_state(t, JOINTS, pos)))
        events.append(
            (t + 2 * MS, "/leader/joint_states", bag_io.joint_state(t, JOINTS, np.full(6, -0.01 * i)))
        )
    for i in range(int(seconds * 30)):
        t = t0 + i * 1_000_000_000 // 30
        events.append((t + 5 * MS, FRONT, bag_io.image(t, np.full((48, 64, 3), (i * 8) % 256, np.uint8))))
        events.append((t + 6 * MS, WRIST, bag_io.image(t, np.full((32, 48, 3), 200 - i, np.uint8))))
    conns = {}
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        for log_time, topic, msg in sorted(events, key=lambda e: e[0]):
            if topic not in conns:
                conns[topic] = writer.add_connection(topic, msg.__msgtype__, typestore=bag_io.typestore())
            writer.write(conns[topic], log_time, bag_io.serialize(msg))
    return path


def import_args(bags, out, *extra):
    return [
        *map(str, bags),
        "--output",
        str(out),
        "--fps",
        "10",
        "--state",
        "/joint_states",
        "--action",
        "/leader/joint_states",
        "--image",
        f"front={FRONT}",
        "--image",
        f"wrist={WRIST}",
        "--task",
        "pick",
        "--no-progress",
        *extra,
    ]


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    d = tmp_path_factory.mktemp("probes")
    bags = [write_bag(d / "a", 0.5, T0), write_bag(d / "b", 0.5, T0 + 60 * 10**9)]
    assert bag_import(import_args(bags, d / "ds")) == 0
    longer = write_bag(d / "long", 1.5, T0)
    assert bag_import(import_args([longer], d / "other")) == 0  # one 15-frame episode
    extra = write_bag(d / "c", 0.5, T0 + 120 * 10**9)
    return {"ds": d / "ds", "other": d / "other", "bag": extra}


@pytest.fixture
def ds(base, tmp_path):
    copy = tmp_path / "ds"
    shutil.copytree(base["ds"], copy)
    return copy


def md5s(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.md5(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".lerobot_ros" not in p.parts
    }


def rewrite_data(root: Path, change) -> None:
    path = root / DATA
    table = pq.read_table(path)
    table = change(table)
    pq.write_table(table, path)


def set_column(table: pa.Table, name: str, values) -> pa.Table:
    i = table.column_names.index(name)
    return table.set_column(i, name, pa.array(values, type=table.schema.field(name).type))


def edit_info(root: Path, change) -> None:
    path = root / "meta/info.json"
    info = json.loads(path.read_text())
    change(info)
    path.write_text(json.dumps(info, indent=4))


def _nan_state(t):
    state = t.column("observation.state").to_pylist()
    state[3][2] = float("nan")
    state[7][0] = float("inf")
    return set_column(t, "observation.state", state)


def _index_gap(t):
    index = t.column("index").to_pylist()
    index[6:] = [i + 1 for i in index[6:]]
    return set_column(t, "index", index)


def _bad_timestamp(t):
    ts = t.column("timestamp").to_pylist()
    ts[2] += 0.5
    return set_column(t, "timestamp", ts)


def _truncate(path: Path, keep: float) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


def _swap(root: Path) -> None:
    a, b = root / FRONT_MP4, root / WRIST_MP4
    tmp = a.with_suffix(".swap")
    os.replace(a, tmp)
    os.replace(b, a)
    os.replace(tmp, b)


# name -> (damage, what --check says)
DAMAGE = {
    "missing_rows": (lambda r: rewrite_data(r, lambda t: t.slice(0, t.num_rows - 1)), "has 4 rows"),
    "extra_rows": (lambda r: rewrite_data(r, lambda t: pa.concat_tables([t, t.slice(9, 1)])), "has 6 rows"),
    "truncated_mp4": (lambda r: _truncate(r / FRONT_MP4, 0.5), "camera observation.images.front"),
    "missing_mp4": (lambda r: (r / WRIST_MP4).unlink(), "video file is missing"),
    "index_gap": (lambda r: rewrite_data(r, _index_gap), "index is not contiguous"),
    "bad_timestamp": (lambda r: rewrite_data(r, _bad_timestamp), "!= frame_index / fps"),
    "zero_byte_parquet": (lambda r: (r / DATA).write_bytes(b""), "does not open"),
    "video_path_null": (lambda r: edit_info(r, lambda i: i.update(video_path=None)), "video_path is None"),
    "tasks_missing": (lambda r: (r / "meta/tasks.parquet").unlink(), "meta/tasks.parquet: missing"),
    "stats_missing": (lambda r: (r / "meta/stats.json").unlink(), "meta/stats.json: missing"),
    "state_shape": (
        lambda r: edit_info(r, lambda i: i["features"]["observation.state"].update(shape=[7])),
        "says shape [7] but data/chunk-000/file-000.parquet stores [6] value(s) per row",
    ),
    "nan_values": (
        lambda r: rewrite_data(r, _nan_state),
        "observation.state has non-finite values (NaN or inf) in 1 rows, first at frame_index 3",
    ),
    "swapped_cameras": (_swap, "(another camera's file, e.g. front and wrist swapped?)"),
}
# what --repair can rebuild from what is on disk (the rest it must name and leave alone)
REPAIRABLE = {"stats_missing"}


def damaged(ds: Path, name: str) -> dict[str, str]:
    DAMAGE[name][0](ds)
    return md5s(ds)


@pytest.mark.parametrize("name", sorted(DAMAGE))
def test_check_rejects(ds, name, capsys):
    before = damaged(ds, name)
    assert dataset_info([str(ds), "--check"]) == 1
    out = capsys.readouterr().out
    assert "CHECK FAILED" in out and DAMAGE[name][1] in out, out
    assert md5s(ds) == before


def test_check_rejects_an_mp4_with_more_frames_than_its_rows(ds, base, capsys):
    shutil.copy(base["other"] / FRONT_MP4, ds / FRONT_MP4)  # 15 frames; the episodes place 10 there
    before = md5s(ds)
    assert dataset_info([str(ds), "--check"]) == 1
    out = capsys.readouterr().out
    assert "holds 15 frames but its episodes span 10" in out, out
    assert md5s(ds) == before


def test_check_rejects_a_dataset_without_episodes_and_resume_accepts_it(tmp_path, capsys, base):
    out = tmp_path / "empty"
    w = DatasetWriter.create(out, fps=10, features={"observation.state": {"dtype": "float32", "shape": (6,)}})
    del w  # as kill -9 before the first save leaves it: info.json, no episode
    before = md5s(out)
    assert dataset_info([str(out), "--check"]) == 1
    assert "holds no episodes" in capsys.readouterr().out
    assert md5s(out) == before
    DatasetWriter.resume(out).finalize()  # not damaged: appending to it is fine


@pytest.mark.parametrize("name", sorted(DAMAGE))
def test_bag_import_resume_refuses_a_damaged_target(ds, base, name, capsys):
    before = damaged(ds, name)
    assert bag_import(import_args([base["bag"]], ds, "--resume")) == 2
    err = capsys.readouterr().err
    assert "refusing to append to a damaged dataset" in err, err
    assert f"lerobot-dataset-info {ds} --repair" in err and "DatasetWriter" not in err, err
    assert md5s(ds) == before


def test_bag_import_resume_appends_to_a_whole_dataset(ds, base, capsys):
    before = md5s(ds)
    assert bag_import(import_args([base["bag"]], ds, "--resume")) == 0
    after = md5s(ds)
    for rel in ("meta/tasks.parquet",):  # unchanged files stay byte-identical
        assert after[rel] == before[rel]
    assert dataset_info([str(ds), "--check"]) == 0, capsys.readouterr()


@pytest.mark.parametrize("name", sorted(DAMAGE))
def test_repair_repairs_or_names_what_it_cannot(ds, name, capsys):
    before = damaged(ds, name)
    rc = dataset_info([str(ds), "--repair"])
    out, err = capsys.readouterr()
    if name in REPAIRABLE:
        assert rc == 0, out + err
        assert "repaired: meta/stats.json rebuilt from the per-episode statistics of all 2 episodes" in out
        assert dataset_info([str(ds), "--check"]) == 0
        after = md5s(ds)
        assert {k: v for k, v in after.items() if k != "meta/stats.json"} == before
    else:
        assert rc == 1, out + err
        assert "NOT REPAIRED" in out and DAMAGE[name][1] in out, out
        assert "cannot be repaired" in err
        assert md5s(ds) == before  # nothing rewritten from partial information


def test_repair_rebuilds_stats_equal_to_the_recorded_ones(ds, base):
    (ds / "meta/stats.json").unlink()
    assert dataset_info([str(ds), "--repair"]) == 0
    got = json.loads((ds / "meta/stats.json").read_text())
    want = json.loads((base["ds"] / "meta/stats.json").read_text())
    assert set(got) == set(want)
    for key in want:
        for stat in want[key]:
            np.testing.assert_allclose(np.asarray(got[key][stat]), np.asarray(want[key][stat]), rtol=1e-6)


def test_repair_fixes_info_totals_when_the_data_agrees(ds, capsys):
    edit_info(ds, lambda i: i.update(total_episodes=3, total_frames=17))
    data_before = {k: v for k, v in md5s(ds).items() if k != "meta/info.json"}
    assert dataset_info([str(ds), "--check"]) == 1
    capsys.readouterr()
    assert dataset_info([str(ds), "--repair", "--check"]) == 0
    out = capsys.readouterr().out
    assert "repaired: meta/info.json totals" in out
    info = json.loads((ds / "meta/info.json").read_text())
    assert (info["total_episodes"], info["total_frames"]) == (2, 10)
    assert {k: v for k, v in md5s(ds).items() if k != "meta/info.json"} == data_before


@pytest.mark.parametrize("name", ["missing_rows", "truncated_mp4", "nan_values", "swapped_cameras"])
def test_dry_run_push_refuses_what_check_rejects(ds, name, capsys):
    before = damaged(ds, name)
    assert dataset_push([str(ds), "someone/probe", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "fails the dataset check, so it is not pushed" in err and DAMAGE[name][1] in err, err
    assert md5s(ds) == before


def test_dry_run_push_accepts_a_whole_dataset(ds, capsys):
    assert dataset_push([str(ds), "someone/probe", "--dry-run"]) == 0
    assert "would push" in capsys.readouterr().err


# ---------------------------------------------------------------------------- commits and disk space
def test_a_commit_whose_journal_never_reached_the_disk_is_reported_lost_not_recoverable(ds):
    """The journal cannot be written (a directory sits where its temp file goes, as a full disk
    refuses it): the episode is not saved, the message does not promise a later completion, the
    dataset is untouched and the same writer saves the episode once the journal can be written."""
    before = md5s(ds)
    w = DatasetWriter.resume(ds)
    for i in range(3):
        w.add_frame(
            {
                "observation.state": np.full(6, i, np.float32),
                "action": np.full(6, -i, np.float32),
                "observation.images.front": np.zeros((48, 64, 3), np.uint8),
                "observation.images.wrist": np.zeros((32, 48, 3), np.uint8),
            },
            task="pick",
        )
    blocker = ds / ".lerobot_ros/commit-journal.tmp"
    blocker.mkdir(parents=True)
    with pytest.raises(DatasetError) as info:
        w.save_episode()
    msg = str(info.value)
    assert "saving episode 2 failed" in msg and "earlier episodes are intact" in msg, msg
    assert "completes it" not in msg and "resume()" not in msg, msg
    assert not (ds / ".lerobot_ros/commit-journal.json").exists()
    assert md5s(ds) == before
    blocker.rmdir()
    assert w.save_episode()["episode_index"] == 2
    w.finalize()
    assert dataset_info([str(ds), "--check"]) == 0


def _mount_tmpfs(path: Path, size: str) -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    path.mkdir()
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)]).returncode == 0


def test_bag_import_on_a_full_disk_says_what_it_needs_and_keeps_earlier_episodes(base, tmp_path, capsys):
    mnt = tmp_path / "small"
    if not _mount_tmpfs(mnt, "2m"):
        pytest.skip("needs root and permission to mount a tmpfs (not available in this environment)")
    try:
        out = mnt / "ds"
        shutil.copytree(base["ds"], out)
        before = md5s(out)
        st = os.statvfs(mnt)
        with open(mnt / "filler", "wb") as f:  # leave 12 KiB: less than the episode's commit needs
            f.write(b"\0" * max(0, st.f_bavail * st.f_frsize - 12 * 1024))
        assert bag_import(import_args([base["bag"]], out, "--resume")) == 2
        err = capsys.readouterr().err
        assert "disk full" in err and "needs about" in err and "saved before it are intact" in err, err
        assert "save_episode" not in err and "DatasetWriter" not in err, err
        assert md5s(out) == before
        (mnt / "filler").unlink()
        assert dataset_info([str(out), "--check"]) == 0
    finally:
        subprocess.run(["umount", "-l", str(mnt)])


# ---------------------------------------------------------------------------- non-finite values
def _bag_state_with_nan(i):
    pos = np.full(6, 0.01 * i)
    if i in (20, 21):
        pos[2] = np.nan if i == 20 else np.inf
    return pos


def test_bag_import_refuses_a_bag_with_nan_joints_and_keeps_the_dataset(ds, tmp_path, capsys):
    bag = write_bag(tmp_path / "nan", 0.5, T0 + 180 * 10**9, state=_bag_state_with_nan)
    before = md5s(ds)
    assert bag_import(import_args([bag], ds, "--resume")) == 2
    err = capsys.readouterr().err
    assert "topic /joint_states: 1 non-finite value(s) (NaN or inf) in elbow_flex position" in err, err
    assert "episode 2 is not imported (--non-finite drop imports it without such messages)" in err, err
    assert md5s(ds) == before
    assert dataset_info([str(ds), "--check"]) == 0


def test_bag_import_drops_nan_messages_when_asked_and_counts_them(ds, tmp_path, capsys):
    bag = write_bag(tmp_path / "nan", 0.5, T0 + 180 * 10**9, state=_bag_state_with_nan)
    before = md5s(ds)
    assert bag_import(import_args([bag], ds, "--resume", "--non-finite", "drop")) == 0
    out = capsys.readouterr().out
    assert "dropped 2 message(s) holding NaN or inf (--non-finite drop): /joint_states: 2" in out, out
    after = md5s(ds)
    assert after["meta/tasks.parquet"] == before["meta/tasks.parquet"]
    assert dataset_info([str(ds), "--check"]) == 0  # --check also looks for NaN


def test_add_constant_features_refuses_nan(ds, tmp_path):
    from lerobot_dataset.edit import add_constant_features

    before = md5s(ds)
    spec = {"dtype": "float32", "shape": (1,), "names": None}
    for bad in (float("nan"), float("inf")):
        with pytest.raises(DatasetError, match="is not a finite number"):
            add_constant_features(ds, tmp_path / "out", {"complementary_info.discount": (spec, bad)})
        assert not (tmp_path / "out").exists()
    assert md5s(ds) == before


def test_check_finds_front_and_wrist_swapped_at_one_resolution(tmp_path, capsys):
    """Same size cameras: the resolution cannot tell; the stored per-episode mean colours can."""
    root = tmp_path / "same"
    cam = {"dtype": "video", "shape": (24, 32, 3), "names": ["height", "width", "channels"]}
    w = DatasetWriter.create(
        root,
        fps=10,
        features={
            "observation.state": {"dtype": "float32", "shape": (2,)},
            "observation.images.front": cam,
            "observation.images.wrist": cam,
        },
        vcodec="libx264",
    )
    for ep in range(2):
        for i in range(6):
            front = np.full((24, 32, 3), (40 + 5 * i, 60, 20), np.uint8)  # dark, greenish
            wrist = np.full((24, 32, 3), (200, 190 - 4 * i, 230), np.uint8)  # bright, bluish
            w.add_frame(
                {
                    "observation.state": np.array([ep, i], np.float32),
                    "observation.images.front": front,
                    "observation.images.wrist": wrist,
                },
                task="pick",
            )
        w.save_episode()
    w.finalize()
    assert dataset_info([str(root), "--check"]) == 0, capsys.readouterr()
    capsys.readouterr()
    a, b = (root / FRONT_MP4, root / WRIST_MP4)
    tmp = a.with_suffix(".swap")
    os.replace(a, tmp)
    os.replace(b, a)
    os.replace(tmp, b)
    before = md5s(root)
    assert dataset_info([str(root), "--check"]) == 1
    out = capsys.readouterr().out
    assert (
        "episode 0, camera observation.images.front: its video looks like camera observation.images.wrist's"
        in out
    )
    assert (
        "episode 1, camera observation.images.wrist: its video looks like camera observation.images.front's"
        in out
    )
    assert md5s(root) == before
