"""The emulated bus behind a pseudo-terminal, in a child process, and the console script (ROS-free).

:class:`ServoBusEmulator` serves an :class:`~lerobot_drivers.servo_emulator.bus.EmulatedBus` on a
pty: the driver opens the pty's path (or the stable symlink kept at ``link_path``) like a USB
serial adapter, and the client's baud rate is read from the pty's termios. ``unplug()`` /
``replug()`` emulate pulling the USB cable (the symlink moves to a fresh pty).
:class:`EmulatorProcess` runs one in a child process driven over a pipe. Console script::

    lerobot-servo-emulator --protocol feetech --robot so101_follower --link /tmp/so101_follower
"""

from __future__ import annotations

import argparse
import os
import select
import signal
import sys
import termios
import threading
import time
import tty
from typing import Optional

from lerobot_core import cli
from lerobot_core.robots import get_robot_spec
from lerobot_drivers.bus import FAMILIES
from lerobot_drivers.servo_emulator.bus import EmulatedBus

_BAUDS = (9600, 19200, 38400, 57600, 115200, 230400, 460800, 500000, 576000, 921600)
_BAUDS += (1000000, 1152000, 2000000, 2500000, 3000000, 3500000, 4000000)
_TERMIOS_SPEEDS = {getattr(termios, f"B{b}"): b for b in _BAUDS if hasattr(termios, f"B{b}")}


class ServoBusEmulator(EmulatedBus):
    """Servos of one bus behind a pty; a background thread answers the driver's packets."""

    def __init__(
        self,
        family: str,
        servos: dict[int, str],
        protocol_version: Optional[int] = None,
        link_path: Optional[str] = None,
        **bus_options,  # wire_time, tau_s, initial_positions, hand_motion_ticks, hand_period_s
    ):
        super().__init__(family, servos, protocol_version, **bus_options)
        self.link_path = link_path
        self.master_fd = -1
        self.slave_fd = -1
        self.slave_name = ""
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
        self.replug()
        return self

    def stop(self) -> None:
        self.unplug()
        if self.link_path and os.path.islink(self.link_path):
            os.unlink(self.link_path)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def unplug(self) -> None:
        """Like pulling the USB cable: the pty disappears (the driver's reads/writes fail)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None
        with self._io_lock:
            self._close_pty()

    def replug(self) -> None:
        """Like plugging it back: a fresh pty, the symlink (``port``) now points at it."""
        self._open_pty()
        self._stop.clear()
        self._thread = threading.Thread(target=self._serve, name="servo-emulator", daemon=True)
        self._thread.start()

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

    def _send(self, data: bytes) -> None:
        with self._io_lock:
            if self.master_fd >= 0:
                try:
                    os.write(self.master_fd, data)
                except OSError:
                    pass


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


_EMULATOR_OPS = {
    "get": lambda emu, sid, reg: emu.servos[sid].get(reg),
    "get_all": lambda emu, reg: {sid: s.get(reg) for sid, s in emu.servos.items()},
    "torque": lambda emu: {sid: s.torque_on for sid, s in emu.servos.items()},
    "inject_fault": lambda emu, sid, kind: emu.servos[sid].inject_fault(kind),
    "clear_faults": lambda emu, sid: emu.servos[sid].clear_faults(),
    "set_actual": lambda emu, sid, value: emu.servos[sid].move_by_hand(value),
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
        formatter_class=cli.HelpFormatter,
    )
    parser.add_argument("--protocol", choices=list(FAMILIES), default=None, help="bus family")
    parser.add_argument("--robot", default="so101_follower", help="LeRobot robot type giving ids and models")
    parser.add_argument("--link", default=None, help="stable symlink to create pointing at the pty")
    parser.add_argument("--port-file", default=None, help="write the port path to this file once ready")
    parser.add_argument(
        "--tau", type=cli.positive_float, default=0.05, help="position response time constant (s)"
    )
    parser.add_argument(
        "--no-wire-time", action="store_true", help="answer without emulating baud-rate delay"
    )
    parser.add_argument(
        "--hand-motion",
        type=cli.non_negative_float,
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
