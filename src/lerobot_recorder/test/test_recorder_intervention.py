"""Human-in-the-loop recording: complementary_info.* from the arbiter's status, no frames in a pause.

The worker is fed real JointState CDR (rosbags) and ControlStatus-shaped messages (the decode
function is the recorder's injection point: here a small struct stands in for the rclpy message)."""

import json
import re
import subprocess
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from rosbags.typesys import Stores, get_typestore

from lerobot_core.ament import share_path
from lerobot_core.contract import Contract, ContractError
from lerobot_dataset import DatasetReader
from lerobot_recorder.episode_control import EpisodeConfig
from lerobot_recorder.live_recorder import LiveConfig, LiveRecorder
from lerobot_recorder.live_types import RESULT_SAVED

TS = get_typestore(Stores.ROS2_KILTED)
HEADER = TS.types["std_msgs/msg/Header"]
TIME = TS.types["builtin_interfaces/msg/Time"]
JOINT_STATE = TS.types["sensor_msgs/msg/JointState"]
JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
STATUS = "/arbiter/status"
POLICY, HUMAN, HOLD = 0, 1, 2
CHECK = share_path("lerobot_dataset") / "test" / "fixtures" / "check_hil_with_lerobot.py"


def hil_contract(fps=10) -> dict:
    return {
        "fps": fps,
        "robot_type": "so101_follower",
        "task": "pick the cube",
        "defaults": {"max_staleness": 0.25},
        "features": {
            "observation.state": {"topic": "/joint_states", "joints": JOINTS, "policy": "interpolate"},
            "action": {"topic": "/joint_commands", "joints": JOINTS},
            "complementary_info.is_intervention": {"topic": STATUS},
            "complementary_info.control_mode": {"topic": STATUS, "field": "mode"},
        },
    }


