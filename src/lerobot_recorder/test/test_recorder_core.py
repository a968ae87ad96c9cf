"""ROS-free parts of the live recorder: rate audit, raw bags, dataset-root checks, and the worker
fed with real CDR messages (serialized with rosbags), writing a real dataset."""

import re
import time
from types import SimpleNamespace

import numpy as np
import pytest
from rosbags.rosbag2 import Reader
from rosbags.typesys import Stores, get_typestore

from lerobot_core.contract import Contract
from lerobot_dataset import DatasetReader, DatasetWriter
from lerobot_recorder.episode_control import EpisodeConfig, State
from lerobot_recorder.live_recorder import (
    LiveConfig,
    LiveRecorder,
    NoMessageYetError,
    RecorderError,
    cdr_header_stamp,
    check_dataset_root,
    select_streams,
)
from lerobot_recorder.live_types import RESULT_DISCARDED, RESULT_SAVED
from lerobot_recorder.rate_audit import AuditSpec, RateAudit
from lerobot_recorder.raw_bag import RawBagError, RawRecording
from lerobot_recorder.sim_seeds import next_seed, read_seeds

TS = get_typestore(Stores.ROS2_KILTED)
HEADER = TS.types["std_msgs/msg/Header"]
TIME = TS.types["builtin_interfaces/msg/Time"]
JOINT_STATE = TS.types["sensor_msgs/msg/JointState"]
IMAGE = TS.types["sensor_msgs/msg/Image"]
JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
CONTRACT = {
    "fps": 10,
    "robot_type": "so101_follower",
    "task": "unit task",
    "defaults": {"max_staleness": 0.25},
    "features": {
        "observation.state": {"topic": "/joint_states", "joints": JOINTS, "policy": "interpolate"},
        "observation.images.front": {
            "topic": "/cameras/front/image_raw",
            "policy": "nearest",
            "tolerance": 0.02,
        },
    },
}


# ------------------------------------------------------------------ rate audit
def test_rate_audit_warns_when_below_rate_and_when_stale_then_recovers():
    a = RateAudit([AuditSpec("cam", "/cam", expected_rate_hz=30.0, stale_after_s=0.2)], window_s=1.0)
    a.reset(0.0)
    t = 0.0
    for _ in range(40):  # 30 Hz for 1.33 s
        a.note("cam", t)
        t += 1 / 30
    health, changed = a.audit(t)
    assert changed == [] and health[0].rate_ok and not health[0].stale
    for _ in range(15):  # 15 Hz for 1 s
        a.note("cam", t)
        t += 1 / 15
    health, changed = a.audit(t)
    assert [h.name for h in changed] == ["cam"] and not changed[0].rate_ok
    assert "below the expected 30 Hz" in changed[0].describe()
    health, changed = a.audit(t + 0.5)  # silence: low rate -> stale is a new warning
    assert health[0].stale and [h.condition for h in changed] == ["stale"]
    assert "stale: last message 0.5" in changed[0].describe()
    health, changed = a.audit(t + 0.6)  # still stale: no repeat
    assert changed == []
    for _ in range(40):
        a.note("cam", t + 0.5)
        t += 1 / 30
    health, changed = a.audit(t + 0.5)
    assert [h.healthy for h in changed] == [True]


def test_rate_audit_counts_per_episode_and_reports_never_received():
    a = RateAudit([AuditSpec("j", "/j", 100.0, 0.1)])
    a.reset(0.0)
    health, changed = a.audit(0.05)
    assert changed[0].age_s == -1.0 and "no message" in changed[0].describe()
    a.note("j", 0.06)
    a.reset(1.0)
    assert a.health("j", 1.0).received == 0


