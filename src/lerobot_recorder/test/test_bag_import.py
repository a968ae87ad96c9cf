"""lerobot-bag-import end to end: real rosbag2 files (sqlite3 and mcap, CDR via rosbags) -> dataset."""

import shutil
from pathlib import Path

import numpy as np
import pytest
from rosbags.rosbag2 import StoragePlugin, Writer

from lerobot_core.contract import Contract
from lerobot_dataset import DatasetReader, DatasetWriter
from lerobot_recorder import bag_io
from lerobot_recorder.bag_import import BagImportError, import_bags
from lerobot_recorder.bag_import_cli import main

SO101 = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
T0 = 1_700_000_000 * 1_000_000_000  # a realistic epoch stamp
MS = 1_000_000
H, W = 48, 64
STORAGES = pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
CAM = "/cameras/front/image_raw"


def write_bag(path, storage, events):
    """events: (log_time_ns, topic, msg); connections are created in first-use order."""
    plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
    conns = {}
    with Writer(path, version=9, storage_plugin=plugin) as writer:
        for log_time, topic, msg in sorted(events, key=lambda e: e[0]):
            if topic not in conns:
                conns[topic] = writer.add_connection(topic, msg.__msgtype__, typestore=bag_io.typestore())
            writer.write(conns[topic], log_time, bag_io.serialize(msg))
    return Path(path)


def session(seconds=1.0, t0=T0, joint_offset=0.0, image=None, cam_encoding="rgb8", extra=()):
    """Follower joints at 100 Hz (value = 0.01 * i + offset), leader at 100 Hz (-0.01 * i),
    camera at 30 Hz (flat grey frame whose level is the frame number * 4), 1-15 ms transport delay."""
    events = []
    for i in range(int(seconds * 100)):
        t = t0 + i * 10 * MS
        events.append(
            (t + 1 * MS, "/joint_states", bag_io.joint_state(t, SO101, np.full(6, 0.01 * i + joint_offset)))
        )
        events.append(
            (t + 2 * MS, "/leader/joint_states", bag_io.joint_state(t, SO101, np.full(6, -0.01 * i)))
        )
    for i in range(int(seconds * 30)):
        t = t0 + (i * 1_000_000_000) // 30
        img = np.full((H, W, 3), (i * 4) % 256, np.uint8) if image is None else image(i)
        if cam_encoding == "bgr8":
            img = np.ascontiguousarray(img[:, :, ::-1])
        events.append((t + 15 * MS, CAM, bag_io.image(t, img, cam_encoding)))
    return events + list(extra)


def quick_contract(fps=30, **kw):
    return Contract.from_flags(
        fps,
        state="/joint_states",
        action="/leader/joint_states",
        images={"front": CAM},
        task="pick the cube",
        **kw,
    )


