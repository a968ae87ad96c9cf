"""The servos of one bus answering instruction packets (ROS-free, no I/O of its own).

:class:`EmulatedBus` parses the driver's bytes with the family's framing and answers PING, READ,
WRITE, SYNC READ and SYNC WRITE (and whatever else the family's servos answer: REBOOT, error
status for malformed or unknown instructions, CRC errors) the way the servos do: one status
packet per addressed servo, after its Return_Delay_Time and the packet's time on the wire, only
from servos at the baud rate the client uses. A transport (the pty in
:mod:`~lerobot_drivers.servo_emulator.process`) feeds it bytes and sends what it answers.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Optional

from lerobot_drivers.bus import get_family
from lerobot_drivers.servo_emulator.servo import EmulatedServo


class EmulatedBus:
    """Servos of one bus; ``feed`` bytes from the client, replies go to ``_send``."""

    def __init__(
        self,
        family: str,
        servos: dict[int, str],
        protocol_version: Optional[int] = None,
        wire_time: bool = True,
        tau_s: float = 0.05,
        initial_positions: Optional[dict[int, float]] = None,
        hand_motion_ticks: float = 0.0,
        hand_period_s: float = 4.0,
    ):
        fam = get_family(family)
        self.family = family
        self.protocol_version = protocol_version
        self.wire_time = wire_time
        positions = initial_positions or {}
        self.servos: dict[int, EmulatedServo] = {
            sid: EmulatedServo(fam, sid, model, positions.get(sid, 2048.0), tau_s)
            for sid, model in servos.items()
        }
        if hand_motion_ticks:
            for k, servo in enumerate(self.servos.values()):
                servo.hand = (hand_motion_ticks, hand_period_s, k * math.pi / 3, servo.actual)
        versions = {s.protocol for s in self.servos.values()}
        if protocol_version is not None and versions - {protocol_version}:
            raise ValueError(f"servo models speak protocol(s) {versions}, not {protocol_version}")
        # the bus speaks its servos' protocol
        first = next(iter(self.servos.values()), None)
        self.fam = fam.at_protocol(first.protocol if first else protocol_version)
        self.packets_handled = 0
        self.packets_dropped = 0
        self._due = 0.0

    def _send(self, data: bytes) -> None:
        raise NotImplementedError("a transport sends the replies")

    def _client_baud(self) -> Optional[int]:
        return None  # None: every servo hears the client

    # ------------------------------------------------------------ packets
    def _drain(self, buf: bytearray) -> None:
        """Handle every complete instruction at the front of ``buf`` (consumed from it)."""
        while True:
            packet, consumed, corrupt = self.fam.parse_instruction(buf)
            reply = self.fam.corrupt_reply(buf) if corrupt else None
            if reply is not None:
                self._error_reply(*reply)
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

    def _error_reply(self, sid: int, result: int) -> None:
        self._due = time.perf_counter()
        servo = self.servos.get(sid)
        if servo is not None:
            self._reply(servo, self.fam.status_packet(sid, result), 0)

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

    def _status(self, servo: EmulatedServo, result: int = 0, params: bytes = b"") -> bytes:
        return self.fam.status_packet(servo.servo_id, servo.status_error() | result, params)

    def _addressed(self, sid: int, baud: Optional[int]) -> list[EmulatedServo]:
        servos = [s for s in self.servos.values() if baud is None or s.baudrate == baud]
        if sid == self.fam.broadcast_id:
            return sorted(servos, key=lambda s: s.servo_id)
        return [s for s in servos if s.servo_id == sid]

    def _listening(self, sid: int, baud: Optional[int]) -> Optional[EmulatedServo]:
        servo = self.servos.get(sid)
        return None if servo is None or (baud is not None and servo.baudrate != baud) else servo

    def _handle(self, sid: int, inst: int, params: bytes, baud: Optional[int]) -> None:
        self._due = time.perf_counter()
        fam = self.fam
        request_len = len(params) + fam.instruction_overhead
        bcast = sid == fam.broadcast_id
        span_len = 2 * fam.address_bytes  # address + length fields
        if inst == fam.INST_PING:
            for servo in self._addressed(sid, baud):
                self._reply(servo, self._status(servo, params=fam.ping_reply(servo)), request_len)
                request_len = 0
        elif inst == fam.INST_READ and not bcast and (len(params) == span_len or fam.bad_length_result):
            addr, size = fam.span(params)
            for servo in self._addressed(sid, baud):
                if len(params) != span_len or (fam.readable_end and addr + size > fam.readable_end):
                    self._reply(servo, self._status(servo, fam.bad_length_result), request_len)
                    continue
                self._reply(servo, self._status(servo, params=servo.read_bytes(addr, size)), request_len)
        elif inst == fam.INST_WRITE and (len(params) > fam.address_bytes or fam.bad_length_result):
            for servo in self._addressed(sid, baud):
                if len(params) <= fam.address_bytes:
                    result = fam.bad_length_result
                else:
                    addr = int.from_bytes(params[: fam.address_bytes], "little")
                    result = servo.write_bytes(addr, params[fam.address_bytes :])
                if not bcast and servo.replies_to_writes():
                    self._reply(servo, self._status(servo, result), request_len)
        elif inst == fam.INST_SYNC_READ and bcast and len(params) >= span_len and fam.supports_sync_read:
            addr, size = fam.span(params)
            for wanted in params[span_len:]:
                servo = self._listening(wanted, baud)
                if servo is None:
                    continue  # absent servo: the driver times out on it
                self._reply(servo, self._status(servo, params=servo.read_bytes(addr, size)), request_len)
                request_len = 0
        elif inst == fam.INST_SYNC_WRITE and bcast and len(params) >= span_len:
            addr, size = fam.span(params)
            body, step = params[span_len:], size + 1
            for i in range(0, len(body) - size, step):
                servo = self._listening(body[i], baud)
                if servo is not None:
                    servo.write_bytes(addr, body[i + 1 : i + step])
        elif inst == fam.reboot_instruction and not bcast:
            for servo in self._addressed(sid, baud):
                servo.clear_faults()
                servo.write_bytes(servo.table["Torque_Enable"][0], b"\x00")
                self._reply(servo, self._status(servo), request_len)
        elif not bcast and fam.bad_instruction_result:
            for servo in self._addressed(sid, baud):
                self._reply(servo, self._status(servo, fam.bad_instruction_result), request_len)