# ------------------------------------------------------------------ raw bags
def _joint_cdr(t_ns, value):
    msg = JOINT_STATE(
        header=HEADER(stamp=TIME(sec=t_ns // 10**9, nanosec=t_ns % 10**9), frame_id=""),
        name=list(JOINTS),
        position=np.full(6, value, dtype=np.float64),
        velocity=np.zeros(0),
        effort=np.zeros(0),
    )
    return bytes(TS.serialize_cdr(msg, "sensor_msgs/msg/JointState"))


def _image_cdr(t_ns, seq, h=48, w=64):
    arr = np.full((h, w, 3), seq % 256, dtype=np.uint8)
    msg = IMAGE(
        header=HEADER(stamp=TIME(sec=t_ns // 10**9, nanosec=t_ns % 10**9), frame_id="cam"),
        height=h,
        width=w,
        encoding="rgb8",
        is_bigendian=0,
        step=w * 3,
        data=arr.reshape(-1),
    )
    return bytes(TS.serialize_cdr(msg, "sensor_msgs/msg/Image"))


def test_raw_recording_commits_and_discards_episode_bags(tmp_path):
    rec = RawRecording(tmp_path / "raw")
    assert rec.next_index() == 0
    w = rec.begin(0, {"/joint_states": "sensor_msgs/msg/JointState"})
    for i in range(5):
        w.put("/joint_states", 1_000 + i, _joint_cdr(10**9 + i * 10**7, float(i)))
    path = rec.commit(w, 0)
    assert path.name == "episode_000000" and rec.next_index() == 1
    with Reader(path) as r:
        got = [(c.topic, t, raw) for c, t, raw in r.messages()]
    assert [t for _, t, _ in got] == [1000, 1001, 1002, 1003, 1004]
    assert bytes(got[2][2]) == _joint_cdr(10**9 + 2 * 10**7, 2.0)  # byte for byte
    w2 = rec.begin(1, {"/joint_states": "sensor_msgs/msg/JointState"})
    w2.put("/joint_states", 5, _joint_cdr(10**9, 0.0))
    rec.discard(w2)
    assert rec.next_index() == 1 and rec.partials() == []


def test_raw_recording_refuses_foreign_folders_and_unknown_types(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(RawBagError, match="holds other files"):
        RawRecording(tmp_path)
    with pytest.raises(RawBagError, match="unknown to the rosbags typestore"):
        RawRecording(tmp_path / "new").begin(0, {"/x": "my_pkg/msg/Nope"})


# ------------------------------------------------------------------ dataset root and streams
def test_check_dataset_root(tmp_path):
    assert check_dataset_root(tmp_path / "new", False, "dataset") == "create"
    (tmp_path / "empty").mkdir()
    assert check_dataset_root(tmp_path / "empty", False, "dataset") == "create"
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "photo.jpg").write_bytes(b"x")
    with pytest.raises(RecorderError, match="not a LeRobot dataset"):
        check_dataset_root(tmp_path / "other", True, "dataset")
    w = DatasetWriter.create(tmp_path / "ds", 10, {"observation.state": {"dtype": "float32", "shape": (6,)}})
    w.finalize()
    with pytest.raises(RecorderError, match="resume:=true"):
        check_dataset_root(tmp_path / "ds", False, "dataset")
    assert check_dataset_root(tmp_path / "ds", True, "dataset") == "resume"


def test_select_streams_rejects_unknown_names():
    c = Contract.from_dict(CONTRACT)
    with pytest.raises(RecorderError, match=r"unknown stream\(s\) \['observation.images.wrist'\]"):
        select_streams(c, ("observation.images.wrist",))
    only = select_streams(c, ("observation.state",))
    assert list(only.images) == [] and list(only.streams) == ["/joint_states"]


# ------------------------------------------------------------------ the worker, end to end
class FakeClock:
    """The node clock of the stream: advanced by the test as it 'publishes'."""

    def __init__(self, t_ns):
        self.t = t_ns

    def __call__(self):
        return self.t


def _feed(rec, clock, t0_ns, seconds, seq0=0):
    """Publish 100 Hz joints + 10 fps camera on the stream clock (as fast as the worker takes them)."""
    n_j = int(seconds * 100)
    seq = seq0
    for k in range(n_j):
        t = t0_ns + k * 10_000_000
        clock.t = t
        rec.ingest("/joint_states", _joint_cdr(t, k * 0.001), t)
        if k % 10 == 0:
            rec.ingest("/cameras/front/image_raw", _image_cdr(t, seq), t)
            seq += 1
        if k % 20 == 0:
            time.sleep(0.002)
    return t0_ns + n_j * 10_000_000, seq


def _decode(topic, data):
    mtype = "sensor_msgs/msg/Image" if "image" in topic else "sensor_msgs/msg/JointState"
    return TS.deserialize_cdr(data, mtype)


def _started_worker(tmp_path, mode: str, num_episodes: int) -> tuple[LiveRecorder, FakeClock]:
    """A running LiveRecorder on the unit contract, its stream clock at 5 s (episodes end on request)."""
    cfg = LiveConfig(
        dataset_root=str(tmp_path / "ds"),
        mode=mode,
        vcodec="libx264",
        episode=EpisodeConfig(episode_time_s=1000.0, reset_time_s=0.0, num_episodes=num_episodes, task=""),
    )
    clock = FakeClock(5 * 10**9)
    rec = LiveRecorder(cfg, Contract.from_dict(CONTRACT), decode=_decode, clock=clock)
    rec.start()
    return rec, clock


def test_worker_records_saves_discards_and_writes_raw_bags(tmp_path):
    rec, clock = _started_worker(tmp_path, mode="both", num_episodes=5)
    try:
        t, seq = _feed(rec, clock, clock.t, 0.3)
        out = rec.request("start").result(10)
        assert out["episode_index"] == 0
        t, seq = _feed(rec, clock, t, 2.0, seq)
        time.sleep(0.3)
        fut = rec.outcome_future(out["seq"])
        rec.request("stop").result(30)
        oc = fut.result(5)
        assert oc.result_code == RESULT_SAVED, oc.message
        # 2 s of data at 10 fps: 20 ticks, give or take the first/last one
        assert abs(oc.frames - 20) <= 1 and oc.dropped_ticks == 0
        assert oc.raw_bag.endswith("episode_000000")
        # a second episode, discarded (re-record): nothing reaches the dataset
        out2 = rec.request("start").result(10)
        assert out2["episode_index"] == 1
        t, seq = _feed(rec, clock, t, 0.5, seq)
        fut2 = rec.outcome_future(out2["seq"])
        rec.request("discard").result(10)
        assert fut2.result(5).result_code == RESULT_DISCARDED
        assert rec.snapshot().state == State.IDLE
        rec.request("finalize").result(30)
        assert rec.snapshot().state == State.FINALIZED
    finally:
        rec.close()
    r = DatasetReader(tmp_path / "ds")
    assert r.num_episodes == 1 and r.num_frames == oc.frames
    ep = r.episode(0)
    state = np.asarray(ep["observation.state"])
    assert state.shape == (oc.frames, 6) and np.all(np.diff(state[:, 0]) > 0)  # interpolated ramp
    assert r.tasks == ["unit task"]
    assert [p.name for p in RawRecording(tmp_path / "ds_raw").episodes()] == ["episode_000000"]


@pytest.mark.parametrize("folder", ["absent", "empty"])
def test_a_failed_start_leaves_nothing_behind(tmp_path, folder):
    """A session that saves no episode (here: its episode is discarded, as when a start fails and the
    graph is stopped) removes the dataset it created, and the folders it made above it: before, the
    empty dataset blocked the retry ('already holds a dataset; set resume:=true')."""
    root = tmp_path / "new" / "deeper" / "ds"
    if folder == "empty":
        root.mkdir(parents=True)
    cfg = LiveConfig(
        dataset_root=str(root),
        vcodec="libx264",
        episode=EpisodeConfig(episode_time_s=1000.0, reset_time_s=0.0, num_episodes=1, task=""),
    )
    clock = FakeClock(5 * 10**9)
    rec = LiveRecorder(cfg, Contract.from_dict(CONTRACT), decode=_decode, clock=clock)
    rec.start()
    try:
        t, seq = _feed(rec, clock, clock.t, 0.3)
        rec.request("start").result(10)
        assert (root / "meta" / "info.json").is_file()  # created when the episode began
        _feed(rec, clock, t, 0.3, seq)
        rec.request("discard").result(10)
    finally:
        rec.close()
    if folder == "empty":
        assert root.is_dir() and list(root.iterdir()) == []  # the user's folder stays, empty again
    else:
        assert not (tmp_path / "new").exists()
    assert check_dataset_root(root, resume=False, mode="dataset") == "create"  # the retry may go ahead


def test_start_before_any_message_raises_no_message_yet_naming_the_topics(tmp_path):
    rec, clock = _started_worker(tmp_path, mode="dataset", num_episodes=1)
    try:
        with pytest.raises(NoMessageYetError, match="are the sources running") as info:
            rec.request("start").result(10)
        assert info.value.topics == ["/cameras/front/image_raw", "/joint_states"]
        _feed(rec, clock, clock.t, 0.3)  # once they arrive, the same request starts the episode
        assert rec.request("start").result(10)["episode_index"] == 0
    finally:
        rec.close(save_pending=False)


def test_samples_received_late_after_the_stop_settle_no_tick_past_it(tmp_path):
    """A loaded machine delivers samples stamped before the stop well after it: they count, but
    their late receive time must not settle (and drop) ticks that lie after the stop."""
    rec, clock = _started_worker(tmp_path, mode="dataset", num_episodes=1)
    try:
        t, seq = _feed(rec, clock, clock.t, 0.3)
        out = rec.request("start").result(10)
        t, seq = _feed(rec, clock, t, 1.0, seq)
        fut = rec.outcome_future(out["seq"])
        time.sleep(0.2)  # the worker has taken every sample so far
        t_stop = t - 5_000_000
        clock.t = t_stop
        rec.request("stop").result(10)
        # stamped before the stop, received 0.6 s after it (the tick grid is at 10 fps)
        late = t_stop + 600_000_000
        rec.ingest("/joint_states", _joint_cdr(t_stop - 1_000_000, 2.0), late)
        # then every stream has a sample past the stop: the episode closes
        rec.ingest("/cameras/front/image_raw", _image_cdr(late, seq), late)
        rec.ingest("/joint_states", _joint_cdr(late, 2.1), late)
        oc = fut.result(10)
    finally:
        rec.close()
    assert oc.result_code == RESULT_SAVED, oc.message
    m = re.search(r"ticks (-?[\d.]+) s after start to (-?[\d.]+) s before stop", oc.message)
    assert m, oc.message
    assert 0 <= float(m.group(2)) < 0.1, oc.message  # the last tick is the last one before the stop
    assert oc.dropped_ticks == 0 and oc.frames == 10, oc.message


def test_a_stop_in_lockstep_keeps_the_last_tick_whose_samples_all_arrived(tmp_path):
    """Lockstep at 30 fps: the sim stamps tick k at k x 33333333 ns (whole-ns periods), a few ns behind
    the recorder's exact 1/30 s grid, so no sample ever lies at or past a tick until the next tick's.
    The last tick (joints and image both arrived) is nothing the stop may drop; the tick after it, whose
    image never comes (the run ended), is not written."""
    contract = dict(CONTRACT, fps=30, features=dict(CONTRACT["features"]))
    contract["features"]["observation.state"] = dict(contract["features"]["observation.state"], policy="hold")
    contract["features"]["observation.images.front"] = dict(
        contract["features"]["observation.images.front"], tolerance=0.034
    )
    cfg = LiveConfig(
        dataset_root=str(tmp_path / "ds"),
        vcodec="libx264",
        episode=EpisodeConfig(episode_time_s=1000.0, reset_time_s=0.0, num_episodes=1, task=""),
    )
    period, t0, ticks = 33_333_333, 5 * 10**9, 40
    clock = FakeClock(t0)
    taken: list[int] = []
    rec = LiveRecorder(cfg, Contract.from_dict(contract), decode=_decode, clock=clock, on_taken=taken.append)
    rec.start()
    try:
        rec.ingest("/joint_states", _joint_cdr(t0 - period, -1.0), t0 - period)
        rec.ingest("/cameras/front/image_raw", _image_cdr(t0 - period, 0), t0 - period)
        out = rec.request("start").result(10)
        fut = rec.outcome_future(out["seq"])
        for k in range(ticks):
            t = clock.t = t0 + k * period
            rec.ingest("/cameras/front/image_raw", _image_cdr(t, k), t)
            rec.ingest("/joint_states", _joint_cdr(t, float(k)), t)
        # the sim stepped once more (its clock and joints) and then waits for a command that never comes
        t_end = clock.t = t0 + ticks * period
        rec.ingest("/joint_states", _joint_cdr(t_end, float(ticks)), t_end)
        deadline = time.monotonic() + 10
        while (not taken or taken[-1] < t_end - period) and time.monotonic() < deadline:
            time.sleep(0.01)
        rec.request("stop").result(10)
        oc = fut.result(10)
    finally:
        rec.close()
    assert oc.result_code == RESULT_SAVED, oc.message
    assert oc.frames == ticks and oc.dropped_ticks == 0, oc.message
    state = np.asarray(DatasetReader(tmp_path / "ds").episode(0)["observation.state"])[:, 0]
    assert state.tolist() == [float(k) for k in range(ticks)]  # tick k holds the samples stamped at k
    assert "0.033 s before stop" in oc.message, oc.message


def test_cdr_header_stamp_reads_the_stamp_without_decoding():
    t = 1_796_000_000 * 10**9 + 123_456_789
    assert cdr_header_stamp(_image_cdr(t, 3)) == t
    assert cdr_header_stamp(_joint_cdr(t, 0.5)) == t
    with pytest.raises(ValueError):
        cdr_header_stamp(b"\x00\x01\x00")


def test_raw_mode_writes_bags_only_and_continues_numbering(tmp_path):
    contract = Contract.from_dict(CONTRACT)
    raw = tmp_path / "raw"
    for run in range(2):
        cfg = LiveConfig(
            dataset_root=str(raw),
            raw_dir=str(raw),
            mode="raw",
            episode=EpisodeConfig(episode_time_s=1000.0, reset_time_s=0.0, num_episodes=5, task="t"),
        )
        clock = FakeClock((5 + 10 * run) * 10**9)
        rec = LiveRecorder(cfg, contract, decode=_decode, clock=clock)
        rec.start()
        try:
            t, seq = _feed(rec, clock, clock.t, 0.2)
            out = rec.request("start").result(10)
            assert out["episode_index"] == run  # the second run continues after episode_000000
            t, seq = _feed(rec, clock, t, 1.0, seq)
            fut = rec.outcome_future(out["seq"])
            rec.request("stop").result(10)
            t, seq = _feed(rec, clock, t, 0.2, seq)  # samples past the stop close the episode
            oc = fut.result(10)
            assert oc.result_code == RESULT_SAVED, oc.message
            assert abs(oc.frames - 10) <= 1
        finally:
            rec.close()
    assert [p.name for p in RawRecording(raw).episodes()] == ["episode_000000", "episode_000001"]
    assert not (raw / "meta").exists()  # no dataset in raw mode
    with Reader(raw / "episode_000001") as r:
        topics = {c.topic for c, _, _ in r.messages()}
    assert topics == {"/joint_states", "/cameras/front/image_raw"}


def test_on_taken_reports_the_stamp_every_required_stream_has_been_taken_in_up_to(tmp_path):
    """Lockstep acknowledgement: the newest stamp all stamped streams reached, once the worker took it."""
    cfg = LiveConfig(dataset_root=str(tmp_path / "ds"), vcodec="libx264", episode=EpisodeConfig(task=""))
    clock = FakeClock(5 * 10**9)
    taken: list[int] = []
    rec = LiveRecorder(cfg, Contract.from_dict(CONTRACT), decode=_decode, clock=clock, on_taken=taken.append)
    rec.start()
    try:
        t0 = 5 * 10**9
        rec.ingest("/joint_states", _joint_cdr(t0, 0.0), t0)
        rec.ingest("/joint_states", _joint_cdr(t0 + 10**8, 0.0), t0 + 10**8)
        time.sleep(0.3)
        assert taken == []  # the camera has not delivered yet: nothing is complete
        rec.ingest("/cameras/front/image_raw", _image_cdr(t0, 0), t0)
        deadline = time.monotonic() + 10
        while not taken and time.monotonic() < deadline:
            time.sleep(0.01)
        assert taken == [t0]  # the camera's stamp bounds it
        rec.ingest("/cameras/front/image_raw", _image_cdr(t0 + 2 * 10**8, 1), t0 + 2 * 10**8)
        deadline = time.monotonic() + 10
        while len(taken) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert taken == [t0, t0 + 10**8]  # now the joints' newest stamp bounds it; never goes back
    finally:
        rec.close()


# ------------------------------------------------------------------ sim episode boundaries
def _info_bytes(t_ns, episode, step, done):
    return f"{t_ns} {episode} {step} {int(done)}".encode()


def _decode_with_info(topic, data):
    if topic == "/sim/episode_info":
        t, episode, step, done = (int(x) for x in data.decode().split())
        return SimpleNamespace(
            header=SimpleNamespace(stamp=SimpleNamespace(sec=t // 10**9, nanosec=t % 10**9)),
            episode_index=episode,
            step=step,
            seed=episode,
            terminated=bool(done),
            truncated=False,
            is_success=bool(done),
        )
    return _decode(topic, data)


class _LockstepSim:
    """Publishes like lerobot_sim in lockstep: per step the image, the joints (value = 100 x episode +
    step) and, last, the episode info, all stamped with the step's sim time (10 fps); a reset takes one
    period. Some steps' info overtakes their data (other topics are not ordered with it)."""

    def __init__(self, rec, clock, t0_ns):
        self.rec, self.clock, self.t, self.episode, self.seq = rec, clock, t0_ns, -1, 0

    def tick(self, step, done):
        t, v = self.t, 100 * self.episode + step
        self.clock.t = t
        parts = [
            ("/cameras/front/image_raw", _image_cdr(t, self.seq)),
            ("/joint_states", _joint_cdr(t, float(v))),
            ("/sim/episode_info", _info_bytes(t, self.episode, step, done)),
        ]
        if self.seq % 3 == 1:
            parts = parts[::-1]
        for topic, data in parts:
            self.rec.ingest(topic, data, t)
        self.seq += 1
        self.t += 100_000_000
        time.sleep(0.003)

    def episode_of(self, steps, upto=None):
        """A new sim episode that ends (done) at step ``steps``; stop early at step ``upto``."""
        self.episode += 1
        for step in range(steps + 1 if upto is None else upto + 1):
            self.tick(step, done=step == steps)

    def resume(self, from_step, steps):
        for step in range(from_step, steps + 1):
            self.tick(step, done=step == steps)


def _sim_worker(tmp_path, num_episodes, episode_time_s=1000.0):
    cfg = LiveConfig(
        dataset_root=str(tmp_path / "ds"),
        vcodec="libx264",
        episode=EpisodeConfig(
            episode_time_s=episode_time_s, reset_time_s=0.0, num_episodes=num_episodes, task=""
        ),
        episode_boundaries="sim",
    )
    contract = dict(CONTRACT, features=dict(CONTRACT["features"]))
    contract["features"]["observation.state"] = dict(contract["features"]["observation.state"], policy="hold")
    clock = FakeClock(0)
    rec = LiveRecorder(cfg, Contract.from_dict(contract), decode=_decode_with_info, clock=clock)
    rec.start()
    return rec, _LockstepSim(rec, clock, 5 * 10**9)


def _episode_values(root):
    r = DatasetReader(root)
    return [
        np.asarray(r.episode(i)["observation.state"])[:, 0].round().astype(int).tolist()
        for i in range(r.num_episodes)
    ]


@pytest.mark.parametrize("join_at_step", [0, 2])
def test_sim_boundaries_record_one_sim_episode_each_from_its_reset_to_its_done_step(tmp_path, join_at_step):
    """A recorder that starts at the sim's reset records that episode; one that joins mid-episode
    waits for the next reset. Each dataset episode is exactly one sim episode: its reset frame, every
    step, the done step, and nothing of the next one."""
    rec, sim = _sim_worker(tmp_path, num_episodes=2)
    try:
        sim.episode_of(5, upto=join_at_step)
        deadline = time.monotonic() + 10
        while True:  # the session starts once every stream has delivered
            try:
                rec.request("start", session=True).result(10)
                break
            except NoMessageYetError:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        sim.resume(join_at_step + 1, 5)
        sim.episode_of(3)
        sim.episode_of(4)
        sim.episode_of(6)
        deadline = time.monotonic() + 20
        while not rec.done.is_set() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert rec.done.is_set(), rec.snapshot().message
        rec.request("finalize").result(30)
    finally:
        rec.close()
    expected = {
        0: [[0, 1, 2, 3, 4, 5], [100, 101, 102, 103]],
        2: [[100, 101, 102, 103], [200, 201, 202, 203, 204]],
    }[join_at_step]
    assert _episode_values(tmp_path / "ds") == expected
    # the seed of each saved episode's sim episode is kept: a resumed recording continues after them
    assert read_seeds(tmp_path / "ds") == ({0: 0, 1: 1} if join_at_step == 0 else {0: 1, 1: 2})
    assert next_seed(tmp_path / "ds")[0] == (2 if join_at_step == 0 else 3)


def test_sim_boundaries_episode_time_caps_an_episode_and_the_next_waits_for_a_reset(tmp_path):
    """episode_time_s stays a cap (here on the wall clock: 0.5 s); the episode after a capped one
    begins at the sim's next reset, not in the middle of the episode it cut."""
    rec, sim = _sim_worker(tmp_path, num_episodes=2, episode_time_s=0.5)
    try:
        sim.episode_of(3, upto=0)
        rec.request("start", session=True).result(10)
        for step in range(1, 200):  # a long sim episode: the cap ends the recorded one
            sim.tick(step, done=False)
            if rec.snapshot().episodes_recorded:
                break
        sim.tick(step + 1, done=True)
        sim.episode_of(2)
        sim.episode_of(2)
        deadline = time.monotonic() + 20
        while not rec.done.is_set() and time.monotonic() < deadline:
            time.sleep(0.02)
        rec.request("finalize").result(30)
    finally:
        rec.close()
    first, second = _episode_values(tmp_path / "ds")
    assert first[0] == 0 and 1 < len(first) < step + 2 and first == list(range(len(first)))
    assert second == [100, 101, 102]


def test_a_sim_reset_is_not_reported_as_stale_or_slow_streams(tmp_path, caplog):
    """The sim publishes nothing while it resets (a realtime sim: ~1 s). The recorder waiting for that
    reset warned that every stream was stale, then below its rate (the window held the pause), and
    logged each recovery: a burst at every reset. A pause inside a sim episode is still reported."""
    import logging

    caplog.set_level(logging.INFO, logger="recorder")
    rec, sim = _sim_worker(tmp_path, num_episodes=1)

    def run(steps, done_at=None, first=0):
        for step in range(first, first + steps):
            sim.tick(step, done=step == done_at)
            time.sleep(0.03)  # ~30 Hz on the wall clock, above the contract's 10 fps

    try:
        sim.episode_of(60, upto=2)  # joined mid-episode: the recording begins at the next reset
        deadline = time.monotonic() + 10
        while True:
            try:
                rec.request("start", session=True).result(10)
                break
            except NoMessageYetError:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        run(40, done_at=42, first=3)  # more than one audit window while recording (waiting)
        time.sleep(1.5)  # the reset
        sim.episode += 1
        run(45)  # the recorded episode, more than one window
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
        assert "recovered" not in caplog.text
        # the sim silent inside an episode: that is still reported
        deadline = time.monotonic() + 5
        while "stale: last message" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.05)
        assert "stale: last message" in caplog.text
        sim.tick(45, done=True)
        deadline = time.monotonic() + 20
        while not rec.done.is_set() and time.monotonic() < deadline:
            time.sleep(0.02)
        rec.request("finalize").result(30)
    finally:
        rec.close()
    assert len(_episode_values(tmp_path / "ds")) == 1


def test_episode_boundaries_must_be_time_or_sim(tmp_path):
    cfg = LiveConfig(
        dataset_root=str(tmp_path / "ds"), episode=EpisodeConfig(task=""), episode_boundaries="steps"
    )
    with pytest.raises(
        ValueError, match=r"parameter 'episode_boundaries' must be one of \('time', 'sim'\), got 'steps'"
    ):
        LiveRecorder(cfg, Contract.from_dict(CONTRACT), decode=_decode, clock=FakeClock(0))


def test_a_saved_episode_ends_at_its_newest_common_sample_never_past_the_stop():
    """The aligner's default end reaches 0.1 ms past the newest common sample (the last tick of a
    lockstep sim's whole-ns clock); a live episode's end never passes its stop."""
    from lerobot_core.alignment import Aligner, StreamSpec
    from lerobot_recorder.live_recorder import LiveRecorder, _Episode

    period = 1_000_000_000 // 30
    aligner = Aligner(30, [StreamSpec("a"), StreamSpec("b")], history_s=None)
    for k in range(4):
        aligner.push("a", k, stamp_ns=k * period)
        aligner.push("b", k, stamp_ns=k * period)
    ep = _Episode(index=0, aligner=aligner, t_begin_ns=0)
    assert LiveRecorder._end_of(ep) is None  # not stopped: the aligner's own default
    ep.t_stop_ns = 10 * period
    assert LiveRecorder._end_of(ep) == 3 * period + aligner.end_slack_ns
    ep.t_stop_ns = 3 * period  # grid tick 3 lies 1 ns past the stop
    assert LiveRecorder._end_of(ep) == 3 * period
    assert [f.values["a"] for f in aligner.finish(LiveRecorder._end_of(ep))] == [0, 1, 2]
    ep.end_ns = 5  # the sim ended the episode: its done step decides
    assert LiveRecorder._end_of(ep) == 5
