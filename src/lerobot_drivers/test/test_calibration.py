"""Calibration files and LeRobot normalisation, value for value."""

import json
import math
import threading
import time
from pathlib import Path

import pytest

from lerobot_core.calibration import (
    CalibrationError,
    MotorCalibration,
    calibration_path,
    find_calibration_file,
    load_calibration,
    save_calibration,
)
from lerobot_core.robots import (
    DEGREES,
    FEETECH,
    RANGE_0_100,
    RANGE_M100_100,
    JointLimit,
    MotorSpec,
    RobotSpec,
    get_robot_spec,
)
from lerobot_drivers.calibrate import bus_for_spec, calibrate, read_calibration
from lerobot_drivers.calibration import Normalizer
from lerobot_drivers.servo_emulator import emulator_for_robot

FIXTURES = Path(__file__).parent / "fixtures"


def _fixture_spec(family):
    fx = json.loads((FIXTURES / "lerobot_norm_fixture.json").read_text())
    modes = {"range_m100_100": RANGE_M100_100, "range_0_100": RANGE_0_100, "degrees": DEGREES}
    motors = tuple(
        MotorSpec(name, c["id"], "sts3215", modes[fx["modes"][name]]) for name, c in fx["calibration"].items()
    )
    limits = {m.name: JointLimit(-1, 1, 1, 1) for m in motors}
    spec = RobotSpec("fx", family, motors, limits, "robots", "fx")
    cal = {n: MotorCalibration(**c) for n, c in fx["calibration"].items()}
    return fx, spec, cal


@pytest.mark.parametrize("family", ["feetech", "dynamixel"])
def test_normalisation_matches_real_lerobot(family):
    """Fixture made by the real LeRobot 0.4.4 code (test/fixtures/make_lerobot_norm_fixture.py)."""
    fx, spec, cal = _fixture_spec(family)
    norm = Normalizer(spec, cal)
    for name in cal:
        for raw, expected in zip(fx["raws"], fx[family]["normalize"][name], strict=False):
            assert norm.normalize(name, raw) == pytest.approx(expected, abs=1e-9), (name, raw)
        for value, expected in zip(fx["values"], fx[family]["unnormalize"][name], strict=False):
            assert norm.unnormalize(name, value) == expected, (name, value)


def test_hand_computed_values():
    spec = get_robot_spec("so101_follower")
    cal = {m.name: MotorCalibration(m.id, 0, 0, 1000, 3000) for m in spec.motors}
    norm = Normalizer(spec, cal)
    assert norm.normalize("elbow_flex", 2000) == 0.0
    assert norm.normalize("elbow_flex", 1500) == -50.0
    assert norm.normalize("elbow_flex", 500) == -100.0  # clamped to range_min
    assert norm.normalize("gripper", 2500) == 75.0
    assert norm.unnormalize("gripper", 75.0) == 2500
    # radians: mid-range is 0; 4095 ticks per turn
    assert norm.to_radians("elbow_flex", 2000) == 0.0
    assert norm.to_radians("elbow_flex", 2000 + 4095 / 4) == pytest.approx(math.pi / 2)
    assert norm.from_radians("elbow_flex", math.pi / 4) == 2512  # 4095 / 8 = 511.875 ticks
    assert norm.from_radians("elbow_flex", 3.0) == 3000  # clamped to the calibrated range
    inverted = dict(cal, elbow_flex=MotorCalibration(3, 1, 0, 1000, 3000))
    norm_inv = Normalizer(spec, inverted)
    assert norm_inv.normalize("elbow_flex", 1500) == 50.0
    assert norm_inv.to_radians("elbow_flex", 2000 + 4095 / 4) == pytest.approx(-math.pi / 2)


def test_reads_file_written_by_lerobot_and_writes_it_back_identically(tmp_path):
    src = FIXTURES / "lerobot_so101_calibration.json"
    spec = get_robot_spec("so101_follower")
    cal = load_calibration(src, spec)
    assert cal["shoulder_pan"] == MotorCalibration(1, 0, -1406, 721, 3395)
    assert list(cal) == list(spec.joint_names) or set(cal) == set(spec.joint_names)
    out = save_calibration(tmp_path / "x.json", cal)
    assert json.loads(out.read_text()) == json.loads(src.read_text())
    assert out.read_text() == src.read_text()


