"""What a servo bus family is (ROS-free): one object per family holds everything that differs.

A :class:`BusFamily` carries the framing (packets, status parsing, register encodings), the
control-table facts the driver relies on (torque and lock writes, baud-rate codes, homing-offset
sign, where the drive mode lives, error bits, state registers, units) and the device rules the
servo emulator plays (factory defaults, write access, fault bits). The bus client, calibration,
the arm and the emulator ask this object instead of branching on the family name. The families
are registered in :data:`lerobot_drivers.bus.FAMILIES`; a new family is one module with a subclass
and one line there (see the package README, "Adding a bus family").
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Optional

Writes = tuple[tuple[str, int], ...]  # (register, value) in the order they are written


@dataclass
class Status:
    """A status packet: the servo's answer."""

    servo_id: int
    error: int
    params: bytes


@dataclass(frozen=True)
class BusFamily(ABC):
    """One servo family at one protocol version (``at_protocol`` gives the others)."""

    protocol_version: int

    # instruction codes (Feetech and Dynamixel 2.0 share them; a family may override)
    INST_PING: ClassVar[int] = 0x01
    INST_READ: ClassVar[int] = 0x02
    INST_WRITE: ClassVar[int] = 0x03
    INST_SYNC_READ: ClassVar[int] = 0x82
    INST_SYNC_WRITE: ClassVar[int] = 0x83
    name: ClassVar[str]
    protocols: ClassVar[tuple[int, ...]]  # versions this family speaks; the first is the default
    broadcast_id: ClassVar[int]
    baud_rates: ClassVar[Mapping[int, int]]  # bit/s -> Baud_Rate register code
    address_bytes: ClassVar[int]  # width of an address / length field in READ, WRITE, SYNC_*
    instruction_overhead: ClassVar[int]  # instruction packet bytes around its parameters
    # Present = Actual + homing_sign * Homing_Offset (and modulo one turn when position_wraps)
    homing_sign: ClassVar[int]
    position_wraps: ClassVar[bool]
    # True: Drive_Mode is a servo register (the servo inverts); False: the driver inverts
    stores_drive_mode: ClassVar[bool]
    calibration_operating_mode: ClassVar[int]  # position mode the calibration procedure uses
    eeprom_unlock: ClassVar[Writes]  # written before EEPROM registers (baud rate)
    state_registers: ClassVar[tuple[str, ...]]  # what one joint-state read takes, one block
    voltage_register: ClassVar[str]
    hardware_error_register: ClassVar[Optional[str]]  # None: the status byte carries the faults
    model_number_register: ClassVar[tuple[int, int]]  # (address, size), valid on every model
    # emulated device
    nominal_voltage: ClassVar[float]
    fault_bits: ClassVar[Mapping[str, int]]  # injected fault kind -> hardware error bit
    status_return_level: ClassVar[tuple[str, int]]  # (register, level from which writes are answered)

    def __post_init__(self) -> None:
        if self.protocol_version not in self.protocols:
            raise ValueError(
                f"{self.name} protocol {self.protocol_version} is not supported; use one of {list(self.protocols)}"
            )

    def at_protocol(self, protocol_version: Optional[int]) -> BusFamily:
        if protocol_version is None or protocol_version == self.protocol_version:
            return self
        return dataclasses.replace(self, protocol_version=int(protocol_version))

    def __str__(self) -> str:
        return self.name

    # from the family's module (plain functions, staticmethod in the subclass): the model spec
    # (model_number, resolution, ...; KeyError naming the known ones), the control table
    # (register -> (address, size)), packets, parsing -> (packet or None, consumed, corrupt), the
    # unstuffed status size for n parameter bytes, and register value <-> bytes
    model: ClassVar[Callable[[str], Any]]
    table: ClassVar[Callable[[str], Mapping[str, tuple[int, int]]]]
    instruction_packet: ClassVar[Callable[..., bytes]]  # (servo_id, instruction, params=b"")
    status_packet: ClassVar[Callable[..., bytes]]  # (servo_id, error, params=b"")
    parse_status: ClassVar[Callable[[bytearray], tuple]]
    parse_instruction: ClassVar[Callable[[bytearray], tuple]]  # servo side: (id, inst, params)
    status_length: ClassVar[Callable[[int], int]]
    encode: ClassVar[Callable[[str, str, int], bytes]]  # (model, register, value)
    decode: ClassVar[Callable[[str, str, bytes], int]]  # (model, register, data)

    def protocol_of(self, model: str) -> int:
        return self.protocol_version

    def check_model(self, model: str) -> None:
        self.model(model)

    def resolution(self, model: str) -> int:
        return self.model(model).resolution

    def model_number(self, model: str) -> int:
        return self.model(model).model_number

    @property
    def supports_sync_read(self) -> bool:
        return True

    @property
    def has_homing_offset(self) -> bool:
        return True

    @property
    def byteorder(self) -> str:
        return "little"

    def field(self, value: int) -> bytes:
        """An address or length field of an instruction."""
        return int(value).to_bytes(self.address_bytes, "little")

    def span(self, params: bytes) -> tuple[int, int]:
        """(address, length) at the start of READ / SYNC_* parameters."""
        n = self.address_bytes
        return int.from_bytes(params[:n], "little"), int.from_bytes(params[n : 2 * n], "little")

    def ping(self, sid: int) -> bytes:
        return self.instruction_packet(sid, self.INST_PING)

    def read(self, sid: int, addr: int, size: int) -> bytes:
        return self.instruction_packet(sid, self.INST_READ, self.field(addr) + self.field(size))

    def write(self, sid: int, addr: int, data: bytes) -> bytes:
        return self.instruction_packet(sid, self.INST_WRITE, self.field(addr) + bytes(data))

    def sync_read(self, addr: int, size: int, ids) -> bytes:
        params = self.field(addr) + self.field(size) + bytes(ids)
        return self.instruction_packet(self.broadcast_id, self.INST_SYNC_READ, params)

    def sync_write(self, addr: int, size: int, items) -> bytes:
        params = bytearray(self.field(addr) + self.field(size))
        for sid, data in items:
            params.append(sid)
            params += data
        return self.instruction_packet(self.broadcast_id, self.INST_SYNC_WRITE, bytes(params))

    # PING answer: parameter count, and the model number when the answer carries it
    ping_reply_params: ClassVar[int] = 0

    def model_number_from_ping(self, params: bytes) -> Optional[int]:
        return None

    # ------------------------------------------------------------ errors
    # status error byte -> actionable messages; the same for the hardware fault bits
    # (``hardware_error_register``, else the status byte)
    describe: ClassVar[Callable[[int], list[str]]]
    describe_hardware: ClassVar[Callable[[int], list[str]]]

    @abstractmethod
    def fatal(self, error: int) -> bool: ...  # the instruction failed (its data is not valid)

    # ------------------------------------------------- driver conventions
    def torque_writes(self, on: bool) -> Writes:
        return (("Torque_Enable", int(on)),)

    def configure_writes(self, motor: str, model: str, leader: bool) -> Writes:
        """LeRobot's configure(): the registers written to every motor before use."""
        return ()

    @abstractmethod
    def velocity_unit_rad_s(self, model: str) -> float: ...  # Present_Velocity LSB

    @abstractmethod
    def effort_nm(self, model: str, regs: Mapping[str, int]) -> float: ...  # from state_registers

    # ---------------------------------------------------- emulated device
    def factory_defaults(self, model: str) -> Writes:
        return ()

    def status_error(self, fault: int) -> int:
        """Status byte of a servo carrying the hardware fault bits ``fault``."""
        return fault

    # Present_* registers from the state (position ticks, velocity ticks/s, load fraction,
    # voltage V, temperature C); a WRITE applied as the firmware does -> result bits (0 = ok)
    @abstractmethod
    def present_registers(self, model: str, state: Mapping[str, float], fault: int) -> dict[str, int]: ...

    @abstractmethod
    def device_write(self, servo, addr: int, data: bytes) -> int: ...

    # malformed or unsupported requests: the result the servo answers with (None: it stays silent)
    bad_length_result: ClassVar[Optional[int]] = None
    bad_instruction_result: ClassVar[Optional[int]] = None
    reboot_instruction: ClassVar[Optional[int]] = None
    readable_end: ClassVar[Optional[int]] = None  # READ past this address is a bad length

    def corrupt_reply(self, buf: bytearray) -> Optional[tuple[int, int]]:
        """(servo id, result) the servo answers a corrupt packet with; None when it drops it."""
        return None

    def ping_reply(self, servo) -> bytes:
        return b""
