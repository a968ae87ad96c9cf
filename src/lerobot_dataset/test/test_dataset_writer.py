"""DatasetWriter: format, values, stats, rotation, episodes lifecycle, backpressure, codecs."""

import json
import os
import threading
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from lerobot_dataset import DatasetError, DatasetReader, DatasetWriter
from lerobot_dataset import video as video_mod
from lerobot_dataset.mp4 import count_frames
from lerobot_dataset.video import wait_until

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "lerobot_v30_small"
FPS = 10
H, W = 24, 32
NAMES = [
    f"{j}.pos" for j in ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper")
]


def make_features(cameras=("observation.images.front",), h=H, w=W):
    feats = {
        "observation.state": {"dtype": "float32", "shape": (6,), "names": NAMES},
        "action": {"dtype": "float32", "shape": (6,), "names": NAMES},
    }
    for key in cameras:
        feats[key] = {"dtype": "video", "shape": (h, w, 3), "names": ["height", "width", "channels"]}
    return feats


def state(ep, i):
    return np.array([ep * 100 + i + j / 8 for j in range(6)], dtype=np.float32)


def colour(cam, ep, i):
    return (10 + 20 * i % 240, 30 + 60 * ep % 240, 80 + 90 * cam)


def frame(ep, i, cameras=("observation.images.front",), h=H, w=W):
    f = {"observation.state": state(ep, i), "action": -state(ep, i)}
    for c, key in enumerate(cameras):
        f[key] = np.full((h, w, 3), colour(c, ep, i), dtype=np.uint8)
    return f


def record(writer, ep, length, task="pick the cube", cameras=("observation.images.front",), h=H, w=W):
    for i in range(length):
        writer.add_frame(frame(ep, i, cameras, h, w), task=task)
    return writer.save_episode()


def write_dataset(root, lengths, tasks=None, cameras=("observation.images.front",), **kwargs):
    w = DatasetWriter.create(
        root, fps=FPS, features=make_features(cameras), robot_type="so101_follower", **kwargs
    )
    for ep, n in enumerate(lengths):
        record(w, ep, n, (tasks or ["pick the cube"] * len(lengths))[ep], cameras)
    w.finalize()
    return root


def test_round_trip_values_and_layout(tmp_path):
    root = write_dataset(tmp_path / "ds", [5, 3, 4], ["pick the cube", "place the cube", "pick the cube"])
    info = json.loads((root / "meta/info.json").read_text())
    lerobot_info = json.loads((FIXTURE / "meta/info.json").read_text())
    assert list(info) == list(lerobot_info)
    assert info["codebase_version"] == "v3.0"
    assert (info["total_episodes"], info["total_frames"], info["total_tasks"]) == (3, 12, 2)
    assert info["splits"] == {"train": "0:3"}
    assert list(info["features"]) == [
        "observation.state",
        "action",
        "observation.images.front",
        "timestamp",
        "frame_index",
        "episode_index",
        "index",
        "task_index",
    ]
    vinfo = info["features"]["observation.images.front"]["info"]
    assert vinfo == {
        "video.height": H,
        "video.width": W,
        "video.codec": "av1",
        "video.pix_fmt": "yuv420p",
        "video.is_depth_map": False,
        "video.fps": FPS,
        "video.channels": 3,
        "has_audio": False,
        "is_depth_map": False,  # LeRobot 0.6 reads the flag top-level (0.4.4 wrote video.is_depth_map)
        # the encoder fields LeRobot 0.6 records (its RGBEncoderConfig); 0.4.4 ignores them
        "video.g": 2,
        "video.crf": 30,
        "video.preset": 10,
        "video.fast_decode": 0,
        "video.video_backend": "pyav",
        "video.extra_options": {},
    }
    assert set(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()) == {
        "meta/info.json",
        "meta/stats.json",
        "meta/tasks.parquet",
        "meta/episodes/chunk-000/file-000.parquet",
        "data/chunk-000/file-000.parquet",
        "videos/observation.images.front/chunk-000/file-000.mp4",
    }

    r = DatasetReader(root)
    assert (r.num_episodes, r.num_frames, r.tasks) == (3, 12, ["pick the cube", "place the cube"])
    index = 0
    for ep, n in enumerate([5, 3, 4]):
        cols = r.episode(ep)
        np.testing.assert_array_equal(cols["observation.state"], np.stack([state(ep, i) for i in range(n)]))
        np.testing.assert_array_equal(cols["action"], -np.stack([state(ep, i) for i in range(n)]))
        np.testing.assert_array_equal(cols["frame_index"], np.arange(n))
        np.testing.assert_array_equal(cols["timestamp"], (np.arange(n) / FPS).astype(np.float32))
        np.testing.assert_array_equal(cols["index"], np.arange(index, index + n))
        assert set(cols["episode_index"]) == {ep}
        assert list(cols["task_index"]) == [1 if ep == 1 else 0] * n
        frames = r.video_frames("observation.images.front", ep)
        assert frames.shape == (n, H, W, 3)
        want = np.array([colour(0, ep, i) for i in range(n)], dtype=np.float64)
        assert np.abs(frames.mean(axis=(1, 2)) - want).max() < 4
        index += n
    item = r[6]
    assert (item["episode_index"], item["frame_index"], item["index"], item["task"]) == (
        1,
        1,
        6,
        "place the cube",
    )
    np.testing.assert_array_equal(item["observation.state"], state(1, 1))
    assert item["observation.images.front"].shape == (H, W, 3)


