"""Protocol framing against the manuals' byte examples, and status-error decoding."""

import pytest

from lerobot_drivers import dynamixel as dxl
from lerobot_drivers import feetech as ft


def test_dynamixel_ping_and_read_match_emanual_examples():
    # ROBOTIS e-manual, Protocol 2.0: ping ID 1 and read Present_Position (132, 4 bytes) from ID 1
    assert dxl.instruction_packet(1, dxl.INST_PING) == bytes.fromhex("ffff fd00 0103 0001 194e")
    read = dxl.instruction_packet(1, dxl.INST_READ, dxl.u16(132) + dxl.u16(4))
    assert read == bytes.fromhex("ffff fd00 0107 0002 8400 0400 1d15")


def test_dynamixel_crc_and_status_roundtrip():
    pkt = dxl.status_packet(7, 0, dxl.encode_register("xl430-w250", "Present_Position", -5))
    status, consumed, corrupt = dxl.parse_status(bytearray(pkt))
    assert consumed == len(pkt) and not corrupt
    assert status.servo_id == 7
    assert dxl.decode_register("xl430-w250", "Present_Position", status.params) == -5
    bad = bytearray(pkt)
    bad[-3] ^= 0x01
    status, consumed, corrupt = dxl.parse_status(bad)
    assert status is None and corrupt


def test_dynamixel_byte_stuffing_roundtrip():
    params = bytes([0xFF, 0xFF, 0xFD, 0x01])
    pkt = dxl.instruction_packet(3, dxl.INST_WRITE, params)
    assert b"\xff\xff\xfd\xfd" in pkt[7:]
    parsed, consumed, _ = dxl.parse_instruction(bytearray(pkt))
    assert parsed == (3, dxl.INST_WRITE, params) and consumed == len(pkt)


def test_feetech_ping_and_write_bytes():
    assert ft.instruction_packet(1, ft.INST_PING) == bytes.fromhex("ffff 0102 01fb")
    # write Goal_Position (42) = 2048 on id 1, little-endian on STS: 00 08
    data = ft.encode_register("sts3215", "Goal_Position", 2048)
    pkt = ft.instruction_packet(1, ft.INST_WRITE, bytes([42]) + data)
    assert pkt == bytes([0xFF, 0xFF, 0x01, 0x05, 0x03, 0x2A, 0x00, 0x08, (~(1 + 5 + 3 + 42 + 8)) & 0xFF])


def test_feetech_sync_read_bytes():
    pkt = ft.instruction_packet(ft.BROADCAST_ID, ft.INST_SYNC_READ, bytes([56, 2, 1, 2]))
    assert pkt == bytes([0xFF, 0xFF, 0xFE, 0x06, 0x82, 0x38, 0x02, 0x01, 0x02, 0x3C])


def test_feetech_sign_magnitude_and_endianness():
    assert ft.encode_register("sts3215", "Homing_Offset", -5) == bytes([0x05, 0x08])  # bit 11
    assert ft.decode_register("sts3215", "Present_Load", bytes([0x10, 0x04])) == -16  # bit 10
    assert ft.decode_register("sts3215", "Present_Velocity", bytes([0x03, 0x80])) == -3
    # SCS (protocol 1) is big-endian and unsigned
    assert ft.encode_register("scs0009", "Goal_Position", 0x0123) == bytes([0x01, 0x23])
    with pytest.raises(ValueError, match="sign bit 11"):
        ft.encode_register("sts3215", "Homing_Offset", 4096)


def test_status_parsers_resync_after_garbage():
    good = ft.status_packet(2, 0, b"\x10\x00")
    buf = bytearray(b"\x00\x13") + bytearray(good)
    status, consumed, _ = ft.parse_status(buf)
    assert status is None and consumed == 2
    del buf[:consumed]
    status, consumed, _ = ft.parse_status(buf)
    assert status.servo_id == 2 and status.params == b"\x10\x00"


def test_error_messages_are_actionable():
    msgs = ft.describe_error(ft.ERRBIT_OVERHEAT | ft.ERRBIT_VOLTAGE)
    assert any("over-temperature" in m for m in msgs) and any("power supply" in m for m in msgs)
    assert ft.describe_error(0) == []
    assert any("disable torque first" in m for m in dxl.describe_error(dxl.RESULT_ACCESS))
    assert any("Hardware_Error_Status" in m for m in dxl.describe_error(dxl.ERR_ALERT))
    assert any("overheating" in m for m in dxl.describe_hardware_error(dxl.HW_OVERHEATING))


def test_two_complement_range_checks():
    assert dxl.encode_register("xm430-w350", "Goal_Position", -1) == b"\xff\xff\xff\xff"
    with pytest.raises(ValueError, match="Torque_Enable"):
        dxl.encode_register("xm430-w350", "Torque_Enable", 256)
