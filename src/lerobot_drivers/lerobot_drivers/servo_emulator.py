"""A servo bus emulator on a pseudo-terminal (ROS-free).

It plays the servos of one bus behind a pty: the driver opens the pty's path (or the stable
symlink the emulator maintains) like a USB serial adapter. Each servo has its real control table
(EEPROM/RAM bytes at the manuals' addresses), answers PING/READ/WRITE/SYNC READ/SYNC WRITE with
checksummed (Feetech) or CRC-16 (Dynamixel 2.0) status packets after its Return_Delay_Time,
drops packets with a bad checksum (Feetech) or answers them with a CRC error (Dynamixel), ignores
traffic at a baud rate different from its own (read from the pty's termios), and moves with a
first-order response towards its goal while torque is on. Faults (over-temperature, overload,
voltage) can be injected; the servo then reports them in its status byte and cuts torque, as
the real ones do. ``unplug()``/``replug()`` emulate pulling the USB cable (the symlink moves to
a fresh pty).

Console script::

    lerobot-servo-emulator --protocol feetech --robot so101_follower --link /tmp/so101_follower
"""

from __future__ import annotations

import argparse
import math
import os
import select
import signal
import sys
import termios
import threading
import time
import tty
from typing import Optional

from lerobot_core.robots import DYNAMIXEL, FEETECH, get_robot_spec
from lerobot_drivers import dynamixel as dxl
from lerobot_drivers import feetech as ft

_TERMIOS_SPEEDS = {
    getattr(termios, f"B{b}"): b
    for b in (
        9600,
        19200,
        38400,
        57600,
        115200,
        230400,
        460800,
        500000,
        576000,
        921600,
        1000000,
        1152000,
        2000000,
        2500000,
        3000000,
        3500000,
        4000000,
    )
    if hasattr(termios, f"B{b}")
}

FAULTS = ("overheat", "overload", "voltage")


