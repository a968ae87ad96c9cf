#!/usr/bin/env python3
"""Motor-bus benchmark: full read-write cycle rate for 6 servos at 1 Mbps against the pty emulator,
next to the bound the protocol's bytes on the wire allow, and JointState publish jitter.

    source env.sh && python benchmarks/drivers_bus.py [--seconds 3]

Figures:
* wire bound: one cycle = SYNC READ of position+velocity+load for 6 servos (instruction + 6 status
  packets) + SYNC WRITE of 6 goal positions, 10 bits per byte at 1 Mbps, servo return delay 0.
* measured: ArmBus.read() + ArmBus.write_goals() in a loop; the emulator runs in its own process
  and delays each reply by its wire time (so the measured rate can never beat the bound).
* baseline (same run): the same cycle with three separate single-register sync reads (position,
  velocity, load), which is what per-register calls (LeRobot's sync_read(data_name), the vendor
  SDKs' GroupSyncRead per address) cost.
* command path (--command-path): the motor_bus node's host work per joint_commands message (a
  JointState naming all 6 joints in another order) up to the goal ticks it would sync-write: parse,
  keep the target, guard it against the present position, radians -> ticks; no bus I/O. Measured on
  the checkout's code (by name before the motor bus kept vectors, by vector after), with the floor
  beside it: the same arithmetic on vectors with the joint order precomputed (numpy + the normalizer).
* JointState jitter: motor_bus node (100 Hz) in its own process, intervals between consecutive
  header stamps and between receive times at a subscriber, p50/p99 of |interval - 10 ms|.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

from lerobot_core.robots import get_robot_spec
from lerobot_drivers import dynamixel as dxl
from lerobot_drivers import feetech as ft
from lerobot_drivers.arm import ArmBus
from lerobot_drivers.bus import BusTimeoutError
from lerobot_drivers.servo_emulator import EmulatorProcess

BAUD = 1_000_000


def wire_bytes(family: str, n: int = 6) -> dict:
    if family == "feetech":
        block = 6  # Present_Position, Present_Velocity, Present_Load: addresses 56..61
        read_req = len(
            ft.instruction_packet(
                ft.BROADCAST_ID, ft.INST_SYNC_READ, bytes([56, block]) + bytes(range(1, n + 1))
            )
        )
        read_rep = n * ft.status_length(block)
        params = bytes([42, 2]) + b"".join(bytes([i, 0, 8]) for i in range(1, n + 1))
        write = len(ft.instruction_packet(ft.BROADCAST_ID, ft.INST_SYNC_WRITE, params))
        per_reg = sum(
            len(
                ft.instruction_packet(
                    ft.BROADCAST_ID, ft.INST_SYNC_READ, bytes([a, 2]) + bytes(range(1, n + 1))
                )
            )
            + n * ft.status_length(2)
            for a in (56, 58, 60)
        )
    else:
        block = 10  # Present_Current, Present_Velocity, Present_Position: 126..135
        read_req = len(
            dxl.instruction_packet(
                dxl.BROADCAST_ID, dxl.INST_SYNC_READ, dxl.u16(126) + dxl.u16(block) + bytes(range(1, n + 1))
            )
        )
        read_rep = n * dxl.status_length(block)
        params = dxl.u16(116) + dxl.u16(4) + b"".join(bytes([i, 0, 8, 0, 0]) for i in range(1, n + 1))
        write = len(dxl.instruction_packet(dxl.BROADCAST_ID, dxl.INST_SYNC_WRITE, params))
        per_reg = sum(
            len(
                dxl.instruction_packet(
                    dxl.BROADCAST_ID, dxl.INST_SYNC_READ, dxl.u16(a) + dxl.u16(s) + bytes(range(1, n + 1))
                )
            )
            + n * dxl.status_length(s)
            for a, s in ((132, 4), (128, 4), (126, 2))
        )
    return {
        "read": read_req + read_rep,
        "write": write,
        "cycle": read_req + read_rep + write,
        "per_register": per_reg + write,
    }


def cycle_rate(robot: str, seconds: float, per_register: bool) -> float:
    spec = get_robot_spec(robot)
    with (
        tempfile.TemporaryDirectory() as tmp,
        EmulatorProcess(robot, os.path.join(tmp, "tty"), wire_time=True),
    ):
        arm = ArmBus(spec, os.path.join(tmp, "tty"), timeout_s=0.05)
        arm.connect()
        arm.hold_present()
        regs = arm.family.state_registers
        goals = {n: 0.05 for n in spec.joint_names}
        n = timeouts = 0
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            try:
                if per_register:
                    for r in regs:
                        arm.bus.sync_read(r, spec.motor_ids)
                else:
                    arm.read()
            except BusTimeoutError:
                timeouts += 1  # the machine is shared: a starved emulator misses a reply now and then
                continue
            arm.write_goals(goals)
            n += 1
        rate = n / (time.perf_counter() - t0)
        arm.close()
    return rate, timeouts


def command_path(iters: int, rounds: int = 5) -> dict:
    """Per-command host work of the motor_bus node (see the module docstring), in microseconds."""
    import numpy as np
    from sensor_msgs.msg import JointState

    from lerobot_core.command import parse_command

    spec = get_robot_spec("so101_follower")
    names = list(spec.joint_names)
    with (
        tempfile.TemporaryDirectory() as tmp,
        EmulatorProcess("so101_follower", os.path.join(tmp, "tty")),
    ):
        arm = ArmBus(spec, os.path.join(tmp, "tty"), timeout_s=0.05, max_step_rad=0.1)
        arm.connect()
        sample = arm.read()
        arm.close()
    msgs = [JointState(name=names[::-1], position=[0.001 * k] * 6) for k in range(iters)]
    vectors = hasattr(arm, "limit_goals")

    def node(msg, state):  # what MotorBusNode._on_command + _command_step do, minus the sync write
        command = parse_command(msg, spec.joint_names)
        if vectors:
            state[0] = command.onto(state[0])
            goals, _ = arm.limit_goals(state[0], sample.position)
            return arm.goal_ticks(goals)
        targets = {names[j]: float(v) for j, v in zip(command.index, command.values, strict=True)}
        merged = dict(state[0] or {})
        merged.update(targets)
        state[0] = merged
        goals, _ = arm.safe_goals(dict(state[0]), dict(zip(sample.names, sample.position, strict=False)))
        return {arm._ids[n]: arm.normalizer.from_radians(n, v) for n, v in goals.items()}

    perm = np.array([5, 4, 3, 2, 1, 0])
    ids = [arm._ids[n] for n in names]
    present = np.asarray(sample.position, dtype=np.float64)

    def floor(msg, state):  # the arithmetic alone: vector, clamp + step bound, ticks
        goals = arm._limits.limit(np.asarray(msg.position, dtype=np.float64)[perm], present, inside=False)[0]
        return {ids[j]: arm.normalizer.from_radians(names[j], float(goals[j])) for j in range(6)}

    ways = {"node": node, "floor": floor}
    out: dict[str, list[float]] = {k: [] for k in ways}
    for _ in range(rounds):
        for label, fn in ways.items():
            state = [np.full(6, np.nan) if vectors else None]
            t0 = time.process_time()
            for msg in msgs:
                fn(msg, state)
            out[label].append((time.process_time() - t0) / iters * 1e6)
    return {"vectors": vectors, **{k: min(v) for k, v in out.items()}}


def jitter(seconds: float) -> dict:
    import rclpy
    from sensor_msgs.msg import JointState

    exe = subprocess.run(
        [
            sys.executable,
            "-c",
            "from lerobot_core.ament import find_executable; print(find_executable('lerobot_drivers','motor_bus'))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp, EmulatorProcess("so101_follower", os.path.join(tmp, "tty")):
        env = dict(os.environ, ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
        proc = subprocess.Popen(
            [
                exe,
                "--ros-args",
                "-p",
                f"port:={os.path.join(tmp, 'tty')}",
                "-p",
                "autostart:=true",
                "-p",
                "rate_hz:=100.0",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        rclpy.init()
        node = rclpy.create_node("drivers_bench")
        stamps, recv = [], []

        def cb(msg):
            stamps.append(msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9)
            recv.append(time.perf_counter())

        node.create_subscription(JointState, "/joint_states", cb, 100)
        t_end = time.monotonic() + 30
        while len(stamps) < 50 and time.monotonic() < t_end:
            rclpy.spin_once(node, timeout_sec=0.1)
        stamps.clear()
        recv.clear()
        t_end = time.monotonic() + seconds
        while time.monotonic() < t_end:
            rclpy.spin_once(node, timeout_sec=0.1)
        node.destroy_node()
        rclpy.shutdown()
        proc.send_signal(2)
        proc.wait(10)

    def stats(ts):
        d = [abs((b - a) - 0.01) * 1e3 for a, b in zip(ts, ts[1:], strict=False)]
        d.sort()
        return {"p50_ms": d[len(d) // 2], "p99_ms": d[int(len(d) * 0.99)], "n": len(d)}

    rate = (len(stamps) - 1) / (stamps[-1] - stamps[0]) if len(stamps) > 1 else 0.0
    return {"rate_hz": rate, "stamp": stats(stamps), "recv": stats(recv)}


def teleop_rate(seconds: float) -> dict:
    """Leader bus (emulated, hand-moved) + teleop as processes; rate of /joint_commands."""
    import rclpy
    from sensor_msgs.msg import JointState

    from lerobot_core.ament import find_executable

    bus_exe = str(find_executable("lerobot_drivers", "motor_bus"))
    teleop_exe = str(find_executable("lerobot_drivers", "teleop"))
    env = dict(os.environ, ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
    with (
        tempfile.TemporaryDirectory() as tmp,
        EmulatorProcess("so101_leader", os.path.join(tmp, "tty"), hand_motion_ticks=300.0),
    ):
        procs = [
            subprocess.Popen(
                [
                    bus_exe,
                    "--ros-args",
                    "-r",
                    "__ns:=/leader",
                    "-p",
                    f"port:={os.path.join(tmp, 'tty')}",
                    "-p",
                    "robot:=so101_leader",
                    "-p",
                    "read_only:=true",
                    "-p",
                    "autostart:=true",
                ],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            ),
            subprocess.Popen(
                [
                    teleop_exe,
                    "--ros-args",
                    "-p",
                    "autostart:=true",
                    "-p",
                    "rate_hz:=100.0",
                    "-r",
                    "leader_joint_states:=/leader/joint_states",
                ],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            ),
        ]
        rclpy.init()
        node = rclpy.create_node("drivers_bench_teleop")
        recv = []
        node.create_subscription(
            JointState, "/joint_commands", lambda m: recv.append(time.perf_counter()), 100
        )
        t_end = time.monotonic() + 40
        while len(recv) < 50 and time.monotonic() < t_end:
            rclpy.spin_once(node, timeout_sec=0.1)
        recv.clear()
        t_end = time.monotonic() + seconds
        while time.monotonic() < t_end:
            rclpy.spin_once(node, timeout_sec=0.1)
        node.destroy_node()
        rclpy.shutdown()
        for p in procs:
            p.send_signal(2)
        for p in procs:
            p.wait(10)
    d = sorted((b - a) * 1e3 for a, b in zip(recv, recv[1:], strict=False))
    rate = (len(recv) - 1) / (recv[-1] - recv[0]) if len(recv) > 1 else 0.0
    return {
        "rate_hz": rate,
        "p50_ms": d[len(d) // 2] if d else 0.0,
        "p99_ms": d[int(len(d) * 0.99)] if d else 0.0,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--command-path", action="store_true", help="only the per-command host work (fast)")
    a = ap.parse_args()
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    os.environ.setdefault("ROS_DOMAIN_ID", "43")
    print(
        f"load average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores (a shared machine slows the emulator)"
    )
    c = command_path(2000)
    print(
        f"motor_bus host work per joint_commands message (6 joints, another order; CPU, best of 5 rounds of "
        f"2000): {c['node']:.1f} us ({'vectors in the robot order' if c['vectors'] else 'by name'}); "
        f"floor (numpy + normalizer, order precomputed) {c['floor']:.1f} us = {c['node'] / c['floor']:.2f}x"
    )
    if a.command_path:
        return 0
    for robot in ("so101_follower", "koch_follower"):
        fam = get_robot_spec(robot).bus
        b = wire_bytes(fam)
        bound = BAUD / (10 * b["cycle"])
        measured, t1 = cycle_rate(robot, a.seconds, per_register=False)
        baseline, t2 = cycle_rate(robot, a.seconds, per_register=True)
        print(f"{robot} ({fam}, 6 servos, {BAUD // 1000} kbit/s)")
        print(
            f"  bytes per cycle: read {b['read']} + write {b['write']} = {b['cycle']} -> wire bound {bound:.0f} Hz"
        )
        print(
            f"  measured block-read cycle:   {measured:7.1f} Hz  ({measured / bound:.2f} of the wire bound; {t1} timeouts)"
        )
        print(
            f"  baseline 3 per-register reads: {baseline:5.1f} Hz  (wire bound {BAUD / (10 * b['per_register']):.0f} Hz); "
            f"block read is {measured / baseline:.2f}x the baseline ({t2} timeouts)"
        )
    j = jitter(a.seconds)
    print(f"motor_bus JointState at 100 Hz target: {j['rate_hz']:.1f} Hz over {j['stamp']['n']} intervals")
    print(
        f"  header-stamp interval jitter |dt-10ms|: p50 {j['stamp']['p50_ms']:.3f} ms, p99 {j['stamp']['p99_ms']:.3f} ms"
    )
    print(
        f"  receive interval jitter      |dt-10ms|: p50 {j['recv']['p50_ms']:.3f} ms, p99 {j['recv']['p99_ms']:.3f} ms"
    )
    t = teleop_rate(a.seconds)
    print(
        f"teleop /joint_commands (target 100 Hz, requirement >= 50 Hz): {t['rate_hz']:.1f} Hz; "
        f"interval p50 {t['p50_ms']:.2f} ms, p99 {t['p99_ms']:.2f} ms"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
