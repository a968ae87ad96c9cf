"""Benchmark: LeRobotDataset v3.0 write throughput and memory of lerobot_recorder's DatasetWriter.

Workload (issue 3, item 9): 2 cameras 640x480 RGB + 6-DoF state + 6-DoF action at 30 fps.

  1. throughput of our DatasetWriter (create + add_frame + save_episode) in frames/s, vs real time;
  2. the same workload with LeRobot's own writer (LeRobotDataset.create / add_frame / save_episode
     with its defaults), run as a subprocess of the LeRobot reference venv when it exists;
  3. peak RSS of a process writing one long episode (default 1 min vs 10 min at 30 fps), to show
     memory is flat in episode length (frames stream to the encoders; only numeric columns stay in RAM).

Both writers run LeRobot 0.4.4's effective settings and print them exactly: libsvtav1 yuv420p crf 30
g 2, SVT-AV1 at M10 (LeRobot passes preset 12, which its pinned PyAV 15's SVT-AV1 3.0.0 maps to M10;
our PyAV 18's SVT-AV1 4.1.0 gets preset 10 for M10). Each side also prints its floor: bare PyAV of
its own venv encoding the same frames with the same options (2 cameras in 2 threads, as both writers
do), and the PSNR of the decoded videos against the source frames.

Run:  source env.sh && python benchmarks/recorder_write.py [--frames 300] [--long-minutes 10] [--preset 10]
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
from video_floor import decode, encoder_settings, psnr

from lerobot_dataset import encoders
from lerobot_dataset.encoders import ENCODER_NICE

# Both floors and LeRobot's writer drop CAP_SYS_NICE first, as our encoder threads do: otherwise, run as
# root, SVT-AV1 puts its workers on SCHED_FIFO 99 there and not in ours (see encoders.forbid_realtime_priority).
NO_REALTIME = (
    textwrap.dedent(
        f"""
    _CAP_SYS_NICE = {encoders._CAP_SYS_NICE}
    _LINUX_CAPABILITY_VERSION_3 = {encoders._LINUX_CAPABILITY_VERSION_3}
    """
    )
    + textwrap.dedent(inspect.getsource(encoders.forbid_realtime_priority))
    + "\nforbid_realtime_priority()\n"
)

FPS = 30
HEIGHT, WIDTH = 480, 640
REF_VENV = Path(os.environ.get("LEROBOT_REF_VENV") or Path.home() / ".cache/lerobot_ros/lerobot-0.4.4")

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
    from lerobot_dataset import DatasetWriter
    root, n, vcodec, preset = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    preset = None if preset == "" else int(preset) if preset.isdigit() else preset
    frames = precompute()
    t0, c0 = time.perf_counter(), time.process_time()
    w = DatasetWriter.create(root, fps=FPS, features=FEATURES, robot_type="so101_follower", vcodec=vcodec, preset=preset)
    settings = w.encoder_settings
    max_backlog = 0
    for i in range(n):
        w.add_frame(frame_at(frames, i), task="pick the cube")
        max_backlog = max(max_backlog, w.backlog())
    t_add = time.perf_counter() - t0
    w.save_episode()
    w.finalize()
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(json.dumps({"seconds": dt, "cpu": cpu, "add_seconds": t_add, "max_backlog": max_backlog, "settings": settings}))
    """
)

LEROBOT_THROUGHPUT = (
    COMMON
    + NO_REALTIME
    + textwrap.dedent(
        """
    import importlib.util, json, logging, sys, time, types
    logging.disable(logging.WARNING)
    if importlib.util.find_spec("accelerate") is None:  # only imported for a type hint by lerobot.utils
        _stub = types.ModuleType("accelerate"); _stub.Accelerator = object; sys.modules["accelerate"] = _stub
    from lerobot.datasets.lerobot_dataset import LeRobotDataset
    from lerobot.datasets import video_utils
    root, n, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    frames = precompute()
    kwargs = {"streaming_encoding": True} if mode == "streaming" else {}
    # what LeRobot passes to PyAV (its own option builder, called as its writers call it)
    options = video_utils._get_codec_options("libsvtav1", 2, 30, None)
    settings = "libsvtav1 yuv420p " + " ".join(f"{k}={v}" for k, v in sorted(options.items()))
    t0, c0 = time.perf_counter(), time.process_time()
    ds = LeRobotDataset.create("bench/lerobot", fps=FPS, features=FEATURES, root=root,
                               robot_type="so101_follower", use_videos=True, **kwargs)
    for i in range(n):
        f = frame_at(frames, i)
        f["task"] = "pick the cube"
        ds.add_frame(f)
    t_add = time.perf_counter() - t0
    ds.save_episode()
    ds.finalize()
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(json.dumps({"seconds": dt, "cpu": cpu, "add_seconds": t_add, "settings": settings}))
    """
    )
)