def expected_state(fps, n):
    """Follower positions interpolated at tick k: stamps every 10 ms, value 0.01 per sample."""
    ticks = [(k * 1_000_000_000) // fps for k in range(n)]
    return np.array([0.01 * t / (10 * MS) for t in ticks], dtype=np.float32)


@STORAGES
def test_import_one_bag_exact_values(tmp_path, storage):
    bag = write_bag(tmp_path / "bag", storage, session(1.0))
    summary = import_bags([bag], quick_contract(), tmp_path / "ds", progress=False)
    assert summary.frames == 30 and summary.dropped_ticks == 0
    rates = summary.stream_rates()
    assert rates["/joint_states"][0] == 100 and rates["/joint_states"][1] == pytest.approx(100.0)
    assert rates[CAM][1] == pytest.approx(30.0, rel=1e-3)
    r = DatasetReader(tmp_path / "ds")
    assert (r.num_episodes, r.num_frames, r.fps) == (1, 30, 30)
    assert r.features["observation.state"]["names"] == [f"{j}.pos" for j in SO101]
    ep = r.episode(0)
    np.testing.assert_allclose(ep["observation.state"][:, 0], expected_state(30, 30), rtol=0, atol=1e-6)
    # action holds the leader's latest sample at or before the tick: floor(tick / 10 ms)
    held = [-0.01 * ((k * 1_000_000_000 // 30) // (10 * MS)) for k in range(30)]
    np.testing.assert_allclose(ep["action"][:, 3], np.array(held, np.float32), atol=1e-6)
    assert ep["frame_index"].tolist() == list(range(30))
    assert set(ep["task"]) == {"pick the cube"}
    frames = r.video_frames("observation.images.front", 0)
    assert frames.shape == (30, H, W, 3)
    # the camera frame stamped on the tick is used: grey level 4 * k (lossy AV1 on flat frames)
    assert np.abs(frames.reshape(30, -1).mean(axis=1) - 4 * np.arange(30)).max() < 2.5


def test_lockstep_sim_stamps_import_every_tick(tmp_path):
    """A raw bag of a lockstep sim: every stream stamped with the sim tick, k * 33333333 ns (whole-ns
    periods, so up to k/3 ns before the exact 1/30 s grid). Every tick of the bag is a frame, the last
    one included (it used to be lost: the live recording of the same run had one frame more)."""
    period = 1_000_000_000 // 30
    events = []
    for k in range(45):
        t = T0 + k * period
        events.append((t + MS, "/joint_states", bag_io.joint_state(t, SO101, np.full(6, 0.01 * k))))
        events.append((t + MS, "/leader/joint_states", bag_io.joint_state(t, SO101, np.full(6, -0.01 * k))))
        events.append((t + 2 * MS, CAM, bag_io.image(t, np.full((H, W, 3), k * 4, np.uint8), "rgb8")))
    bag = write_bag(tmp_path / "bag", "mcap", events)
    summary = import_bags([bag], quick_contract(), tmp_path / "ds", progress=False)
    assert summary.frames == 45 and summary.dropped_ticks == 0
    ep = DatasetReader(tmp_path / "ds").episode(0)
    np.testing.assert_allclose(ep["observation.state"][:, 0], 0.01 * np.arange(45), atol=1e-5)
    np.testing.assert_allclose(ep["action"][:, 0], -0.01 * np.arange(45), atol=1e-5)
    frames = DatasetReader(tmp_path / "ds").video_frames("observation.images.front", 0)
    assert np.abs(frames.reshape(45, -1).mean(axis=1) - 4 * np.arange(45)).max() < 2.5


@STORAGES
def test_many_bags_resume_and_split(tmp_path, storage):
    a = write_bag(tmp_path / "a", storage, session(1.0))
    b = write_bag(tmp_path / "b", storage, session(0.5, t0=T0 + 60 * 10**9))
    out = tmp_path / "ds"
    s1 = import_bags([a, b], quick_contract(), out, progress=False)
    assert [e.frames for e in s1.episodes] == [30, 15]
    # a marker topic splits one bag into episodes; markers at 0.4 s and 0.7 s
    marks = [(T0 + t * MS, "/episode_marker", bag_io.string("next")) for t in (400, 700)]
    c = write_bag(tmp_path / "c", storage, session(1.0, extra=marks))
    s2 = import_bags([c], quick_contract(), out, resume=True, split_topic="/episode_marker", progress=False)
    # segments [0, 400 ms), [400, 700 ms), [700 ms, 966.7 ms = last camera frame]: ticks on 1/30 s
    # grids anchored at each start; a marker's instant belongs to the episode it starts
    assert [e.frames for e in s2.episodes] == [12, 9, 9]
    assert [e.episode_index for e in s2.episodes] == [2, 3, 4]
    r = DatasetReader(out)
    assert r.num_episodes == 5 and r.num_frames == 30 + 15 + 30
    seg2 = r.episode(3)["observation.state"][:, 0]
    ticks = [400 * MS + (k * 1_000_000_000) // 30 for k in range(9)]
    np.testing.assert_allclose(seg2, np.array([0.01 * t / (10 * MS) for t in ticks], np.float32), atol=1e-6)


def test_contract_file_and_cli(tmp_path, capsys):
    bag = write_bag(tmp_path / "bag", "mcap", session(0.5, cam_encoding="bgr8"))
    contract = tmp_path / "c.yaml"
    contract.write_text(
        f"""
fps: 10
robot_type: so101_follower
task: stack
units: degrees
features:
  observation.state: {{topic: /joint_states, joints: [gripper, shoulder_pan], policy: interpolate}}
  action: {{topic: /leader/joint_states, joints: [gripper]}}
  observation.images.front: {{topic: {CAM}, policy: nearest, tolerance: 0.02, encoding: bgr8}}
"""
    )
    assert main([str(bag), "--output", str(tmp_path / "ds"), "--config", str(contract), "--check"]) == 0
    checked = capsys.readouterr().out
    assert "1 bag(s) fit the contract" in checked and "observation.images.front: video (48, 64, 3)" in checked
    assert not (tmp_path / "ds").exists()  # --check writes nothing
    rc = main([str(bag), "--output", str(tmp_path / "ds"), "--config", str(contract)])
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert "imported 1 episode(s), 5 frames, 0 dropped ticks" in out.out
    assert "/joint_states: 50 msgs, 100.00 Hz" in out.out
    assert "100.0%" in out.err  # the progress bar reached the end
    r = DatasetReader(tmp_path / "ds")
    assert r.info["robot_type"] == "so101_follower"
    assert r.features["observation.state"]["names"] == ["gripper.pos", "shoulder_pan.pos"]
    state = r.episode(0)["observation.state"]
    np.testing.assert_allclose(state[:, 1], np.degrees(expected_state(10, 5).astype(np.float64)), atol=1e-4)
    frames = r.video_frames("observation.images.front", 0)
    assert np.abs(frames.reshape(5, -1).mean(axis=1) - 4 * 3 * np.arange(5)).max() < 2.5  # bgr8 -> RGB, grey


def _assert_nothing_written(out: Path):
    assert not out.exists() or not any(out.iterdir())


def test_missing_topic_names_bag_and_topic(tmp_path):
    events = [e for e in session(0.3) if e[1] != "/leader/joint_states"]
    bag = write_bag(tmp_path / "nolead", "sqlite3", events)
    with pytest.raises(
        BagImportError, match=r"nolead: topic /leader/joint_states is not in the bag \(topics: "
    ):
        import_bags([bag], quick_contract(), tmp_path / "ds", progress=False)
    _assert_nothing_written(tmp_path / "ds")


def test_unknown_message_type(tmp_path):
    events = session(0.3) + [(T0, "/task_text", bag_io.string("x"))]
    bag = write_bag(tmp_path / "bag", "mcap", events)
    contract = Contract.from_flags(30, state="/task_text", images={"front": CAM}, task="t")
    with pytest.raises(
        BagImportError, match="bag: topic /task_text has message type std_msgs/msg/String, but"
    ):
        import_bags([bag], contract, tmp_path / "ds", progress=False)
    _assert_nothing_written(tmp_path / "ds")


@STORAGES
def test_corrupt_bag(tmp_path, storage):
    good = write_bag(tmp_path / "good", storage, session(0.3))
    bad = write_bag(tmp_path / "bad", storage, session(0.3))
    data_file = next(p for p in bad.iterdir() if p.suffix in (".mcap", ".db3"))
    data_file.write_bytes(data_file.read_bytes()[:200])
    with pytest.raises(BagImportError, match=r"bad: "):
        import_bags([good, bad], quick_contract(), tmp_path / "ds", progress=False)
    _assert_nothing_written(tmp_path / "ds")
    (bad / "metadata.yaml").write_text("not: [a rosbag2")
    with pytest.raises(BagImportError, match=r"bad: cannot open the bag"):
        import_bags([bad], quick_contract(), tmp_path / "ds", progress=False)
    with pytest.raises(BagImportError, match=r"nowhere: no such bag directory"):
        import_bags([tmp_path / "nowhere"], quick_contract(), tmp_path / "ds", progress=False)


def test_encoding_mismatch_and_zero_stamps(tmp_path):
    bag = write_bag(tmp_path / "bgr", "mcap", session(0.3, cam_encoding="bgr8"))
    contract = Contract.from_dict(
        {"fps": 30, "task": "t", "features": {"observation.images.front": {"topic": CAM, "encoding": "rgb8"}}}
    )
    with pytest.raises(
        BagImportError, match=rf"bgr: topic {CAM}: encoding 'bgr8' does not match the contract's 'rgb8'"
    ):
        import_bags([bag], contract, tmp_path / "ds", progress=False)
    depth = write_bag(  # 16UC1 is a depth camera now (test_depth.py); 16SC1 is neither RGB nor depth
        tmp_path / "depth",
        "mcap",
        [(T0 + i, CAM, bag_io.image(T0 + i, np.zeros((4, 4), np.int16), "16SC1")) for i in range(3)],
    )
    any_encoding = Contract.from_dict(
        {"fps": 30, "task": "t", "features": {"observation.images.front": {"topic": CAM}}}
    )
    with pytest.raises(BagImportError, match=rf"depth: topic {CAM}: encoding '16SC1' cannot be recorded"):
        import_bags([depth], any_encoding, tmp_path / "ds", progress=False)
    zero = write_bag(
        tmp_path / "zero",
        "sqlite3",
        [(T0 + i * 10 * MS, "/joint_states", bag_io.joint_state(0, SO101, np.zeros(6))) for i in range(5)],
    )
    with pytest.raises(
        BagImportError, match=r"zero: topic /joint_states: header stamps are zero .* 'timeline: receive'"
    ):
        import_bags(
            [zero], Contract.from_flags(30, state="/joint_states", task="t"), tmp_path / "ds", progress=False
        )
    _assert_nothing_written(tmp_path / "ds")


def test_failure_mid_bag_keeps_earlier_episodes_and_stays_resumable(tmp_path):
    good = write_bag(tmp_path / "good", "mcap", session(0.5))

    def image(i):  # frame 10 of the second bag has a different size: found only while importing
        return np.zeros((H // 2 if i == 10 else H, W, 3), np.uint8)

    broken = write_bag(tmp_path / "broken", "mcap", session(0.5, t0=T0 + 10**10, image=image))
    out = tmp_path / "ds"
    with pytest.raises(BagImportError, match=rf"broken: topic {CAM}: image size changed to 64x24"):
        import_bags([good, broken], quick_contract(), out, progress=False)
    r = DatasetReader(out)
    assert r.num_episodes == 1 and r.num_frames == 15
    # the dataset is resumable and the next import appends after the intact episode
    again = write_bag(tmp_path / "again", "sqlite3", session(0.5, t0=T0 + 2 * 10**10))
    s = import_bags([again], quick_contract(), out, resume=True, progress=False)
    assert [e.episode_index for e in s.episodes] == [1]
    assert DatasetReader(out).num_frames == 30


def test_resume_refuses_different_features_and_fresh_import_refuses_existing(tmp_path):
    bag = write_bag(tmp_path / "bag", "mcap", session(0.3))
    out = tmp_path / "ds"
    import_bags([bag], quick_contract(), out, progress=False)
    with pytest.raises(
        BagImportError, match=r"--output .*ds exists and is not empty \(a dataset\): pass --resume"
    ):
        import_bags([bag], quick_contract(), out, progress=False)
    # errors speak in the CLI's flags, not in the Python API's names
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("x")
    with pytest.raises(BagImportError, match=r"--output .*other is not a dataset .* leave out --resume") as e:
        import_bags([bag], quick_contract(), other, resume=True, progress=False)
    assert "DatasetWriter" not in str(e.value)
    with pytest.raises(BagImportError, match=r"--output .*missing does not exist: --resume appends"):
        import_bags([bag], quick_contract(), tmp_path / "missing", resume=True, progress=False)
    narrow = Contract.from_flags(
        30, state="/joint_states", images={"front": CAM}, task="t", joints=["gripper"]
    )
    with pytest.raises(BagImportError, match="features differ from the dataset's"):
        import_bags([bag], narrow, out, resume=True, progress=False)
    assert DatasetReader(out).num_episodes == 1
    degrees = Contract.from_dict(
        {
            "fps": 30,
            "units": "degrees",
            "task": "pick the cube",
            "features": {
                "observation.state": {"topic": "/joint_states", "policy": "interpolate"},
                "action": {"topic": "/leader/joint_states"},
                "observation.images.front": {"topic": CAM},
            },
        }
    )
    with pytest.raises(BagImportError, match="features differ from the dataset's"):
        import_bags([bag], degrees, out, resume=True, progress=False)  # same names, other units
    with pytest.raises(BagImportError, match="is 30 fps, the import asks for 15"):
        import_bags([bag], quick_contract(fps=15), out, resume=True, progress=False)
    writer = DatasetWriter.resume(out)  # still resumable by the writer itself
    writer.finalize()


def test_cli_errors_exit_2(tmp_path, capsys):
    assert main([str(tmp_path), "--output", str(tmp_path / "ds")]) == 2
    assert "nothing to import" in capsys.readouterr().err
    assert main([str(tmp_path), "--output", str(tmp_path / "ds"), "--state", "/js"]) == 2
    assert "--fps is required" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("fps: 30\ntask: t\nfeatures: {action: {topic: /a, policy: cubic}}\n")
    assert main([str(tmp_path), "--output", str(tmp_path / "ds"), "--config", str(bad)]) == 2
    assert "bad.yaml: features.action.policy: 'cubic'" in capsys.readouterr().err
    shutil.rmtree(tmp_path / "ds", ignore_errors=True)


@STORAGES
def test_corrupt_message_mid_bag_discards_only_that_episode(tmp_path, storage):
    good = write_bag(tmp_path / "good", storage, session(0.4))
    plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
    events = sorted(session(0.4, t0=T0 + 10**10), key=lambda e: e[0])
    conns = {}
    with Writer(tmp_path / "broken", version=9, storage_plugin=plugin) as writer:
        for n, (log_time, topic, msg) in enumerate(events):
            if topic not in conns:
                conns[topic] = writer.add_connection(topic, msg.__msgtype__, typestore=bag_io.typestore())
            raw = bag_io.serialize(msg)
            if topic == CAM and n > len(events) // 2:
                raw = raw[:40]  # a truncated CDR payload in the middle of the bag
            writer.write(conns[topic], log_time, raw)
    out = tmp_path / "ds"
    with pytest.raises(BagImportError, match=rf"broken: topic {CAM}: cannot read the bag"):
        import_bags([good, tmp_path / "broken"], quick_contract(), out, progress=False)
    r = DatasetReader(out)
    assert r.num_episodes == 1 and r.num_frames == 12


def test_quick_flags_take_message_types_from_the_bag(tmp_path, capsys):
    events = [e for e in session(0.5) if e[1] == "/joint_states"]
    for i in range(50):  # commands without header: aligned on log (receive) time
        events.append(
            (T0 + i * 10 * MS + 3 * MS, "/commands", bag_io.float64_multi_array(np.full(6, float(i))))
        )
    for i in range(15):
        t = T0 + (i * 1_000_000_000) // 30
        events.append(
            (t + 5 * MS, "/cam_jpeg", bag_io.compressed_image(t, np.full((H, W, 3), 100, np.uint8)))
        )
    bag = write_bag(tmp_path / "bag", "sqlite3", events)
    args = [
        str(bag),
        "-o",
        str(tmp_path / "ds"),
        "--fps",
        "30",
        "--state",
        "/joint_states",
        "--action",
        "/commands",
    ]
    assert main([*args, "--image", "wrist=/cam_jpeg", "--task", "t", "--no-progress"]) == 0, (
        capsys.readouterr().err
    )
    r = DatasetReader(tmp_path / "ds")
    # the action borrows the state's joint names (same size) and holds the latest command
    assert r.features["action"]["names"] == [f"{j}.pos" for j in SO101]
    ep = r.episode(0)
    # grid anchored at the first command (log time 3 ms), ending at the last camera frame (466.7 ms):
    # tick k holds command floor(k * 10 / 3)
    n = len(ep["action"])
    assert n == 14 and ep["action"][:, 0].tolist() == [float((k * 10) // 3) for k in range(n)]
    assert r.video_frames("observation.images.wrist", 0).shape[1:] == (H, W, 3)


def test_sim_time_stamps_in_a_wall_clock_bag(tmp_path):
    """A simulation stamps with /clock (starting near 0); rosbag2 logs wall time: still aligned."""
    events = []
    for log_time, topic, msg in session(0.5, t0=5 * 10**9):  # stamps from 5 s (sim time)
        events.append((log_time - 5 * 10**9 + T0, topic, msg))  # logged at wall time
    events.append((T0 + 50 * MS, "/task", bag_io.string("from sim")))
    bag = write_bag(tmp_path / "sim", "mcap", events)
    contract = Contract.from_flags(
        30, state="/joint_states", action="/leader/joint_states", images={"front": CAM}, task_topic="/task"
    )
    summary = import_bags([bag], contract, tmp_path / "ds", progress=False)
    ep = DatasetReader(tmp_path / "ds").episode(0)
    # log time maps onto the sim clock by the smallest log-stamp difference (the follower's 1 ms
    # delay), so the task logged 50 ms in lands at 49 ms: the grid starts there and ends at the
    # last camera frame (466.7 ms)
    assert summary.frames == len(ep["frame_index"]) == 13
    assert set(ep["task"]) == {"from sim"}
    ticks = [49 * MS + (k * 10**9) // 30 for k in range(13)]
    np.testing.assert_allclose(
        ep["observation.state"][:, 0], [0.01 * t / (10 * MS) for t in ticks], atol=1e-6
    )
    # a header-less stream on receive time cannot be aligned with sim stamps: clear error
    cmds = [(T0 + i * 10 * MS, "/commands", bag_io.float64_multi_array(np.zeros(6))) for i in range(20)]
    mixed = write_bag(tmp_path / "mixed", "mcap", events + cmds)
    c2 = Contract.from_flags(
        30,
        state="/joint_states",
        action="/commands",
        task="t",
        types={"/commands": "std_msgs/msg/Float64MultiArray"},
    )
    with pytest.raises(
        BagImportError, match=r"mixed: topic /joint_states is stamped .* s away from the bag's log time"
    ):
        import_bags([mixed], c2, tmp_path / "ds2", progress=False)


@pytest.mark.parametrize(
    "flags,message",
    [
        (["--crf", "99"], "--crf 99: libsvtav1 refuses crf 99"),
        (["--preset", "abc"], "--preset abc: libsvtav1 refuses preset abc"),
        (["--fps", "1000"], "--fps 1000: libsvtav1 refuses fps 1000"),
        (["--vcodec", "h264", "--preset", "abc"], "--preset abc: libx264 refuses preset abc"),
    ],
)
def test_encoder_flags_are_tried_on_the_encoder_before_any_work(tmp_path, capsys, flags, message):
    bag = write_bag(tmp_path / "bag", "mcap", session(0.3))
    quick = ["--state", "/joint_states", "--image", f"front={CAM}", "--task", "t"]
    args = [str(bag), "-o", str(tmp_path / "ds"), *quick, *flags]
    if "--fps" not in flags:
        args += ["--fps", "30"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert not (tmp_path / "ds").exists()


def test_an_image_too_small_for_the_encoder_is_refused_before_the_first_episode(tmp_path, capsys):
    bag = write_bag(tmp_path / "bag", "mcap", session(0.3, image=lambda i: np.zeros((1, 1, 3), np.uint8)))
    quick = ["--state", "/joint_states", "--image", f"front={CAM}", "--task", "t", "--fps", "30"]
    assert main([str(bag), "-o", str(tmp_path / "ds"), *quick]) == 2
    err = capsys.readouterr().err
    assert "observation.images.front: libsvtav1 refuses 1x1 frames" in err and "at least 4x4" in err, err
    assert not (tmp_path / "ds").exists()


# ------------------------------------------------------------------ messages in the user's words
def test_an_error_while_writing_frames_names_only_its_own_topic(tmp_path, capsys):
    def image(i):  # frame 10 changes size: found when a frame is assembled, after a joint message
        return np.zeros((H // 2 if i == 10 else H, W, 3), np.uint8)

    broken = write_bag(tmp_path / "broken", "mcap", session(0.5, image=image))
    with pytest.raises(BagImportError) as e:
        import_bags([broken], quick_contract(), tmp_path / "ds", progress=False)
    text = str(e.value)
    assert f"broken: topic {CAM}: image size changed to 64x24" in text
    assert text.count("topic ") == 1, text  # was: "topic /leader/joint_states: topic /cameras/...: ..."


def test_a_failed_import_of_several_bags_says_what_was_kept_and_what_was_not(tmp_path):
    def image(i):
        return np.zeros((H // 2 if i == 10 else H, W, 3), np.uint8)

    good = write_bag(tmp_path / "good", "mcap", session(0.5))
    broken = write_bag(tmp_path / "broken", "mcap", session(0.5, t0=T0 + 10**10, image=image))
    after = write_bag(tmp_path / "after", "mcap", session(0.5, t0=T0 + 2 * 10**10))
    with pytest.raises(BagImportError) as e:
        import_bags([good, broken, after], quick_contract(), tmp_path / "ds", progress=False)
    text = str(e.value)
    assert f"kept in {tmp_path / 'ds'}:\n    {good}: episode 0\n" in text, text
    assert f"not imported: {broken} {after}" in text and "--resume" in text
    assert DatasetReader(tmp_path / "ds").num_episodes == 1


def test_the_report_counts_late_and_backwards_samples_per_stream(tmp_path):
    # a follower sample stamped 0.4 s back, logged mid-bag: its time is before frames already written
    back = (T0 + 500 * MS, "/joint_states", bag_io.joint_state(T0 + 100 * MS, SO101, np.zeros(6)))
    bag = write_bag(tmp_path / "bag", "mcap", session(1.0, extra=[back]))
    summary = import_bags([bag], quick_contract(), tmp_path / "ds", progress=False)
    assert summary.late_samples()["/joint_states"] == 1
    assert summary.late_samples()["/leader/joint_states"] == 0
    line = next(x for x in summary.report().splitlines() if x.strip().startswith("/joint_states:"))
    assert "1 late or backwards" in line and "--latency-margin" in line, line


def test_a_bag_without_metadata_yaml_suggests_ros2_bag_reindex(tmp_path):
    bag = write_bag(tmp_path / "bag", "mcap", session(0.3))
    (bag / "metadata.yaml").unlink()
    with pytest.raises(BagImportError, match=r"no metadata.yaml beside bag.mcap .* `ros2 bag reindex .*bag`"):
        import_bags([bag], quick_contract(), tmp_path / "ds", progress=False)
    _assert_nothing_written(tmp_path / "ds")


def test_a_full_disk_mid_import_is_told_in_the_commands_words(tmp_path):
    """A real full filesystem (a small tmpfs): the writer's advice ("call save_episode() again") is the
    Python API's; the command says what its user does, and what was kept."""
    import os
    import subprocess

    mnt = tmp_path / "small"
    mnt.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)]).returncode
    ):
        pytest.skip("needs root and permission to mount a tmpfs (not available in this environment)")
    try:
        rng = np.random.default_rng(0)
        noise = [rng.integers(0, 256, (H, W, 3), np.uint8) for _ in range(8)]
        small = write_bag(tmp_path / "small_bag", "mcap", session(0.3))
        big = write_bag(
            tmp_path / "big_bag", "mcap", session(20.0, t0=T0 + 10**11, image=lambda i: noise[i % 8])
        )
        out = mnt / "ds"
        with pytest.raises(BagImportError) as e:
            import_bags([small, big], quick_contract(), out, progress=False, writer_options={"crf": 0})
        text = str(e.value)
        assert "disk full" in text or "No space left" in text, text
        for api in ("save_episode()", "discard_episode()", "DatasetWriter"):
            assert api not in text, text
        assert f"kept in {out}:\n    {small}: episode 0" in text and f"not imported: {big}" in text, text
        assert DatasetReader(out).num_episodes == 1
    finally:
        subprocess.run(["umount", str(mnt)])
