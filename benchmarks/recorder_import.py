#!/usr/bin/env python3
"""Benchmark: rosbag2 import throughput vs real time (lerobot-bag-import's code path).

One 30 fps VGA (640x480 rgb8) camera + follower and leader JointState at 100 Hz, written to an
mcap bag with rosbags (real CDR), then imported into a LeRobotDataset v3. Prints, in one run:

  * baseline 0 - real time: the bag's duration
  * baseline 1 - reading + deserializing the bag with rosbags alone (the bare library), and the same
                 with the import's reader (bag_read: the MCAP file mapped, payloads not copied)
  * stage 2    - the import's reader + alignment + contract conversion (everything but the writer)
  * baseline 2 - encoding the same frames with PyAV alone, same codec settings (the floor for any
                 writer using that codec; benchmarks/video_floor.py)
  * full       - the whole import, per codec: the default (LeRobot 0.4.4's quality: libsvtav1 crf 30 g 2
                 at M10), faster presets and h264 ultrafast

with, per codec, the exact encoder settings (identical for floor and import), the import's throughput
and CPU against the floor (targets >= 0.9x and <= 1.1x), the PSNR of the decoded frames against their
source frames (floor and import), and the ratio of the import to real time (target >= 10x).

    python benchmarks/recorder_import.py [--seconds 20] [--codecs libsvtav1,libsvtav1:12,h264:ultrafast] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from rosbags.rosbag2 import Reader, StoragePlugin, Writer
from video_floor import bare_encode, decode, encoder_settings, parse_spec, psnr

from lerobot_core.alignment import Aligner
from lerobot_core.contract import Contract
from lerobot_dataset import DatasetReader
from lerobot_dataset.video import rgb_to_yuv420p
from lerobot_recorder import bag_io, bag_read
from lerobot_recorder.bag_import import import_bags

JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
CAM = "/cameras/front/image_raw"
NS = 1_000_000_000


def cut_frames(n: int, h: int = 480, w: int = 640, every: int = 1) -> list[np.ndarray]:
    """Sudden full-frame changes: a new random textured scene every `every` frame(s) (a camera switched,
    a light turned on), the frame number as 8 black/white stripes on top."""
    frames = []
    xx = np.mgrid[0:h, 0:w][1]
    for i in range(n):
        rng = np.random.default_rng(i // every)
        img = np.empty((h, w, 3), np.uint8)
        img[:] = rng.integers(0, 255, 3)
        img[..., 0] = (img[..., 0] + (xx * rng.integers(1, 4)) % 256).astype(np.uint8)
        for bit in range(8):
            img[:30, bit * (w // 8) : (bit + 1) * (w // 8)] = 255 if (i >> bit) & 1 else 0
        frames.append(img)
    return frames


def scene_frames(
    n: int, h: int = 480, w: int = 640, noise: int = 3, scene: str = "camera"
) -> list[np.ndarray]:
    """Camera-like frames: a lit gradient, a moving textured object and sensor noise (scene "camera"),
    or sudden full-frame changes (scene "cuts", see cut_frames)."""
    if scene == "cuts":
        return cut_frames(n, h, w)
    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:h, 0:w]
    base = np.stack([60 + xx * 120 // w, 50 + yy * 100 // h, 90 + (xx + yy) * 60 // (w + h)], axis=2)
    texture = rng.integers(0, 40, (80, 120, 3))
    frames = []
    for i in range(n):
        img = base.copy()
        x0, y0 = 100 + (i * 7) % (w - 250), 150 + int(60 * np.sin(i / 9))
        img[y0 : y0 + 80, x0 : x0 + 120] = 180 + texture
        if noise:
            img = img + rng.integers(-noise, noise + 1, img.shape)
        frames.append(np.clip(img, 0, 255).astype(np.uint8))
    return frames


def write_bag(path: Path, seconds: float, noise: int = 3, scene: str = "camera") -> dict:
    frames = scene_frames(60, noise=noise, scene=scene)
    t0 = 1_700_000_000 * NS
    events = []
    for i in range(int(seconds * 100)):
        t = t0 + i * 10_000_000
        q = np.sin(np.arange(6) + i / 50.0)
        events.append((t + 1_000_000, "/joint_states", bag_io.joint_state(t, JOINTS, q, q * 0.1, q * 0.01)))
        events.append((t + 2_000_000, "/leader/joint_states", bag_io.joint_state(t, JOINTS, q * 0.9)))
    n_cam = int(seconds * 30)
    for i in range(n_cam):
        t = t0 + (i * NS) // 30
        events.append((t + 12_000_000, CAM, (t, i)))
    events.sort(key=lambda e: e[0])
    ts = bag_io.typestore()
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        conns = {}
        for log_time, topic, msg in events:
            if topic == CAM:  # build images lazily: 600 VGA frames would be 550 MB at once
                stamp, i = msg
                msg = bag_io.image(stamp, frames[i % len(frames)])
            if topic not in conns:
                conns[topic] = writer.add_connection(topic, msg.__msgtype__, typestore=ts)
            writer.write(conns[topic], log_time, bag_io.serialize(msg))
    size = sum(p.stat().st_size for p in path.iterdir())
    return {"seconds": seconds, "camera_frames": n_cam, "joint_msgs": 2 * int(seconds * 100), "bytes": size}


def contract() -> Contract:
    return Contract.from_dict(
        {
            "fps": 30,
            "robot_type": "so101_follower",
            "task": "benchmark",
            "features": {
                "observation.state": {"topic": "/joint_states", "joints": JOINTS, "policy": "interpolate"},
                "action": {"topic": "/leader/joint_states", "joints": JOINTS},
                "observation.images.front": {"topic": CAM, "policy": "nearest", "tolerance": 0.02},
            },
        },
        source="benchmark",
    )


def read_only(bag: Path, zero_copy: bool = False) -> int:
    """Read and deserialize every message: rosbags' reader, or the import's (bag_read: mapped MCAP)."""
    n = 0
    with Reader(bag) as reader:
        messages = bag_read.messages(reader, reader.connections) if zero_copy else reader.messages()
        for conn, _, raw in messages:
            bag_io.deserialize(raw, conn.msgtype)
            n += 1
    return n


def align_and_convert(bag: Path, c: Contract) -> int:
    """Everything the import does except writing: deserialize, align, decode images to RGB."""
    first = {}
    with Reader(bag) as reader:
        for conn in reader.connections:
            for _, _, raw in bag_read.messages(reader, [conn]):
                first[conn.topic] = bag_io.deserialize(raw, conn.msgtype)
                break
        c = c.resolve(first)
        aligner = Aligner(c.fps, c.stream_specs(), latency_margin_s=0.1)
        frames = 0
        for conn, log_time, raw in bag_read.messages(reader, reader.connections):
            msg = bag_io.deserialize(raw, conn.msgtype)
            aligner.push(conn.topic, *c.extract(conn.topic, msg, conn.msgtype, log_time))
            for f in aligner.pop_ready(now_ns=log_time):
                c.make_frame(f.values)
                frames += 1
        for f in aligner.finish():
            c.make_frame(f.values)
            frames += 1
    return frames


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="recording length in the bag")
    ap.add_argument(
        "--codecs",
        default="libsvtav1,libsvtav1:12,h264:ultrafast",
        help="comma-separated vcodec[:preset] list (default: LeRobot's quality, SVT preset 12, fast h264)",
    )
    ap.add_argument(
        "--noise", type=int, default=3, help="+- sensor noise per pixel (0: clean frames, encode faster)"
    )
    ap.add_argument(
        "--scene",
        choices=("camera", "cuts"),
        default="camera",
        help="camera: moving object on a lit gradient; cuts: a new scene every frame (where presets differ)",
    )
    ap.add_argument(
        "--rounds",
        type=int,
        default=5,
        help="floor/import pairs per codec (median round shown; the codec alone varies +-10 %% per round)",
    )
    ap.add_argument(
        "--warmup",
        type=int,
        default=1,
        help="untimed floor/import pairs per codec before the rounds (first-use costs out of both sides)",
    )
    ap.add_argument("--keep", help="keep the bag and the dataset in this directory")
    args = ap.parse_args()
    os.environ.setdefault("SVT_LOG", "1")
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="recorder_import_bench_"))
    work.mkdir(parents=True, exist_ok=True)
    bag, out = work / "bag", work / "dataset"
    shutil.rmtree(bag, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    try:
        t = time.perf_counter()
        meta = write_bag(bag, args.seconds, args.noise, args.scene)
        t_write = time.perf_counter() - t
        print(
            f"bag: {meta['seconds']:.0f} s, {meta['camera_frames']} VGA rgb8 frames @30 fps (scene {args.scene}) + "
            f"{meta['joint_msgs']} JointState @100 Hz x2, noise +-{args.noise}, {meta['bytes'] / 1e6:.0f} MB mcap (written in {t_write:.1f} s)"
        )
        t, c = time.perf_counter(), time.process_time()
        n = read_only(bag)
        t_read, c_read = time.perf_counter() - t, time.process_time() - c
        t, c = time.perf_counter(), time.process_time()
        read_only(bag, zero_copy=True)
        t_read_mapped, c_read_mapped = time.perf_counter() - t, time.process_time() - c
        t, c = time.perf_counter(), time.process_time()
        frames = align_and_convert(bag, contract())
        t_align, c_align = time.perf_counter() - t, time.process_time() - c
        sources = scene_frames(
            60, noise=args.noise, scene=args.scene
        )  # what write_bag put in the bag, cycled
        t, c, yuv = time.perf_counter(), time.process_time(), None
        for k in range(frames):  # part of the floor and of the import alike
            yuv = rgb_to_yuv420p(sources[k % len(sources)], out=yuv)
        t_yuv, c_yuv = time.perf_counter() - t, time.process_time() - c
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        real = meta["seconds"]
        rows = [
            ("baseline 0: real time", real, None),
            (f"baseline 1: rosbags read+deserialize ({n} msgs)", t_read, c_read),
            ("the import's reader (mapped MCAP) + deserialize", t_read_mapped, c_read_mapped),
            ("stage 2: + align + convert (no writer)", t_align, c_align),
            ("RGB->I420 alone (writer's converter, in the floor)", t_yuv, c_yuv),
        ]
        results = []
        truth = [sources[k % len(sources)] for k in range(frames)]
        for spec in args.codecs.split(","):
            _, _, settings = encoder_settings(spec)
            floor_path = work / "floor.mp4"
            vcodec, preset = parse_spec(spec)
            options = {"preset": preset} if preset is not None else {}
            floor_runs, import_runs = [], []
            # Untimed: what a process pays once (the import's first parquet write imports numpy.ma via
            # pyarrow, the floor's first encoder and muxer) stays out of the first round of either side.
            for _ in range(args.warmup):
                bare_encode(lambda i: sources[i % len(sources)], frames, spec, floor_path)
                shutil.rmtree(out, ignore_errors=True)
                import_bags([bag], contract(), out, vcodec=vcodec, progress=False, writer_options=options)
            for _ in range(args.rounds):  # floor and import alternate: a load change hits both alike
                floor_runs.append(bare_encode(lambda i: sources[i % len(sources)], frames, spec, floor_path))
                shutil.rmtree(out, ignore_errors=True)
                t, c, m = time.perf_counter(), time.process_time(), time.thread_time()
                summary = import_bags(
                    [bag], contract(), out, vcodec=vcodec, progress=False, writer_options=options
                )
                # this thread reads the bag, aligns, converts RGB -> I420 and writes parquet; the
                # rest of the process CPU is the encoder thread and the codec's own threads
                import_runs.append((time.perf_counter() - t, time.process_time() - c, time.thread_time() - m))
                if summary.video_settings != settings:
                    raise RuntimeError(
                        f"import used {summary.video_settings!r}, floor {settings!r}: not equal settings"
                    )
            # the table shows the round with the median import CPU; the ratios are medians over rounds
            k = sorted(range(args.rounds), key=lambda r: import_runs[r][1])[args.rounds // 2]
            t_enc, c_enc = floor_runs[k]
            t_full, c_full, main_full = import_runs[k]
            cpu_ratios = [import_runs[r][1] / floor_runs[r][1] for r in range(args.rounds)]
            speed_ratios = [floor_runs[r][0] / import_runs[r][0] for r in range(args.rounds)]
            q_floor = psnr(truth, decode(floor_path))
            rows.append((f"baseline 2: PyAV encode alone ({spec})", t_enc, c_enc))
            q_import = psnr(truth, list(DatasetReader(out).video_frames("observation.images.front", 0)))
            rows.append((f"full import ({spec}, {summary.frames} frames)", t_full, c_full))
            results.append(
                (
                    spec,
                    settings,
                    t_full,
                    c_full,
                    t_enc,
                    c_enc,
                    q_floor,
                    q_import,
                    summary,
                    cpu_ratios,
                    speed_ratios,
                    main_full,
                )
            )
        rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        # Wall time depends on what else runs on the machine; CPU time (all threads) much less so.
        # "2 free cores" = real / (CPU / 2): what two idle cores would give with main thread and
        # encoder fully overlapped (an upper bound).
        head = f"{'stage':<50}{'wall s':>8}{'CPU s':>8}{'frames/s':>10}{'x real (wall)':>15}"
        print(head + f"{'x real (2 free cores)':>23}")
        for name, secs, cpu in rows:
            est = f"{real / (cpu / 2):>23.1f}" if cpu else ""
            cpu_text = f"{cpu:>8.2f}" if cpu else f"{'':>8}"
            print(f"{name:<50}{secs:>8.2f}{cpu_text}{frames / secs:>10.1f}{real / secs:>15.1f}{est}")
        print(
            "per codec (floor = bare PyAV, same frames, same settings; PSNR over RGB vs the source frames; "
            f"{args.rounds} timed round(s) after {args.warmup} untimed warm-up pair(s)):"
        )
        for (
            spec,
            settings,
            t_full,
            c_full,
            _t_enc,
            c_enc,
            q_floor,
            q_import,
            summary,
            cpu_ratios,
            speed_ratios,
            main_full,
        ) in results:
            ratio, est = real / t_full, real / (c_full / 2)
            verdict = "PASS" if ratio >= 10 else ("PASS on 2 free cores (est.)" if est >= 10 else "FAIL")
            speed, cpu = (
                float(np.median(speed_ratios)),
                float(np.median(cpu_ratios)),
            )  # medians over the rounds
            print(
                f"  [{spec}] settings (floor and import): {settings}\n"
                f"    import vs floor: throughput {speed:.2f}x (target >= 0.9: {'PASS' if speed >= 0.9 else 'FAIL'}), "
                f"CPU {cpu:.2f}x (target <= 1.1: {'PASS' if cpu <= 1.1 else 'FAIL'}); "
                f"per round: throughput {', '.join(f'{x:.2f}' for x in speed_ratios)}, "
                f"CPU {', '.join(f'{x:.2f}' for x in cpu_ratios)}\n"
                f"    CPU split (median round): import {c_full:.2f} s = main thread {main_full:.2f} s (bag read, "
                f"align, RGB->I420, image stats, parquet) + encoder/codec threads {c_full - main_full:.2f} s; "
                f"floor {c_enc:.2f} s (RGB->I420 + codec)\n"
                f"    quality: floor PSNR mean {q_floor[0]:.2f} dB, worst frame {q_floor[1]:.2f} dB; "
                f"import mean {q_import[0]:.2f} dB, worst frame {q_import[1]:.2f} dB\n"
                f"    vs real time: {ratio:.1f}x wall, {est:.1f}x on 2 free cores (est.) (target >= 10x: {verdict}); "
                f"frames {summary.frames}, dropped ticks {summary.dropped_ticks}"
            )
        print(f"peak RSS: {rss_before:.0f} MB before the imports, {rss_after:.0f} MB after (process max)")
        print(
            f"load average after the run: {os.getloadavg()[0]:.1f} (2 cores shared; encoders are CPU-bound)"
        )
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
