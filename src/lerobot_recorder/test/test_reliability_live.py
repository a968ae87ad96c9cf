"""Reliability probes of the live recorder's worker (ROS-free, real CDR messages, a real dataset):
a full disk, a stop request during a save, NaN joints, a silent camera, resume onto a damaged dataset.

Each asserts the outcome, the message, and that what was saved before is byte-identical (md5)."""

import hashlib
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from lerobot_core.contract import Contract
from lerobot_dataset import DatasetReader
from lerobot_dataset.check import check_dataset
from lerobot_recorder import bag_io
from lerobot_recorder.episode_control import EpisodeConfig, State
from lerobot_recorder.live_recorder import LiveConfig, LiveRecorder, RecorderError
from lerobot_recorder.live_types import RESULT_ERROR, RESULT_SAVED

JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
FRONT, WRIST = "/cameras/front/image_raw", "/cameras/wrist/image_raw"
CONTRACT = {
    "fps": 10,
    "robot_type": "so101_follower",
    "task": "probe",
    "defaults": {"max_staleness": 0.25},
    "features": {
        "observation.state": {"topic": "/joint_states", "joints": JOINTS, "policy": "interpolate"},
        "observation.images.front": {"topic": FRONT, "policy": "nearest", "tolerance": 0.02},
        "observation.images.wrist": {"topic": WRIST, "policy": "nearest", "tolerance": 0.02},
    },
}
T0 = 5 * 10**9


def _decode(topic, data):
    return bag_io.deserialize(
        data, "sensor_msgs/msg/Image" if "image" in topic else "sensor_msgs/msg/JointState"
    )