def test_parquet_schemas_match_lerobot_fixture(tmp_path):
    """Same features as the LeRobot-written fixture -> same data columns/types and episodes columns."""
    root = tmp_path / "ds"
    w = DatasetWriter.create(root, fps=FPS, features=make_features(h=48, w=64), robot_type="so101_follower")
    record(w, 0, 3, h=48, w=64)
    w.finalize()
    ours = pq.read_schema(root / "data/chunk-000/file-000.parquet")
    theirs = pq.read_schema(FIXTURE / "data/chunk-000/file-000.parquet")
    assert [(f.name, f.type) for f in ours] == [(f.name, f.type) for f in theirs]
    hf_ours = json.loads(ours.metadata[b"huggingface"])["info"]["features"]
    hf_theirs = json.loads(theirs.metadata[b"huggingface"])["info"]["features"]
    assert hf_ours == hf_theirs
    ours_ep = pq.read_schema(root / "meta/episodes/chunk-000/file-000.parquet")
    theirs_ep = pq.read_schema(FIXTURE / "meta/episodes/chunk-000/file-000.parquet")
    assert sorted(ours_ep.names) == sorted(theirs_ep.names)
    assert {f.name: f.type for f in ours_ep} == {f.name: f.type for f in theirs_ep}
    tasks = pq.read_table(root / "meta/tasks.parquet")
    assert tasks.column("task").to_pylist() == ["pick the cube"]
    assert tasks.column("task_index").to_pylist() == [0]
    assert json.loads(tasks.schema.metadata[b"pandas"])["index_columns"] == ["task"]


def _np_stats(x):
    x = np.asarray(x, dtype=np.float64)
    q = np.quantile(x, [0.01, 0.10, 0.50, 0.90, 0.99], axis=0)
    return {
        "min": x.min(0),
        "max": x.max(0),
        "mean": x.mean(0),
        "std": x.std(0),
        "q01": q[0],
        "q10": q[1],
    } | {
        "q50": q[2],
        "q90": q[3],
        "q99": q[4],
    }


