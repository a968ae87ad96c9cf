"""Feetech serial-bus servo protocol (ROS-free): STS/SMS (protocol 0) and SCS (protocol 1).

Packet framing (both protocols)::

    instruction: FF FF <id> <len> <instr> <params...> <checksum>
    status:      FF FF <id> <len> <error> <params...> <checksum>

``len`` = number of params + 2 and ``checksum`` = ~(id + len + instr/error + sum(params)) & 0xFF.
Protocol 0 (STS/SMS) stores multi-byte registers little-endian, protocol 1 (SCS) big-endian.
Signed registers on STS/SMS use sign-magnitude (sign bit 15 for positions/velocities, 11 for the
homing offset, 10 for the load). Control-table addresses follow the Feetech STS/SMS and SCSCL
manuals (the same addresses LeRobot uses).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from lerobot_drivers.family import BusFamily, Status

HEADER = b"\xff\xff"
BROADCAST_ID = 0xFE
MAX_ID = 0xFC

INST_PING = 0x01
INST_READ = 0x02
INST_WRITE = 0x03
INST_REG_WRITE = 0x04
INST_ACTION = 0x05
INST_RESET = 0x06
INST_SYNC_READ = 0x82
INST_SYNC_WRITE = 0x83

# status error bits (Feetech SCServo SDK naming)
ERRBIT_VOLTAGE = 0x01
ERRBIT_ANGLE = 0x02
ERRBIT_OVERHEAT = 0x04
ERRBIT_OVERCURRENT = 0x08
ERRBIT_OVERLOAD = 0x20

_ERROR_TEXT = {
    ERRBIT_VOLTAGE: "input voltage out of range: check the power supply (STS3215: 6-12.6 V)",
    ERRBIT_ANGLE: "angle/position limit: goal outside Min/Max_Position_Limit, check calibration",
    ERRBIT_OVERHEAT: "over-temperature: torque was cut, let the servo cool and reduce load",
    ERRBIT_OVERCURRENT: "over-current: the joint is blocked or overloaded, free it and re-enable torque",
    ERRBIT_OVERLOAD: "overload: sustained torque above limit, reduce load and re-enable torque",
}

# data_name: (address, size). The two protocol families share the EEPROM head and the present-state block.
_EEPROM_HEAD: dict[str, tuple[int, int]] = {
    "Firmware_Major_Version": (0, 1),
    "Firmware_Minor_Version": (1, 1),
    "Model_Number": (3, 2),
    "ID": (5, 1),
    "Baud_Rate": (6, 1),
    "Return_Delay_Time": (7, 1),
    "Response_Status_Level": (8, 1),
    "Min_Position_Limit": (9, 2),
    "Max_Position_Limit": (11, 2),
    "Max_Temperature_Limit": (13, 1),
    "Max_Voltage_Limit": (14, 1),
    "Min_Voltage_Limit": (15, 1),
    "Max_Torque_Limit": (16, 2),
    "Phase": (18, 1),
    "Unloading_Condition": (19, 1),
    "LED_Alarm_Condition": (20, 1),
    "P_Coefficient": (21, 1),
    "D_Coefficient": (22, 1),
    "I_Coefficient": (23, 1),
    "Minimum_Startup_Force": (24, 2),
    "CW_Dead_Zone": (26, 1),
    "CCW_Dead_Zone": (27, 1),
}
_PRESENT_STATE: dict[str, tuple[int, int]] = {
    "Present_Position": (56, 2),
    "Present_Velocity": (58, 2),
    "Present_Load": (60, 2),
    "Present_Voltage": (62, 1),
    "Present_Temperature": (63, 1),
    "Status": (65, 1),
    "Moving": (66, 1),
}

STS_SMS_TABLE: dict[str, tuple[int, int]] = {
    **_EEPROM_HEAD,
    "Protection_Current": (28, 2),
    "Angular_Resolution": (30, 1),
    "Homing_Offset": (31, 2),
    "Operating_Mode": (33, 1),
    "Protective_Torque": (34, 1),
    "Protection_Time": (35, 1),
    "Overload_Torque": (36, 1),
    "Torque_Enable": (40, 1),
    "Acceleration": (41, 1),
    "Goal_Position": (42, 2),
    "Goal_Time": (44, 2),
    "Goal_Velocity": (46, 2),
    "Torque_Limit": (48, 2),
    "Lock": (55, 1),
    **_PRESENT_STATE,
    "Present_Current": (69, 2),
    "Maximum_Acceleration": (85, 1),
}

SCS_TABLE: dict[str, tuple[int, int]] = {
    **_EEPROM_HEAD,
    "Protective_Torque": (37, 1),
    "Protection_Time": (38, 1),
    "Torque_Enable": (40, 1),
    "Acceleration": (41, 1),
    "Goal_Position": (42, 2),
    "Running_Time": (44, 2),
    "Goal_Velocity": (46, 2),
    "Lock": (48, 1),
    **_PRESENT_STATE,
}

STS_SIGN_BITS = {
    "Homing_Offset": 11,
    "Goal_Position": 15,
    "Goal_Velocity": 15,
    "Present_Position": 15,
    "Present_Velocity": 15,
    "Present_Load": 10,
}

BAUD_RATES = {1_000_000: 0, 500_000: 1, 250_000: 2, 128_000: 3, 115_200: 4, 57_600: 5, 38_400: 6, 19_200: 7}


@dataclass(frozen=True)
class FeetechModel:
    name: str
    protocol: int
    model_number: int
    resolution: int
    stall_torque_nm: float  # for effort = load fraction * stall torque
    current_unit_a: float  # Present_Current LSB in A (0 when the model has no current sensor)


MODELS: dict[str, FeetechModel] = {
    "sts3215": FeetechModel("sts3215", 0, 777, 4096, 2.94, 0.0065),
    "sts3250": FeetechModel("sts3250", 0, 2825, 4096, 4.9, 0.0065),
    "sm8512bl": FeetechModel("sm8512bl", 0, 11272, 4096, 12.0, 0.0065),
    "scs0009": FeetechModel("scs0009", 1, 1284, 1024, 0.23, 0.0),
}


def control_table(model: str) -> dict[str, tuple[int, int]]:
    return STS_SMS_TABLE if get_model(model).protocol == 0 else SCS_TABLE


def get_model(model: str) -> FeetechModel:
    try:
        return MODELS[model]
    except KeyError:
        raise KeyError(f"unknown Feetech model {model!r}; known: {', '.join(sorted(MODELS))}") from None


def checksum(body: bytes) -> int:
    """Checksum over id, length, instruction/error and params (everything after FF FF)."""
    return (~sum(body)) & 0xFF


def instruction_packet(servo_id: int, instruction: int, params: bytes = b"") -> bytes:
    body = bytes([servo_id, len(params) + 2, instruction]) + bytes(params)
    return HEADER + body + bytes([checksum(body)])


def status_packet(servo_id: int, error: int, params: bytes = b"") -> bytes:
    body = bytes([servo_id, len(params) + 2, error]) + bytes(params)
    return HEADER + body + bytes([checksum(body)])


def encode_sign_magnitude(value: int, sign_bit: int) -> int:
    magnitude = abs(int(value))
    if magnitude >= (1 << sign_bit):
        raise ValueError(f"magnitude {magnitude} does not fit below sign bit {sign_bit}")
    return ((1 << sign_bit) if value < 0 else 0) | magnitude


def decode_sign_magnitude(raw: int, sign_bit: int) -> int:
    magnitude = raw & ((1 << sign_bit) - 1)
    return -magnitude if (raw >> sign_bit) & 1 else magnitude


def to_bytes(value: int, size: int, protocol: int) -> bytes:
    return int(value).to_bytes(size, "little" if protocol == 0 else "big")


def from_bytes(data: bytes, protocol: int) -> int:
    return int.from_bytes(bytes(data), "little" if protocol == 0 else "big")


def encode_register(model: str, register: str, value: int) -> bytes:
    """Value (signed where the register is signed) -> register bytes."""
    spec = get_model(model)
    _, size = control_table(model)[register]
    value = int(value)
    if spec.protocol == 0 and register in STS_SIGN_BITS:
        value = encode_sign_magnitude(value, STS_SIGN_BITS[register])
    if not 0 <= value < (1 << (8 * size)):
        raise ValueError(f"{register}={value} does not fit in {size} byte(s) on {model}")
    return to_bytes(value, size, spec.protocol)


def decode_register(model: str, register: str, data: bytes) -> int:
    spec = get_model(model)
    raw = from_bytes(data, spec.protocol)
    if spec.protocol == 0 and register in STS_SIGN_BITS:
        return decode_sign_magnitude(raw, STS_SIGN_BITS[register])
    return raw


def describe_error(error: int) -> list[str]:
    """Status error byte -> list of actionable messages (empty when no error)."""
    out = [text for bit, text in _ERROR_TEXT.items() if error & bit]
    unknown = error & ~sum(_ERROR_TEXT)
    if unknown:
        out.append(f"unknown status error bits 0x{unknown:02x}")
    return out


def parse_status(buf: bytearray) -> tuple[Optional[Status], int, bool]:
    """Try to take one status packet from the front of ``buf``.

    Returns ``(status, bytes_consumed, corrupt)``. ``status`` is None when more bytes are needed
    (``consumed`` 0) or when garbage/corrupt bytes were dropped (``consumed`` > 0, ``corrupt`` set
    on a checksum mismatch).
    """
    start = buf.find(HEADER)
    if start < 0:
        keep = 1 if buf.endswith(b"\xff") else 0
        return None, len(buf) - keep, False
    if start > 0:
        return None, start, False
    if len(buf) < 4:
        return None, 0, False
    length = buf[3]
    if length < 2:
        return None, 2, True
    total = 4 + length
    if len(buf) < total:
        return None, 0, False
    body = bytes(buf[2 : total - 1])
    if checksum(body) != buf[total - 1]:
        return None, 2, True
    return Status(buf[2], buf[4], bytes(buf[5 : total - 1])), total, False


def parse_instruction(buf: bytearray) -> tuple[Optional[tuple[int, int, bytes]], int, bool]:
    """Servo side: take one instruction packet -> ((id, instruction, params), consumed, corrupt)."""
    status, consumed, corrupt = parse_status(buf)
    if status is None:
        return None, consumed, corrupt
    return (status.servo_id, status.error, status.params), consumed, False


def status_length(n_params: int) -> int:
    return 6 + n_params


class FeetechFamily(BusFamily):
    """Feetech STS/SMS (protocol 0) and SCS (protocol 1)."""

    name = "feetech"
    protocols = (0, 1)
    broadcast_id = BROADCAST_ID
    baud_rates = BAUD_RATES
    address_bytes = 1
    instruction_overhead = 6
    homing_sign = -1  # Present_Position = Actual_Position - Homing_Offset, within one turn
    position_wraps = True
    stores_drive_mode = False  # LeRobot inverts in software (calibration drive_mode)
    calibration_operating_mode = 0
    eeprom_unlock = (("Lock", 0),)
    state_registers = ("Present_Position", "Present_Velocity", "Present_Load")  # 56..61, one block
    voltage_register = "Present_Voltage"
    hardware_error_register = None
    model_number_register = STS_SMS_TABLE["Model_Number"]
    nominal_voltage = 12.0
    fault_bits = {"overheat": ERRBIT_OVERHEAT, "overload": ERRBIT_OVERLOAD, "voltage": ERRBIT_VOLTAGE}
    status_return_level = ("Response_Status_Level", 1)
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
    describe_hardware = staticmethod(describe_error)

    def protocol_of(self, model):
        return get_model(model).protocol

    def check_model(self, model):
        if get_model(model).protocol != self.protocol_version:
            raise ValueError(
                f"Feetech model {model} speaks protocol {get_model(model).protocol}, "
                f"the bus is configured for protocol {self.protocol_version}"
            )

    @property
    def supports_sync_read(self):
        return self.protocol_version == 0  # SCS has no SYNC READ

    @property
    def has_homing_offset(self):
        return self.protocol_version == 0  # SCS has no Homing_Offset register

    @property
    def byteorder(self):
        return "little" if self.protocol_version == 0 else "big"

    def fatal(self, error):
        return False  # the status bits report conditions (overheat, overload...); data is still valid

    def torque_writes(self, on):
        return (("Torque_Enable", int(on)), ("Lock", int(on)))

    def configure_writes(self, motor, model, leader):
        writes = [("Return_Delay_Time", 0), ("Operating_Mode", 0)]
        if self.protocol_version == 0:
            writes.append(("Maximum_Acceleration", 254))
        writes.append(("Acceleration", 254))
        if not leader:
            writes += [("P_Coefficient", 16), ("I_Coefficient", 0), ("D_Coefficient", 32)]
        return tuple(writes)

    def velocity_unit_rad_s(self, model):
        return 2 * math.pi / get_model(model).resolution  # steps/s

    def effort_nm(self, model, regs):
        return regs["Present_Load"] / 1000.0 * get_model(model).stall_torque_nm

    # ------------------------------------------------------ emulated device
    def factory_defaults(self, model):
        info = get_model(model)
        return (
            ("Firmware_Major_Version", 3),
            ("Firmware_Minor_Version", 10),
            ("Model_Number", info.model_number),
            ("Baud_Rate", 0),
            ("Return_Delay_Time", 0),
            ("Response_Status_Level", 1),
            ("Min_Position_Limit", 0),
            ("Max_Position_Limit", info.resolution - 1),
            ("Max_Temperature_Limit", 70),
            ("Max_Voltage_Limit", 140),
            ("Min_Voltage_Limit", 40),
            ("Max_Torque_Limit", 1000),
            ("P_Coefficient", 32),
            ("Lock", 1),
        )

    def present_registers(self, model, state, fault):
        protocol = get_model(model).protocol
        vel = max(-32767, min(32767, int(round(state["velocity"]))))
        load = state["load"]
        load_raw = max(-1000, min(1000, int(round(load * 1000))))
        out = {"Present_Position": int(round(state["position"])) % get_model(model).resolution}
        if protocol == 0:
            out["Present_Velocity"] = vel
            out["Present_Load"] = load_raw
        else:  # SCS: same direction bits, but the registers are plain unsigned (big-endian)
            out["Present_Velocity"] = encode_sign_magnitude(vel, 15)
            out["Present_Load"] = encode_sign_magnitude(load_raw, 10)
        out["Present_Voltage"] = int(round(state["voltage"] * 10))
        out["Present_Temperature"] = int(round(state["temperature"]))
        out["Moving"] = int(abs(state["velocity"]) > 5)
        if protocol == 0:
            out["Present_Current"] = int(abs(load) * 2.7 / 0.0065)
        return out

    def device_write(self, servo, addr, data):
        end = addr + len(data)
        if addr < 5 or (56 <= addr < 71 and end <= 71):
            return 0  # read-only: silently ignored by Feetech firmware
        servo.mem[addr:end] = data
        ga, gs = servo.table["Goal_Position"]
        if addr <= ga and end >= ga + gs:
            goal = servo.get("Goal_Position")
            lo, hi = servo.get("Min_Position_Limit"), servo.get("Max_Position_Limit")
            if lo < hi and not lo <= goal <= hi:
                servo.set("Goal_Position", min(hi, max(lo, goal)))
        if servo.fault:
            servo.set("Torque_Enable", 0)
        return 0


FEETECH = FeetechFamily(0)
