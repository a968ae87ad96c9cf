"""Dynamixel Protocol 2.0 (ROS-free): X-series control table, framing, CRC-16, byte stuffing.

Packet framing::

    instruction: FF FF FD 00 <id> <len_l> <len_h> <instr> <params...> <crc_l> <crc_h>
    status:      FF FF FD 00 <id> <len_l> <len_h> 55 <error> <params...> <crc_l> <crc_h>

``len`` counts instruction (+ error) + params + 2 CRC bytes, after byte stuffing (FF FF FD in the
payload gets an extra FD). The CRC is CRC-16 with polynomial 0x8005, initial value 0, MSB first
(ROBOTIS e-manual, "CRC calculation"), over every byte from the header to the last parameter.
Multi-byte registers are little-endian; signed registers are two's complement.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from lerobot_drivers.family import BusFamily, Status

HEADER = b"\xff\xff\xfd\x00"
BROADCAST_ID = 0xFE
MAX_ID = 0xFC

INST_PING = 0x01
INST_READ = 0x02
INST_WRITE = 0x03
INST_REG_WRITE = 0x04
INST_ACTION = 0x05
INST_FACTORY_RESET = 0x06
INST_REBOOT = 0x08
INST_STATUS = 0x55
INST_SYNC_READ = 0x82
INST_SYNC_WRITE = 0x83

# status packet error field: bit 7 = hardware alert, bits 0-6 = result code
ERR_ALERT = 0x80
RESULT_FAIL = 1
RESULT_INSTRUCTION = 2
RESULT_CRC = 3
RESULT_DATA_RANGE = 4
RESULT_DATA_LENGTH = 5
RESULT_DATA_LIMIT = 6
RESULT_ACCESS = 7

_RESULT_TEXT = {
    RESULT_FAIL: "result fail: the servo could not process the instruction",
    RESULT_INSTRUCTION: "instruction error: undefined instruction, or ACTION without REG_WRITE",
    RESULT_CRC: "CRC error: the packet was corrupted on the wire, check cabling and baud rate",
    RESULT_DATA_RANGE: "data range error: the value is outside the register's range",
    RESULT_DATA_LENGTH: "data length error: fewer bytes than the register needs",
    RESULT_DATA_LIMIT: "data limit error: value exceeds a limit (e.g. goal outside position limits)",
    RESULT_ACCESS: "access error: write to a read-only register, or to EEPROM while torque is on "
    "(disable torque first)",
}

# Hardware_Error_Status (address 70) bits
HW_INPUT_VOLTAGE = 0x01
HW_OVERHEATING = 0x04
HW_MOTOR_ENCODER = 0x08
HW_ELECTRICAL_SHOCK = 0x10
HW_OVERLOAD = 0x20

_HW_TEXT = {
    HW_INPUT_VOLTAGE: "input voltage error: check the power supply",
    HW_OVERHEATING: "overheating: torque was cut, let the servo cool down and reboot it",
    HW_MOTOR_ENCODER: "motor encoder error: the servo needs service",
    HW_ELECTRICAL_SHOCK: "electrical shock: check wiring/short circuit and reboot the servo",
    HW_OVERLOAD: "overload: sustained load above limit, reduce load and reboot the servo",
}

X_SERIES_TABLE: dict[str, tuple[int, int]] = {
    "Model_Number": (0, 2),
    "Model_Information": (2, 4),
    "Firmware_Version": (6, 1),
    "ID": (7, 1),
    "Baud_Rate": (8, 1),
    "Return_Delay_Time": (9, 1),
    "Drive_Mode": (10, 1),
    "Operating_Mode": (11, 1),
    "Secondary_ID": (12, 1),
    "Protocol_Type": (13, 1),
    "Homing_Offset": (20, 4),
    "Moving_Threshold": (24, 4),
    "Temperature_Limit": (31, 1),
    "Max_Voltage_Limit": (32, 2),
    "Min_Voltage_Limit": (34, 2),
    "PWM_Limit": (36, 2),
    "Current_Limit": (38, 2),
    "Acceleration_Limit": (40, 4),
    "Velocity_Limit": (44, 4),
    "Max_Position_Limit": (48, 4),
    "Min_Position_Limit": (52, 4),
    "Shutdown": (63, 1),
    "Torque_Enable": (64, 1),
    "LED": (65, 1),
    "Status_Return_Level": (68, 1),
    "Registered_Instruction": (69, 1),
    "Hardware_Error_Status": (70, 1),
    "Velocity_I_Gain": (76, 2),
    "Velocity_P_Gain": (78, 2),
    "Position_D_Gain": (80, 2),
    "Position_I_Gain": (82, 2),
    "Position_P_Gain": (84, 2),
    "Feedforward_2nd_Gain": (88, 2),
    "Feedforward_1st_Gain": (90, 2),
    "Bus_Watchdog": (98, 1),
    "Goal_PWM": (100, 2),
    "Goal_Current": (102, 2),
    "Goal_Velocity": (104, 4),
    "Profile_Acceleration": (108, 4),
    "Profile_Velocity": (112, 4),
    "Goal_Position": (116, 4),
    "Realtime_Tick": (120, 2),
    "Moving": (122, 1),
    "Moving_Status": (123, 1),
    "Present_PWM": (124, 2),
    "Present_Current": (126, 2),  # Present_Load (0.1 %) on xl430/xc430
    "Present_Velocity": (128, 4),
    "Present_Position": (132, 4),
    "Velocity_Trajectory": (136, 4),
    "Position_Trajectory": (140, 4),
    "Present_Input_Voltage": (144, 2),
    "Present_Temperature": (146, 1),
}
EEPROM_END = 64  # addresses below are EEPROM: writable only with torque off

SIGNED_REGISTERS = {
    "Homing_Offset",
    "Goal_PWM",
    "Goal_Current",
    "Goal_Velocity",
    "Goal_Position",
    "Present_Position",
    "Present_PWM",
    "Present_Current",
    "Present_Velocity",
}

BAUD_RATES = {
    9_600: 0,
    57_600: 1,
    115_200: 2,
    1_000_000: 3,
    2_000_000: 4,
    3_000_000: 5,
    4_000_000: 6,
}

OPERATING_MODES = {
    "current": 0,
    "velocity": 1,
    "position": 3,
    "extended_position": 4,
    "current_position": 5,
    "pwm": 16,
}


@dataclass(frozen=True)
class DynamixelModel:
    name: str
    model_number: int
    resolution: int
    stall_torque_nm: float
    # Present_Current LSB in A; 0 means address 126 holds Present_Load in 0.1 % units
    current_unit_a: float
    stall_current_a: float
    operating_modes: tuple[int, ...]


MODELS: dict[str, DynamixelModel] = {
    "xl330-m077": DynamixelModel("xl330-m077", 1190, 4096, 0.215, 0.001, 1.47, (0, 1, 3, 4, 5, 16)),
    "xl330-m288": DynamixelModel("xl330-m288", 1200, 4096, 0.52, 0.001, 1.47, (0, 1, 3, 4, 5, 16)),
    "xl430-w250": DynamixelModel("xl430-w250", 1060, 4096, 1.5, 0.0, 1.4, (1, 3, 4, 16)),
    "xm430-w350": DynamixelModel("xm430-w350", 1020, 4096, 4.1, 0.00269, 2.3, (0, 1, 3, 4, 5, 16)),
    "xm540-w270": DynamixelModel("xm540-w270", 1120, 4096, 10.6, 0.00269, 4.4, (0, 1, 3, 4, 5, 16)),
    "xc430-w150": DynamixelModel("xc430-w150", 1070, 4096, 1.6, 0.0, 1.4, (1, 3, 4, 16)),
}

VELOCITY_UNIT_RPM = 0.229


def get_model(model: str) -> DynamixelModel:
    try:
        return MODELS[model]
    except KeyError:
        raise KeyError(f"unknown Dynamixel model {model!r}; known: {', '.join(sorted(MODELS))}") from None


def control_table(model: str) -> dict[str, tuple[int, int]]:
    get_model(model)
    return X_SERIES_TABLE


def _make_crc_table() -> list[int]:
    table = []
    for i in range(256):
        crc = i << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x8005) if crc & 0x8000 else (crc << 1)
        table.append(crc & 0xFFFF)
    return table


_CRC_TABLE = _make_crc_table()


def crc16(data: bytes, crc: int = 0) -> int:
    for byte in data:
        crc = ((crc << 8) ^ _CRC_TABLE[((crc >> 8) ^ byte) & 0xFF]) & 0xFFFF
    return crc


def stuff(payload: bytes) -> bytes:
    """Insert FD after every FF FF FD in the instruction/params part."""
    out = bytearray()
    for byte in payload:
        out.append(byte)
        if len(out) >= 3 and out[-3:] == b"\xff\xff\xfd":
            out.append(0xFD)
    return bytes(out)


def unstuff(payload: bytes) -> bytes:
    out = bytearray()
    i = 0
    while i < len(payload):
        out.append(payload[i])
        if len(out) >= 3 and out[-3:] == b"\xff\xff\xfd" and i + 1 < len(payload) and payload[i + 1] == 0xFD:
            i += 1  # skip the stuffing byte
        i += 1
    return bytes(out)


def _packet(servo_id: int, payload: bytes) -> bytes:
    payload = stuff(payload)
    length = len(payload) + 2
    head = HEADER + bytes([servo_id, length & 0xFF, length >> 8]) + payload
    crc = crc16(head)
    return head + bytes([crc & 0xFF, crc >> 8])


def instruction_packet(servo_id: int, instruction: int, params: bytes = b"") -> bytes:
    return _packet(servo_id, bytes([instruction]) + bytes(params))


def status_packet(servo_id: int, error: int, params: bytes = b"") -> bytes:
    return _packet(servo_id, bytes([INST_STATUS, error]) + bytes(params))


def u16(value: int) -> bytes:
    return int(value).to_bytes(2, "little")


def encode_register(model: str, register: str, value: int) -> bytes:
    _, size = control_table(model)[register]
    value = int(value)
    if register in SIGNED_REGISTERS:
        lo, hi = -(1 << (8 * size - 1)), (1 << (8 * size - 1)) - 1
        if not lo <= value <= hi:
            raise ValueError(f"{register}={value} outside [{lo}, {hi}] on {model}")
        value &= (1 << (8 * size)) - 1
    elif not 0 <= value < (1 << (8 * size)):
        raise ValueError(f"{register}={value} does not fit in {size} byte(s) on {model}")
    return value.to_bytes(size, "little")


def decode_register(model: str, register: str, data: bytes) -> int:
    raw = int.from_bytes(bytes(data), "little")
    if register in SIGNED_REGISTERS:
        bits = 8 * len(data)
        if raw & (1 << (bits - 1)):
            raw -= 1 << bits
    return raw


def describe_error(error: int) -> list[str]:
    out = []
    code = error & 0x7F
    if code:
        out.append(_RESULT_TEXT.get(code, f"unknown result code {code}"))
    if error & ERR_ALERT:
        out.append("hardware alert: read Hardware_Error_Status (address 70) for the cause")
    return out


def describe_hardware_error(bits: int) -> list[str]:
    return [text for bit, text in _HW_TEXT.items() if bits & bit]


def _take_packet(buf: bytearray) -> tuple[Optional[tuple[int, bytes]], int, bool]:
    start = buf.find(HEADER)
    if start < 0:
        # keep a possible partial header at the end
        keep = 0
        for k in (3, 2, 1):
            if buf.endswith(HEADER[:k]):
                keep = k
                break
        return None, len(buf) - keep, False
    if start > 0:
        return None, start, False
    if len(buf) < 7:
        return None, 0, False
    length = buf[5] | (buf[6] << 8)
    if length < 3 or length > 1024:
        return None, 4, True
    total = 7 + length
    if len(buf) < total:
        return None, 0, False
    crc = buf[total - 2] | (buf[total - 1] << 8)
    if crc16(bytes(buf[: total - 2])) != crc:
        return None, 4, True
    return (buf[4], unstuff(bytes(buf[7 : total - 2]))), total, False


def parse_status(buf: bytearray) -> tuple[Optional[Status], int, bool]:
    """Take one status packet from the front of ``buf`` -> (status, consumed, corrupt)."""
    packet, consumed, corrupt = _take_packet(buf)
    if packet is None:
        return None, consumed, corrupt
    servo_id, payload = packet
    if len(payload) < 2 or payload[0] != INST_STATUS:
        return None, consumed, False  # an instruction echo or foreign packet: skip it
    return Status(servo_id, payload[1], payload[2:]), consumed, False


def parse_instruction(buf: bytearray) -> tuple[Optional[tuple[int, int, bytes]], int, bool]:
    """Servo side: take one instruction packet -> ((id, instruction, params), consumed, corrupt)."""
    packet, consumed, corrupt = _take_packet(buf)
    if packet is None:
        return None, consumed, corrupt
    servo_id, payload = packet
    if not payload or payload[0] == INST_STATUS:
        return None, consumed, False
    return (servo_id, payload[0], payload[1:]), consumed, False


def status_length(n_params: int) -> int:
    """Unstuffed status packet size with n parameter bytes."""
    return 11 + n_params


class DynamixelFamily(BusFamily):
    """Dynamixel protocol 2.0, X series (as in LeRobot)."""

    name = "dynamixel"
    protocols = (2,)
    broadcast_id = BROADCAST_ID
    baud_rates = BAUD_RATES
    address_bytes = 2
    instruction_overhead = 10
    homing_sign = 1  # Present_Position = Actual_Position + Homing_Offset (multi-turn)
    position_wraps = False
    stores_drive_mode = True  # Drive_Mode bit 0 makes the servo itself count the other way
    calibration_operating_mode = OPERATING_MODES["extended_position"]
    eeprom_unlock = ()
    state_registers = ("Present_Current", "Present_Velocity", "Present_Position")  # 126..135
    voltage_register = "Present_Input_Voltage"
    hardware_error_register = "Hardware_Error_Status"
    model_number_register = X_SERIES_TABLE["Model_Number"]
    nominal_voltage = 5.0
    fault_bits = {"overheat": HW_OVERHEATING, "overload": HW_OVERLOAD, "voltage": HW_INPUT_VOLTAGE}
    status_return_level = ("Status_Return_Level", 2)
    ping_reply_params = 3  # model number (2 bytes), firmware version
    bad_length_result = RESULT_DATA_LENGTH
    bad_instruction_result = RESULT_INSTRUCTION
    reboot_instruction = INST_REBOOT
    readable_end = 147  # end of the control table
    model = staticmethod(get_model)
    table = staticmethod(control_table)
    instruction_packet = staticmethod(instruction_packet)
    status_packet = staticmethod(status_packet)
    parse_status = staticmethod(parse_status)
    parse_instruction = staticmethod(parse_instruction)
    status_length = staticmethod(status_length)
    encode = staticmethod(encode_register)
    decode = staticmethod(decode_register)
    describe = staticmethod(describe_error)
    describe_hardware = staticmethod(describe_hardware_error)

    def model_number_from_ping(self, params):
        return params[0] | (params[1] << 8) if len(params) >= 2 else None

    def fatal(self, error):
        return bool(error & 0x7F)

    def configure_writes(self, motor, model, leader):
        mode = OPERATING_MODES["current_position" if motor.endswith("gripper") else "extended_position"]
        if mode not in get_model(model).operating_modes:
            mode = OPERATING_MODES["extended_position"]
        return (("Return_Delay_Time", 0), ("Operating_Mode", mode))

    def velocity_unit_rad_s(self, model):
        return VELOCITY_UNIT_RPM * 2 * math.pi / 60.0

    def effort_nm(self, model, regs):
        info = get_model(model)
        if info.current_unit_a:
            return regs["Present_Current"] * info.current_unit_a / info.stall_current_a * info.stall_torque_nm
        return regs["Present_Current"] / 1000.0 * info.stall_torque_nm  # Present_Load, 0.1 %

    # ------------------------------------------------------ emulated device
    def factory_defaults(self, model):
        info = get_model(model)
        xl330 = model.startswith("xl330")
        return (
            ("Model_Number", info.model_number),
            ("Firmware_Version", 52),
            ("Baud_Rate", 3),
            ("Return_Delay_Time", 0),
            ("Operating_Mode", 3),
            ("Protocol_Type", 2),
            ("Temperature_Limit", 70),
            ("Max_Voltage_Limit", 70 if xl330 else 160),
            ("Min_Voltage_Limit", 35 if xl330 else 95),
            ("Max_Position_Limit", info.resolution - 1),
            ("Min_Position_Limit", 0),
            ("Status_Return_Level", 2),
            ("Shutdown", 0x34),
            ("Position_P_Gain", 800),
            ("Velocity_Limit", 445 if xl330 else 1023),
        )

    def status_error(self, fault):
        return ERR_ALERT if fault else 0

    def present_registers(self, model, state, fault):
        info = get_model(model)
        rpm = state["velocity"] / info.resolution * 60.0
        load = state["load"]
        if info.current_unit_a:
            current = int(round(load * info.stall_current_a / info.current_unit_a))
        else:
            current = int(round(load * 1000))
        return {
            "Present_Position": int(round(state["position"])),
            "Present_Velocity": int(round(rpm / VELOCITY_UNIT_RPM)),
            "Present_Current": current,
            "Present_Input_Voltage": int(round(state["voltage"] * 10)),
            "Present_Temperature": int(round(state["temperature"])),
            "Moving": int(abs(state["velocity"]) > 5),
            "Hardware_Error_Status": fault,
        }

    def device_write(self, servo, addr, data):
        end = addr + len(data)
        if end > self.readable_end or addr < 0:
            return RESULT_DATA_LENGTH
        if addr < 7 or (120 <= addr < self.readable_end):
            return RESULT_ACCESS  # read-only registers
        if addr < EEPROM_END and servo.torque_on:
            return RESULT_ACCESS
        ga, gs = servo.table["Goal_Position"]
        if addr <= ga and end >= ga + gs and servo.get("Operating_Mode") == 3:
            goal = decode_register(servo.model, "Goal_Position", data[ga - addr : ga - addr + gs])
            if not servo.get("Min_Position_Limit") <= goal <= servo.get("Max_Position_Limit"):
                return RESULT_DATA_LIMIT
        ta = servo.table["Torque_Enable"][0]
        if addr <= ta < end and data[ta - addr] and servo.fault:
            return RESULT_ACCESS  # cannot re-enable torque before a reboot
        servo.mem[addr:end] = data
        return 0

    def corrupt_reply(self, buf):
        return (buf[4], RESULT_CRC) if len(buf) > 4 else None

    def ping_reply(self, servo):
        return u16(get_model(servo.model).model_number) + bytes([servo.get("Firmware_Version")])


DYNAMIXEL = DynamixelFamily(2)