def test_stats_exact_against_numpy(tmp_path):
    rng = np.random.default_rng(7)
    h, w = 32, 320  # wide enough that LeRobot's image-stats stride (int(320 / 150) = 2) applies
    feats = {
        "observation.state": {"dtype": "float32", "shape": (3,), "names": ["a", "b", "c"]},
        "reward": {"dtype": "float64", "shape": (1,), "names": None},
        "observation.images.cam": {
            "dtype": "video",
            "shape": (h, w, 3),
            "names": ["height", "width", "channels"],
        },
    }
    root = tmp_path / "ds"
    wr = DatasetWriter.create(root, fps=FPS, features=feats)
    lengths = [7, 4]
    data = []
    for ep, n in enumerate(lengths):
        st = rng.normal(size=(n, 3)).astype(np.float32) * (ep + 1)
        rw = rng.uniform(size=n)
        imgs = rng.integers(0, 256, size=(n, h, w, 3), dtype=np.uint8)
        for i in range(n):
            wr.add_frame(
                {"observation.state": st[i], "reward": rw[i], "observation.images.cam": imgs[i]}, task="t"
            )
        wr.save_episode()
        data.append((st, rw, imgs))
    wr.finalize()
    r = DatasetReader(root)
    for ep, (st, rw, imgs) in enumerate(data):
        es = r.episode_stats(ep)
        for key, want in (("observation.state", _np_stats(st)), ("reward", _np_stats(rw.reshape(-1, 1)))):
            for k, v in want.items():
                np.testing.assert_allclose(es[key][k], v, rtol=1e-12, atol=1e-12, err_msg=f"{key} {k}")
            assert list(es[key]["count"]) == [len(st)]
        pixels = imgs[:, ::2, ::2].reshape(-1, 3) / 255.0
        for k, v in _np_stats(pixels).items():
            assert es["observation.images.cam"][k].shape == (3, 1, 1)
            np.testing.assert_allclose(
                es["observation.images.cam"][k].ravel(), v, rtol=1e-12, atol=1e-12, err_msg=k
            )
        np.testing.assert_array_equal(es["index"]["min"], [sum(lengths[:ep])])
        np.testing.assert_array_equal(es["frame_index"]["max"], [len(st) - 1])
    # Dataset stats: exact moments over all frames; quantiles are count-weighted episode quantiles.
    all_st = np.concatenate([d[0] for d in data]).astype(np.float64)
    ds = r.stats["observation.state"]
    np.testing.assert_allclose(ds["mean"], all_st.mean(0), rtol=1e-12)
    np.testing.assert_allclose(ds["std"], all_st.std(0), rtol=1e-10)
    np.testing.assert_array_equal(ds["min"], all_st.min(0))
    np.testing.assert_array_equal(ds["max"], all_st.max(0))
    np.testing.assert_array_equal(ds["count"], [sum(lengths)])
    q = [np.quantile(d[0].astype(np.float64), 0.5, axis=0) for d in data]
    np.testing.assert_allclose(ds["q50"], (q[0] * 7 + q[1] * 4) / 11, rtol=1e-12)
    all_px = np.concatenate([d[2][:, ::2, ::2].reshape(-1, 3) for d in data]) / 255.0
    np.testing.assert_allclose(r.stats["observation.images.cam"]["mean"].ravel(), all_px.mean(0), rtol=1e-12)