# The floor, run in each venv: bare PyAV encoding the same frames with the given options, one thread
# per camera (as both writers), rgb24 frames handed to PyAV (its libswscale converts).
FLOOR = (
    COMMON
    + NO_REALTIME
    + textwrap.dedent(
        """
    import json, sys, threading, time, glob, os
    from fractions import Fraction
    import av
    out_dir, n, options, NICE = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]), int(sys.argv[4])
    frames = precompute()
    def encode(c):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), os.getpriority(os.PRIO_PROCESS, 0) + NICE)
        with av.open(f"{out_dir}/floor-{c}.mp4", "w") as out:
            stream = out.add_stream("libsvtav1", rate=FPS, options=options)
            stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
            for i in range(n):
                vf = av.VideoFrame.from_ndarray(frames[c][i % len(frames[c])], format="rgb24")
                vf.pts, vf.time_base = i, Fraction(1, FPS)
                for packet in stream.encode(vf):
                    out.mux(packet)
            for packet in stream.encode(None):
                out.mux(packet)
    t0, c0 = time.perf_counter(), time.process_time()
    threads = [threading.Thread(target=encode, args=(c,)) for c in range(len(CAMERAS))]
    [t.start() for t in threads]
    [t.join() for t in threads]
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    libs = glob.glob(os.path.join(os.path.dirname(av.__file__), "..", "*.libs", "libSvtAv1Enc*"))
    svt = os.path.basename(libs[0]).split(".so.")[-1] if libs else "?"
    print(json.dumps({"seconds": dt, "cpu": cpu, "pyav": av.__version__, "svtav1": svt}))
    """
    )
)

