"""lerobot-bag-import --jobs N and --ray: the same dataset as a serial import, retried workers, clear errors."""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import psutil
import pyarrow.parquet as pq
import pytest
from rosbags.rosbag2 import StoragePlugin, Writer

from lerobot_core.contract import Contract
from lerobot_dataset import DatasetReader
from lerobot_recorder import bag_io
from lerobot_recorder.bag_import import BagImportError, import_bags

JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
CAM = "/cameras/front/image_raw"
SPLIT = "/episode_marker"
NS = 1_000_000_000
H, W = 48, 64


def _frame(i: int, bag: int) -> np.ndarray:
    img = np.full((H, W, 3), (10 + 5 * i % 200, 30 + 50 * bag, 90), np.uint8)
    img[:, (i * 3) % W : (i * 3) % W + 6] = 240
    return img


def write_bag(path: Path, bag: int, seconds: float, split_at: float | None = None) -> Path:
    t0 = (1_700_000_000 + 100 * bag) * NS
    events = []
    for i in range(int(seconds * 100)):
        t = t0 + i * 10_000_000
        q = np.sin(np.arange(6) + i / 20.0) + bag
        events.append((t + 1_000_000, "/joint_states", bag_io.joint_state(t, JOINTS, q)))
        events.append((t + 2_000_000, "/leader/joint_states", bag_io.joint_state(t, JOINTS, -q)))
    for i in range(int(seconds * 15)):
        t = t0 + i * NS // 15
        events.append((t + 4_000_000, CAM, bag_io.image(t, _frame(i, bag))))
    # every bag carries the split topic; only a marker inside the data splits an episode
    at = t0 + int(split_at * NS) if split_at is not None else t0 - 1_000_000
    events.append((at, SPLIT, bag_io.string("next")))
    conns = {}
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        for log_time, topic, msg in sorted(events, key=lambda e: e[0]):
            if topic not in conns:
                conns[topic] = writer.add_connection(topic, msg.__msgtype__, typestore=bag_io.typestore())
            writer.write(conns[topic], log_time, bag_io.serialize(msg))
    return path


def contract() -> Contract:
    return Contract.from_flags(
        15, state="/joint_states", action="/leader/joint_states", images={"front": CAM}, task="pick"
    )


@pytest.fixture(scope="module")
def bags(tmp_path_factory) -> list[Path]:
    d = tmp_path_factory.mktemp("bags")
    # one bag split in two episodes: a worker's partial dataset then holds several episodes
    return [write_bag(d / f"b{i}", i, 1.2 + 0.3 * i, split_at=0.7 if i == 1 else None) for i in range(4)]