class Stream:
    """Publishes 100 Hz joints (value = seconds on the stream clock) and 10 fps cameras into a worker,
    on its own clock, from a thread (as fast as the worker takes them, paced lightly)."""

    def __init__(self, cameras=(FRONT, WRIST), nan_at=()):
        self.t = T0
        self.cameras = cameras
        self.nan_at = set(nan_at)  # joint message indices published with a NaN
        self.k = 0
        self._stop = threading.Event()
        self._thread = None

    def clock(self):
        return self.t

    def publish(self, rec, seconds):
        for _ in range(int(seconds * 100)):
            self.step(rec)

    def step(self, rec):
        t = self.t
        pos = np.full(6, t / 1e9)
        if self.k in self.nan_at:
            pos[2] = np.nan
        rec.ingest("/joint_states", bag_io.serialize(bag_io.joint_state(t, JOINTS, pos)), t)
        if self.k % 10 == 0:
            for cam in self.cameras:
                h, w = (48, 64) if cam == FRONT else (32, 48)
                img = np.full((h, w, 3), (self.k // 10) % 256, np.uint8)
                rec.ingest(cam, bag_io.serialize(bag_io.image(t, img)), t)
            time.sleep(0.003)
        self.k += 1
        self.t = t + 10_000_000

    def run(self, rec):
        def loop():
            while not self._stop.is_set():
                self.step(rec)

        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()

    def stop(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)


def worker(root, stream, num_episodes=5, episode_time_s=1000.0, **cfg):
    live = LiveConfig(
        dataset_root=str(root),
        vcodec="libx264",
        episode=EpisodeConfig(
            episode_time_s=episode_time_s, reset_time_s=0.0, num_episodes=num_episodes, task=""
        ),
        **cfg,
    )
    rec = LiveRecorder(live, Contract.from_dict(CONTRACT), decode=_decode, clock=stream.clock)
    rec.start()
    return rec


def record_one(rec, stream, seconds=1.0):
    out = rec.request("start").result(10)
    fut = rec.outcome_future(out["seq"])
    stream.publish(rec, seconds)
    try:
        rec.request("stop").result(30)
    except RecorderError as exc:  # the episode already ended by itself (refused)
        assert "nothing to stop" in str(exc)
    return fut.result(30)


def md5s(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.md5(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and ".lerobot_ros" not in p.parts
    }


def wait_for(predicate, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def _mount_tmpfs(path: Path, size: str) -> bool:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    path.mkdir()
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)]).returncode == 0


def test_a_full_disk_stops_the_session_after_the_first_failed_save(tmp_path):
    """Before: each save failed, the episode was thrown away and recorded again, for ever."""
    mnt = tmp_path / "small"
    if not _mount_tmpfs(mnt, "3m"):
        pytest.skip("needs root and permission to mount a tmpfs (not available in this environment)")
    try:
        _full_disk_session(mnt)
    finally:
        subprocess.run(["umount", "-l", str(mnt)])


def _full_disk_session(mnt: Path) -> None:
    stream = Stream()
    rec = worker(mnt / "ds", stream, num_episodes=6, episode_time_s=0.5)
    try:
        stream.publish(rec, 0.3)
        assert record_one(rec, stream).result_code == RESULT_SAVED
        before = md5s(mnt / "ds")
        st = os.statvfs(mnt)
        with open(mnt / "filler", "wb") as f:  # leave 24 KiB: less than an episode's save needs
            f.write(b"\0" * max(0, st.f_bavail * st.f_frsize - 24 * 1024))
        stream.run(rec)
        rec.request("start", session=True).result(10)
        assert wait_for(lambda: getattr(rec, "fatal", None), 30), "the session went on recording"
        seq_then = rec._episode_seq
        time.sleep(1.0)  # nothing more is started
        assert rec._episode_seq == seq_then
        assert rec.snapshot().state == State.ERROR and rec.done.is_set()
        assert "disk full" in rec.fatal and "episode 1 was not saved" in rec.fatal, rec.fatal
        assert "1 episode(s) saved before it are intact" in rec.fatal and "resume:=true" in rec.fatal
        assert rec._last_outcome.result_code == RESULT_ERROR
        with pytest.raises(RecorderError, match="error state"):
            rec.request("start").result(10)
    finally:
        stream.stop()
        rec.close(timeout=10)
    assert md5s(mnt / "ds") == before
    (mnt / "filler").unlink()
    assert check_dataset(mnt / "ds") == []
    assert DatasetReader(mnt / "ds").num_episodes == 1


def test_a_stop_request_during_a_save_keeps_nothing_recorded_after_it(tmp_path):
    """SIGINT while a session saves: the next episode begins meanwhile; it must not be saved, and no
    saved frame is from after the request (the state ramp is the stream clock in seconds)."""
    stream = Stream()
    rec = worker(tmp_path / "ds", stream, num_episodes=50, episode_time_s=0.4)
    stream.publish(rec, 0.3)
    stream.run(rec)
    rec.request("start", session=True).result(10)
    assert wait_for(lambda: rec._episode_seq >= 2 and rec.snapshot().state == State.SAVING, 30)
    stop_s = stream.clock() / 1e9
    seq = rec._episode_seq
    rec.close(save_pending=True)
    stream.stop()
    r = DatasetReader(tmp_path / "ds")
    assert r.num_episodes <= seq, (r.num_episodes, seq)  # none begun after the stop request
    last = np.concatenate([r.episode(e)["observation.state"][:, 0] for e in range(r.num_episodes)])
    assert last.max() <= stop_s + 1e-6, (last.max(), stop_s)
    assert check_dataset(tmp_path / "ds") == []


def test_a_second_recorder_on_the_same_dataset_is_refused_saying_why(tmp_path):
    """A second recorder resuming a dataset the first still writes: refused with the holder and what to
    do, in the recorder's words (was only "autostart: configure failed; exiting"); nothing changes."""
    stream = Stream()
    first = worker(tmp_path / "ds", stream)
    try:
        stream.publish(first, 0.3)
        assert record_one(first, stream).result_code == RESULT_SAVED
        before = md5s(tmp_path / "ds")
        with pytest.raises(RecorderError) as refused:
            worker(tmp_path / "ds", Stream(), resume=True)
        text = str(refused.value)
        assert text.startswith("resume:=true: ") and f"another writer (process {os.getpid()}: " in text, text
        assert "stop that one first" in text and "DatasetWriter" not in text, text
    finally:
        first.close(timeout=10)
    assert md5s(tmp_path / "ds") == before
    assert DatasetReader(tmp_path / "ds").num_episodes == 1


@pytest.mark.parametrize("mode", ["refuse", "drop"])
def test_nan_joints_refuse_the_episode_or_are_dropped_and_counted(tmp_path, mode):
    stream = Stream(nan_at={60, 61, 75})
    rec = worker(tmp_path / "ds", stream, non_finite=mode)
    try:
        stream.publish(rec, 0.3)
        assert record_one(rec, stream, 0.2).result_code == RESULT_SAVED  # messages 30..49: finite
        before = md5s(tmp_path / "ds")
        oc = record_one(rec, stream, 0.5)  # messages 50..99: three hold a NaN
    finally:
        rec.close()
    if mode == "refuse":
        assert oc.result_code == RESULT_ERROR
        assert "topic /joint_states: 1 non-finite value(s) (NaN or inf) in elbow_flex position" in oc.message
        assert "episode 1 is not saved (non_finite:=drop" in oc.message
        assert md5s(tmp_path / "ds") == before
    else:
        assert oc.result_code == RESULT_SAVED, oc.message
        assert rec._rejected == {"/joint_states": 3}
        state = DatasetReader(tmp_path / "ds").episode(1)["observation.state"]
        assert np.isfinite(state).all()
    assert check_dataset(tmp_path / "ds") == []


@pytest.mark.parametrize("resume", [False, True])
def test_a_silent_camera_fails_fast_naming_it(tmp_path, resume):
    """resume:=true cameras:="['front']" against a two-camera contract waited for ever."""
    if resume:
        full = Stream()
        rec = worker(tmp_path / "ds", full)
        full.publish(rec, 0.3)
        assert record_one(rec, full).result_code == RESULT_SAVED
        rec.close()
    before = md5s(tmp_path / "ds") if resume else {}
    stream = Stream(cameras=(FRONT,))
    rec = worker(tmp_path / "ds", stream, resume=resume, source_timeout_s=1.0)
    try:
        stream.run(rec)
        t0 = time.monotonic()
        while True:
            try:
                rec.request("start").result(10)
            except RecorderError as exc:
                if "no message received yet" in str(exc) and time.monotonic() - t0 < 10:
                    time.sleep(0.1)
                    continue
                message = str(exc)
                break
            pytest.fail("an episode started without the wrist camera")
    finally:
        stream.stop()
        rec.close()
    assert "no message on /cameras/wrist/image_raw (observation.images.wrist)" in message, message
    assert "/joint_states" in message and "cameras:=" in message
    assert time.monotonic() - t0 < 5
    if resume:
        assert md5s(tmp_path / "ds") == before


def test_live_resume_refuses_a_damaged_dataset_with_the_reason(tmp_path):
    stream = Stream()
    rec = worker(tmp_path / "ds", stream)
    stream.publish(rec, 0.3)
    assert record_one(rec, stream).result_code == RESULT_SAVED
    rec.close()
    (tmp_path / "ds/meta/stats.json").unlink()
    before = md5s(tmp_path / "ds")
    with pytest.raises(RecorderError) as info:
        worker(tmp_path / "ds", Stream(), resume=True)
    text = str(info.value)
    assert text.startswith("resume:=true: ") and "refusing to append to a damaged dataset" in text
    assert "meta/stats.json: missing" in text and "--repair" in text
    assert md5s(tmp_path / "ds") == before


def test_a_source_that_keeps_sending_nan_stops_the_session_after_three_refused_episodes(tmp_path):
    """Refusing each episode must not become an endless re-record loop."""
    stream = Stream()
    rec = worker(tmp_path / "ds", stream, num_episodes=10, episode_time_s=0.5)
    try:
        stream.publish(rec, 0.3)
        assert record_one(rec, stream).result_code == RESULT_SAVED
        before = md5s(tmp_path / "ds")
        stream.nan_at = set(range(stream.k, stream.k + 10**6))  # from here every joint message is NaN
        stream.run(rec)
        rec.request("start", session=True).result(10)
        assert wait_for(lambda: getattr(rec, "fatal", None), 30), "the session went on re-recording"
        assert "3 episodes in a row were refused for NaN or inf values" in rec.fatal, rec.fatal
        assert "non_finite:=drop" in rec.fatal and rec.snapshot().state == State.ERROR
        seq = rec._episode_seq
        time.sleep(0.5)
        assert rec._episode_seq == seq
    finally:
        stream.stop()
        rec.close(timeout=10)
    assert md5s(tmp_path / "ds") == before
    assert check_dataset(tmp_path / "ds") == []
