"""A serial servo bus client over pyserial (ROS-free): Feetech protocol 0/1 and Dynamixel 2.0.

:class:`MotorBus` speaks raw register values (sign-decoded integers); calibration/normalisation
lives in :mod:`lerobot_drivers.calibration`. Every failure raises a :class:`BusError` subclass
with a message saying what, which servo and what to do.

Why not the vendor SDKs (``feetech-servo-sdk`` / ``dynamixel-sdk`` from PyPI): the Feetech one
is an unofficial copy that needs a monkeypatch for its packet timeout (LeRobot carries one), both
keep module-global state (byte order is a global in the Feetech SDK, so protocol 0 and 1 buses
cannot live in one process), neither decodes status errors into actionable text, and neither
reads a contiguous block of several registers (position, velocity, load, voltage, temperature) in
one sync read. The framing is ~200 lines here, tested byte-exactly against the manuals' examples.
"""

from __future__ import annotations

import select
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Optional

from lerobot_drivers import dynamixel as dxl
from lerobot_drivers import feetech as ft


class BusError(Exception):
    """Base class for bus failures."""


class PortError(BusError):
    """The serial port cannot be opened or went away (unplugged)."""


class BusTimeoutError(BusError):
    """A servo did not answer in time."""

    def __init__(self, message: str, missing_ids: Sequence[int] = ()):
        super().__init__(message)
        self.missing_ids = tuple(missing_ids)


class ServoError(BusError):
    """A servo answered with an error status that made the instruction fail."""

    def __init__(self, servo_id: int, error: int, messages: list[str]):
        super().__init__(f"servo id {servo_id}: " + "; ".join(messages))
        self.servo_id = servo_id
        self.error = error
        self.messages = messages


class _Codec:
    """Protocol-specific bits behind one interface."""

    family = ""
    broadcast_id = 0xFE
    supports_sync_read = True

    def __init__(self, protocol_version: int = 0):
        self.protocol_version = protocol_version


class FeetechCodec(_Codec):
    family = "feetech"
    broadcast_id = ft.BROADCAST_ID

    def __init__(self, protocol_version: int = 0):
        super().__init__(protocol_version)
        # Feetech protocol 1 (SCS) has no SYNC READ
        self.supports_sync_read = protocol_version == 0

    def table(self, model):
        return ft.control_table(model)

    def check_model(self, model):
        if ft.get_model(model).protocol != self.protocol_version:
            raise ValueError(
                f"Feetech model {model} speaks protocol {ft.get_model(model).protocol}, "
                f"the bus is configured for protocol {self.protocol_version}"
            )

    def resolution(self, model):
        return ft.get_model(model).resolution

    def model_number(self, model):
        return ft.get_model(model).model_number

    def ping(self, sid):
        return ft.instruction_packet(sid, ft.INST_PING)

    def read(self, sid, addr, size):
        return ft.instruction_packet(sid, ft.INST_READ, bytes([addr, size]))

    def write(self, sid, addr, data):
        return ft.instruction_packet(sid, ft.INST_WRITE, bytes([addr]) + data)

    def sync_read(self, addr, size, ids):
        return ft.instruction_packet(ft.BROADCAST_ID, ft.INST_SYNC_READ, bytes([addr, size]) + bytes(ids))

    def sync_write(self, addr, size, items):
        params = bytearray([addr, size])
        for sid, data in items:
            params.append(sid)
            params += data
        return ft.instruction_packet(ft.BROADCAST_ID, ft.INST_SYNC_WRITE, bytes(params))

    def parse_status(self, buf):
        return ft.parse_status(buf)

    def status_length(self, n):
        return ft.status_length(n)

    def encode(self, model, register, value):
        return ft.encode_register(model, register, value)

    def decode(self, model, register, data):
        return ft.decode_register(model, register, data)

    def fatal(self, error):
        # Feetech status bits report conditions (overheat, overload...); data is still valid
        return False

    def describe(self, error):
        return ft.describe_error(error)


