"""motor_bus: lifecycle node owning one Feetech/Dynamixel servo bus (a follower or a leader arm).

configure: open the port (retrying up to connect_timeout_s), check models, load/put the calibration.
activate:  follower -> goal := present position, torque on; leader (read_only) -> torque off.
           A bus thread then reads joint states at rate_hz and writes the newest safe goal.
deactivate/shutdown/command timeout: the configured safe state (hold position or torque off).
A vanished serial port is reported on /diagnostics and in the log, reopened every
reconnect_period_s, and the arm resumes holding its present position.
"""

from __future__ import annotations

import threading
import time
from functools import partial
from typing import Optional

import numpy as np
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.lifecycle import LifecycleNode, State, TransitionCallbackReturn
from sensor_msgs.msg import JointState
from std_srvs.srv import SetBool

from lerobot_core.calibration import CalibrationError
from lerobot_core.command import parse_command
from lerobot_core.rate import RateMeter
from lerobot_core.robots import get_robot_spec
from lerobot_core.ros import qos
from lerobot_core.ros.commands import subscribe_commands
from lerobot_core.ros.node import autostart_timer, publish_unless_shut_down, run_node
from lerobot_core.ros.params import declare
from lerobot_core.safety import CommandError
from lerobot_core.time import seconds_to_stamp
from lerobot_drivers.arm import ArmBus, JointSample
from lerobot_drivers.bus import BusError, BusTimeoutError, PortError
from lerobot_drivers.motor_bus_config import bus_status, bus_values, load_bus_calibration, read_config

SAFE_STATE_ATTEMPTS = 3


