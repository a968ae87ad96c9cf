"""One arm on one bus: read joint states in SI units, write safe goals (ROS-free core of motor_bus).

:class:`ArmBus` wraps a :class:`~lerobot_drivers.bus.MotorBus` with the robot spec and its
calibration. It turns raw ticks into radians / rad/s / N*m and LeRobot units, and guards the
device on every goal (lerobot_core.safety's rule): non-finite values rejected, joint limits clamped,
the step from the present position bounded, the calibrated range never left.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from lerobot_core.calibration import MotorCalibration
from lerobot_core.joint_map import index_plan
from lerobot_core.robots import RobotSpec
from lerobot_core.safety import CommandError, SafetyLimits
from lerobot_drivers.bus import MotorBus
from lerobot_drivers.calibrate import bus_for_spec, read_calibration, write_calibration
from lerobot_drivers.calibration import Normalizer


@dataclass
class JointSample:
    stamp: float  # time.time() of the read (middle of the transaction)
    names: tuple[str, ...]
    position: list[float]  # rad
    velocity: list[float]  # rad/s
    effort: list[float]  # N*m (estimated from load/current)
    lerobot: list[float]  # LeRobot units (RANGE_M100_100 / RANGE_0_100 / DEGREES)
    raw: dict[int, int]


@dataclass
class MotorHealth:
    name: str
    servo_id: int
    temperature_c: Optional[float] = None
    voltage_v: Optional[float] = None
    error_bits: int = 0
    messages: list[str] = field(default_factory=list)


@dataclass
class SafetyReport:
    clamped: list[str] = field(default_factory=list)  # joints clamped to limits
    step_limited: list[str] = field(default_factory=list)  # joints whose step was bounded


class ArmBus:
    def __init__(
        self,
        spec: RobotSpec,
        port: str,
        calibration: Optional[dict[str, MotorCalibration]] = None,
        baudrate: int = 1_000_000,
        timeout_s: float = 0.02,
        max_step_rad: float = 0.0,
    ):
        self.spec = spec
        self.bus: MotorBus = bus_for_spec(spec, port, baudrate, timeout_s)
        self.file_calibration = calibration
        self.normalizer: Optional[Normalizer] = None
        self.max_step_rad = float(max_step_rad)
        lim = [spec.limits[n] for n in spec.joint_names]
        self._limits = SafetyLimits.build(
            len(lim), [x.lower for x in lim], [x.upper for x in lim], self.max_step_rad or float("inf")
        )
        self._ids = {m.name: m.id for m in spec.motors}
        self._motor_ids = [self._ids[n] for n in spec.joint_names]  # servo id per joint, joint order
        self._names = {m.id: m.name for m in spec.motors}
        self.family = self.bus.family
        self.last_positions: Optional[dict[str, float]] = None
        self.calibration_written = False

    # ----------------------------------------------------------- connect
    def connect(self, configure: bool = True, leader: bool = False) -> None:
        """Open the port, check the servos, make sure they carry our calibration, configure them."""
        self.bus.open()
        try:
            self.bus.verify_models()
            on_servos = read_calibration(self.bus, self.spec)
            cal = self.file_calibration
            if cal is None:
                cal = on_servos  # the servos' EEPROM holds the calibration (LeRobot writes it there)
            elif any(on_servos[n] != self._servo_view(cal[n]) for n in self.spec.joint_names):
                self.bus.disable_torque()
                write_calibration(self.bus, self.spec, cal)
                self.calibration_written = True
            resolutions = {m.name: self.bus.resolution(m.id) for m in self.spec.motors}
            self.normalizer = Normalizer(self.spec, cal, resolutions)
            if configure:
                self._configure(leader)
        except Exception:
            self.bus.close()
            raise

    def _servo_view(self, c: MotorCalibration) -> MotorCalibration:
        """What read_calibration returns for a file entry (what the servos store of it)."""
        fam = self.family
        drive = c.drive_mode if fam.stores_drive_mode else 0
        offset = c.homing_offset if fam.has_homing_offset else 0
        return MotorCalibration(c.id, drive, offset, c.range_min, c.range_max)

    def _configure(self, leader: bool) -> None:
        """LeRobot's configure(): position mode, fast replies; P/I/D for the Feetech followers."""
        self.bus.disable_torque()
        for m in self.spec.motors:
            for register, value in self.family.configure_writes(m.name, m.model, leader):
                self.bus.write(m.id, register, value)

    def close(self) -> None:
        self.bus.close()

    @property
    def is_open(self) -> bool:
        return self.bus.is_open

    # -------------------------------------------------------------- state
    def read(self) -> JointSample:
        t0 = time.time()
        regs = self.bus.sync_read_registers(self.family.state_registers, self.spec.motor_ids)
        stamp = (t0 + time.time()) / 2
        norm = self.normalizer
        names = self.spec.joint_names
        pos, vel, eff, lr, raw = [], [], [], [], {}
        for m in self.spec.motors:
            r = regs[m.id]
            p = r["Present_Position"]
            raw[m.id] = p
            pos.append(norm.to_radians(m.name, p))
            lr.append(norm.normalize(m.name, p))
            unit = self.family.velocity_unit_rad_s(m.model)
            vel.append(norm.velocity_to_rad_s(m.name, r["Present_Velocity"], unit))
            eff.append(self.family.effort_nm(m.model, r))
        self.last_positions = dict(zip(names, pos, strict=False))
        return JointSample(stamp, names, pos, vel, eff, lr, raw)

    def read_health(self) -> list[MotorHealth]:
        fam = self.family
        ids = self.spec.motor_ids
        vals = self.bus.sync_read_registers((fam.voltage_register, "Present_Temperature"), ids)
        if fam.hardware_error_register:
            bits = self.bus.sync_read(fam.hardware_error_register, ids)
        else:  # the faults come in every status byte
            bits = {sid: self.bus.servo_errors.get(sid, 0) for sid in ids}
        return [
            MotorHealth(
                m.name,
                m.id,
                float(vals[m.id]["Present_Temperature"]),
                vals[m.id][fam.voltage_register] / 10.0,
                bits[m.id],
                fam.describe_hardware(bits[m.id]),
            )
            for m in self.spec.motors
        ]

    # ------------------------------------------------------------- torque
    def set_torque(self, on: bool) -> None:
        if on:
            self.bus.enable_torque()
        else:
            self.bus.disable_torque()

    def hold_present(self) -> None:
        """Goal := present position (no jump when torque comes on), then torque on."""
        present = self.bus.sync_read("Present_Position", self.spec.motor_ids)
        self.bus.sync_write("Goal_Position", present)
        self.bus.enable_torque()

    # ------------------------------------------------------------ commands
    def safe_goals(self, targets: Mapping[str, float], present: Optional[Mapping[str, float]] = None):
        """Validate and bound joint targets (rad) given by name; returns ({name: rad}, SafetyReport).

        The by-name form of :meth:`limit_goals` (for callers holding names; the node keeps vectors).
        """
        names = self.spec.joint_names
        plan = index_plan(list(targets), names)
        if plan.unknown:
            raise CommandError(
                f"unknown joint {plan.unknown[0]!r}; joints of {self.spec.name}: {', '.join(names)}"
            )
        values = plan.take(list(targets.values()))
        for k in np.flatnonzero(~np.isfinite(values))[:1]:
            raise CommandError(
                f"non-finite target {values[k]} for joint {names[plan.dst[k]]!r}: command rejected"
            )
        present = present if present is not None else (self.last_positions or {})
        measured = index_plan(list(present), names).gather(list(present.values()))
        goals, report = self.limit_goals(plan.gather(list(targets.values())), measured)
        return {names[j]: float(goals[j]) for j in plan.dst}, report

    def limit_goals(
        self, target: np.ndarray, present: Optional[Sequence[float]]
    ) -> tuple[np.ndarray, SafetyReport]:
        """The device guard on a target vector in the robot's joint order; returns (goals, SafetyReport).

        The device guard (lerobot_core.safety, the one rule): the servo's position range, and at
        most ``max_step_rad`` from the measured position per cycle. The per-step bound of a policy's
        commands is the policy node's or the arbiter's (docs/policy.md, Command safety).
        ``target``: finite rad, NaN for a joint not commanded (its goal stays NaN: not written);
        ``present``: the measured positions in the same order (None, or NaN for a joint: no step bound).
        """
        commanded = ~np.isnan(target)
        previous = None
        if self.max_step_rad > 0 and present is not None:
            previous = np.asarray(present, dtype=np.float64)
        goals, clamped, stepped = self._limits.limit(target, previous, inside=False)
        if not commanded.all():
            goals[~commanded] = np.nan  # fmin/fmax would give an uncommanded joint the previous value
            clamped &= commanded
            stepped &= commanded
        names = self.spec.joint_names
        report = SafetyReport(
            [names[j] for j in np.flatnonzero(clamped)] if clamped.any() else [],
            [names[j] for j in np.flatnonzero(stepped)] if stepped.any() else [],
        )
        return goals, report

    def goal_ticks(self, goals: np.ndarray) -> dict[int, int]:
        """Goals in the robot's joint order (rad; NaN: not written) -> {servo id: ticks} (calibrated range)."""
        to_ticks, names, ids = self.normalizer.from_radians, self.spec.joint_names, self._motor_ids
        return {ids[j]: to_ticks(names[j], float(goals[j])) for j in np.flatnonzero(~np.isnan(goals))}

    def write_goal_vector(self, goals: np.ndarray) -> dict[int, int]:
        """Goals in the robot's joint order (rad; NaN: not written) -> ticks -> one sync write."""
        ticks = self.goal_ticks(goals)
        self.bus.sync_write("Goal_Position", ticks)
        return ticks

    def write_goals(self, goals_rad: Mapping[str, float]) -> dict[int, int]:
        """Radians by name -> ticks (inside the calibrated range) -> one sync write."""
        plan = index_plan(list(goals_rad), self.spec.joint_names)
        if plan.unknown:
            raise CommandError(f"unknown joint {plan.unknown[0]!r}; joints of {self.spec.name}")
        return self.write_goal_vector(plan.gather(list(goals_rad.values())))