class DynamixelCodec(_Codec):
    family = "dynamixel"
    broadcast_id = dxl.BROADCAST_ID

    def __init__(self, protocol_version: int = 2):
        if protocol_version != 2:
            raise ValueError("only Dynamixel protocol 2.0 is supported (as in LeRobot)")
        super().__init__(2)

    def table(self, model):
        return dxl.control_table(model)

    def check_model(self, model):
        dxl.get_model(model)

    def resolution(self, model):
        return dxl.get_model(model).resolution

    def model_number(self, model):
        return dxl.get_model(model).model_number

    def ping(self, sid):
        return dxl.instruction_packet(sid, dxl.INST_PING)

    def read(self, sid, addr, size):
        return dxl.instruction_packet(sid, dxl.INST_READ, dxl.u16(addr) + dxl.u16(size))

    def write(self, sid, addr, data):
        return dxl.instruction_packet(sid, dxl.INST_WRITE, dxl.u16(addr) + data)

    def sync_read(self, addr, size, ids):
        return dxl.instruction_packet(
            dxl.BROADCAST_ID, dxl.INST_SYNC_READ, dxl.u16(addr) + dxl.u16(size) + bytes(ids)
        )

    def sync_write(self, addr, size, items):
        params = bytearray(dxl.u16(addr) + dxl.u16(size))
        for sid, data in items:
            params.append(sid)
            params += data
        return dxl.instruction_packet(dxl.BROADCAST_ID, dxl.INST_SYNC_WRITE, bytes(params))

    def parse_status(self, buf):
        return dxl.parse_status(buf)

    def status_length(self, n):
        return dxl.status_length(n)

    def encode(self, model, register, value):
        return dxl.encode_register(model, register, value)

    def decode(self, model, register, data):
        return dxl.decode_register(model, register, data)

    def fatal(self, error):
        return bool(error & 0x7F)

    def describe(self, error):
        return dxl.describe_error(error)


def make_codec(family: str, protocol_version: Optional[int] = None) -> _Codec:
    if family == "feetech":
        return FeetechCodec(0 if protocol_version is None else protocol_version)
    if family == "dynamixel":
        return DynamixelCodec(2 if protocol_version is None else protocol_version)
    raise ValueError(f"unknown bus family {family!r}: use 'feetech' or 'dynamixel'")


def wire_time_s(n_bytes: int, baudrate: int) -> float:
    """Time n bytes take on the wire: 10 bits per byte (start + 8 data + stop)."""
    return n_bytes * 10.0 / baudrate


@dataclass
class BusStats:
    transactions: int = 0
    timeouts: int = 0
    corrupt_packets: int = 0
    port_errors: int = 0
    stale_replies: int = 0
    bytes_out: int = 0
    bytes_in: int = 0


def _open_serial(port: str, baudrate: int):
    import serial

    try:
        ser = serial.Serial(port=port, baudrate=baudrate, timeout=0, write_timeout=0.5, exclusive=True)
    except (serial.SerialException, OSError, ValueError) as exc:
        raise PortError(
            f"cannot open serial port {port!r} at {baudrate} baud: {exc}. Check the cable, the path "
            "(ls /dev/serial/by-id/) and permissions (dialout group)"
        ) from exc
    return ser