class MotorBusNode(LifecycleNode):
    def __init__(self, node_name: str = "motor_bus", **kwargs) -> None:
        super().__init__(node_name, **kwargs)
        self.cfg = read_config(partial(declare, self))
        self.spec = get_robot_spec(self.cfg.robot, use_degrees=self.cfg.use_degrees)
        self.arm: Optional[ArmBus] = None
        self._lock = threading.Lock()
        # goal per joint in the robot's order (rad; NaN: never commanded); replaced, never written in place
        self._target: Optional[np.ndarray] = None
        self._target_time = 0.0
        self._no_target = np.full(len(self.spec.joint_names), np.nan)
        self._timed_out = False
        self._torque_on = False
        self._thread: Optional[threading.Thread] = None
        self._running = threading.Event()
        self._stats = {
            "cycles": 0,
            "reconnects": 0,
            "bus_errors": 0,
            "rejected_commands": 0,
            "clamped": 0,
            "step_limited": 0,
        }
        self._last_error = ""
        self._last_error_time = 0.0  # monotonic
        self._activate_bus_error = False  # the last activate failed on the bus (autostart retries it)
        self._loop_hz = 0.0
        self._connected = False
        self._health = []
        self._cmd_subs = []
        self._port_unreachable = False
        names = [self.cfg.joint_prefix + n for n in self.spec.joint_names]
        self._names = names
        self.pub_js = self.create_lifecycle_publisher(JointState, "joint_states", qos.RELIABLE)
        self.pub_lr = (
            self.create_lifecycle_publisher(JointState, "joint_states_lerobot", qos.RELIABLE)
            if self.cfg.publish_lerobot_units
            else None
        )
        # diagnostics are published in every state (a failing bus must be visible while inactive)
        # absolute: every arm of a robot (a leader in its namespace too) reports on the one /diagnostics
        self.pub_diag = self.create_publisher(DiagnosticArray, "/diagnostics", qos.RELIABLE)
        self._diag_timer = self.create_timer(self.cfg.diagnostics_period_s, self._publish_diagnostics)
        # a leader arm with active motors (human-in-the-loop): torque on -> it follows joint_commands
        self._leader_driven = False
        self._torque_request: Optional[tuple[bool, threading.Event, list]] = None
        if self.cfg.read_only:
            self.create_service(SetBool, "torque_enable", self._on_torque_enable)
        if self.cfg.autostart:
            autostart_timer(self, on_failure=self._autostart_failed)

    def _autostart_failed(self, transition: str) -> None:
        """While the bus is unreachable (port missing, servos silent), retry configure.

        A graph may start the driver before the USB adapter (or the emulator) is there. A bad
        calibration file is not retried: it needs a person.
        """
        if transition == "configure" and self._port_unreachable:
            self._port_unreachable = False
            self.get_logger().warning(
                f"bus unreachable; retrying configure in {self.cfg.reconnect_period_s * 4:g} s"
            )
            autostart_timer(self, self.cfg.reconnect_period_s * 4, self._autostart_failed)
        elif transition == "activate" and self._activate_bus_error:
            # configured, but a servo missed a reply while torque was set (a starved emulator, a
            # glitch on the wire): the node is inactive; try activating again
            self._activate_bus_error = False
            delay = self.cfg.reconnect_period_s * 4
            self.get_logger().warning(f"retrying activate in {delay:g} s")

            def retry() -> None:
                timer.cancel()
                if self.trigger_activate() != TransitionCallbackReturn.SUCCESS:
                    self._autostart_failed("activate")

            timer = self.create_timer(delay, retry)

    # ------------------------------------------------------------ lifecycle
    def on_configure(self, state: State) -> TransitionCallbackReturn:
        try:
            cal, source = load_bus_calibration(self.cfg, self.spec)
        except CalibrationError as exc:
            self.get_logger().error(f"configure failed: {exc}")
            return TransitionCallbackReturn.FAILURE
        self.arm = ArmBus(
            self.spec,
            self.cfg.port,
            cal,
            self.cfg.baudrate,
            self.cfg.timeout_ms / 1000.0,
            self.cfg.max_step_rad,
        )
        deadline = time.monotonic() + self.cfg.connect_timeout_s
        while True:
            try:
                self.arm.connect(configure=True, leader=self.cfg.read_only)
                break
            except (BusError, OSError, KeyError) as exc:
                self._note_error(str(exc))
                if time.monotonic() >= deadline:
                    self.get_logger().error(f"configure failed: {exc}")
                    self.arm = None
                    self._port_unreachable = True
                    return TransitionCallbackReturn.FAILURE
                time.sleep(0.2)
        self._connected = True
        note = " (calibration written to the servos)" if self.arm.calibration_written else ""
        self.get_logger().info(
            f"{self.cfg.robot} on {self.cfg.port}: {len(self.spec.motors)} {self.spec.bus} servos, "
            f"calibration from {source}{note}"
        )
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state: State) -> TransitionCallbackReturn:
        try:
            self._enter_running_torque_state()
        except BusError as exc:
            self.get_logger().error(f"activate failed: {exc}")
            self._activate_bus_error = True
            return TransitionCallbackReturn.FAILURE
        if not self.cfg.read_only:
            self._create_command_subscriptions()
        self._running.set()
        self._thread = threading.Thread(target=self._bus_loop, name="motor-bus", daemon=True)
        self._thread.start()
        mode = (
            "leader (read only, torque off)" if self.cfg.read_only else "follower (holding present position)"
        )
        self.get_logger().info(f"active as {mode}, {self.cfg.rate_hz:g} Hz")
        return super().on_activate(state)

    def _enter_running_torque_state(self) -> None:
        with self._lock:
            self._target = None
            self._timed_out = False
        if self.cfg.read_only:
            self.arm.set_torque(False)
            self._torque_on = self._leader_driven = False
        else:
            self.arm.hold_present()
            self._torque_on = True

    def _stop_loop(self) -> None:
        self._running.clear()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None

    def _safe_state(self, why: str) -> None:
        if self.arm is None or not self.arm.is_open or self.cfg.read_only:
            return
        # a servo can miss one reply (a noisy wire, a busy emulator): the safe state is worth retries
        for attempt in range(SAFE_STATE_ATTEMPTS):
            try:
                if self.cfg.safe_state == "torque_off":
                    self.arm.set_torque(False)
                    self._torque_on = False
                else:
                    self.arm.hold_present()
                    self._torque_on = True
            except PortError as exc:  # the port is gone: no retry can help
                self.get_logger().error(f"{why}: could not reach the safe state ({exc})")
                return
            except BusError as exc:
                if attempt + 1 == SAFE_STATE_ATTEMPTS:
                    self.get_logger().error(
                        f"{why}: could not reach the safe state in {SAFE_STATE_ATTEMPTS} attempts ({exc})"
                    )
                    return
                continue
            self.get_logger().info(f"{why}: {self.cfg.safe_state}")
            return

    def on_deactivate(self, state: State) -> TransitionCallbackReturn:
        self._stop_loop()
        self._destroy_command_subscriptions()
        self._safe_state("deactivated")
        return super().on_deactivate(state)

    def on_cleanup(self, state: State) -> TransitionCallbackReturn:
        if self.arm is not None:
            self.arm.close()
            self.arm = None
        self._connected = False
        return TransitionCallbackReturn.SUCCESS

    def on_shutdown(self, state: State) -> TransitionCallbackReturn:
        self._stop_loop()
        self._safe_state("shutdown")
        if self.arm is not None:
            self.arm.close()
            self.arm = None
        return TransitionCallbackReturn.SUCCESS

    def shutdown_safely(self) -> None:
        """Called from main() on Ctrl-C whatever the lifecycle state."""
        self._stop_loop()
        self._safe_state("shutdown")
        if self.arm is not None:
            self.arm.close()

    # ------------------------------------------------------------- commands
    def _create_command_subscriptions(self) -> None:
        self._cmd_subs = subscribe_commands(self, self._on_command, qos.RELIABLE)

    def _destroy_command_subscriptions(self) -> None:
        for sub in self._cmd_subs:
            self.destroy_subscription(sub)
        self._cmd_subs = []

    def _on_command(self, msg) -> None:
        """Any of the three command types (lerobot_core.command): the named joints' new targets."""
        try:
            command = parse_command(msg, self._names)
        except CommandError as exc:
            self._stats["rejected_commands"] += 1
            self.get_logger().warning(f"{exc}; command rejected", throttle_duration_sec=1.0)
            return
        if command.unused_points:
            self.get_logger().warning(
                "joint_trajectory: only the first point is used", throttle_duration_sec=5.0
            )
        with self._lock:
            previous = self._target if self._target is not None else self._no_target
            self._target = command.onto(previous)  # a new vector: the bus thread's stays as it was
            self._target_time = time.monotonic()

    # ------------------------------------------------------------- bus loop
    def _bus_loop(self) -> None:
        period = 1.0 / self.cfg.rate_hz
        next_t = time.perf_counter()
        consecutive_timeouts = 0
        last_health = 0.0
        last_reconnect = 0.0
        loop_rate = RateMeter()
        while self._running.is_set():
            now = time.perf_counter()
            if now < next_t:
                time.sleep(next_t - now)
            next_t += period
            if time.perf_counter() - next_t > 5 * period:
                next_t = time.perf_counter() + period  # fell far behind (reconnect): do not burst
            if not self.arm.is_open:
                if time.monotonic() - last_reconnect >= self.cfg.reconnect_period_s:
                    last_reconnect = time.monotonic()
                    self._try_reconnect()
                continue
            if not self.context.ok():
                break  # Ctrl-C: rclpy is shutting down; main() puts the arm in its safe state
            try:
                sample = self.arm.read()
                if not self._publish_sample(sample):
                    break  # rclpy shut down meanwhile
                self._apply_torque_request()
                if not self.cfg.read_only or self._leader_driven:
                    self._command_step(sample)
                if time.monotonic() - last_health >= self.cfg.diagnostics_period_s:
                    last_health = time.monotonic()
                    self._health = self.arm.read_health()
                consecutive_timeouts = 0
                self._stats["cycles"] += 1
                t = time.perf_counter()
                loop_rate.tick(t)
                self._loop_hz = loop_rate.rate(t)
            except PortError as exc:
                self._bus_lost(str(exc))
            except BusTimeoutError as exc:
                consecutive_timeouts += 1
                self._stats["bus_errors"] += 1
                self._note_error(str(exc))
                if consecutive_timeouts >= 5:
                    self.arm.close()
                    self._bus_lost(f"5 consecutive timeouts: {exc}")
                else:
                    self.get_logger().warning(str(exc), throttle_duration_sec=1.0)
            except BusError as exc:
                self._stats["bus_errors"] += 1
                self._note_error(str(exc))
                self.get_logger().warning(f"bus error: {exc}", throttle_duration_sec=1.0)

    def _note_error(self, text: str) -> None:
        self._last_error, self._last_error_time = text, time.monotonic()

    def _bus_lost(self, why: str) -> None:
        self._stats["bus_errors"] += 1
        self._connected = False
        self._note_error(why)
        self.arm.close()
        self.get_logger().error(
            f"lost the bus on {self.cfg.port}: {why}; retrying every {self.cfg.reconnect_period_s:g} s"
        )

    def _try_reconnect(self) -> None:
        try:
            self.arm.connect(configure=True, leader=self.cfg.read_only)
            self._enter_running_torque_state()
        except (BusError, OSError) as exc:
            self.arm.close()
            self._note_error(f"reconnect failed: {exc}")
            return
        self._connected = True
        self._stats["reconnects"] += 1
        self.get_logger().info(
            f"bus on {self.cfg.port} is back; resumed ({'torque off' if self.cfg.read_only else 'holding present position'})"
        )

    def _command_step(self, sample: JointSample) -> None:
        with self._lock:
            target = self._target
            age = time.monotonic() - self._target_time
        if target is None:
            return
        if self.cfg.command_timeout_s > 0 and age > self.cfg.command_timeout_s:
            if not self._timed_out:
                self._timed_out = True
                self.get_logger().warning(f"no command for {age:.2f} s (> command_timeout_s)")
                self._safe_state("command timeout")
            return
        if self._timed_out:
            self._timed_out = False
            if not self._torque_on:
                self.arm.hold_present()
                self._torque_on = True
            self.get_logger().info("commands resumed")
        # the sample is in the robot's joint order (ArmBus.read), like the target: no names to map
        goals, report = self.arm.limit_goals(target, sample.position)
        if report.clamped:
            self._stats["clamped"] += 1
        if report.step_limited:
            self._stats["step_limited"] += 1
        self.arm.write_goal_vector(goals)

    # ------------------------------------------------ leader with active motors
    def _on_torque_enable(self, request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        """Leader only: true = hold the present pose and follow joint_commands; false = torque off (free).

        The bus thread owns the port, so the request is applied there and awaited here.
        """
        if self.arm is None or not self._running.is_set():
            response.success, response.message = False, f"{self.get_name()} is not active: no torque change"
            return response
        done, result = threading.Event(), []
        with self._lock:
            self._torque_request = (bool(request.data), done, result)
        if not done.wait(2.0):
            response.success, response.message = (
                False,
                "the bus thread did not apply the torque change in 2 s",
            )
            return response
        response.success, response.message = result[0], result[1]
        return response

    def _apply_torque_request(self) -> None:
        with self._lock:
            req, self._torque_request = self._torque_request, None
        if req is None:
            return
        on, done, result = req
        try:
            if on:
                with self._lock:
                    self._target, self._timed_out = None, False
                self.arm.hold_present()
                if not self._cmd_subs:
                    self._create_command_subscriptions()
            else:
                self._destroy_command_subscriptions()
                self.arm.set_torque(False)
            self._torque_on = self._leader_driven = on
            result += [True, "torque on: following joint_commands" if on else "torque off: free to move"]
        except BusError as exc:
            result += [False, f"torque {'on' if on else 'off'} failed: {exc}"]
        self.get_logger().info(result[1])
        done.set()

    # ---------------------------------------------------------------- output
    def _publish_sample(self, sample: JointSample) -> bool:
        """False once rclpy is shut down (Ctrl-C may come between the loop's check and a publish)."""
        msg = JointState()
        msg.header.stamp = seconds_to_stamp(sample.stamp, Time)
        msg.name = self._names
        msg.position = sample.position
        msg.velocity = sample.velocity
        msg.effort = sample.effort
        if not publish_unless_shut_down(self.pub_js, msg, self.context):
            return False
        if self.pub_lr is not None:
            lr = JointState()
            lr.header.stamp = msg.header.stamp
            lr.name = self._names
            lr.position = sample.lerobot
            return publish_unless_shut_down(self.pub_lr, lr, self.context)
        return True

    def _publish_diagnostics(self) -> None:
        arr = DiagnosticArray()
        arr.header.stamp = self.get_clock().now().to_msg()
        bus = DiagnosticStatus()
        bus.name = f"{self.get_name()}: {self.spec.bus} bus {self.cfg.port}"
        bus.hardware_id = self.cfg.port
        stats = self.arm.bus.stats if self.arm is not None else None
        level, bus.message = bus_status(
            self._connected,
            self._last_error,
            time.monotonic() - self._last_error_time,
            self.cfg.diagnostics_period_s,
        )
        bus.level = {
            "ok": DiagnosticStatus.OK,
            "warn": DiagnosticStatus.WARN,
            "error": DiagnosticStatus.ERROR,
        }[level]
        values = bus_values(self.cfg.robot, self._loop_hz, self._stats, self._torque_on, stats)
        bus.values = [KeyValue(key=k, value=v) for k, v in values.items()]
        arr.status.append(bus)
        for h in list(self._health):
            st = DiagnosticStatus()
            st.name = f"{self.get_name()}: {self.cfg.joint_prefix}{h.name} (id {h.servo_id})"
            st.hardware_id = f"{self.cfg.port}#{h.servo_id}"
            st.level = DiagnosticStatus.ERROR if h.error_bits else DiagnosticStatus.OK
            st.message = "; ".join(h.messages) if h.messages else "ok"
            st.values = [
                KeyValue(key="temperature_c", value=f"{h.temperature_c:.0f}"),
                KeyValue(key="voltage_v", value=f"{h.voltage_v:.1f}"),
                KeyValue(key="error_bits", value=f"0x{h.error_bits:02x}"),
            ]
            arr.status.append(st)
        self.pub_diag.publish(arr)


def main(args=None) -> int:
    return run_node(MotorBusNode, args, on_exit=MotorBusNode.shutdown_safely)


if __name__ == "__main__":
    raise SystemExit(main())