OURS_MEMORY = COMMON + textwrap.dedent(
    """
    import json, resource, sys, time
    import psutil
    from lerobot_dataset import DatasetWriter
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


def run(python: str, code: str, *args: str, env: dict | None = None, nice: int = 0) -> dict:
    res = subprocess.run(
        [python, "-c", code, *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        preexec_fn=(lambda: os.nice(nice)) if nice else None,
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
    parser.add_argument(
        "--preset", default="", help="our SVT-AV1 preset ('' = the writer's default, M10 like LeRobot 0.4.4)"
    )
    parser.add_argument("--skip-memory", action="store_true", help="do not run the long-episode memory test")
    args = parser.parse_args()
    n = args.frames
    print(f"workload: {n} frames, 2 cameras {WIDTH}x{HEIGHT} RGB + 6-DoF state + 6-DoF action, {FPS} fps")
    print(
        f"machine: {os.cpu_count()} cores, shared with other jobs while measured (load average "
        f"{os.getloadavg()[0]:.1f} at start): compare ratios taken in one run, not absolute figures across runs"
    )
    print(
        f"every encoder runs at nice +{ENCODER_NICE} (our writer's encoder threads, both floors' threads, "
        "LeRobot's whole process), none with real-time codec workers: a busy machine slows them alike"
    )
    ns: dict = {}
    exec(COMMON, ns)  # the same source frames, for PSNR
    sources = [[f[i % len(f)] for i in range(n)] for f in ns["precompute"]()]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)

        def quality(paths) -> str:
            means, worsts, notes = [], [], []
            for c, path in enumerate(paths):
                got = decode(path)
                if len(got) != n:  # reported, and PSNR taken over the frames present
                    notes.append(
                        f"{path.parent.parent.name or path.name}: {len(got)} frames decoded for {n} written"
                    )
                k = min(len(got), n)
                mean, worst = psnr(sources[c][:k], got[:k])
                means.append(mean)
                worsts.append(worst)
            note = f" [FRAME COUNT: {'; '.join(notes)}]" if notes else ""
            return f"PSNR mean {np.mean(means):.2f} dB, worst frame {min(worsts):.2f} dB{note}"

        def floor(python: str, options: dict, name: str) -> tuple[dict, str]:
            d = tmp / name
            d.mkdir()
            fl = run(python, FLOOR, str(d), str(n), json.dumps(options), str(ENCODER_NICE))
            return fl, quality([d / f"floor-{c}.mp4" for c in range(2)])

        def dataset_videos(root: Path) -> list[Path]:
            return [root / "videos" / cam / "chunk-000" / "file-000.mp4" for cam in ns["CAMERAS"]]

        ours = run(sys.executable, OURS_THROUGHPUT, str(tmp / "ours"), str(n), "libsvtav1", args.preset)
        fps_ours = n / ours["seconds"]
        results["ours"] = fps_ours
        _, our_options, _ = encoder_settings("libsvtav1" + (f":{args.preset}" if args.preset else ""))
        fl, fl_q = floor(sys.executable, our_options, "floor-ours")
        print(f"ours:    settings {ours['settings']} (PyAV {fl['pyav']}, SVT-AV1 {fl['svtav1']})")
        print(
            f"  floor (bare PyAV, same settings): {fl['seconds']:.2f} s wall, {fl['cpu']:.2f} s CPU -> "
            f"{n / fl['seconds']:.1f} frames/s; {fl_q}"
        )
        print(
            f"  writer: {ours['seconds']:.2f} s wall, {ours['cpu']:.2f} s CPU -> {fps_ours:.1f} frames/s = "
            f"{fps_ours / FPS:.2f}x real time; vs floor: throughput {fl['seconds'] / ours['seconds']:.2f}x, "
            f"CPU {ours['cpu'] / fl['cpu']:.2f}x (target <= 1.1); {quality(dataset_videos(tmp / 'ours'))} "
            f"(peak encoder backlog {ours['max_backlog']} frames)"
        )
        ref_python = REF_VENV / "bin/python"
        if args.skip_lerobot:
            print("lerobot: skipped (--skip-lerobot)")
        elif not (REF_VENV / ".ready").exists():
            print(f"lerobot: not importable here (no reference venv at {REF_VENV}); no baseline ratio")
        else:
            lr_floor = None
            for mode, label in (
                ("default", "defaults (PNG + encode at save)"),
                ("streaming", "streaming_encoding=True"),
            ):
                # niced as a whole: its encoders then run at the nice level ours and the floors use
                lr = run(
                    str(ref_python),
                    LEROBOT_THROUGHPUT,
                    str(tmp / f"lerobot-{mode}"),
                    str(n),
                    mode,
                    nice=ENCODER_NICE,
                )
                if lr_floor is None:
                    options = dict(kv.split("=", 1) for kv in lr["settings"].split()[2:])
                    lr_floor = floor(str(ref_python), options, "floor-lerobot")
                    fl2, fl2_q = lr_floor
                    print(
                        f"lerobot 0.4.4: settings {lr['settings']} (PyAV {fl2['pyav']}, SVT-AV1 {fl2['svtav1']})"
                    )
                    print(
                        f"  floor (bare PyAV, same settings): {fl2['seconds']:.2f} s wall, {fl2['cpu']:.2f} s CPU -> "
                        f"{n / fl2['seconds']:.1f} frames/s; {fl2_q}"
                    )
                fl2 = lr_floor[0]
                fps_lr = n / lr["seconds"]
                results[f"lerobot_{mode}"] = fps_lr
                print(
                    f"  {label}: {lr['seconds']:.2f} s wall, {lr['cpu']:.2f} s CPU -> {fps_lr:.1f} frames/s = "
                    f"{fps_lr / FPS:.2f}x real time; vs its floor: throughput {fl2['seconds'] / lr['seconds']:.2f}x, "
                    f"CPU {lr['cpu'] / fl2['cpu']:.2f}x; {quality(dataset_videos(tmp / f'lerobot-{mode}'))}; "
                    f"ours / lerobot = {fps_ours / fps_lr:.2f}x"
                )
        if not args.skip_memory:
            mems = []
            for minutes in (args.short_minutes, args.long_minutes):
                frames = int(minutes * 60 * FPS)
                m = run(sys.executable, OURS_MEMORY, str(tmp / f"mem-{minutes}"), str(frames))
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