def test_file_rotation_and_chunk_indices(tmp_path):
    lengths = [6, 5, 7, 4, 6, 5]
    root = write_dataset(
        tmp_path / "ds",
        lengths,
        cameras=("observation.images.front", "observation.images.wrist"),
        data_files_size_in_mb=0.0075,
        video_files_size_in_mb=0.002,
        chunks_size=2,
    )
    r = DatasetReader(root)
    eps = r.episodes
    data_files = [(e["data/chunk_index"], e["data/file_index"]) for e in eps]
    video_files = [
        (e["videos/observation.images.front/chunk_index"], e["videos/observation.images.front/file_index"])
        for e in eps
    ]
    # Several files were used, some hold more than one episode, and indices follow the chunk rule.
    for files in (data_files, video_files):
        distinct = sorted(set(files))
        assert 2 < len(distinct) < len(lengths), files
        assert files == sorted(files)
        expected, cur = [], (0, 0)
        for _ in distinct:
            expected.append(cur)
            cur = (cur[0] + 1, 0) if cur[1] == 1 else (cur[0], cur[1] + 1)
        assert distinct == expected  # (0,0), (0,1), (1,0), (1,1), (2,0) ... with chunks_size=2
    for key in ("observation.images.front", "observation.images.wrist"):
        by_file = {}
        for e in eps:
            by_file.setdefault((e[f"videos/{key}/chunk_index"], e[f"videos/{key}/file_index"]), []).append(e)
        for (c, f), group in by_file.items():
            assert group[0][f"videos/{key}/from_timestamp"] == 0.0
            for prev, nxt in zip(group, group[1:], strict=False):
                assert nxt[f"videos/{key}/from_timestamp"] == prev[f"videos/{key}/to_timestamp"]
            for e in group:
                span = e[f"videos/{key}/to_timestamp"] - e[f"videos/{key}/from_timestamp"]
                assert span == pytest.approx(e["length"] / FPS, abs=1e-9)
            path = root / f"videos/{key}/chunk-{c:03d}/file-{f:03d}.mp4"
            assert count_frames(path) == sum(e["length"] for e in group)
    for ep, n in enumerate(lengths):
        np.testing.assert_array_equal(
            r.episode(ep)["observation.state"], np.stack([state(ep, i) for i in range(n)])
        )
        assert len(r.video_frames("observation.images.wrist", ep)) == n


@pytest.mark.parametrize("vcodec", ["libsvtav1", "libx264"])
def test_many_episodes_in_one_mp4(tmp_path, vcodec):
    """One-frame episodes between longer ones: with B-frames (libx264) a one-frame file starts its
    decode timestamps a frame later than the others, and the remux must keep them increasing."""
    lengths = [3, 8, 1, 5, 2, 1, 1, 4]
    root = write_dataset(tmp_path / "ds", lengths, vcodec=vcodec)
    r = DatasetReader(root)
    mp4 = root / "videos/observation.images.front/chunk-000/file-000.mp4"
    assert count_frames(mp4) == sum(lengths)
    start = 0
    for ep, n in enumerate(lengths):
        e = r.episode_meta(ep)
        assert e["videos/observation.images.front/from_timestamp"] == start / FPS
        assert e["videos/observation.images.front/to_timestamp"] == (start + n) / FPS
        frames = r.video_frames("observation.images.front", ep)
        assert len(frames) == n
        reds = frames[:, :, :, 0].mean(axis=(1, 2))
        assert np.abs(reds - [colour(0, ep, i)[0] for i in range(n)]).max() < 4
        start += n


def test_discard_then_rerecord(tmp_path):
    root = tmp_path / "ds"
    w = DatasetWriter.create(root, fps=FPS, features=make_features())
    for i in range(4):
        w.add_frame(frame(9, i), task="bad take")
    assert w.episode_frames == 4
    w.discard_episode()
    assert w.episode_frames == 0 and w.total_episodes == 0
    summary = record(w, 0, 3)
    assert summary["episode_index"] == 0 and summary["length"] == 3
    w.finalize()
    assert not (root / ".lerobot_ros").exists()
    r = DatasetReader(root)
    assert r.tasks == ["pick the cube"] and r.num_frames == 3
    np.testing.assert_array_equal(r.episode(0)["observation.state"][0], state(0, 0))
    assert len(r.video_frames("observation.images.front", 0)) == 3


def test_resume_appends_to_new_files(tmp_path):
    root = write_dataset(tmp_path / "ds", [4, 3])
    w = DatasetWriter.resume(root)
    assert (w.total_episodes, w.total_frames) == (2, 7)
    assert not w.recovered_interrupted_save and not w.dropped_partial_episode
    summary = record(w, 2, 5, task="new task")
    assert summary["dataset_from_index"] == 7
    record(w, 3, 2)
    w.finalize()
    r = DatasetReader(root)
    assert (r.num_episodes, r.num_frames, r.tasks) == (4, 14, ["pick the cube", "new task"])
    # LeRobot's resume rule: a resumed writer starts the next data / video / metadata file.
    e = r.episodes
    assert [x["data/file_index"] for x in e] == [0, 0, 1, 1]
    assert [x["videos/observation.images.front/file_index"] for x in e] == [0, 0, 1, 1]
    assert [x["meta/episodes/file_index"] for x in e] == [0, 0, 1, 1]
    assert e[3]["videos/observation.images.front/from_timestamp"] == 0.5
    for ep, n in enumerate([4, 3, 5, 2]):
        np.testing.assert_array_equal(
            r.episode(ep)["observation.state"], np.stack([state(ep, i) for i in range(n)])
        )
        assert len(r.video_frames("observation.images.front", ep)) == n
    np.testing.assert_array_equal(r.episode(2)["task_index"], [1] * 5)
    assert list(r.stats["index"]["count"]) == [14]
    assert r.stats["index"]["max"][0] == 13