def test_default_location_follows_lerobot(monkeypatch, tmp_path):
    spec = get_robot_spec("so101_follower")
    monkeypatch.delenv("HF_LEROBOT_CALIBRATION", raising=False)
    monkeypatch.setenv("HF_LEROBOT_HOME", str(tmp_path / "lr"))
    assert calibration_path(spec, "arm") == tmp_path / "lr/calibration/robots/so_follower/arm.json"
    monkeypatch.delenv("HF_LEROBOT_HOME")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    leader = get_robot_spec("so101_leader")
    assert calibration_path(leader, "l") == tmp_path / "hf/lerobot/calibration/teleoperators/so_leader/l.json"
    # older LeRobot folder name is found too
    legacy = tmp_path / "hf/lerobot/calibration/robots/so101_follower/old.json"
    legacy.parent.mkdir(parents=True)
    legacy.write_text("{}")
    assert find_calibration_file(spec, "old") == legacy
    assert calibration_path(spec, "arm", tmp_path / "mine") == tmp_path / "mine/arm.json"


@pytest.mark.parametrize(
    "content, match",
    [
        ("{not json", "not valid JSON"),
        ('{"shoulder_pan": {"id": 1}}', "motor 'shoulder_pan': missing field"),
        (
            '{"gripper": {"id": 6, "drive_mode": 0, "homing_offset": 0, "range_min": 5, "range_max": 5}}',
            "motor 'gripper': range_min",
        ),
        (
            '{"gripper": {"id": 6, "drive_mode": 2, "homing_offset": 0, "range_min": 0, "range_max": 5}}',
            "drive_mode must be 0 or 1",
        ),
        (
            '{"gripper": {"id": "6", "drive_mode": 0, "homing_offset": 0, "range_min": 0, "range_max": 5}}',
            "'id' must be an integer",
        ),
    ],
)
def test_bad_file_errors_name_file_and_motor(tmp_path, content, match):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(CalibrationError, match=match) as info:
        load_calibration(path)
    assert str(path) in str(info.value)


def test_file_missing_motor_or_wrong_id(tmp_path):
    spec = get_robot_spec("so101_follower")
    cal = {m.name: MotorCalibration(m.id, 0, 0, 0, 4095) for m in spec.motors}
    del cal["wrist_roll"]
    path = save_calibration(tmp_path / "c.json", cal)
    with pytest.raises(CalibrationError, match="wrist_roll"):
        load_calibration(path, spec)
    cal["wrist_roll"] = MotorCalibration(9, 0, 0, 0, 4095)
    save_calibration(path, cal)
    with pytest.raises(CalibrationError, match="id 9"):
        load_calibration(path, spec)


@pytest.mark.parametrize("robot", ["so101_follower", "koch_leader"])
def test_calibrate_against_emulator_records_ranges(tmp_path, robot):
    spec = get_robot_spec(robot)
    emu = emulator_for_robot(robot, link_path=str(tmp_path / "tty")).start()
    try:
        # the "user" holds the arm at actual 2300, then sweeps each joint +-400 ticks
        for servo in emu.servos.values():
            servo.actual = 2300.0
        bus = bus_for_spec(spec, emu.port, timeout_s=0.5)
        sweep_done = threading.Event()
        samples = []

        def user_moves():
            # move, then wait until the recorder has sampled the new pose twice (no timing assumptions)
            while not samples:  # homing is done once the range recording samples
                time.sleep(0.005)
            for delta in (-400, 400):
                for servo in emu.servos.values():
                    servo.actual = 2300.0 + delta
                seen = len(samples)
                while len(samples) < seen + 2:
                    time.sleep(0.005)
            sweep_done.set()

        with bus:
            mover = threading.Thread(target=user_moves)
            cal = calibrate(
                bus,
                spec,
                wait_for_middle=mover.start,
                should_stop=sweep_done.is_set,
                on_sample=samples.append,
            )
            mover.join()
            back = read_calibration(bus, spec)
        for m in spec.motors:
            c = cal[m.name]
            if spec.bus == FEETECH:
                assert c.homing_offset == 2300 - 2047  # Present = Actual - offset reads 2047 at the pose
            else:
                assert c.homing_offset == 2047 - 2300
            if m.name in spec.full_turn_motors:
                assert (c.range_min, c.range_max) == (0, 4095)
            else:
                assert (c.range_min, c.range_max) == (2047 - 400, 2047 + 400)
            assert back[m.name] == c
    finally:
        emu.stop()


def test_cli_errors_name_the_flag_and_leave_no_traceback(tmp_path, capsys):
    from lerobot_drivers.calibrate import main

    with pytest.raises(SystemExit) as e:
        main(["--robot", "so101_followr", "--port", "/dev/null", "--id", "x"])
    assert e.value.code == 2
    assert "--robot: unknown robot type 'so101_followr'; known: " in capsys.readouterr().err
    missing = str(tmp_path / "no_such_port")
    args = ["--robot", "so101_follower", "--port", missing, "--id", "x", "--yes", "--record-seconds", "0.1"]
    assert main([*args, "--calibration-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith(f"lerobot-ros-calibrate: error: --port {missing}: cannot open serial port")
        and "Traceback" not in err
    )
    assert not (tmp_path / "x.json").exists()
