"""MotorBus against the pty servo emulator: both protocols, faults, baud, unplug."""

import math
import os
import time

import pytest

from lerobot_drivers import dynamixel as dxl
from lerobot_drivers import feetech as ft
from lerobot_drivers.bus import BusTimeoutError, MotorBus, PortError, ServoError
from lerobot_drivers.servo_emulator import ServoBusEmulator, emulator_for_robot

ROBOTS = ["so101_follower", "koch_follower"]


@pytest.fixture(params=ROBOTS)
def emu_bus(request, tmp_path):
    from lerobot_core.robots import get_robot_spec

    spec = get_robot_spec(request.param)
    emu = emulator_for_robot(request.param, link_path=str(tmp_path / "tty"), tau_s=0.1).start()
    # a generous reply timeout: the in-process emulator shares this process (and a loaded CI box)
    bus = MotorBus(emu.port, spec.bus, {m.id: m.model for m in spec.motors}, timeout_s=0.5)
    bus.open()
    yield spec, emu, bus
    bus.close()
    emu.stop()


def test_ping_reports_model_numbers(emu_bus):
    spec, emu, bus = emu_bus
    numbers = {m.id: bus.ping(m.id) for m in spec.motors}
    models = {m.id: m.model for m in spec.motors}
    for sid, number in numbers.items():
        module = ft if spec.bus == "feetech" else dxl
        assert number == module.get_model(models[sid]).model_number
    bus.verify_models()


def test_sync_write_moves_servos_first_order(emu_bus):
    spec, emu, bus = emu_bus
    bus.enable_torque()
    goals = {sid: 2048 + 150 * sid for sid in spec.motor_ids}
    t_write = time.monotonic()
    bus.sync_write("Goal_Position", goals)
    # the servos start when the emulator takes the write in (the same instant or, on a busy machine,
    # later): no faster than first order from t_write, never backwards, and gradually, not in a jump
    tau, samples = 0.1, []
    while time.monotonic() - t_write < 0.3:
        pos = bus.sync_read("Present_Position")
        samples.append((time.monotonic() - t_write, pos))
    for sid, goal in goals.items():
        trace = [pos[sid] for _, pos in samples]
        for (t, _), p in zip(samples, trace, strict=True):
            # first-order response: goal - (goal - 2048) * exp(-t / tau) at the latest
            assert 2048 - 2 <= p <= goal - (goal - 2048) * math.exp(-t / tau) + 2, (sid, t, p)
        assert all(b >= a - 2 for a, b in zip(trace, trace[1:], strict=False)), (sid, trace)
        assert any(2048 + 2 < p < goal - 2 for p in trace), (sid, trace)  # between start and goal
    time.sleep(1.2)
    late = bus.sync_read_registers(["Present_Position", "Present_Velocity"])
    for sid, goal in goals.items():
        assert abs(late[sid]["Present_Position"] - goal) <= 2
        assert abs(late[sid]["Present_Velocity"]) < 200


def test_torque_off_servo_does_not_move(emu_bus):
    spec, emu, bus = emu_bus
    bus.disable_torque()
    bus.sync_write("Goal_Position", {sid: 3000 for sid in spec.motor_ids})
    time.sleep(0.1)
    assert set(bus.sync_read("Present_Position").values()) == {2048}


def test_read_write_registers(emu_bus):
    spec, emu, bus = emu_bus
    bus.write(2, "Homing_Offset", -100)
    assert bus.read(2, "Homing_Offset") == -100
    # Feetech: Present = Actual - offset; Dynamixel: Present = Actual + offset
    expected = 2148 if spec.bus == "feetech" else 1948
    assert bus.read(2, "Present_Position") == expected


def test_missing_servo_times_out_naming_it(tmp_path):
    emu = ServoBusEmulator("feetech", {1: "sts3215"}, link_path=str(tmp_path / "tty")).start()
    try:
        bus = MotorBus(emu.port, "feetech", {1: "sts3215", 2: "sts3215"}, timeout_s=0.2)
        with bus:
            with pytest.raises(BusTimeoutError, match=r"\[2\]") as info:
                bus.sync_read("Present_Position")
            assert info.value.missing_ids == (2,)
            assert bus.read(1, "ID") == 1
    finally:
        emu.stop()


def test_overheat_is_reported_and_cuts_torque(emu_bus):
    spec, emu, bus = emu_bus
    bus.enable_torque()
    emu.servos[3].inject_fault("overheat")
    regs = bus.sync_read_registers(["Present_Position"])
    assert regs[3]
    assert bus.servo_errors[3] != 0 and bus.servo_errors[1] == 0
    if spec.bus == "feetech":
        assert bus.servo_errors[3] & ft.ERRBIT_OVERHEAT
        assert bus.read(3, "Present_Temperature") >= 70
    else:
        assert bus.servo_errors[3] & dxl.ERR_ALERT
        assert dxl.describe_hardware_error(bus.read(3, "Hardware_Error_Status"))[0].startswith("overheating")
    assert bus.read(3, "Torque_Enable") == 0


def test_dynamixel_eeprom_write_with_torque_on_is_access_error(tmp_path):
    emu = emulator_for_robot("koch_follower", link_path=str(tmp_path / "tty")).start()
    try:
        bus = MotorBus(emu.port, "dynamixel", {1: "xl430-w250"}, timeout_s=0.5)
        with bus:
            bus.write(1, "Torque_Enable", 1)
            with pytest.raises(ServoError, match="disable torque first"):
                bus.write(1, "Homing_Offset", 10)
            bus.write(1, "Torque_Enable", 0)
            bus.write(1, "Homing_Offset", 10)
            assert bus.read(1, "Homing_Offset") == 10
    finally:
        emu.stop()


