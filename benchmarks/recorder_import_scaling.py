#!/usr/bin/env python3
"""Benchmark: bag import scaling with workers (`lerobot-bag-import --jobs N` and `--ray`).

Writes `--bags` short bags (one camera + follower/leader joint states), then imports all of them:
in this process (no workers: the serial import), with local worker processes (--jobs 1 and 2) and
on a local Ray cluster started here (127.0.0.1 only, num_cpus = workers, no dashboard). Each
worker's encoder is limited to `--encoder-threads` cores (default 1; libsvtav1's lp) so that one
worker uses about one core; the scaling efficiency is t(1 worker) / (N * t(N workers)), both on the
same worker code path (--jobs 1 is one worker process, not the in-process import), target >= 0.8
per added worker. The CPU time of each run (this process and its children; Ray workers are not
children) is printed beside it. Every run must give the same dataset (episodes, frames) as the
serial import.

    python benchmarks/recorder_import_scaling.py [--bags 50] [--seconds 1] [--workers 1,2] [--no-ray]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from rosbags.rosbag2 import StoragePlugin, Writer

from lerobot_core.contract import Contract
from lerobot_dataset import DatasetReader
from lerobot_recorder import bag_io
from lerobot_recorder.bag_import import import_bags

JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
CAM = "/cameras/front/image_raw"
NS = 1_000_000_000


def write_bag(path: Path, index: int, seconds: float, h: int, w: int) -> None:
    rng = np.random.default_rng(index)
    base = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    t0 = (1_700_000_000 + 100 * index) * NS
    events = []
    for i in range(int(seconds * 100)):
        t = t0 + i * 10_000_000
        q = np.sin(np.arange(6) + i / 20.0)
        events.append((t + 1_000_000, "/joint_states", bag_io.joint_state(t, JOINTS, q)))
        events.append((t + 2_000_000, "/leader/joint_states", bag_io.joint_state(t, JOINTS, -q)))
    for i in range(int(seconds * 30)):
        t = t0 + i * NS // 30
        events.append((t + 5_000_000, CAM, bag_io.image(t, np.roll(base, 4 * i, axis=1))))
    conns = {}
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        for log_time, topic, msg in sorted(events, key=lambda e: e[0]):
            if topic not in conns:
                conns[topic] = writer.add_connection(topic, msg.__msgtype__, typestore=bag_io.typestore())
            writer.write(conns[topic], log_time, bag_io.serialize(msg))


def contract() -> Contract:
    return Contract.from_flags(
        30, state="/joint_states", action="/leader/joint_states", images={"front": CAM}, task="bench"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bags", type=int, default=50)
    ap.add_argument("--seconds", type=float, default=1.0, help="recording length per bag")
    ap.add_argument("--size", default="320x240", help="camera WxH")
    ap.add_argument("--workers", default="1,2", help="worker counts to measure")
    ap.add_argument(
        "--encoder-threads", type=int, default=1, help="codec threads per worker (0 = codec default)"
    )
    ap.add_argument("--no-ray", action="store_true", help="local processes only")
    args = ap.parse_args()
    os.environ.setdefault("SVT_LOG", "1")
    w, h = (int(v) for v in args.size.split("x"))
    work = Path(tempfile.mkdtemp(prefix="import_scaling_"))
    try:
        bags = [work / f"bag{i:03d}" for i in range(args.bags)]
        for i, b in enumerate(bags):
            write_bag(b, i, args.seconds, h, w)
        options = {"encoder_threads": args.encoder_threads} if args.encoder_threads else {}
        print(
            f"{args.bags} bags x {args.seconds:g} s, one {w}x{h} camera @30 fps + joints @100 Hz; default video "
            f"settings, {args.encoder_threads or 'default'} codec thread(s) per worker; {os.cpu_count()} cores, "
            f"load average {os.getloadavg()[0]:.1f} at start (shared machine: compare within this run)"
        )

        def run(label: str, **kw) -> float:
            out = work / f"ds-{label.replace(' ', '-')}"
            c0, t = os.times(), time.perf_counter()
            s = import_bags(bags, contract(), out, progress=False, writer_options=options, **kw)
            dt = time.perf_counter() - t
            c1 = os.times()
            cpu = sum(c1[:4]) - sum(c0[:4])
            r = DatasetReader(out)
            print(
                f"  {label:<22} {dt:7.2f} s  {s.frames / dt:7.1f} frames/s  cpu {cpu:6.2f} s  "
                f"({r.num_episodes} episodes, {r.num_frames} frames; load average {os.getloadavg()[0]:.1f})"
            )
            results[label] = (r.num_episodes, r.num_frames)
            shutil.rmtree(out, ignore_errors=True)
            return dt

        results: dict[str, tuple[int, int]] = {}
        run("serial (no workers)")
        times: dict[str, dict[int, float]] = {"jobs": {}, "ray": {}}
        counts = [int(n) for n in args.workers.split(",")]
        for n in counts:
            times["jobs"][n] = run(f"--jobs {n}", jobs=n)  # --jobs 1: one worker process, the same path
        if not args.no_ray:
            import ray

            for n in counts:
                ray_tmp = tempfile.mkdtemp(prefix="ray", dir="/tmp")
                ray.init(
                    num_cpus=n,
                    include_dashboard=False,
                    _node_ip_address="127.0.0.1",
                    _temp_dir=ray_tmp,
                    log_to_driver=False,
                )
                try:
                    times["ray"][n] = run(f"--ray ({n} workers)", ray_address="local")
                finally:
                    ray.shutdown()
                    shutil.rmtree(ray_tmp, ignore_errors=True)
        same = len(set(results.values())) == 1
        print(
            f"every run gave the serial import's episodes and frames: {'yes' if same else 'NO ' + str(results)}"
        )
        for kind, t in times.items():
            if len(t) < 2:
                continue
            base_n = min(t)
            for n in sorted(t)[1:]:
                eff = t[base_n] * base_n / (n * t[n])
                verdict = "PASS" if eff >= 0.8 else "FAIL"
                print(
                    f"{kind}: {n} workers vs {base_n}: speed-up {t[base_n] / t[n]:.2f}x, efficiency {eff:.2f} (target >= 0.8: {verdict})"
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