def test_finalize_idempotent_and_guards(tmp_path):
    root = tmp_path / "ds"
    w = DatasetWriter.create(root, fps=FPS, features=make_features())
    record(w, 0, 2)
    w.add_frame(frame(1, 0), task="x")
    with pytest.raises(DatasetError, match="1 unsaved frames"):
        w.finalize()
    w.finalize(on_pending="discard")
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    w.finalize()
    w.finalize(on_pending="save")
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before
    with pytest.raises(DatasetError, match="finalized"):
        w.add_frame(frame(1, 0), task="x")
    with pytest.raises(DatasetError, match="finalized"):
        w.save_episode()
    assert DatasetReader(root).num_episodes == 1


def test_finalize_can_save_pending_episode(tmp_path):
    root = tmp_path / "ds"
    with DatasetWriter.create(root, fps=FPS, features=make_features()) as w:
        record(w, 0, 2)
        w.add_frame(frame(1, 0), task="x")
        w.finalize(on_pending="save")
    assert DatasetReader(root).num_frames == 3


def test_validation_errors_name_the_problem(tmp_path):
    w = DatasetWriter.create(tmp_path / "ds", fps=FPS, features=make_features())
    f = frame(0, 0)
    del f["action"]
    with pytest.raises(DatasetError, match=r"missing features \['action'\]"):
        w.add_frame(f, task="t")
    f = frame(0, 0) | {"timestamp": 0.0}
    with pytest.raises(DatasetError, match="default columns are filled by the writer"):
        w.add_frame(f, task="t")
    with pytest.raises(DatasetError, match=r"expected shape \(6,\), got \(5,\)"):
        w.add_frame(frame(0, 0) | {"action": np.zeros(5)}, task="t")
    with pytest.raises(DatasetError, match="uint8 RGB array, got float32"):
        w.add_frame(frame(0, 0) | {"observation.images.front": np.zeros((H, W, 3), np.float32)}, task="t")
    with pytest.raises(DatasetError, match="task string is required"):
        w.add_frame(frame(0, 0))
    w.add_frame(frame(0, 0) | {"task": "from the frame"})
    assert w.episode_frames == 1  # nothing half-added by the rejected frames
    with pytest.raises(DatasetError, match=rf"another writer \(process {os.getpid()}: "):
        DatasetWriter.resume(tmp_path / "ds")
    assert w.save_episode()["length"] == 1
    w.finalize()
    with pytest.raises(DatasetError, match="not empty"):
        DatasetWriter.create(tmp_path / "ds", fps=FPS, features=make_features())
    with pytest.raises(DatasetError, match="nothing to resume"):
        DatasetWriter.resume(tmp_path / "missing")
    with pytest.raises(DatasetError, match="default column"):
        DatasetWriter.create(tmp_path / "d2", fps=FPS, features={"index": {"dtype": "int64", "shape": (1,)}})
    with pytest.raises(DatasetError, match="no frames"):
        DatasetWriter.create(tmp_path / "d3", fps=FPS, features=make_features()).save_episode()


