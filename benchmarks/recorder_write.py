"""Benchmark: LeRobotDataset v3.0 write throughput and memory of lerobot_recorder's DatasetWriter.

Workload (issue 3, item 9): 2 cameras 640x480 RGB + 6-DoF state + 6-DoF action at 30 fps.

  1. throughput of our DatasetWriter (create + add_frame + save_episode) in frames/s, vs real time;
  2. the same workload with LeRobot's own writer (LeRobotDataset.create / add_frame / save_episode
     with its defaults), run as a subprocess of the LeRobot reference venv when it exists;
  3. peak RSS of a process writing one long episode (default 1 min vs 10 min at 30 fps), to show
     memory is flat in episode length (frames stream to the encoders; only numeric columns stay in RAM).

Run:  source env.sh && python benchmarks/recorder_write.py [--frames 300] [--long-minutes 10]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

FPS = 30
HEIGHT, WIDTH = 480, 640
REF_VENV = Path(os.environ.get("LEROBOT_REF_VENV", "/work/lerobot-ref-venv"))

# Shared by this process and the subprocesses (ours and LeRobot's): same features, same frames.
COMMON = textwrap.dedent(
    """
    import numpy as np
    FPS, HEIGHT, WIDTH = 30, 480, 640
    JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
    NAMES = [j + ".pos" for j in JOINTS]
    CAMERAS = ["observation.images.front", "observation.images.wrist"]
    FEATURES = {
        "observation.state": {"dtype": "float32", "shape": (6,), "names": NAMES},
        "action": {"dtype": "float32", "shape": (6,), "names": NAMES},
    }
    for _cam in CAMERAS:
        FEATURES[_cam] = {"dtype": "video", "shape": (HEIGHT, WIDTH, 3), "names": ["height", "width", "channels"]}

    def make_scene(seed):
        # A textured scene (gradients + blocks + mild noise) that pans over time: closer to a camera
        # image than flat colours (too easy to encode) or white noise (incompressible).
        rng = np.random.default_rng(seed)
        yy, xx = np.mgrid[0:HEIGHT, 0:WIDTH * 2]
        base = np.stack([(xx * 0.4) % 256, (yy * 0.5 + xx * 0.1) % 256, (128 + 60 * np.sin(xx / 37.0))], -1)
        for _ in range(40):
            y, x = rng.integers(0, HEIGHT - 60), rng.integers(0, 2 * WIDTH - 80)
            base[y:y + rng.integers(20, 60), x:x + rng.integers(20, 80)] = rng.integers(0, 256, 3)
        base = base + rng.normal(0, 4, base.shape)
        return np.clip(base, 0, 255).astype(np.uint8)

    SCENES = [make_scene(1), make_scene(2)]
    PERIOD = 120  # distinct frames per camera, precomputed so frame generation is not timed

    def precompute(period=PERIOD):
        out = []
        for scene in SCENES:
            out.append([np.ascontiguousarray(scene[:, (4 * i) % WIDTH:(4 * i) % WIDTH + WIDTH]) for i in range(period)])
        return out

    def frame_at(frames, i):
        t = i / FPS
        state = np.array([np.sin(t + j) for j in range(6)], dtype=np.float32)
        f = {"observation.state": state, "action": (state * 0.9).astype(np.float32)}
        for c, cam in enumerate(CAMERAS):
            f[cam] = frames[c][i % len(frames[c])]
        return f
    """
)

OURS_THROUGHPUT = COMMON + textwrap.dedent(
    """
    import json, sys, time
    from lerobot_recorder.dataset import DatasetWriter
    root, n, vcodec = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    frames = precompute()
    t0 = time.perf_counter()
    w = DatasetWriter.create(root, fps=FPS, features=FEATURES, robot_type="so101_follower", vcodec=vcodec)
    max_backlog = 0
    for i in range(n):
        w.add_frame(frame_at(frames, i), task="pick the cube")
        max_backlog = max(max_backlog, w.backlog())
    t_add = time.perf_counter() - t0
    w.save_episode()
    w.finalize()
    dt = time.perf_counter() - t0
    print(json.dumps({"seconds": dt, "add_seconds": t_add, "max_backlog": max_backlog}))
    """
)

LEROBOT_THROUGHPUT = COMMON + textwrap.dedent(
    """
    import importlib.util, json, logging, sys, time, types
    logging.disable(logging.WARNING)
    if importlib.util.find_spec("accelerate") is None:  # only imported for a type hint by lerobot.utils
        _stub = types.ModuleType("accelerate"); _stub.Accelerator = object; sys.modules["accelerate"] = _stub
    from lerobot.datasets.lerobot_dataset import LeRobotDataset
    root, n, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    frames = precompute()
    kwargs = {"streaming_encoding": True} if mode == "streaming" else {}
    t0 = time.perf_counter()
    ds = LeRobotDataset.create("bench/lerobot", fps=FPS, features=FEATURES, root=root,
                               robot_type="so101_follower", use_videos=True, **kwargs)
    for i in range(n):
        f = frame_at(frames, i)
        f["task"] = "pick the cube"
        ds.add_frame(f)
    t_add = time.perf_counter() - t0
    ds.save_episode()
    ds.finalize()
    dt = time.perf_counter() - t0
    print(json.dumps({"seconds": dt, "add_seconds": t_add}))
    """
)

OURS_MEMORY = COMMON + textwrap.dedent(
    """
    import json, resource, sys, time
    import psutil
    from lerobot_recorder.dataset import DatasetWriter
    root, n = sys.argv[1], int(sys.argv[2])
    frames = precompute(60)
    proc = psutil.Process()
    w = DatasetWriter.create(root, fps=FPS, features=FEATURES, robot_type="so101_follower")
    t0 = time.perf_counter()
    rss_per_minute = []
    for i in range(n):
        w.add_frame(frame_at(frames, i), task="pick the cube")
        if (i + 1) % (60 * FPS) == 0:
            rss_per_minute.append(proc.memory_info().rss)
    w.save_episode()
    w.finalize()
    dt = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"seconds": dt, "peak_rss": peak, "rss_per_minute": rss_per_minute}))
    """
)


def run(python: str, code: str, *args: str, env: dict | None = None) -> dict:
    res = subprocess.run(
        [python, "-c", code, *args], capture_output=True, text=True, env={**os.environ, **(env or {})}
    )
    if res.returncode != 0:
        raise RuntimeError(f"benchmark subprocess failed ({res.returncode}):\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--frames", type=int, default=300, help="frames per throughput run (default 300)")
    parser.add_argument("--short-minutes", type=float, default=1.0, help="short episode for the memory test")
    parser.add_argument("--long-minutes", type=float, default=10.0, help="long episode for the memory test")
    parser.add_argument("--skip-lerobot", action="store_true", help="do not run LeRobot's writer")
    parser.add_argument("--skip-memory", action="store_true", help="do not run the long-episode memory test")
    args = parser.parse_args()
    n = args.frames
    print(f"workload: {n} frames, 2 cameras {WIDTH}x{HEIGHT} RGB + 6-DoF state + 6-DoF action, {FPS} fps")
    print(
        f"machine: {os.cpu_count()} cores; our writer: libsvtav1 crf 30 g 2 preset 12, yuv420p (LeRobot defaults)"
    )
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        ours = run(sys.executable, OURS_THROUGHPUT, str(Path(tmp) / "ours"), str(n), "libsvtav1")
        fps_ours = n / ours["seconds"]
        results["ours"] = fps_ours
        print(
            f"ours:    {ours['seconds']:.2f} s -> {fps_ours:.1f} frames/s = {fps_ours / FPS:.2f}x real time "
            f"(add_frame loop {ours['add_seconds']:.2f} s, peak encoder backlog {ours['max_backlog']} frames)"
        )
        h264 = run(sys.executable, OURS_THROUGHPUT, str(Path(tmp) / "ours-h264"), str(n), "h264")
        print(
            f"ours with vcodec=h264 (libx264 crf 30 g 2, for reference): {n / h264['seconds']:.1f} frames/s = "
            f"{n / h264['seconds'] / FPS:.2f}x real time"
        )
        ref_python = REF_VENV / "bin/python"
        if args.skip_lerobot:
            print("lerobot: skipped (--skip-lerobot)")
        elif not (REF_VENV / ".ready").exists():
            print(f"lerobot: not importable here (no reference venv at {REF_VENV}); no baseline ratio")
        else:
            for mode, label in (
                ("default", "defaults (PNG + encode at save)"),
                ("streaming", "streaming_encoding=True"),
            ):
                lr = run(
                    str(ref_python), LEROBOT_THROUGHPUT, str(Path(tmp) / f"lerobot-{mode}"), str(n), mode
                )
                fps_lr = n / lr["seconds"]
                results[f"lerobot_{mode}"] = fps_lr
                print(
                    f"lerobot 0.4.4 {label}: {lr['seconds']:.2f} s -> {fps_lr:.1f} frames/s = "
                    f"{fps_lr / FPS:.2f}x real time; ours / lerobot = {fps_ours / fps_lr:.2f}x"
                )
        if not args.skip_memory:
            mems = []
            for minutes in (args.short_minutes, args.long_minutes):
                frames = int(minutes * 60 * FPS)
                m = run(sys.executable, OURS_MEMORY, str(Path(tmp) / f"mem-{minutes}"), str(frames))
                mems.append(m)
                series = " ".join(f"{r / 2**20:.0f}" for r in m["rss_per_minute"])
                print(
                    f"memory, one {minutes:g}-min episode ({frames} frames x 2 cameras): peak RSS "
                    f"{m['peak_rss'] / 2**20:.0f} MiB; RSS at each recorded minute [MiB]: {series}; "
                    f"written in {m['seconds']:.0f} s = {frames / m['seconds'] / FPS:.2f}x real time"
                )
            ratio = mems[1]["peak_rss"] / mems[0]["peak_rss"]
            print(
                f"memory ratio {args.long_minutes:g} min / {args.short_minutes:g} min peak RSS = {ratio:.3f} "
                f"(episode {args.long_minutes / args.short_minutes:g}x longer)"
            )
    return 0


if __name__ == "__main__":
    started = time.perf_counter()
    code = main()
    print(f"benchmark wall time {time.perf_counter() - started:.0f} s")
    sys.exit(code)
