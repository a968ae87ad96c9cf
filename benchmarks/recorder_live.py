"""Live recording benchmark: 3 cameras 640x480 @ 30 fps + 2 joint-state streams @ 100 Hz, published by
another process, recorded by the `recorder` node (LeRobot dataset, video encoded live) and, in the
same run, recorded by the same node to a raw mcap bag (mode raw, the baseline: what rosbag2-style
recording costs on the same topics).

    source env.sh && python benchmarks/recorder_live.py [--seconds 30] [--vcodec libx264] [--modes dataset,raw]
        [--hot-path-rounds 5]

Printed per run: frames, dropped ticks (target 0), messages dropped by backpressure, recorder CPU
(% of one core, mean over the episode, includes its encoder threads), stamp->writer latency (the
frame handed to the video encoders; stamp = capture time of the sample) or stamp->mcap latency
(message written to the bag), the save time at episode end (encoder flush + commit), and bytes on disk.

Then, for the dataset run: the encoder settings, the codec's floor (bare PyAV encoding the very frames
the recorder stored, rebuilt from live_sources' pattern, with the same options: benchmarks/video_floor.py)
as CPU % of one core over the episode beside the recorder's, and the quality: PSNR of the decoded
frames of the dataset (and of the floor's file) against the published source frames, per camera.

First, in this process (no DDS, nothing else running): the recorder worker's per-frame work on one
VGA rgb8 frame, from the serialized message (what its raw subscription delivers) to the encoder's
input: decode, the contract's image check and conversion (``decode_image``, what ``make_frame``
calls), and the encoder's own pass (RGB -> I420 into a recycled buffer, ``CameraEncoder.put``).
Three ways, interleaved round by round on the same frames: rclpy's ``deserialize_message`` (the
recorder's decoder up to the change that brought ``decode_message``), the recorder's decoder
(``lerobot_core.ros.serialized.decode_message``, which the policy node's camera subscriptions use too), and the
floor: the I420 conversion of a numpy view of the same bytes (bare numpy + OpenCV, no decoding at all). All three must hand the encoder the same bits.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil
import yaml
from process_groups import interrupt_and_reap
from video_floor import bare_encode, encoder_settings, frame_psnr, iter_decoded

from lerobot_dataset import DatasetReader
from lerobot_dataset import format as fmt
from lerobot_dataset.mp4 import iter_frames

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "src" / "lerobot_recorder" / "test" / "live_sources.py"
sys.path.insert(0, str(SOURCES.parent))
from live_sources import camera_image, camera_shift, gradient_base  # noqa: E402

CAMERAS = ("front", "wrist", "side")  # camera number i in live_sources = position here

# 900 kB images over Fast DDS on loopback: best-effort loses most fragmented samples as soon as the
# receiving socket buffer overflows (default net.core.rmem_max here), so publisher and recorder use
# reliable QoS for the cameras (--image-qos sensor to see the difference).
IMAGE_QOS = "reliable"
CONTRACT = {
    "fps": 30,
    "robot_type": "so101_follower",
    "task": "benchmark",
    "defaults": {"max_staleness": 0.5},
    "features": {
        "observation.state": {
            "topic": "/joint_states",
            "joints": ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"],
            "policy": "interpolate",
            "rate": 100,
        },
        "action": {
            "topic": "/leader/joint_states",
            "joints": ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"],
            "policy": "hold",
            "rate": 100,
        },
        **{
            f"observation.images.{c}": {
                "topic": f"/cameras/{c}/image_raw",
                "policy": "nearest",
                "tolerance": 0.034,  # one frame period: independent cameras are not in phase
                "qos": IMAGE_QOS,
            }
            for c in CAMERAS
        },
    },
}


def find_recorder() -> str:
    install = Path(os.environ.get("LEROBOT_ROS_INSTALL", ROOT / "install"))  # env.sh: this distro's
    exe = install / "lerobot_recorder" / "lib" / "lerobot_recorder" / "recorder"
    if not exe.exists():
        sys.exit(f"{exe} not found: run ./setup.sh first")
    return str(exe)


def dir_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def identify_seq(frame: np.ndarray, camera: int, base: np.ndarray, residues: dict[int, list[int]]) -> int:
    """Sequence number of the published image a decoded frame shows (see live_sources.camera_image).

    The red channel ramps 0..255 across the base, so the roll shows as the column where the rows'
    mean drops from ~255 to ~0 (refined against the ramp itself: compression blurs the edge by a
    column); the roll gives seq modulo the width, the top-left block's gray level seq % 256.
    """
    w = base.shape[1]
    profile = frame[8:, :, 0].astype(np.float32).mean(axis=0)
    ramp = base[0, :, 0].astype(np.float32)
    edge = int(np.argmax(np.roll(profile, 1) - profile))
    shift = min(
        ((edge + d) % w for d in range(-3, 4)),
        key=lambda sh: float(np.sum((np.roll(ramp, sh) - profile) ** 2)),
    )
    block = float(frame[:8, :8].mean())
    best = None
    for m in residues[shift]:
        for j in range(256):
            seq = m + w * j
            err = abs(seq % 256 - block)
            if best is None or err < best[0]:
                best = (err, seq)
    return best[1]


def quality_and_floor(root: Path, spec: str, work: Path) -> list[dict]:
    """Per camera of episode 0: PSNR of the dataset's decoded frames against the published frames,
    then the floor (bare PyAV, same frames, same options) with its CPU, wall and PSNR."""
    reader = DatasetReader(root)
    meta = reader.episode_meta(0)
    out = []
    for i, cam in enumerate(CAMERAS):
        key = f"observation.images.{cam}"
        h, w, _ = reader.features[key]["shape"]
        base = gradient_base(h, w)
        residues: dict[int, list[int]] = {}
        for q in range(w):
            residues.setdefault(camera_shift(q, i, w), []).append(q)
        path = root / fmt.video_path(key, meta[f"videos/{key}/chunk_index"], meta[f"videos/{key}/file_index"])
        seqs, values = [], []
        frames = iter_frames(
            path,
            float(meta[f"videos/{key}/from_timestamp"]),
            float(meta[f"videos/{key}/to_timestamp"]),
            reader.fps,
        )
        for frame in frames:
            seq = identify_seq(frame, i, base, residues)
            seqs.append(seq)
            values.append(frame_psnr(camera_image(base, seq, i), frame))
        floor_path = work / f"floor_{cam}.mp4"
        wall, cpu = bare_encode(
            lambda k, seqs=seqs, i=i, base=base: camera_image(base, seqs[k], i), len(seqs), spec, floor_path
        )
        floor_values = [
            frame_psnr(camera_image(base, seqs[k], i), f) for k, f in enumerate(iter_decoded(floor_path))
        ]
        if len(floor_values) != len(seqs):
            raise SystemExit(f"floor {floor_path}: {len(floor_values)} frames decoded, {len(seqs)} encoded")
        floor_path.unlink()
        out.append(
            {
                "camera": cam,
                "frames": len(seqs),
                "psnr": (float(np.mean(values)), float(np.min(values))),
                "floor_psnr": (float(np.mean(floor_values)), float(np.min(floor_values))),
                "floor_wall": wall,
                "floor_cpu": cpu,
            }
        )
    return out


def hot_path(rounds: int, frames: int = 30) -> None:
    """Per-frame cost of the recorder worker from a serialized VGA image to the encoder's input."""
    from rclpy.serialization import deserialize_message, serialize_message
    from sensor_msgs.msg import Image

    from lerobot_core.contract import Contract
    from lerobot_core.contract.extraction import decode_image
    from lerobot_core.contract.schema import IMAGE
    from lerobot_core.image_conversion import fill_image_msg
    from lerobot_core.ros.serialized import decode_message
    from lerobot_dataset.video import rgb_to_yuv420p

    h, w = 480, 640
    src = Contract.from_dict(CONTRACT).images["observation.images.front"]
    base = gradient_base(h, w)
    data = [
        serialize_message(fill_image_msg(Image(), camera_image(base, k, 0), "rgb8")) for k in range(frames)
    ]
    size = h * w * 3  # the pixels end the message (Image.data is its last field; VGA needs no padding)
    out = np.empty((h * 3 // 2, w), np.uint8)
    ways = {
        "rclpy deserialize_message (before)": lambda d: decode_image(src, deserialize_message(d, Image)),
        "recorder decode_message (now)": lambda d: decode_image(src, decode_message(d, IMAGE, Image)),
        "floor: numpy view + I420": lambda d: np.frombuffer(d, np.uint8, size, len(d) - size).reshape(
            h, w, 3
        ),
    }
    per_frame: dict[str, list[float]] = {k: [] for k in ways}
    for _ in range(rounds):
        yuv = []
        for label, rgb_of in ways.items():
            t0 = time.process_time()
            for d in data:
                rgb_to_yuv420p(rgb_of(d), out=out)
            per_frame[label].append((time.process_time() - t0) / frames * 1e3)
            yuv.append(out.copy())
        if any(not np.array_equal(yuv[0], y) for y in yuv[1:]):
            raise SystemExit("hot path: the three ways hand the encoder different bits")
    floor = float(np.median(per_frame["floor: numpy view + I420"]))
    before = float(np.median(per_frame["rclpy deserialize_message (before)"]))
    print(
        f"hot path, one {w}x{h} rgb8 frame from serialized message to encoder input (CPU ms per frame, "
        f"median of {rounds} interleaved rounds of {frames} frames; identical I420 bits from all three):"
    )
    for label, values in per_frame.items():
        med = float(np.median(values))
        print(
            f"  {label:<36} {med:6.2f} ms (min {min(values):.2f})  {med / floor:5.2f}x floor  "
            f"{before / med:5.2f}x faster than before"
        )


def run_once(mode: str, seconds: float, vcodec: str, preset: int, work: Path, env: dict) -> dict:
    contract = work / "contract.yaml"
    contract.write_text(yaml.safe_dump(CONTRACT))
    params = {
        "autostart": True,
        "contract": str(contract),
        "dataset_root": str(work / f"ds_{mode}"),
        "raw_dir": str(work / f"raw_{mode}"),
        "mode": mode,
        "vcodec": vcodec,
        "preset": preset,
        "auto_record": True,
        "num_episodes": 1,
        "episode_time_s": float(seconds),
        "reset_time_s": 0.0,
        "exit_when_done": True,
    }
    pfile = work / f"params_{mode}.yaml"
    pfile.write_text(yaml.safe_dump({"/**": {"ros__parameters": params}}))
    log = work / f"recorder_{mode}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [find_recorder(), "--ros-args", "--params-file", str(pfile)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        ps = psutil.Process(proc.pid)
        cpu0 = None
        t_rec = None
        samples = []
        t_start = time.monotonic()
        while proc.poll() is None:
            if time.monotonic() - t_start > seconds + 120:
                proc.send_signal(signal.SIGINT)  # no data / stuck: stop (the episode is saved)
                proc.wait(60)
                break
            text = log.read_text(errors="replace")
            try:
                times = ps.cpu_times()
            except psutil.NoSuchProcess:
                break
            busy = times.user + times.system + times.children_user + times.children_system
            if cpu0 is None and "recording episode 0" in text:
                cpu0, t_rec = busy, time.monotonic()
            elif cpu0 is not None and "saved:" not in text and "recorded:" not in text:
                samples.append((time.monotonic() - t_rec, busy - cpu0))
            time.sleep(0.25)
        proc.wait()
    text = log.read_text(errors="replace")
    m = re.search(
        r"episode 0 (?:saved|recorded): (\d+) frames.*?\((\d+) frames, (\d+) dropped ticks(.*?)\)", text
    )
    if not m:
        raise SystemExit(f"{mode}: no episode summary in the recorder log:\n{text[-3000:]}")
    frames, dropped = int(m.group(1)), int(m.group(3))
    lat = re.search(r"\[latency (.*?)\]", text)
    drops = re.search(r"backpressure: (\d+) message", text)
    cpu = samples[-1][1] / samples[-1][0] * 100 if samples and samples[-1][0] > 0 else float("nan")
    return {
        "mode": mode,
        "frames": frames,
        "expected": int(seconds * 30),
        "dropped_ticks": dropped,
        "backpressure_drops": int(drops.group(1)) if drops else 0,
        "cpu_percent": cpu,
        "cpu_seconds": samples[-1][1] if samples else float("nan"),  # recording + save (encoder flush)
        "latency": lat.group(1) if lat else "n/a",
        "bytes": dir_size(work / f"ds_{mode}") + dir_size(work / f"raw_{mode}"),
        "returncode": proc.returncode,
        "log": str(log),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=30.0, help="episode length [s] (issue: 20-60)")
    ap.add_argument(
        "--vcodec", default="libsvtav1", help="video codec of the dataset run (LeRobot default libsvtav1)"
    )
    ap.add_argument(
        "--preset", default="", help="encoder preset ('' = writer default, LeRobot's M10; x264: ultrafast...)"
    )
    ap.add_argument("--modes", default="dataset,raw")
    ap.add_argument("--keep", action="store_true", help="keep the recordings (printed path)")
    ap.add_argument("--image-qos", choices=("reliable", "sensor"), default="reliable")
    ap.add_argument(
        "--hot-path-rounds",
        type=int,
        default=5,
        help="rounds of the in-process per-frame measurement (0 = skip)",
    )
    args = ap.parse_args()
    global IMAGE_QOS
    IMAGE_QOS = args.image_qos
    for c in CAMERAS:
        CONTRACT["features"][f"observation.images.{c}"]["qos"] = IMAGE_QOS
    env = dict(os.environ, ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST", PYTHONUNBUFFERED="1")
    env.setdefault("ROS_DOMAIN_ID", "42")
    work = Path(tempfile.mkdtemp(prefix="recorder-live-bench-"))
    print(
        f"recorder_live: 3 cameras 640x480 rgb8 @ 30 fps + 2 x JointState @ 100 Hz from another process; "
        f"{args.seconds:g} s episode; {os.cpu_count()} CPU(s); load average {os.getloadavg()[0]:.1f} at start; "
        f"image QoS {args.image_qos}"
    )
    spec = args.vcodec + (f":{args.preset}" if args.preset else "")
    print(f"dataset video settings: {encoder_settings(spec)[2]}")
    if args.hot_path_rounds > 0:
        hot_path(args.hot_path_rounds)
    results, src_cpu = [], []
    for mode in [m for m in args.modes.split(",") if m]:
        # a fresh source process per run: no DDS state (unacknowledged samples of the previous
        # recorder) carries over from one run to the next
        # cameras and joint states from two processes (a camera driver and a robot driver): a
        # reliable 900 kB publish that waits for the reader must not stall the joint stream
        base = [sys.executable, str(SOURCES), "--width", "640", "--height", "480", "--fps", "30"]
        cam_args = ["--cameras", ",".join(CAMERAS), "--joint-topics", "", "--image-qos", args.image_qos]
        cam_log = work / f"camera_source_{mode}.log"
        srcs = [
            subprocess.Popen(
                base + extra,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            for extra, out in (
                (cam_args + ["--camera-threads"], open(cam_log, "wb")),
                (["--cameras", "", "--joint-rate", "100"], subprocess.DEVNULL),
            )
        ]
        try:
            time.sleep(2.0)
            src_ps = [psutil.Process(p.pid) for p in srcs]
            for p in src_ps:
                p.cpu_percent(None)
            results.append(run_once(mode, args.seconds, args.vcodec, args.preset, work, env))
            src_cpu.append(sum(p.cpu_percent(None) for p in src_ps))
        finally:
            interrupt_and_reap(srcs, 10)
            summary = [ln for ln in cam_log.read_text(errors="replace").splitlines() if "cameras front" in ln]
            results[-1]["source_summary"] = summary[-1].split("cameras ", 1)[1] if summary else "n/a"
    src_cpu = sum(src_cpu) / max(len(src_cpu), 1)
    print(f"source processes CPU: {src_cpu:.0f}% of one core (mean over the runs)")
    print(f"{'mode':8} {'frames':>9} {'dropped':>8} {'bp-drops':>8} {'CPU %':>7} {'MB':>8}  latency")
    for r in results:
        print(
            f"{r['mode']:8} {r['frames']:>4}/{r['expected']:<4} {r['dropped_ticks']:>8} {r['backpressure_drops']:>8} "
            f"{r['cpu_percent']:>7.0f} {r['bytes'] / 1e6:>8.1f}  {r['latency']}"
        )
    for r in results:  # the publisher's side: were frames captured on time and sent without blocking?
        print(f"camera source during {r['mode']}: {r.get('source_summary', 'n/a')}")
    by = {r["mode"]: r for r in results}
    if "dataset" in by and "raw" in by and by["raw"]["cpu_percent"] > 0:
        d, raw = by["dataset"], by["raw"]
        print(
            f"ratio dataset/raw-mcap: CPU {d['cpu_percent'] / raw['cpu_percent']:.2f}x, "
            f"disk {d['bytes'] / max(raw['bytes'], 1):.3f}x (raw mcap is the baseline)"
        )
    if "dataset" in by:
        d = by["dataset"]
        cams = quality_and_floor(work / "ds_dataset", spec, work)
        frames = sum(c["frames"] for c in cams)
        floor_cpu = sum(c["floor_cpu"] for c in cams)
        floor_percent = floor_cpu / args.seconds * 100
        rec_cpu = d["cpu_seconds"]
        print(
            f"floor: bare PyAV, the same {' + '.join(str(c['frames']) for c in cams)} frames, same settings "
            f"({encoder_settings(spec)[2]}): CPU {floor_cpu:.1f} s ({floor_cpu / frames * 1e3:.1f} ms/frame) "
            f"= {floor_percent:.0f}% of one core over the {args.seconds:g} s episode, "
            f"wall {sum(c['floor_wall'] for c in cams):.1f} s (one camera after the other)"
        )
        print(
            f"recorder (dataset mode): CPU {rec_cpu:.1f} s from the episode's start to its save "
            f"({rec_cpu / frames * 1e3:.1f} ms per stored frame) = {rec_cpu / floor_cpu:.2f}x the floor (it also "
            "receives the images over DDS, aligns and writes parquet)"
        )
        print("quality (PSNR over RGB of the decoded frames vs the published frames, mean / worst frame):")
        for c in cams:
            print(
                f"  {c['camera']:6} recorder {c['psnr'][0]:.2f} / {c['psnr'][1]:.2f} dB, "
                f"floor {c['floor_psnr'][0]:.2f} / {c['floor_psnr'][1]:.2f} dB ({c['frames']} frames)"
            )
    print(f"load average at the end: {os.getloadavg()[0]:.1f} (2 cores shared; encoders are CPU-bound)")
    print(f"logs: {work}")
    if not args.keep:
        for r in results:
            for sub in (f"ds_{r['mode']}", f"raw_{r['mode']}"):
                shutil.rmtree(work / sub, ignore_errors=True)
    return 0 if all(r["returncode"] == 0 for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