@pytest.fixture(scope="module")
def serial(bags, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("serial") / "ds"
    import_bags(bags, contract(), out, split_topic=SPLIT, progress=False)
    return out


def assert_same_dataset(a: Path, b: Path) -> None:
    ra, rb = DatasetReader(a), DatasetReader(b)
    assert (ra.num_episodes, ra.num_frames, ra.tasks) == (rb.num_episodes, rb.num_frames, rb.tasks)
    assert ra.num_episodes == 5
    for e in range(ra.num_episodes):
        ta, tb = ra.episode_table(e), rb.episode_table(e)
        assert ta.equals(tb), f"episode {e}: parquet rows differ"
        ma = {k: v for k, v in ra.episode_meta(e).items() if not k.startswith("meta/")}
        mb = {k: v for k, v in rb.episode_meta(e).items() if not k.startswith("meta/")}
        assert ma == mb, f"episode {e}: meta/episodes differ"
        fa, fb = (
            ra.video_frames("observation.images.front", e),
            rb.video_frames("observation.images.front", e),
        )
        assert fa.shape == fb.shape and np.array_equal(fa, fb), f"episode {e}: decoded frames differ"
    sa, sb = (json.loads((p / "meta/stats.json").read_text()) for p in (a, b))
    assert sa == sb
    for p in (a, b):
        assert pq.read_table(p / "meta/tasks.parquet").num_rows == len(ra.tasks)
    assert not Path(f"{b}.parts").exists(), "worker folders left behind"


def test_jobs_gives_the_serial_dataset(bags, serial, tmp_path):
    out = tmp_path / "ds"
    summary = import_bags(bags, contract(), out, split_topic=SPLIT, progress=False, jobs=2)
    assert [e.episode_index for e in summary.episodes] == list(range(5))
    assert [e.bag for e in summary.episodes] == [
        str(bags[0]),
        str(bags[1]),
        str(bags[1]),
        str(bags[2]),
        str(bags[3]),
    ]
    assert_same_dataset(serial, out)


def _workers(me: psutil.Process) -> list[psutil.Process]:
    """The pool's spawned workers; a child that exits while being looked at is skipped."""
    found = []
    for c in me.children(recursive=True):
        try:
            if "spawn_main" in " ".join(c.cmdline()):
                found.append(c)
        except psutil.Error:
            continue
    return found


def test_a_worker_killed_mid_bag_is_retried_and_nothing_half_written(bags, serial, tmp_path):
    me = psutil.Process()
    # The kill must land while a worker is inside a bag. On a fast run the import can finish between
    # two looks, so a run without a kill is repeated (on a fresh output) rather than passed.
    for attempt in range(5):
        out = tmp_path / f"ds{attempt}"
        parts = Path(f"{out}.parts")
        killed: list[int] = []
        done = threading.Event()

        def kill_one_worker_mid_bag(parts=parts, killed=killed, done=done):
            while not done.is_set() and not killed:
                started = [p for p in parts.glob("bag-*") if (p / "meta" / "info.json").exists()]
                workers = _workers(me) if started else []
                if workers:
                    try:
                        os.kill(workers[0].pid, signal.SIGKILL)
                    except ProcessLookupError:
                        continue
                    killed.append(workers[0].pid)
                    return
                time.sleep(0.005)

        killer = threading.Thread(target=kill_one_worker_mid_bag)
        killer.start()
        try:
            import_bags(bags, contract(), out, split_topic=SPLIT, progress=False, jobs=2)
        finally:
            done.set()
            killer.join()
        if killed:
            break
    assert killed, "no worker was seen converting a bag in 5 imports"
    assert_same_dataset(serial, out)


def test_jobs_must_be_positive(bags, tmp_path):
    with pytest.raises(BagImportError, match="--jobs must be at least 1, got 0"):
        import_bags(bags, contract(), tmp_path / "ds", progress=False, jobs=0)


def test_unreachable_ray_address_is_a_clear_error_within_seconds(bags, tmp_path):
    t = time.monotonic()
    with pytest.raises(BagImportError, match=r"--ray 127\.0\.0\.1:1: no Ray cluster reachable there"):
        import_bags(bags, contract(), tmp_path / "ds", progress=False, ray_address="127.0.0.1:1")
    assert time.monotonic() - t < 10
    assert not (tmp_path / "ds").exists() or not any((tmp_path / "ds").iterdir())


@pytest.mark.slow
def test_ray_local_cluster_gives_the_serial_dataset_even_when_a_worker_dies(bags, serial, tmp_path):
    ray = pytest.importorskip("ray", reason="ray is in requirements.txt; run ./setup.sh")
    # A short private temp dir: Ray's socket paths must stay under the Unix limit, and other Ray
    # users on this machine keep their own session. Local only, on 127.0.0.1.
    ray_tmp = tempfile.mkdtemp(prefix="ray", dir="/tmp")
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        _temp_dir=ray_tmp,
        log_to_driver=False,
    )
    try:
        out = tmp_path / "ds"
        summary = import_bags(bags, contract(), out, split_topic=SPLIT, progress=False, ray_address="local")
        assert summary.frames == DatasetReader(serial).num_frames
        assert_same_dataset(serial, out)

        # again, killing one Ray worker while it converts a bag: Ray reruns the task, the dataset is the same
        out2 = tmp_path / "ds2"
        parts = Path(f"{out2}.parts")
        me = psutil.Process()
        killed: list[int] = []

        def kill_one_ray_worker_mid_bag():
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not killed:
                if any((p / "meta" / "info.json").exists() for p in parts.glob("bag-*")):
                    for c in me.children(recursive=True):
                        try:
                            if c.cmdline() and c.cmdline()[0].startswith("ray::convert_bag_to_part"):
                                os.kill(c.pid, signal.SIGKILL)
                                killed.append(c.pid)
                                return
                        except psutil.Error:
                            continue
                time.sleep(0.01)

        killer = threading.Thread(target=kill_one_ray_worker_mid_bag)
        killer.start()
        import_bags(bags, contract(), out2, split_topic=SPLIT, progress=False, ray_address="local")
        killer.join()
        assert killed, "no Ray worker was seen converting a bag"
        assert_same_dataset(serial, out2)
    finally:
        ray.shutdown()
        shutil.rmtree(ray_tmp, ignore_errors=True)