class MotorBus:
    """Raw register access to the servos of one bus.

    ``models`` maps servo id -> model string (``"sts3215"``, ``"xl430-w250"``...).
    """

    def __init__(
        self,
        port: str,
        family: str,
        models: dict[int, str],
        baudrate: int = 1_000_000,
        timeout_s: float = 0.02,
        protocol_version: Optional[int] = None,
        serial_factory: Optional[Callable] = None,
    ):
        self.port = port
        self.codec = make_codec(family, protocol_version)
        for model in models.values():
            self.codec.check_model(model)
        self.models = dict(models)
        self.baudrate = int(baudrate)
        self.timeout_s = float(timeout_s)
        self._serial_factory = serial_factory or _open_serial
        self._ser = None
        self._rx = bytearray()
        self.stats = BusStats()
        # last status error byte seen per servo (0 = fine); the node turns them into diagnostics
        self.servo_errors: dict[int, int] = {}

    # ------------------------------------------------------------------ port
    @property
    def family(self) -> str:
        return self.codec.family

    @property
    def is_open(self) -> bool:
        return self._ser is not None

    def open(self) -> None:
        if self._ser is None:
            self._ser = self._serial_factory(self.port, self.baudrate)
            self._rx.clear()

    def close(self) -> None:
        if self._ser is not None:
            try:
                self._ser.close()
            except Exception:
                pass
            self._ser = None

    def __enter__(self):
        self.open()
        return self

    def __exit__(self, *exc):
        self.close()

    def set_port_baudrate(self, baudrate: int) -> None:
        self.baudrate = int(baudrate)
        if self._ser is not None:
            self._ser.baudrate = self.baudrate

    # ------------------------------------------------------------- low level
    def _port_failed(self, exc: Exception) -> PortError:
        self.stats.port_errors += 1
        self.close()
        return PortError(f"serial port {self.port!r} failed ({exc}); unplugged? it will be reopened")

    def _fileno(self) -> Optional[int]:
        try:
            return self._ser.fileno()
        except Exception:
            return None

    def _send(self, packet: bytes) -> None:
        if self._ser is None:
            raise PortError(f"serial port {self.port!r} is not open")
        try:
            if self._rx or self._ser.in_waiting:
                self._ser.reset_input_buffer()
            self._rx.clear()
            self._ser.write(packet)
        except Exception as exc:
            raise self._port_failed(exc) from exc
        self.stats.transactions += 1
        self.stats.bytes_out += len(packet)

    def _receive(self, expected_ids: Sequence[int], n_params: int) -> dict[int, tuple[int, bytes]]:
        """Collect one status packet per expected id (in any order) until the deadline."""
        want = list(expected_ids)
        got: dict[int, tuple[int, bytes]] = {}
        n_bytes = len(want) * self.codec.status_length(n_params)
        deadline = time.monotonic() + self.timeout_s + wire_time_s(n_bytes, self.baudrate)
        ser = self._ser
        fd = self._fileno()
        while len(got) < len(want):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                if fd is not None:
                    # wait with select; the port stays non-blocking (changing pyserial's timeout
                    # would re-run tcsetattr on every read)
                    if not select.select([fd], [], [], remaining)[0]:
                        continue
                    chunk = ser.read(max(1, ser.in_waiting))
                    if not chunk:
                        raise PortError("device reports readiness to read but returned no data")
                else:
                    ser.timeout = remaining
                    chunk = ser.read(max(1, n_bytes - len(self._rx)))
            except Exception as exc:
                raise self._port_failed(exc) from exc
            if not chunk:
                continue
            self.stats.bytes_in += len(chunk)
            self._rx += chunk
            while True:
                status, consumed, corrupt = self.codec.parse_status(self._rx)
                if corrupt:
                    self.stats.corrupt_packets += 1
                if consumed:
                    del self._rx[:consumed]
                if status is None:
                    if not consumed:
                        break
                    continue
                if len(status.params) != n_params:
                    self.stats.stale_replies += 1  # a late answer to an earlier (timed-out) request
                    continue
                if status.servo_id in want and status.servo_id not in got:
                    got[status.servo_id] = (status.error, status.params)
                    self.servo_errors[status.servo_id] = status.error
        missing = [i for i in want if i not in got]
        if missing:
            self.stats.timeouts += 1
            raise BusTimeoutError(
                f"no answer from servo id(s) {missing} on {self.port} within {self.timeout_s * 1e3:.0f} ms "
                f"(baud {self.baudrate}): check power, wiring, ids and baud rate",
                missing,
            )
        return got

    def _check(self, sid: int, error: int, what: str) -> None:
        if self.codec.fatal(error):
            err = ServoError(sid, error, self.codec.describe(error))
            err.args = (f"{what}: {err.args[0]}",)
            raise err

    def _model(self, sid: int) -> str:
        try:
            return self.models[sid]
        except KeyError:
            raise KeyError(
                f"servo id {sid} is not configured on this bus (ids: {sorted(self.models)})"
            ) from None

    def address(self, sid: int, register: str) -> tuple[int, int]:
        model = self._model(sid)
        try:
            return self.codec.table(model)[register]
        except KeyError:
            raise KeyError(f"register {register!r} does not exist on {model} (servo id {sid})") from None

    # ---------------------------------------------------------- instructions
    def ping(self, sid: int) -> int:
        """Ping one servo; returns its model number (read from the control table on Feetech)."""
        self._send(self.codec.ping(sid))
        error, params = self._receive([sid], 3 if self.family == "dynamixel" else 0)[sid]
        self._check(sid, error, f"ping id {sid}")
        if self.family == "dynamixel" and len(params) >= 2:
            return params[0] | (params[1] << 8)
        return self.read(sid, "Model_Number") if sid in self.models else self._read_model_number(sid)

    def _read_model_number(self, sid: int) -> int:
        addr, size = ft.STS_SMS_TABLE["Model_Number"]
        self._send(self.codec.read(sid, addr, size))
        _, params = self._receive([sid], size)[sid]
        return ft.from_bytes(params, self.codec.protocol_version)

    def read(self, sid: int, register: str) -> int:
        addr, size = self.address(sid, register)
        self._send(self.codec.read(sid, addr, size))
        error, params = self._receive([sid], size)[sid]
        self._check(sid, error, f"read {register} from id {sid}")
        if len(params) != size:
            raise BusError(f"servo id {sid} returned {len(params)} bytes for {register}, expected {size}")
        return self.codec.decode(self._model(sid), register, params)

    def write(self, sid: int, register: str, value: int) -> None:
        addr, _ = self.address(sid, register)
        data = self.codec.encode(self._model(sid), register, value)
        self._send(self.codec.write(sid, addr, data))
        if sid == self.codec.broadcast_id:
            return
        error, _ = self._receive([sid], 0)[sid]
        self._check(sid, error, f"write {register}={value} to id {sid}")

    def sync_read(self, register: str, ids: Optional[Iterable[int]] = None) -> dict[int, int]:
        return {sid: regs[register] for sid, regs in self.sync_read_registers([register], ids).items()}

    def sync_read_registers(
        self, registers: Sequence[str], ids: Optional[Iterable[int]] = None
    ) -> dict[int, dict[str, int]]:
        """Read several registers of every servo in one transaction (one contiguous block)."""
        ids = list(self.models if ids is None else ids)
        table = self.codec.table(self._model(ids[0]))
        spans = [table[r] for r in registers]
        start = min(a for a, _ in spans)
        end = max(a + s for a, s in spans)
        size = end - start
        if self.codec.supports_sync_read:
            self._send(self.codec.sync_read(start, size, ids))
            replies = self._receive(ids, size)
        else:
            replies = {}
            for sid in ids:
                self._send(self.codec.read(sid, start, size))
                replies.update(self._receive([sid], size))
        out: dict[int, dict[str, int]] = {}
        for sid in ids:
            error, params = replies[sid]
            self._check(sid, error, f"sync read {registers} from id {sid}")
            if len(params) != size:
                raise BusError(f"servo id {sid} returned {len(params)} bytes, expected {size}")
            model = self._model(sid)
            out[sid] = {
                reg: self.codec.decode(model, reg, params[a - start : a - start + s])
                for reg, (a, s) in zip(registers, spans, strict=False)
            }
        return out

    def sync_write(self, register: str, values: dict[int, int]) -> None:
        """Write one register on several servos in one broadcast packet (no reply)."""
        if not values:
            return
        items = []
        addr = size = None
        for sid, value in values.items():
            addr, size = self.address(sid, register)
            items.append((sid, self.codec.encode(self._model(sid), register, value)))
        self._send(self.codec.sync_write(addr, size, items))

    # --------------------------------------------------------------- helpers
    def enable_torque(self, ids: Optional[Iterable[int]] = None) -> None:
        for sid in list(self.models if ids is None else ids):
            self.write(sid, "Torque_Enable", 1)
            if self.family == "feetech":
                self.write(sid, "Lock", 1)

    def disable_torque(self, ids: Optional[Iterable[int]] = None) -> None:
        for sid in list(self.models if ids is None else ids):
            self.write(sid, "Torque_Enable", 0)
            if self.family == "feetech":
                self.write(sid, "Lock", 0)

    def set_baudrate(self, baudrate: int) -> None:
        """Switch every servo, then the port, to ``baudrate`` (the servos answer the write first)."""
        table = ft.BAUD_RATES if self.family == "feetech" else dxl.BAUD_RATES
        if baudrate not in table:
            raise ValueError(
                f"{self.family} servos do not support {baudrate} baud; supported: {sorted(table)}"
            )
        for sid in self.models:
            if self.family == "feetech":
                self.write(sid, "Lock", 0)
            self.write(sid, "Baud_Rate", table[baudrate])
        self.set_port_baudrate(baudrate)

    def resolution(self, sid: int) -> int:
        return self.codec.resolution(self._model(sid))

    def verify_models(self) -> None:
        """Ping every configured servo and compare its model number; raises with what to fix."""
        for sid, model in self.models.items():
            number = self.ping(sid)
            expected = self.codec.model_number(model)
            if number != expected:
                raise BusError(
                    f"servo id {sid} reports model number {number}, expected {expected} ({model}): "
                    "wrong robot type or ids"
                )
