"""One emulated servo (ROS-free): its control table in bytes and a first-order position model.

The family object (:class:`~lerobot_drivers.family.BusFamily`) supplies what differs between
families: factory defaults, register encodings, the homing-offset convention, the firmware's
write rules and fault bits. Torque off: the servo stays where it is, or where a hand (or
:meth:`EmulatedServo.move_by_hand`) puts it; torque on: it moves to Goal_Position.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Optional, Union

from lerobot_drivers.bus import get_family
from lerobot_drivers.family import BusFamily

FAULTS = ("overheat", "overload", "voltage")


class EmulatedServo:
    """One servo: a control table in bytes plus a first-order position model."""

    def __init__(
        self,
        family: Union[str, BusFamily],
        servo_id: int,
        model: str,
        position: float = 2048.0,
        tau_s: float = 0.05,
    ):
        fam = get_family(family) if isinstance(family, str) else family
        self.fam = fam.at_protocol(fam.protocol_of(model))
        self.family = self.fam.name
        self.model = model
        self.protocol = self.fam.protocol_version
        self.table = self.fam.table(model)
        self.resolution = self.fam.resolution(model)
        self.mem = bytearray(256)
        self.lock = threading.RLock()
        self.tau_s = tau_s
        self.actual = float(position)  # encoder ticks, motor frame (before homing offset)
        self.velocity = 0.0  # ticks/s
        self.temperature = 30.0
        self.voltage = self.fam.nominal_voltage
        self.fault = 0  # injected hardware fault bits (the family's)
        self.external_load = 0.0  # fraction of stall torque pushed by the "world"
        self.hand = None  # (amplitude ticks, period s, phase rad, center ticks) while torque is off
        self._t = time.monotonic()
        for register, value in self.fam.factory_defaults(model):
            self.set(register, value)
        self.set("ID", servo_id)
        self.set("Goal_Position", int(round(self.present_from_actual(self.actual))))
        self._refresh_present()

    # ----------------------------------------------------------- registers
    def set(self, register: str, value: int) -> None:
        addr, size = self.table[register]
        self.mem[addr : addr + size] = self.fam.encode(self.model, register, value)

    def get(self, register: str) -> int:
        addr, size = self.table[register]
        return self.fam.decode(self.model, register, bytes(self.mem[addr : addr + size]))

    @property
    def servo_id(self) -> int:
        return self.mem[self.table["ID"][0]]

    @property
    def return_delay_s(self) -> float:
        return self.mem[self.table["Return_Delay_Time"][0]] * 2e-6

    @property
    def baudrate(self) -> int:
        code = self.mem[self.table["Baud_Rate"][0]]
        for baud, c in self.fam.baud_rates.items():
            if c == code:
                return baud
        return -1

    @property
    def torque_on(self) -> bool:
        return bool(self.get("Torque_Enable"))

    def replies_to_writes(self) -> bool:
        register, level = self.fam.status_return_level
        return self.get(register) >= level

    # ----------------------------------------------------- homing / frames
    def _offset(self) -> int:
        return self.get("Homing_Offset") if "Homing_Offset" in self.table else 0  # SCS has none

    def _reverse(self) -> bool:
        return self.fam.stores_drive_mode and bool(self.get("Drive_Mode") & 0x01)

    def present_from_actual(self, actual: float) -> float:
        pos = (-actual if self._reverse() else actual) + self.fam.homing_sign * self._offset()
        return pos % self.resolution if self.fam.position_wraps else pos

    def actual_from_present(self, present: float) -> float:
        pos = present - self.fam.homing_sign * self._offset()
        if self.fam.position_wraps:
            # shortest way from the current actual position (no wrap jumps)
            target = pos % self.resolution
            half = self.resolution / 2
            return self.actual + ((target - self.actual + half) % self.resolution) - half
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

    def move_by_hand(self, actual: float) -> None:
        """An outside force puts the horn at ``actual`` ticks (motor frame); with torque on the
        servo then drives back to its goal, with torque off it stays there."""
        with self.lock:
            self.step()
            self.actual = float(actual)
            self._refresh_present()

    def _load_fraction(self) -> float:
        if not self.torque_on or self.fault:
            return self.external_load
        error = self.get("Goal_Position") - self.present_from_actual(self.actual)
        return max(-1.0, min(1.0, error / 200.0 + self.external_load))

    def _refresh_present(self) -> None:
        state = {
            "position": self.present_from_actual(self.actual),
            "velocity": self.velocity,
            "load": self._load_fraction(),
            "voltage": self.voltage,
            "temperature": self.temperature,
        }
        for register, value in self.fam.present_registers(self.model, state, self.fault).items():
            self.set(register, value)

    # ----------------------------------------------------------- faults
    def inject_fault(self, kind: str) -> None:
        """Raise a hardware fault: the servo cuts torque and flags it in every status packet."""
        with self.lock:
            if kind not in FAULTS:
                raise ValueError(f"unknown fault {kind!r}; known: {', '.join(FAULTS)}")
            if kind == "overheat":
                self.temperature = 80.0
            elif kind == "voltage":
                self.voltage = 3.0
            self.fault |= self.fam.fault_bits[kind]
            self.set("Torque_Enable", 0)
            self._refresh_present()

    def clear_faults(self) -> None:
        """Like a power cycle (Feetech) / REBOOT (Dynamixel): faults cleared, torque stays off."""
        with self.lock:
            self.fault = 0
            self.temperature = 30.0
            self.voltage = self.fam.nominal_voltage
            self._refresh_present()

    def status_error(self) -> int:
        return self.fam.status_error(self.fault)

    # ----------------------------------------------------------- access
    def read_bytes(self, addr: int, size: int) -> bytes:
        with self.lock:
            self.step()
            return bytes(self.mem[addr : addr + size])

    def write_bytes(self, addr: int, data: bytes) -> int:
        """Apply a write as the firmware does; returns the status result bits (0 = ok)."""
        with self.lock:
            self.step()
            result = self.fam.device_write(self, addr, data)
            self._refresh_present()
            return result
