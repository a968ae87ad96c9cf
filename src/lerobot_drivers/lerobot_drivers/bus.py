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
from lerobot_drivers.family import BusFamily


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


FAMILIES: dict[str, BusFamily] = {f.name: f for f in (ft.FEETECH, dxl.DYNAMIXEL)}


def get_family(family: str, protocol_version: Optional[int] = None) -> BusFamily:
    """The family object for a bus family name (at ``protocol_version``, else its default)."""
    try:
        return FAMILIES[family].at_protocol(protocol_version)
    except KeyError:
        raise ValueError(
            f"unknown bus family {family!r}: use {' or '.join(repr(f) for f in FAMILIES)}"
        ) from None


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
        self.family: BusFamily = get_family(family, protocol_version)
        for model in models.values():
            self.family.check_model(model)
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
        n_bytes = len(want) * self.family.status_length(n_params)
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
                status, consumed, corrupt = self.family.parse_status(self._rx)
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
        if self.family.fatal(error):
            err = ServoError(sid, error, self.family.describe(error))
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
            return self.family.table(model)[register]
        except KeyError:
            raise KeyError(f"register {register!r} does not exist on {model} (servo id {sid})") from None

    # ---------------------------------------------------------- instructions
    def ping(self, sid: int) -> int:
        """Ping one servo; returns its model number (read from the control table on Feetech)."""
        self._send(self.family.ping(sid))
        error, params = self._receive([sid], self.family.ping_reply_params)[sid]
        self._check(sid, error, f"ping id {sid}")
        number = self.family.model_number_from_ping(params)
        if number is not None:
            return number
        return self.read(sid, "Model_Number") if sid in self.models else self._read_model_number(sid)

    def _read_model_number(self, sid: int) -> int:
        addr, size = self.family.model_number_register
        self._send(self.family.read(sid, addr, size))
        _, params = self._receive([sid], size)[sid]
        return int.from_bytes(params, self.family.byteorder)

    def read(self, sid: int, register: str) -> int:
        addr, size = self.address(sid, register)
        self._send(self.family.read(sid, addr, size))
        error, params = self._receive([sid], size)[sid]
        self._check(sid, error, f"read {register} from id {sid}")
        if len(params) != size:
            raise BusError(f"servo id {sid} returned {len(params)} bytes for {register}, expected {size}")
        return self.family.decode(self._model(sid), register, params)

    def write(self, sid: int, register: str, value: int) -> None:
        addr, _ = self.address(sid, register)
        data = self.family.encode(self._model(sid), register, value)
        self._send(self.family.write(sid, addr, data))
        if sid == self.family.broadcast_id:
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
        table = self.family.table(self._model(ids[0]))
        spans = [table[r] for r in registers]
        start = min(a for a, _ in spans)
        end = max(a + s for a, s in spans)
        size = end - start
        if self.family.supports_sync_read:
            self._send(self.family.sync_read(start, size, ids))
            replies = self._receive(ids, size)
        else:
            replies = {}
            for sid in ids:
                self._send(self.family.read(sid, start, size))
                replies.update(self._receive([sid], size))
        out: dict[int, dict[str, int]] = {}
        for sid in ids:
            error, params = replies[sid]
            self._check(sid, error, f"sync read {registers} from id {sid}")
            if len(params) != size:
                raise BusError(f"servo id {sid} returned {len(params)} bytes, expected {size}")
            model = self._model(sid)
            out[sid] = {
                reg: self.family.decode(model, reg, params[a - start : a - start + s])
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
            items.append((sid, self.family.encode(self._model(sid), register, value)))
        self._send(self.family.sync_write(addr, size, items))

    # --------------------------------------------------------------- helpers
    def enable_torque(self, ids: Optional[Iterable[int]] = None) -> None:
        for sid in list(self.models if ids is None else ids):
            for register, value in self.family.torque_writes(True):
                self.write(sid, register, value)

    def disable_torque(self, ids: Optional[Iterable[int]] = None) -> None:
        for sid in list(self.models if ids is None else ids):
            for register, value in self.family.torque_writes(False):
                self.write(sid, register, value)

    def set_baudrate(self, baudrate: int) -> None:
        """Switch every servo, then the port, to ``baudrate`` (the servos answer the write first)."""
        table = self.family.baud_rates
        if baudrate not in table:
            raise ValueError(
                f"{self.family} servos do not support {baudrate} baud; supported: {sorted(table)}"
            )
        for sid in self.models:
            for register, value in self.family.eeprom_unlock:
                self.write(sid, register, value)
            self.write(sid, "Baud_Rate", table[baudrate])
        self.set_port_baudrate(baudrate)

    def resolution(self, sid: int) -> int:
        return self.family.resolution(self._model(sid))

    def verify_models(self) -> None:
        """Ping every configured servo and compare its model number; raises with what to fix."""
        for sid, model in self.models.items():
            number = self.ping(sid)
            expected = self.family.model_number(model)
            if number != expected:
                raise BusError(
                    f"servo id {sid} reports model number {number}, expected {expected} ({model}): "
                    "wrong robot type or ids"
                )