def test_wrong_baud_gets_no_answer_then_switch(tmp_path):
    emu = emulator_for_robot("so101_follower", link_path=str(tmp_path / "tty")).start()
    try:
        ids = {i: "sts3215" for i in range(1, 7)}
        with MotorBus(emu.port, "feetech", ids, baudrate=1_000_000, timeout_s=0.5) as bus:
            bus.set_baudrate(500_000)
            assert bus.read(1, "Baud_Rate") == 1
        with (
            MotorBus(emu.port, "feetech", ids, baudrate=1_000_000, timeout_s=0.02) as bus,
            pytest.raises(BusTimeoutError),
        ):
            bus.ping(1)
        with MotorBus(emu.port, "feetech", ids, baudrate=500_000, timeout_s=0.5) as bus:
            assert bus.ping(1) == 777
    finally:
        emu.stop()


def test_unplug_raises_port_error_and_replug_resumes(tmp_path):
    emu = emulator_for_robot("so101_follower", link_path=str(tmp_path / "tty")).start()
    try:
        bus = MotorBus(emu.port, "feetech", {1: "sts3215"}, timeout_s=0.5)
        bus.open()
        assert bus.ping(1) == 777
        old_target = os.readlink(emu.port)
        emu.unplug()
        with pytest.raises(PortError):
            for _ in range(3):
                bus.ping(1)
        assert not bus.is_open
        emu.replug()
        assert os.readlink(emu.port) != old_target or True
        bus.open()
        assert bus.ping(1) == 777
        bus.close()
    finally:
        emu.stop()


def test_scs_protocol1_reads_without_sync_read(tmp_path):
    emu = ServoBusEmulator("feetech", {1: "scs0009", 2: "scs0009"}, link_path=str(tmp_path / "tty")).start()
    try:
        with MotorBus(
            emu.port, "feetech", {1: "scs0009", 2: "scs0009"}, protocol_version=1, timeout_s=0.5
        ) as bus:
            assert bus.ping(1) == 1284
            bus.enable_torque()
            bus.sync_write("Goal_Position", {1: 600, 2: 400})
            time.sleep(0.6)
            pos = bus.sync_read("Present_Position")
            assert abs(pos[1] - 600) <= 2 and abs(pos[2] - 400) <= 2
    finally:
        emu.stop()


def test_protocol_mismatch_is_refused():
    with pytest.raises(ValueError, match="protocol 1"):
        MotorBus("/dev/null", "feetech", {1: "scs0009"}, protocol_version=0)


def _settles(bus, sid, goal, timeout_s=5.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if abs(bus.read(sid, "Present_Position") - goal) <= 2:
            return True
        time.sleep(0.02)
    return False


def test_torque_off_stays_where_moved_torque_on_drives_to_goal(emu_bus):
    spec, emu, bus = emu_bus
    sid = spec.motor_ids[0]
    bus.disable_torque()
    emu.servos[sid].move_by_hand(2600)  # a hand moves the limp servo
    bus.write(sid, "Goal_Position", 3000)  # a goal written with torque off does not move it
    assert bus.read(sid, "Present_Position") == 2600
    time.sleep(0.3)
    assert bus.read(sid, "Present_Position") == 2600
    bus.enable_torque()
    assert _settles(bus, sid, 3000)
    emu.servos[sid].move_by_hand(2400)  # pushed away with torque on: it drives back
    assert _settles(bus, sid, 3000)


def test_emulator_process_moved_by_hand_then_mirrors_a_goal(tmp_path):
    from lerobot_drivers.servo_emulator import EmulatorProcess

    with (
        EmulatorProcess("so101_leader", str(tmp_path / "tty"), tau_s=0.02) as emu,
        MotorBus(emu.port, "feetech", {1: "sts3215"}, timeout_s=0.5) as bus,
    ):
        bus.disable_torque()
        emu.call("set_actual", 1, 1500)
        assert bus.read(1, "Present_Position") == 1500
        bus.write(1, "Goal_Position", 2500)
        assert bus.read(1, "Present_Position") == 1500 and not emu.call("torque")[1]
        bus.enable_torque()
        assert _settles(bus, 1, 2500)
        # a bus read advances the emulated motion to now; the register then holds what the bus read
        # (the other order raced: the read could advance the motion after the register was taken)
        read = bus.read(1, "Present_Position")
        assert emu.call("get", 1, "Present_Position") == read


def test_a_registered_family_works_by_name_everywhere(tmp_path, monkeypatch):
    """A new family is a BusFamily subclass plus its FAMILIES entry: bus and emulator take it by name."""
    from lerobot_drivers.bus import FAMILIES

    class SlowDynamixel(dxl.DynamixelFamily):
        name = "slow_dynamixel"
        baud_rates = {57_600: 1, 115_200: 2}

    monkeypatch.setitem(FAMILIES, "slow_dynamixel", SlowDynamixel(2))
    emu = ServoBusEmulator("slow_dynamixel", {1: "xl430-w250"}, link_path=str(tmp_path / "tty")).start()
    try:
        with MotorBus(emu.port, "slow_dynamixel", {1: "xl430-w250"}, baudrate=57_600, timeout_s=0.5) as bus:
            emu.servos[1].set("Baud_Rate", 1)
            assert bus.ping(1) == 1060
            with pytest.raises(ValueError, match="slow_dynamixel servos do not support 1000000 baud"):
                bus.set_baudrate(1_000_000)
            bus.set_baudrate(115_200)
            assert bus.read(1, "Baud_Rate") == 2
    finally:
        emu.stop()
