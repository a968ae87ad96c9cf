"""Console scripts: lerobot-servo-emulator and lerobot-ros-calibrate."""

import json
import signal
import subprocess
import sys
import time

from lerobot_drivers.bus import MotorBus
from lerobot_drivers.calibrate import main as calibrate_main
from lerobot_drivers.servo_emulator import ServoBusEmulator


def test_servo_emulator_cli_serves_a_bus(tmp_path):
    link, port_file = tmp_path / "tty", tmp_path / "port.txt"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lerobot_drivers.servo_emulator",
            "--protocol",
            "dynamixel",
            "--robot",
            "koch_leader",
            "--link",
            str(link),
            "--port-file",
            str(port_file),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert port_file.read_text().strip() == str(link)
        with MotorBus(str(link), "dynamixel", {i: "xl330-m077" for i in range(1, 7)}, timeout_s=0.2) as bus:
            assert [bus.ping(i) for i in range(1, 7)] == [1190] * 6
    finally:
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=10)
    assert proc.returncode == 0
    assert "dynamixel bus for koch_leader" in out and not link.exists()


def test_servo_emulator_cli_rejects_wrong_protocol():
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "lerobot_drivers.servo_emulator",
            "--protocol",
            "dynamixel",
            "--robot",
            "so101_follower",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2 and "uses a feetech bus" in proc.stderr


def test_calibrate_cli_writes_lerobot_json(tmp_path):
    spec_ids = {i: "sts3215" for i in range(1, 7)}
    emu = ServoBusEmulator(
        "feetech", spec_ids, link_path=str(tmp_path / "tty"), hand_motion_ticks=300.0, hand_period_s=0.4
    ).start()
    try:
        rc = calibrate_main(
            [
                "--robot",
                "so101_leader",
                "--port",
                emu.port,
                "--id",
                "lead",
                "--calibration-dir",
                str(tmp_path / "cal"),
                "--yes",
                "--record-seconds",
                "2.0",
                "--timeout-ms",
                "500",
            ]
        )
    finally:
        emu.stop()
    assert rc == 0
    data = json.loads((tmp_path / "cal" / "lead.json").read_text())
    assert list(data) == [
        "shoulder_pan",
        "shoulder_lift",
        "elbow_flex",
        "wrist_flex",
        "wrist_roll",
        "gripper",
    ]
    assert data["wrist_roll"]["range_min"] == 0 and data["wrist_roll"]["range_max"] == 4095
    for name in ("shoulder_pan", "elbow_flex", "gripper"):
        c = data[name]
        # the hand swings +-300 ticks: a real span was recorded, never more than the motion
        assert 100 < c["range_max"] - c["range_min"] <= 602, (name, c)
        assert c["drive_mode"] == 0 and c["id"] == data[name]["id"]
