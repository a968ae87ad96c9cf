#!/usr/bin/env python3
"""Human-in-the-loop switch latency: from an operator input to the first robot command of the new
source, in control periods of the control_arbiter (target: p99 <= 2).

    source env.sh && python benchmarks/hil_switch.py [--cycles 20] [--rate 30]

Setup (printed): control_arbiter in its own process at --rate Hz; this process plays the robot
(joint_states at pose P), the policy (command A) and the leader teleop (command B), all at 100 Hz on
loopback DDS. max_step_rad is large so a command equals its source's value at once (the bounded
ramp of a bumpless switch is tested in test_arbiter.py, not timed here). One cycle = pause (-> P),
takeover (-> B), resume (-> A).

Figures, per input path:
* service: time from sending arbiter/command to receiving the first joint_commands equal to the new
  source's value; the floor beside it is the same service's round trip with no transition (a pause
  while paused), i.e. what ROS itself costs before the arbiter can act.
* pedal: time from writing a key press (struct input_event) into a FIFO given as pedal_device to
  the first joint_commands of the new source.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time

import numpy as np
import rclpy
from rclpy.executors import SingleThreadedExecutor
from sensor_msgs.msg import JointState

from lerobot_core.realtime import process_threads, set_fifo
from lerobot_core.ros.testing import RosProcess, wait_until
from lerobot_msgs.msg import ControlStatus
from lerobot_msgs.srv import ArbiterCommand
from lerobot_policy_node.pedal import KEY_CODES, pack_event

JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
P = np.array([0.0, -0.5, 0.5, 0.2, 0.0, 0.3])
A = P + 0.2
B = P - 0.2
TARGET = {"pause": P, "takeover": B, "resume": A}
PEDAL = {"pause": "KEY_A", "takeover": "KEY_B", "resume": "KEY_C"}


class Bench:
    def __init__(self, node):
        self.node = node
        self.pubs = {
            t: node.create_publisher(JointState, t, 10)
            for t in ("/joint_states", "/policy/joint_commands", "/teleop/joint_commands")
        }
        self.values = {"/joint_states": P, "/policy/joint_commands": A, "/teleop/joint_commands": B}
        self.out: list[tuple[float, np.ndarray]] = []
        self.lock = threading.Lock()
        node.create_subscription(JointState, "/joint_commands", self._on_out, 100)
        self.mode = None
        node.create_subscription(
            ControlStatus, "/arbiter/status", lambda m: setattr(self, "mode", m.mode), 10
        )
        node.create_timer(0.01, self._tick)
        self.cli = node.create_client(ArbiterCommand, "/arbiter/command")

    def _tick(self):
        stamp = self.node.get_clock().now().to_msg()
        for t, pub in self.pubs.items():
            m = JointState(name=list(JOINTS), position=[float(v) for v in self.values[t]])
            m.header.stamp = stamp
            pub.publish(m)

    def _on_out(self, msg):
        with self.lock:
            self.out.append((time.perf_counter(), np.array(msg.position)))

    def first_equal(self, since: float, target: np.ndarray, timeout=2.0) -> float | None:
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            with self.lock:
                for t, v in self.out:
                    if t >= since and np.allclose(v, target, atol=1e-9):
                        return t - since
            time.sleep(0.001)
        return None

    def call(self, command: str) -> tuple[float, bool]:
        t0 = time.perf_counter()
        fut = self.cli.call_async(ArbiterCommand.Request(command=command))
        wait_until(fut.done, 5.0, 0.0005)
        return time.perf_counter() - t0, bool(fut.result() and fut.result().success)


def pct(values, q):
    return float(np.percentile(values, q)) if values else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cycles", type=int, default=20, help="pause/takeover/resume cycles per input path")
    ap.add_argument("--rate", type=float, default=30.0, help="arbiter control rate [Hz]")
    ap.add_argument(
        "--priority",
        type=int,
        default=0,
        help="SCHED_FIFO priority for the arbiter (its control_priority) and for this process, the "
        "robot and sources; 0 = normal scheduling",
    )
    args = ap.parse_args()
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    os.environ.setdefault("ROS_DOMAIN_ID", "109")
    period = 1.0 / args.rate
    tmp = tempfile.TemporaryDirectory(prefix="hil-bench-")
    fifo = os.path.join(tmp.name, "pedal")
    os.mkfifo(fifo)
    rclpy.init()
    node = rclpy.create_node("hil_bench")
    bench = Bench(node)
    ex = SingleThreadedExecutor()  # a multi-threaded one busy-polls, which SCHED_FIFO turns into a hog
    ex.add_node(node)
    threading.Thread(target=ex.spin, daemon=True).start()
    params = {
        "rate_hz": args.rate,
        "max_step_rad": 10.0,
        "source_timeout_s": 0.5,
        "robot": "",
        "pedal_device": fifo,
        "pedal_keys": [f"{k}:{c}" for c, k in PEDAL.items()],
        "autostart": True,
        "control_priority": args.priority,
    }
    print(
        f"control_arbiter at {args.rate:g} Hz (period {period * 1e3:.1f} ms), sources at 100 Hz, "
        f"{args.cycles} cycles x 3 transitions per path, loopback DDS, ROS_DOMAIN_ID {os.environ['ROS_DOMAIN_ID']}, "
        f"scheduling: {f'SCHED_FIFO {args.priority} (arbiter and this process)' if args.priority else 'normal'}, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    results = {"service": [], "pedal": []}
    floor = []
    with RosProcess("lerobot_policy_node", "control_arbiter", parameters=params) as proc:
        if not wait_until(lambda: bench.mode == ControlStatus.MODE_POLICY, 30):
            print(proc.output())
            return 1
        if args.priority:  # after the start: the arbiter gets its priority from its own parameter
            set_fifo(args.priority, process_threads())
        fd = os.open(fifo, os.O_WRONLY)
        try:
            for path in ("service", "pedal"):
                for _ in range(args.cycles):
                    for command in ("pause", "takeover", "resume"):
                        time.sleep(0.1 + np.random.uniform(0, period))  # inputs fall anywhere in a period
                        t0 = time.perf_counter()
                        if path == "service":
                            bench.call(command)
                        else:
                            os.write(fd, pack_event(KEY_CODES[PEDAL[command]]))
                        lat = bench.first_equal(t0, TARGET[command])
                        if lat is None:
                            print(f"{path} {command}: no command of the new source within 2 s")
                            return 1
                        results[path].append(lat)
                        if command == "pause" and path == "service":
                            rtt, _ = bench.call("pause")  # already paused: the bare round trip
                            floor.append(rtt)
        finally:
            os.close(fd)
        if args.priority:
            line = [x for x in proc.output().splitlines() if "SCHED_FIFO" in x]
            print("arbiter:", line[0].split("]: ")[-1] if line else "no SCHED_FIFO line in its log")
    ex.shutdown()
    node.destroy_node()
    rclpy.try_shutdown()
    print(f"{'path':<26}{'n':>4}{'p50 ms':>9}{'p99 ms':>9}{'p50 periods':>13}{'p99 periods':>13}")
    for path, lat in results.items():
        print(
            f"{'input -> new source, ' + path:<26}{len(lat):>4}{pct(lat, 50) * 1e3:>9.1f}{pct(lat, 99) * 1e3:>9.1f}"
            f"{pct(lat, 50) / period:>13.2f}{pct(lat, 99) / period:>13.2f}"
        )
    print(
        f"{'floor: service round trip':<26}{len(floor):>4}{pct(floor, 50) * 1e3:>9.1f}{pct(floor, 99) * 1e3:>9.1f}"
        f"{pct(floor, 50) / period:>13.2f}{pct(floor, 99) / period:>13.2f}"
    )
    worst = max(pct(v, 99) / period for v in results.values())
    print(f"target p99 <= 2 control periods: {'met' if worst <= 2 else 'NOT met'} (worst p99 {worst:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