def test_mp4_frame_count_mismatch_fails_the_save(tmp_path):
    w = DatasetWriter.create(tmp_path / "ds", fps=FPS, features=make_features())
    for i in range(3):
        w.add_frame(frame(0, i), task="t")
    # An extra frame reaching the encoder without a parquet row (what a buggy producer would do).
    w._encoders["observation.images.front"].put(frame(0, 3)["observation.images.front"], block=True)
    with pytest.raises(DatasetError, match="mp4 has 4 frames but the episode has 3 parquet rows"):
        w.save_episode()
    assert w.total_episodes == 0 and not (tmp_path / "ds/data").exists()
    w.discard_episode()
    record(w, 0, 2)
    w.finalize()
    assert DatasetReader(tmp_path / "ds").num_frames == 2


class _Gate:
    """Holds every encoder thread before it encodes a frame, until opened."""

    def __init__(self, monkeypatch):
        self.open = threading.Event()
        original = video_mod.CameraEncoder._encode_one
        gate = self

        def held(enc, container, stream, item):
            gate.open.wait(timeout=30)
            original(enc, container, stream, item)

        monkeypatch.setattr(video_mod.CameraEncoder, "_encode_one", held)


def test_backpressure_error_mode_never_drops_silently(tmp_path, monkeypatch):
    gate = _Gate(monkeypatch)
    w = DatasetWriter.create(
        tmp_path / "ds", fps=FPS, features=make_features(), encoder_queue_size=2, on_backpressure="error"
    )
    w.add_frame(frame(0, 0), task="t")
    assert wait_until(lambda: w.backlog() == 0, timeout=10)  # the encoder thread holds frame 0
    accepted = 1
    with pytest.raises(DatasetError, match=r"backlog full .* was NOT recorded"):
        for i in range(1, 10):
            w.add_frame(frame(0, i), task="t")
            accepted += 1
    # One frame held by the encoder thread + 2 queued; the rejected frame left no row behind.
    assert accepted == 3 and w.episode_frames == 3 and w.backlog() == 2
    gate.open.set()
    assert w.save_episode()["length"] == 3
    w.finalize()
    r = DatasetReader(tmp_path / "ds")
    assert r.num_frames == 3 and len(r.video_frames("observation.images.front", 0)) == 3


def test_backpressure_block_mode_waits(tmp_path, monkeypatch):
    gate = _Gate(monkeypatch)
    w = DatasetWriter.create(tmp_path / "ds", fps=FPS, features=make_features(), encoder_queue_size=1)
    done = threading.Event()

    def produce():
        for i in range(5):
            w.add_frame(frame(0, i), task="t")
        done.set()

    t = threading.Thread(target=produce)
    t.start()
    assert not done.wait(0.5)  # the producer is held back, not dropping frames
    assert w.episode_frames == 2  # 1 in the encoder + 1 queued; the 3rd add_frame is waiting
    gate.open.set()
    t.join(timeout=30)
    assert done.is_set()
    assert w.save_episode()["length"] == 5
    w.finalize()
    assert len(DatasetReader(tmp_path / "ds").video_frames("observation.images.front", 0)) == 5


@pytest.mark.parametrize(("vcodec", "codec_name"), [("h264", "h264"), ("libsvtav1", "av1")])
def test_codec_selectable(tmp_path, vcodec, codec_name):
    root = write_dataset(tmp_path / "ds", [3, 2], vcodec=vcodec)
    info = json.loads((root / "meta/info.json").read_text())
    assert info["features"]["observation.images.front"]["info"]["video.codec"] == codec_name
    w = DatasetWriter.resume(root)
    assert w.vcodec == ("libx264" if vcodec == "h264" else "libsvtav1")
    record(w, 2, 4)
    w.finalize()
    r = DatasetReader(root)
    for ep, n in enumerate([3, 2, 4]):
        frames = r.video_frames("observation.images.front", ep)
        assert len(frames) == n
        assert abs(frames[-1, :, :, 0].mean() - colour(0, ep, n - 1)[0]) < 4


def test_unknown_codec_is_a_clear_error(tmp_path):
    with pytest.raises(DatasetError, match="no encoder"):
        DatasetWriter.create(tmp_path / "ds", fps=FPS, features=make_features(), vcodec="not-a-codec")