class EmulatedServo:
    """One servo: a control table in bytes plus a first-order position model."""

    def __init__(self, family: str, servo_id: int, model: str, position: float = 2048.0, tau_s: float = 0.05):
        self.family = family
        self.model = model
        self.mem = bytearray(256)
        self.lock = threading.RLock()
        self.tau_s = tau_s
        self.actual = float(position)  # encoder ticks, motor frame (before homing offset)
        self.velocity = 0.0  # ticks/s
        self.temperature = 30.0
        self.voltage = 12.0 if family == FEETECH else 5.0
        self.fault = 0  # injected hardware fault bits (protocol specific)
        self.external_load = 0.0  # fraction of stall torque pushed by the "world"
        self.hand = None  # (amplitude ticks, period s, phase rad, center ticks) while torque is off
        self._t = time.monotonic()
        if family == FEETECH:
            info = ft.get_model(model)
            self.protocol = info.protocol
            self.table = ft.control_table(model)
            self.resolution = info.resolution
            self._set("Firmware_Major_Version", 3)
            self._set("Firmware_Minor_Version", 10)
            self._set("Model_Number", info.model_number)
            self._set("Baud_Rate", 0)
            self._set("Return_Delay_Time", 0)
            self._set("Response_Status_Level", 1)
            self._set("Min_Position_Limit", 0)
            self._set("Max_Position_Limit", self.resolution - 1)
            self._set("Max_Temperature_Limit", 70)
            self._set("Max_Voltage_Limit", 140)
            self._set("Min_Voltage_Limit", 40)
            self._set("Max_Torque_Limit", 1000)
            self._set("P_Coefficient", 32)
            self._set("Lock", 1)
        else:
            info = dxl.get_model(model)
            self.protocol = 2
            self.table = dxl.control_table(model)
            self.resolution = info.resolution
            self._set("Model_Number", info.model_number)
            self._set("Firmware_Version", 52)
            self._set("Baud_Rate", 3)
            self._set("Return_Delay_Time", 0)
            self._set("Operating_Mode", 3)
            self._set("Protocol_Type", 2)
            self._set("Temperature_Limit", 70)
            self._set("Max_Voltage_Limit", 70 if model.startswith("xl330") else 160)
            self._set("Min_Voltage_Limit", 35 if model.startswith("xl330") else 95)
            self._set("Max_Position_Limit", self.resolution - 1)
            self._set("Min_Position_Limit", 0)
            self._set("Status_Return_Level", 2)
            self._set("Shutdown", 0x34 if not model.startswith("xl330") else 0x34)
            self._set("Position_P_Gain", 800)
            self._set("Velocity_Limit", 1023 if not model.startswith("xl330") else 445)
        self._set("ID", servo_id)
        self._set("Goal_Position", int(round(self.present_from_actual(self.actual))))
        self._refresh_present()

    # ----------------------------------------------------------- registers
    def _encode(self, register: str, value: int) -> bytes:
        if self.family == FEETECH:
            return ft.encode_register(self.model, register, value)
        return dxl.encode_register(self.model, register, value)

    def _set(self, register: str, value: int) -> None:
        addr, size = self.table[register]
        self.mem[addr : addr + size] = self._encode(register, value)

    def get(self, register: str) -> int:
        addr, size = self.table[register]
        data = bytes(self.mem[addr : addr + size])
        if self.family == FEETECH:
            return ft.decode_register(self.model, register, data)
        return dxl.decode_register(self.model, register, data)

    @property
    def servo_id(self) -> int:
        return self.mem[self.table["ID"][0]]

    @property
    def return_delay_s(self) -> float:
        return self.mem[self.table["Return_Delay_Time"][0]] * 2e-6

    @property
    def baudrate(self) -> int:
        code = self.mem[self.table["Baud_Rate"][0]]
        table = ft.BAUD_RATES if self.family == FEETECH else dxl.BAUD_RATES
        for baud, c in table.items():
            if c == code:
                return baud
        return -1

    @property
    def torque_on(self) -> bool:
        return bool(self.get("Torque_Enable"))

    def replies_to_writes(self) -> bool:
        if self.family == FEETECH:
            return self.get("Response_Status_Level") >= 1
        return self.get("Status_Return_Level") >= 2

    # ----------------------------------------------------- homing / frames
    def _offset(self) -> int:
        return self.get("Homing_Offset") if "Homing_Offset" in self.table else 0  # SCS has none

    def _reverse(self) -> bool:
        return self.family == DYNAMIXEL and bool(self.get("Drive_Mode") & 0x01)

    def present_from_actual(self, actual: float) -> float:
        if self.family == FEETECH:
            # Feetech: Present_Position = Actual_Position - Homing_Offset, kept within one turn
            return (actual - self._offset()) % self.resolution
        pos = -actual if self._reverse() else actual
        return pos + self._offset()  # Dynamixel: Present = Actual + Homing_Offset

    def actual_from_present(self, present: float) -> float:
        if self.family == FEETECH:
            target = (present + self._offset()) % self.resolution
            # shortest way from the current actual position (no wrap jumps)
            return (
                self.actual
                + ((target - self.actual + self.resolution / 2) % self.resolution)
                - self.resolution / 2
            )
        pos = present - self._offset()
        return -pos if self._reverse() else pos

    # --------------------------------------------------------------- physics
    def step(self, now: Optional[float] = None) -> None:
        with self.lock:
            now = time.monotonic() if now is None else now
            dt = max(0.0, now - self._t)
            self._t = now
            if dt <= 0:
                return
            self.velocity = 0.0
            if self.hand is not None and not self.torque_on:
                # a hand moving a limp (leader) arm: a slow sinusoid around where it was grabbed
                amp, period, phase, center = self.hand
                w = 2 * math.pi / period
                self.actual = center + amp * math.sin(w * now + phase)
                self.velocity = amp * w * math.cos(w * now + phase)
            elif self.torque_on and not self.fault:
                goal = self.actual_from_present(self.get("Goal_Position"))
                alpha = 1.0 - math.exp(-dt / self.tau_s)
                self.actual += (goal - self.actual) * alpha
                # instantaneous rate of the first-order response, not the mean since the last access
                self.velocity = (goal - self.actual) / self.tau_s
                self.temperature += (32.0 - self.temperature) * min(1.0, dt / 30.0)
            self._refresh_present()

    def _load_fraction(self) -> float:
        if not self.torque_on or self.fault:
            return self.external_load
        error = self.get("Goal_Position") - self.present_from_actual(self.actual)
        return max(-1.0, min(1.0, error / 200.0 + self.external_load))

    def _refresh_present(self) -> None:
        present = self.present_from_actual(self.actual)
        load = self._load_fraction()
        if self.family == FEETECH:
            self._set("Present_Position", int(round(present)) % self.resolution)
            vel = max(-32767, min(32767, int(round(self.velocity))))
            load_raw = max(-1000, min(1000, int(round(load * 1000))))
            if self.protocol == 0:
                self._set("Present_Velocity", vel)
                self._set("Present_Load", load_raw)
            else:  # SCS: same direction bits, but the registers are plain unsigned (big-endian)
                self._set("Present_Velocity", ft.encode_sign_magnitude(vel, 15))
                self._set("Present_Load", ft.encode_sign_magnitude(load_raw, 10))
            self._set("Present_Voltage", int(round(self.voltage * 10)))
            self._set("Present_Temperature", int(round(self.temperature)))
            self._set("Moving", int(abs(self.velocity) > 5))
            if self.protocol == 0:
                self._set("Present_Current", int(abs(load) * 2.7 / 0.0065))
        else:
            info = dxl.get_model(self.model)
            self._set("Present_Position", int(round(present)))
            rpm = self.velocity / self.resolution * 60.0
            self._set("Present_Velocity", int(round(rpm / dxl.VELOCITY_UNIT_RPM)))
            if info.current_unit_a:
                self._set("Present_Current", int(round(load * info.stall_current_a / info.current_unit_a)))
            else:
                self._set("Present_Current", int(round(load * 1000)))
            self._set("Present_Input_Voltage", int(round(self.voltage * 10)))
            self._set("Present_Temperature", int(round(self.temperature)))
            self._set("Moving", int(abs(self.velocity) > 5))
            self._set("Hardware_Error_Status", self.fault)

    # ----------------------------------------------------------- faults
    def inject_fault(self, kind: str) -> None:
        """Raise a hardware fault: the servo cuts torque and flags it in every status packet."""
        with self.lock:
            if kind == "overheat":
                self.temperature = 80.0
                self.fault |= ft.ERRBIT_OVERHEAT if self.family == FEETECH else dxl.HW_OVERHEATING
            elif kind == "overload":
                self.fault |= ft.ERRBIT_OVERLOAD if self.family == FEETECH else dxl.HW_OVERLOAD
            elif kind == "voltage":
                self.voltage = 3.0
                self.fault |= ft.ERRBIT_VOLTAGE if self.family == FEETECH else dxl.HW_INPUT_VOLTAGE
            else:
                raise ValueError(f"unknown fault {kind!r}; known: {', '.join(FAULTS)}")
            self._set("Torque_Enable", 0)
            self._refresh_present()

    def clear_faults(self) -> None:
        """Like a power cycle (Feetech) / REBOOT (Dynamixel): faults cleared, torque stays off."""
        with self.lock:
            self.fault = 0
            self.temperature = 30.0
            self.voltage = 12.0 if self.family == FEETECH else 5.0
            self._refresh_present()

    def status_error(self) -> int:
        if self.family == FEETECH:
            return self.fault
        return dxl.ERR_ALERT if self.fault else 0

    # ----------------------------------------------------------- access
    def read_bytes(self, addr: int, size: int) -> bytes:
        with self.lock:
            self.step()
            return bytes(self.mem[addr : addr + size])

    def write_bytes(self, addr: int, data: bytes) -> int:
        """Apply a write; returns a Dynamixel result code (0 = ok) or a Feetech error bit."""
        with self.lock:
            self.step()
            end = addr + len(data)
            if self.family == DYNAMIXEL:
                if end > 147 or addr < 0:
                    return dxl.RESULT_DATA_LENGTH
                if addr < 7 or (120 <= addr < 147):
                    return dxl.RESULT_ACCESS  # read-only registers
                if addr < dxl.EEPROM_END and self.torque_on:
                    return dxl.RESULT_ACCESS
                ga, gs = self.table["Goal_Position"]
                if addr <= ga and end >= ga + gs and self.get("Operating_Mode") == 3:
                    goal = dxl.decode_register(self.model, "Goal_Position", data[ga - addr : ga - addr + gs])
                    if not self.get("Min_Position_Limit") <= goal <= self.get("Max_Position_Limit"):
                        return dxl.RESULT_DATA_LIMIT
                ta = self.table["Torque_Enable"][0]
                if addr <= ta < end and data[ta - addr] and self.fault:
                    return dxl.RESULT_ACCESS  # cannot re-enable torque before a reboot
                self.mem[addr:end] = data
            else:
                if addr < 5 or (56 <= addr < 71 and end <= 71):
                    return 0  # read-only: silently ignored by Feetech firmware
                self.mem[addr:end] = data
                ga, gs = self.table["Goal_Position"]
                if addr <= ga and end >= ga + gs:
                    goal = self.get("Goal_Position")
                    lo, hi = self.get("Min_Position_Limit"), self.get("Max_Position_Limit")
                    if lo < hi and not lo <= goal <= hi:
                        self._set("Goal_Position", min(hi, max(lo, goal)))
                if self.fault:
                    self._set("Torque_Enable", 0)
            self._refresh_present()
            return 0