def _joint_cdr(t_ns, value):
    msg = JOINT_STATE(
        header=HEADER(stamp=TIME(sec=t_ns // 10**9, nanosec=t_ns % 10**9), frame_id=""),
        name=list(JOINTS),
        position=np.full(6, value, dtype=np.float64),
        velocity=np.zeros(0),
        effort=np.zeros(0),
    )
    return bytes(TS.serialize_cdr(msg, "sensor_msgs/msg/JointState"))


def _status_bytes(t_ns, mode):
    return json.dumps({"t": t_ns, "mode": mode}).encode()


def _decode(topic, data):
    if topic == STATUS:
        d = json.loads(data)
        sec, ns = divmod(d["t"], 10**9)
        return SimpleNamespace(
            header=SimpleNamespace(stamp=SimpleNamespace(sec=sec, nanosec=ns)),
            mode=d["mode"],
            is_intervention=d["mode"] == HUMAN,
        )
    return TS.deserialize_cdr(data, "sensor_msgs/msg/JointState")


class FakeClock:
    def __init__(self, t):
        self.t = t

    def __call__(self):
        return self.t


def test_contract_extras_parse_and_features():
    c = Contract.from_dict(hil_contract())
    feats = c.resolve({}).features()
    assert feats["complementary_info.is_intervention"] == {"dtype": "bool", "shape": (1,), "names": None}
    assert feats["complementary_info.control_mode"] == {"dtype": "int64", "shape": (1,), "names": None}
    spec = {s.name: s for s in c.stream_specs()}[STATUS]
    assert spec.latched and spec.max_staleness_s is None  # published on change: never stale
    bad = hil_contract()
    bad["features"]["complementary_info.penalty"] = {"topic": STATUS}
    with pytest.raises(ContractError, match=r"features.complementary_info.penalty.field"):
        Contract.from_dict(bad)
    bad = hil_contract()
    bad["features"]["complementary_info.is_intervention"] = {"topic": STATUS, "type": "std_msgs/String"}
    with pytest.raises(ContractError, match=r"complementary_info.is_intervention.type"):
        Contract.from_dict(bad)


# the arbiter's story, in seconds from the episode start: (time, mode)
SEGMENTS = [(0.0, POLICY), (1.0, HOLD), (1.5, HUMAN), (2.2, POLICY), (2.6, HOLD), (2.8, POLICY)]
END_S = 3.5


def _mode_at(t):
    return [m for s, m in SEGMENTS if s <= t][-1]


def record_hil_episode(root: Path, resume: bool = False, value_offset: float = 0.0) -> dict:
    cfg = LiveConfig(
        dataset_root=str(root),
        mode="dataset",
        vcodec="libx264",
        resume=resume,
        episode=EpisodeConfig(episode_time_s=1000.0, reset_time_s=0.0, num_episodes=5, task=""),
    )
    t0 = 5 * 10**9
    clock = FakeClock(t0)
    rec = LiveRecorder(cfg, Contract.from_dict(hil_contract()), decode=_decode, clock=clock)
    rec.start()
    try:
        rec.ingest(STATUS, _status_bytes(t0 - 10**8, POLICY), t0 - 10**8)
        rec.ingest("/joint_states", _joint_cdr(t0 - 10**7, value_offset), t0 - 10**7)
        rec.ingest("/joint_commands", _joint_cdr(t0 - 10**7, value_offset), t0 - 10**7)
        clock.t = t0
        time.sleep(0.1)
        out = rec.request("start").result(10)
        fut = rec.outcome_future(out["seq"])
        seg = 1
        for k in range(int(END_S * 100) + 1):  # joints at 100 Hz: value = seconds since start
            t = t0 + k * 10_000_000
            while seg < len(SEGMENTS) and t >= t0 + int(SEGMENTS[seg][0] * 1e9):
                ts = t0 + int(SEGMENTS[seg][0] * 1e9)
                rec.ingest(STATUS, _status_bytes(ts, SEGMENTS[seg][1]), ts)
                seg += 1
            clock.t = t
            rec.ingest("/joint_states", _joint_cdr(t, value_offset + k / 100), t)
            rec.ingest("/joint_commands", _joint_cdr(t, value_offset + k / 100), t)
            if k % 20 == 0:
                time.sleep(0.002)
        time.sleep(0.3)
        rec.request("stop").result(30)
        oc = fut.result(10)
        assert oc.result_code == RESULT_SAVED, oc.message
        rec.request("finalize").result(30)
    finally:
        rec.close()
    return {"frames": oc.frames, "t0": t0}


def test_paused_ticks_make_no_frames_and_each_frame_says_who_drove(tmp_path):
    record_hil_episode(tmp_path / "ds")
    r = DatasetReader(tmp_path / "ds")
    assert r.num_episodes == 1  # one continuous episode across the handoffs
    ep = r.episode(0)
    state = np.asarray(ep["observation.state"])[:, 0]
    flag = np.asarray(ep["complementary_info.is_intervention"]).reshape(-1)
    mode = np.asarray(ep["complementary_info.control_mode"]).reshape(-1)
    # no frame comes from a pause, every other tick does: 3.5 s at 10 fps minus 0.5 s + 0.2 s paused
    assert not any(_mode_at(s) == HOLD for s in state)
    expected_ticks = [k / 10 for k in range(int(END_S * 10) + 1) if _mode_at(k / 10) != HOLD]
    assert len(state) in (len(expected_ticks), len(expected_ticks) - 1)  # the last tick may fall after stop
    np.testing.assert_allclose(state, expected_ticks[: len(state)], atol=1e-4)
    # the flag and the mode follow the arbiter, frame by frame
    assert list(mode) == [_mode_at(s) for s in state]
    assert list(flag) == [_mode_at(s) == HUMAN for s in state]
    assert flag.dtype == bool and flag.sum() == 7  # 1.5 .. 2.1 s
    # frame indices and timestamps stay consecutive over the pauses
    assert list(np.asarray(ep["frame_index"]).reshape(-1)) == list(range(len(state)))


def test_hil_episodes_append_to_a_dataset_with_the_same_features(tmp_path):
    root = tmp_path / "ds"
    record_hil_episode(root)
    record_hil_episode(root, resume=True, value_offset=10.0)
    r = DatasetReader(root)
    assert r.num_episodes == 2
    assert np.asarray(r.episode(1)["observation.state"])[0, 0] == pytest.approx(10.0)


def test_hil_dataset_loads_in_lerobot(tmp_path, lerobot_python):
    root = tmp_path / "ds"
    record_hil_episode(root)
    record_hil_episode(root, resume=True, value_offset=10.0)
    out = subprocess.run(
        [str(lerobot_python), str(CHECK), str(root)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "ok:" in out.stdout


@pytest.mark.parametrize(
    "data,hil,keys",
    [
        (b" ", True, ["pause"]),
        (b"c", True, ["takeover"]),
        (b"p", True, ["resume"]),
        (b"s", True, ["start"]),
        (b" cp\x1b[C", True, ["pause", "takeover", "resume", "right"]),
        (b" ", False, ["start"]),  # without --arbiter the keys stay as they were
        (b"cp", False, ["unknown", "unknown"]),
    ],
)
def test_hil_keys(data, hil, keys):
    from lerobot_recorder.keyboard import KeyDecoder

    assert KeyDecoder(hil=hil).feed(data) == keys


def test_an_episode_paused_throughout_says_so_instead_of_no_complete_tick(tmp_path):
    """Before: 'no complete tick was recorded (is every required stream publishing?) (269 frames, ...)'
    while every stream published: the arbiter held the robot (a silent policy). Nothing is saved and
    the new dataset is removed again."""
    cfg = LiveConfig(
        dataset_root=str(tmp_path / "ds"),
        vcodec="libx264",
        episode=EpisodeConfig(episode_time_s=1000.0, reset_time_s=0.0, num_episodes=1, task=""),
    )
    t0 = 5 * 10**9
    clock = FakeClock(t0)
    rec = LiveRecorder(cfg, Contract.from_dict(hil_contract()), decode=_decode, clock=clock)
    rec.start()
    try:
        rec.ingest(STATUS, _status_bytes(t0 - 10**8, HOLD), t0 - 10**8)
        rec.ingest("/joint_states", _joint_cdr(t0 - 10**7, 0.0), t0 - 10**7)
        rec.ingest("/joint_commands", _joint_cdr(t0 - 10**7, 0.0), t0 - 10**7)
        time.sleep(0.1)
        out = rec.request("start").result(10)
        fut = rec.outcome_future(out["seq"])
        for k in range(101):
            t = t0 + k * 10_000_000
            clock.t = t
            rec.ingest("/joint_states", _joint_cdr(t, k / 100), t)
            rec.ingest("/joint_commands", _joint_cdr(t, k / 100), t)
        time.sleep(0.3)
        rec.request("stop").result(30)
        oc = fut.result(10)
    finally:
        rec.close()
    assert oc.frames == 0
    assert re.match(
        r"episode 0: nothing recorded: the control arbiter held the robot \(paused\) in all \d+ aligned ticks",
        oc.message,
    ), oc.message
    assert not (tmp_path / "ds").exists()
