"""Realtime rate of the simulated SO-101: the rate its topics arrive at vs the configured rate.

    python benchmarks/sim_realtime.py [--fps 30] [--seconds 8] [--cameras 2] [--height 240 --width 320]

The `sim` node runs as a separate process in realtime mode (wall-clock pacing); this process
subscribes to joint_states and each camera's image_raw (reliable, as the recorder's contract does)
and counts what arrives over --seconds after a warm-up. Printed beside it, as the floor, is the
lockstep step rate of the same sim over ROS (benchmarks/sim_steps.py's loop): the fastest the sim can
step with this machine's load. Realtime must hold the setting whenever that floor is above it; the
sim's own count of late periods (skipped, reported in its diagnostics) is printed too.
Run with `source env.sh` (needs the built workspace).
"""

from __future__ import annotations

import argparse
import os
import threading
import time

os.environ.setdefault("MUJOCO_GL", "egl")

import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.executors import SingleThreadedExecutor
from sensor_msgs.msg import Image, JointState

from lerobot_sim.bridge_base import QOS_IMAGE, QOS_STATE
from lerobot_sim.eval_cli import make_transport_factory, resolve_env
from lerobot_sim.ros_transport import SimProcess

CAMERAS = ("front", "wrist")


def measure_realtime(fps: float, seconds: float, cams: tuple[str, ...], height: int, width: int) -> dict:
    process = SimProcess(
        "sim",
        {
            "mode": "realtime",
            "fps": fps,
            "seed": 0,
            "cameras": list(cams) or [""],
            "image_height": height,
            "image_width": width,
            "autostart": True,
        },
    )
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("sim_realtime_bench", context=context)
    stamps: dict[str, list[float]] = {"joint_states": [], **{c: [] for c in cams}}
    late: dict[str, str] = {}
    node.create_subscription(
        JointState, "joint_states", lambda m: stamps["joint_states"].append(time.monotonic()), QOS_STATE
    )
    for cam in cams:
        node.create_subscription(
            Image, f"cameras/{cam}/image_raw", lambda m, c=cam: stamps[c].append(time.monotonic()), QOS_IMAGE
        )

    def on_diag(msg: DiagnosticArray) -> None:
        for status in msg.status:
            late.update({kv.key: kv.value for kv in status.values})

    node.create_subscription(DiagnosticArray, "diagnostics", on_diag, 10)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    try:
        deadline = time.monotonic() + 60
        while len(stamps["joint_states"]) < int(fps) and time.monotonic() < deadline:  # warm-up: 1 s of data
            if not process.alive():
                raise RuntimeError(f"sim exited: {process.output()[-2000:]}")
            time.sleep(0.1)
        t0 = time.monotonic()
        time.sleep(seconds)
        t1 = time.monotonic()
        rates = {k: sum(t0 <= t < t1 for t in v) / (t1 - t0) for k, v in stamps.items()}
        time.sleep(1.1)  # one more diagnostics period
        return {"rates": rates, "diagnostics": dict(late)}
    finally:
        executor.shutdown(timeout_sec=1.0)
        node.destroy_node()
        rclpy.try_shutdown(context=context)
        process.stop()


def measure_lockstep(steps: int, cams: tuple[str, ...], height: int, width: int) -> float:
    from lerobot_sim.evaluation import ScriptedPolicy

    factory, _ = make_transport_factory(
        resolve_env("so101_cube", list(cams) or [""]),
        {"image_height": height, "image_width": width},
        log=lambda m: None,
    )
    transport = factory()
    try:
        policy = ScriptedPolicy()
        obs = transport.reset(0)
        policy.reset(0)
        for _ in range(10):  # warm-up
            obs, _ep = transport.step(policy.select_action(obs))
        t0 = time.perf_counter()
        for _ in range(steps):
            obs, ep = transport.step(policy.select_action(obs))
            if ep.terminated or ep.truncated:
                obs = transport.reset(1)
                policy.reset(1)
        return steps / (time.perf_counter() - t0)
    finally:
        transport.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fps", type=float, nargs="+", default=[30.0], help="configured realtime rate(s) [Hz]")
    ap.add_argument("--seconds", type=float, default=8.0, help="measuring window per rate [s]")
    ap.add_argument("--cameras", type=int, default=2, choices=[0, 1, 2])
    ap.add_argument("--height", type=int, default=240)
    ap.add_argument("--width", type=int, default=320)
    ap.add_argument("--lockstep-steps", type=int, default=150, help="steps of the lockstep floor (0 = skip)")
    args = ap.parse_args()
    cams = CAMERAS[: args.cameras]
    print(
        f"SO-101 cube, {len(cams)} camera(s) {args.height}x{args.width}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.2f}, MUJOCO_GL={os.environ['MUJOCO_GL']}"
    )
    floor = None
    if args.lockstep_steps > 0:
        floor = measure_lockstep(args.lockstep_steps, cams, args.height, args.width)
        print(f"floor: lockstep over ROS steps {floor:.1f} /s (the most the sim can step here)")
    print(
        f"{'setting Hz':>10} {'joint_states Hz':>16} "
        + " ".join(f"{c + ' Hz':>10}" for c in cams)
        + "  sim report"
    )
    for fps in args.fps:
        out = measure_realtime(fps, args.seconds, cams, args.height, args.width)
        r = out["rates"]
        d = out["diagnostics"]
        report = ", ".join(f"{k} {d[k]}" for k in ("steps_per_s", "late_periods") if k in d)
        print(
            f"{fps:>10.1f} {r['joint_states']:>16.1f} "
            + " ".join(f"{r[c]:>10.1f}" for c in cams)
            + f"  {report}"
        )


if __name__ == "__main__":
    main()