class ServoBusEmulator:
    """Servos of one bus behind a pty; a background thread answers the driver's packets."""

    def __init__(
        self,
        family: str,
        servos: dict[int, str],
        protocol_version: Optional[int] = None,
        link_path: Optional[str] = None,
        wire_time: bool = True,
        tau_s: float = 0.05,
        initial_positions: Optional[dict[int, float]] = None,
        hand_motion_ticks: float = 0.0,
        hand_period_s: float = 4.0,
    ):
        if family not in (FEETECH, DYNAMIXEL):
            raise ValueError(f"unknown protocol family {family!r}: use 'feetech' or 'dynamixel'")
        self.family = family
        self.protocol_version = protocol_version
        self.wire_time = wire_time
        positions = initial_positions or {}
        self.servos: dict[int, EmulatedServo] = {
            sid: EmulatedServo(family, sid, model, positions.get(sid, 2048.0), tau_s)
            for sid, model in servos.items()
        }
        if hand_motion_ticks:
            for k, servo in enumerate(self.servos.values()):
                servo.hand = (hand_motion_ticks, hand_period_s, k * math.pi / 3, servo.actual)
        if family == FEETECH:
            versions = {s.protocol for s in self.servos.values()}
            if protocol_version is not None and versions - {protocol_version}:
                raise ValueError(f"servo models speak protocol(s) {versions}, not {protocol_version}")
        self.link_path = link_path
        self.master_fd = -1
        self.slave_fd = -1
        self.slave_name = ""
        self.packets_handled = 0
        self.packets_dropped = 0
        self._due = 0.0
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._io_lock = threading.Lock()

    # ------------------------------------------------------------ lifecycle
    @property
    def port(self) -> str:
        """The path a driver should open: the stable symlink if any, else the pty itself."""
        return self.link_path or self.slave_name

    def _open_pty(self) -> None:
        master, slave = os.openpty()
        tty.setraw(slave)
        self.master_fd, self.slave_fd = master, slave
        self.slave_name = os.ttyname(slave)
        if self.link_path:
            tmp = self.link_path + ".tmp"
            if os.path.lexists(tmp):
                os.unlink(tmp)
            os.symlink(self.slave_name, tmp)
            os.replace(tmp, self.link_path)

    def _close_pty(self) -> None:
        for fd in (self.master_fd, self.slave_fd):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.master_fd = self.slave_fd = -1

    def start(self) -> ServoBusEmulator:
        self._open_pty()
        self._stop.clear()
        self._thread = threading.Thread(target=self._serve, name="servo-emulator", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None
        with self._io_lock:
            self._close_pty()
        if self.link_path and os.path.islink(self.link_path):
            os.unlink(self.link_path)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def unplug(self) -> None:
        """Like pulling the USB cable: the pty disappears (the driver's reads/writes fail)."""
        self.stop_thread_only()
        with self._io_lock:
            self._close_pty()

    def replug(self) -> None:
        """Like plugging it back: a fresh pty, the symlink (``port``) now points at it."""
        self._open_pty()
        self._stop.clear()
        self._thread = threading.Thread(target=self._serve, name="servo-emulator", daemon=True)
        self._thread.start()

    def stop_thread_only(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None

    # ---------------------------------------------------------------- I/O
    def _client_baud(self) -> Optional[int]:
        try:
            attrs = termios.tcgetattr(self.slave_fd)
        except termios.error:
            return None
        return _TERMIOS_SPEEDS.get(attrs[5])

    def _serve(self) -> None:
        buf = bytearray()
        fd = self.master_fd
        while not self._stop.is_set():
            try:
                ready, _, _ = select.select([fd], [], [], 0.05)
            except (OSError, ValueError):
                return
            if not ready:
                continue
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                time.sleep(0.01)  # no client has the slave open; keep waiting
                continue
            if not chunk:
                continue
            buf += chunk
            self._drain(buf)

    def _drain(self, buf: bytearray) -> None:
        parse = ft.parse_instruction if self.family == FEETECH else dxl.parse_instruction
        while True:
            packet, consumed, corrupt = parse(buf)
            if corrupt and self.family == DYNAMIXEL and len(buf) > 4:
                self._crc_error(buf[4])
            if consumed:
                del buf[:consumed]
            if corrupt:
                self.packets_dropped += 1
            if packet is None:
                if not consumed:
                    return
                continue
            baud = self._client_baud()
            sid, inst, params = packet
            self.packets_handled += 1
            try:
                self._handle(sid, inst, params, baud)
            except Exception as exc:
                print(f"servo emulator: packet id={sid} inst=0x{inst:02x} failed: {exc!r}", file=sys.stderr)

    def _crc_error(self, sid: int) -> None:
        self._due = time.perf_counter()
        servo = self.servos.get(sid)
        if servo is not None:
            self._reply(servo, dxl.status_packet(sid, dxl.RESULT_CRC), 0)

    def _send(self, data: bytes) -> None:
        with self._io_lock:
            if self.master_fd >= 0:
                try:
                    os.write(self.master_fd, data)
                except OSError:
                    pass

    def _delay(self, seconds: float) -> None:
        if seconds <= 0:
            return
        # sleep (not spin): the emulator often shares a process, and the GIL, with the code under test
        time.sleep(seconds)

    def _reply(self, servo: EmulatedServo, packet: bytes, request_len: int) -> None:
        """Send a status packet when it would have finished arriving on a real wire.

        Replies are scheduled on an absolute timeline that starts when the instruction arrived
        (request bytes, return delay, reply bytes, one servo after the other); sub-0.3 ms waits
        are skipped rather than slept (a sleep costs more than that), and a late emulator does
        not catch up by answering faster than the wire allows.
        """
        delay = servo.return_delay_s
        if self.wire_time:
            delay += (request_len + len(packet)) * 10.0 / servo.baudrate
        self._due += delay
        now = time.perf_counter()
        if self._due > now + 0.0003:
            self._delay(self._due - now)
        elif self._due < now:
            self._due = now
        self._send(packet)

    # ------------------------------------------------------------ protocol
    def _status(self, servo: EmulatedServo, result: int = 0, params: bytes = b"") -> bytes:
        if self.family == FEETECH:
            return ft.status_packet(servo.servo_id, servo.status_error() | result, params)
        return dxl.status_packet(servo.servo_id, servo.status_error() | result, params)

    def _addressed(self, sid: int, baud: Optional[int]) -> list[EmulatedServo]:
        servos = [s for s in self.servos.values() if baud is None or s.baudrate == baud]
        bid = ft.BROADCAST_ID if self.family == FEETECH else dxl.BROADCAST_ID
        if sid == bid:
            return sorted(servos, key=lambda s: s.servo_id)
        return [s for s in servos if s.servo_id == sid]

    def _handle(self, sid: int, inst: int, params: bytes, baud: Optional[int]) -> None:
        self._due = time.perf_counter()
        if self.family == FEETECH:
            self._handle_feetech(sid, inst, params, baud)
        else:
            self._handle_dynamixel(sid, inst, params, baud)

    def _handle_feetech(self, sid, inst, params, baud):
        request_len = len(params) + 6
        bcast = sid == ft.BROADCAST_ID
        big = None if not self.servos else next(iter(self.servos.values())).protocol == 1
        if inst == ft.INST_PING:
            for servo in self._addressed(sid, baud):
                self._reply(servo, self._status(servo), request_len)
                request_len = 0
        elif inst == ft.INST_READ and len(params) == 2 and not bcast:
            for servo in self._addressed(sid, baud):
                data = servo.read_bytes(params[0], params[1])
                self._reply(servo, self._status(servo, params=data), request_len)
        elif inst == ft.INST_WRITE and len(params) >= 2:
            for servo in self._addressed(sid, baud):
                result = servo.write_bytes(params[0], params[1:])
                if not bcast and servo.replies_to_writes():
                    self._reply(servo, self._status(servo, result), request_len)
        elif inst == ft.INST_SYNC_READ and bcast and len(params) >= 2 and not big:
            addr, size = params[0], params[1]
            for wanted in params[2:]:
                servo = self.servos.get(wanted)
                if servo is None or (baud is not None and servo.baudrate != baud):
                    continue  # absent servo: the driver times out on it
                data = servo.read_bytes(addr, size)
                self._reply(servo, self._status(servo, params=data), request_len)
                request_len = 0
        elif inst == ft.INST_SYNC_WRITE and bcast and len(params) >= 2:
            self._sync_write(params[0], params[1], params[2:], baud)

    def _sync_write(self, addr: int, size: int, body: bytes, baud: Optional[int]) -> None:
        step = size + 1
        for i in range(0, len(body) - size, step):
            servo = self.servos.get(body[i])
            if servo is not None and (baud is None or servo.baudrate == baud):
                servo.write_bytes(addr, body[i + 1 : i + step])

    def _handle_dynamixel(self, sid, inst, params, baud):
        request_len = len(params) + 10
        bcast = sid == dxl.BROADCAST_ID
        targets = self._addressed(sid, baud)
        if inst == dxl.INST_PING:
            for servo in targets:
                info = dxl.get_model(servo.model)
                body = dxl.u16(info.model_number) + bytes([servo.get("Firmware_Version")])
                self._reply(servo, self._status(servo, params=body), request_len)
                request_len = 0
        elif inst == dxl.INST_READ and not bcast:
            for servo in targets:
                if len(params) != 4:
                    self._reply(servo, self._status(servo, dxl.RESULT_DATA_LENGTH), request_len)
                    continue
                addr = params[0] | params[1] << 8
                size = params[2] | params[3] << 8
                if addr + size > 147:
                    self._reply(servo, self._status(servo, dxl.RESULT_DATA_LENGTH), request_len)
                    continue
                self._reply(servo, self._status(servo, params=servo.read_bytes(addr, size)), request_len)
        elif inst == dxl.INST_WRITE:
            for servo in targets:
                if len(params) < 3:
                    result = dxl.RESULT_DATA_LENGTH
                else:
                    result = servo.write_bytes(params[0] | params[1] << 8, params[2:])
                if not bcast and servo.replies_to_writes():
                    self._reply(servo, self._status(servo, result), request_len)
        elif inst == dxl.INST_SYNC_READ and bcast and len(params) >= 4:
            addr = params[0] | params[1] << 8
            size = params[2] | params[3] << 8
            for wanted in params[4:]:
                servo = self.servos.get(wanted)
                if servo is None or (baud is not None and servo.baudrate != baud):
                    continue
                self._reply(servo, self._status(servo, params=servo.read_bytes(addr, size)), request_len)
                request_len = 0
        elif inst == dxl.INST_SYNC_WRITE and bcast and len(params) >= 4:
            addr = params[0] | params[1] << 8
            size = params[2] | params[3] << 8
            self._sync_write(addr, size, params[4:], baud)
        elif inst == dxl.INST_REBOOT and not bcast:
            for servo in targets:
                servo.clear_faults()
                servo.write_bytes(self_torque_addr(), b"\x00")
                self._reply(servo, self._status(servo), request_len)
        elif not bcast:
            for servo in targets:
                self._reply(servo, self._status(servo, dxl.RESULT_INSTRUCTION), request_len)


def self_torque_addr() -> int:
    return dxl.X_SERIES_TABLE["Torque_Enable"][0]


def emulator_for_robot(
    robot: str,
    link_path: Optional[str] = None,
    wire_time: bool = True,
    tau_s: float = 0.05,
    hand_motion_ticks: float = 0.0,
) -> ServoBusEmulator:
    """An emulator with the servos of a LeRobot robot type (ids and models from robots.py)."""
    spec = get_robot_spec(robot)
    if spec.is_bimanual:
        raise ValueError(f"{robot} has two buses: start one emulator per arm ({spec.arms[0][1].name})")
    return ServoBusEmulator(
        spec.bus,
        {m.id: m.model for m in spec.motors},
        link_path=link_path,
        wire_time=wire_time,
        tau_s=tau_s,
        hand_motion_ticks=hand_motion_ticks,
    )


def _emulator_process_main(conn, robot, link_path, tau_s, wire_time, hand_motion_ticks):
    emu = emulator_for_robot(robot, link_path, wire_time, tau_s, hand_motion_ticks).start()
    conn.send(("ready", emu.port))
    try:
        while True:
            try:
                request = conn.recv()
            except EOFError:
                break
            if request is None:
                break
            op, args = request
            try:
                conn.send(("ok", _EMULATOR_OPS[op](emu, *args)))
            except Exception as exc:
                conn.send(("error", repr(exc)))
    finally:
        emu.stop()


def _set_actual(emu, sid, value):
    with emu.servos[sid].lock:
        emu.servos[sid].step()
        emu.servos[sid].actual = float(value)
        emu.servos[sid]._refresh_present()


_EMULATOR_OPS = {
    "get": lambda emu, sid, reg: emu.servos[sid].get(reg),
    "get_all": lambda emu, reg: {sid: s.get(reg) for sid, s in emu.servos.items()},
    "torque": lambda emu: {sid: s.torque_on for sid, s in emu.servos.items()},
    "inject_fault": lambda emu, sid, kind: emu.servos[sid].inject_fault(kind),
    "clear_faults": lambda emu, sid: emu.servos[sid].clear_faults(),
    "set_actual": _set_actual,
    "unplug": lambda emu: emu.unplug(),
    "replug": lambda emu: emu.replug(),
    "stats": lambda emu: (emu.packets_handled, emu.packets_dropped),
}


class EmulatorProcess:
    """The emulator in a child process (its own GIL), driven over a pipe.

    Tests use it so that the emulated servos answer in time whatever the test process is doing::

        with EmulatorProcess("so101_follower", link) as emu:
            emu.call("inject_fault", 3, "overheat"); emu.call("get", 3, "Goal_Position")
    """

    def __init__(
        self,
        robot: str,
        link_path: str,
        tau_s: float = 0.05,
        wire_time: bool = True,
        hand_motion_ticks: float = 0.0,
    ):
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")  # never fork a process that may hold rclpy state
        self._conn, child = ctx.Pipe()
        self._lock = threading.Lock()
        self.proc = ctx.Process(
            target=_emulator_process_main,
            args=(child, robot, link_path, tau_s, wire_time, hand_motion_ticks),
            daemon=True,
        )
        self.port = link_path

    def start(self) -> EmulatorProcess:
        self.proc.start()
        if not self._conn.poll(20.0):
            self.proc.kill()
            raise RuntimeError("servo emulator process did not start within 20 s")
        status, self.port = self._conn.recv()
        return self

    def call(self, op: str, *args):
        with self._lock:
            self._conn.send((op, args))
            status, value = self._conn.recv()
        if status != "ok":
            raise RuntimeError(f"emulator {op}{args} failed: {value}")
        return value

    def stop(self) -> None:
        if self.proc.is_alive():
            try:
                self._conn.send(None)
            except OSError:
                pass
            self.proc.join(5.0)
            if self.proc.is_alive():
                self.proc.kill()
                self.proc.join(2.0)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="lerobot-servo-emulator",
        description="Emulate a Feetech or Dynamixel servo bus on a pty (for drivers and demos without hardware).",
    )
    parser.add_argument("--protocol", choices=[FEETECH, DYNAMIXEL], default=None, help="bus family")
    parser.add_argument("--robot", default="so101_follower", help="LeRobot robot type giving ids and models")
    parser.add_argument("--link", default=None, help="stable symlink to create pointing at the pty")
    parser.add_argument("--port-file", default=None, help="write the port path to this file once ready")
    parser.add_argument("--tau", type=float, default=0.05, help="position response time constant (s)")
    parser.add_argument(
        "--no-wire-time", action="store_true", help="answer without emulating baud-rate delay"
    )
    parser.add_argument(
        "--hand-motion",
        type=float,
        default=0.0,
        help="ticks of sinusoidal 'hand' motion while torque is off (leader demo)",
    )
    args = parser.parse_args(argv)
    spec = get_robot_spec(args.robot)
    if args.protocol and args.protocol != spec.bus:
        parser.error(f"robot {args.robot} uses a {spec.bus} bus, not {args.protocol}")
    emu = emulator_for_robot(args.robot, args.link, not args.no_wire_time, args.tau, args.hand_motion).start()
    print(f"{spec.bus} bus for {args.robot} (ids {list(spec.motor_ids)}) on {emu.port}", flush=True)
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(emu.port + "\n")
        os.replace(tmp, args.port_file)
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    try:
        while not done.wait(0.5):
            pass
    finally:
        emu.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
