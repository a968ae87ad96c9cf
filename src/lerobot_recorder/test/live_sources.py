"""A separate-process source for recorder tests and the live benchmark: cameras + joint states.

    python live_sources.py --cameras front,wrist --width 640 --height 480 --fps 30 \
        --joint-topics /joint_states,/leader/joint_states --joint-rate 100 [--duration 10]

Each camera publishes rgb8 sensor_msgs/Image on /cameras/<name>/image_raw (best effort, like a
camera driver) with header.stamp = capture time; the image carries its sequence number in the top
left 8x8 block (value = seq % 256) on a moving gradient. Joint states are SO-101 sinusoids.
--depth-cameras name:16UC1,name2:32FC1 adds depth cameras on /cameras/<name>/depth/image_raw
(depth_image(): a ramp that moves with seq, with invalid pixels). Runs until SIGINT/SIGTERM, or for
--duration seconds.
"""

from __future__ import annotations

import argparse
import math
import signal
import sys
import threading
import time

import numpy as np
import rclpy
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import Image, JointState

from lerobot_core.dds_transport import use_large_image_transport
from lerobot_core.image_conversion import fill_image_msg

# Set by --image-qos: "sensor" (best effort, like most camera drivers) or "reliable".
IMAGE_QOS = qos_profile_sensor_data
JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]


def gradient_base(height: int, width: int) -> np.ndarray:
    """The still scene every camera rolls: red ramps across, green down, blue diagonally."""
    yy, xx = np.mgrid[0:height, 0:width]
    base = np.stack([(xx * 255 // max(width - 1, 1)), (yy * 255 // max(height - 1, 1)), (xx + yy) % 256], -1)
    return base.astype(np.uint8)


def camera_shift(seq: int, camera: int, width: int) -> int:
    """Columns the base is rolled by in image `seq` of camera number `camera`."""
    return (seq * 3 + camera * 17) % width


def camera_image(base: np.ndarray, seq: int, camera: int) -> np.ndarray:
    """Image `seq` of camera number `camera`: the base rolled, seq % 256 in the top-left 8x8 block
    (the live benchmark rebuilds the published frames from this to measure video quality)."""
    img = np.roll(base, camera_shift(seq, camera, base.shape[1]), axis=1)
    img[:8, :8] = seq % 256
    return img


def depth_image(height: int, width: int, seq: int, encoding: str) -> np.ndarray:
    """Depth image `seq`: a ramp from 0.3 m across and down, moving 5 mm per image, with the top-left
    8x8 block at (100 + seq % 50) * 10 mm (the sequence marker) and the bottom-right 4x4 block invalid
    (0 in 16UC1, NaN in 32FC1). uint16 millimetres for 16UC1, float32 metres for 32FC1."""
    yy, xx = np.mgrid[0:height, 0:width]
    mm = 300.0 + 20.0 * xx + 7.0 * yy + 5.0 * (seq % 200)
    mm[:8, :8] = (100 + seq % 50) * 10.0
    if encoding == "32FC1":
        out = (mm / 1000.0).astype(np.float32)
        out[-4:, -4:] = np.nan
        return out
    out = mm.astype(np.uint16)
    out[-4:, -4:] = 0
    return out


class Sources(Node):
    def __init__(self, args):
        super().__init__("live_sources")
        self.args = args
        self.cams = [c for c in args.cameras.split(",") if c]
        self.depth_cams = dict(c.split(":", 1) for c in args.depth_cameras.split(",") if c)
        self.depth_pubs = {
            c: self.create_publisher(Image, f"/cameras/{c}/depth/image_raw", IMAGE_QOS)
            for c in self.depth_cams
        }
        self.img_pubs = {
            c: self.create_publisher(Image, f"/cameras/{c}/image_raw", IMAGE_QOS) for c in self.cams
        }
        self.joint_pubs = [
            self.create_publisher(JointState, t, QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE))
            for t in args.joint_topics.split(",")
            if t
        ]
        self.base = gradient_base(args.height, args.width)
        self.seq = 0
        self.jseq = 0
        self.t0 = time.monotonic()
        # per camera: capture stamps (ns) and publish() durations (s), for the exit summary
        self.stamps: dict[str, list[int]] = {c: [] for c in self.cams}
        self.publish_s: dict[str, list[float]] = {c: [] for c in self.cams}

    def publish_images(self) -> None:
        """All cameras at once (one capture instant, like a synchronized rig)."""
        for i in range(len(self.cams)):
            self.publish_camera(i)
        for cam, encoding in self.depth_cams.items():
            msg = Image()
            msg.header.stamp = self.get_clock().now().to_msg()
            msg.header.frame_id = f"{cam}_depth_optical"
            fill_image_msg(msg, depth_image(self.args.height, self.args.width, self.seq, encoding), encoding)
            self.depth_pubs[cam].publish(msg)
        self.seq += 1

    def publish_camera(self, i: int, seq: int | None = None) -> None:
        cam = self.cams[i]
        seq = self.seq if seq is None else seq
        img = camera_image(self.base, seq, i)
        msg = Image()
        now = self.get_clock().now()
        msg.header.stamp = now.to_msg()
        msg.header.frame_id = f"{cam}_optical"
        fill_image_msg(msg, img, "rgb8")
        t0 = time.perf_counter()
        self.img_pubs[cam].publish(msg)
        self.publish_s[cam].append(time.perf_counter() - t0)
        self.stamps[cam].append(now.nanoseconds)

    def camera_summary(self) -> str:
        """Per camera: largest capture-stamp gap, gaps over 1.5 periods, publish() p99 / max."""
        period = 1.0 / self.args.fps
        parts = []
        for cam in self.cams:
            gaps = np.diff(np.asarray(self.stamps[cam], dtype=np.int64)) / 1e9
            pub = np.asarray(self.publish_s[cam] or [0.0])
            parts.append(
                f"{cam}: {len(self.stamps[cam])} frames, max stamp gap {gaps.max() * 1e3 if gaps.size else 0:.1f} ms, "
                f"{int((gaps > 1.5 * period).sum())} gaps > 1.5 periods, publish() p99 "
                f"{np.percentile(pub, 99) * 1e3:.1f} ms max {pub.max() * 1e3:.1f} ms"
            )
        return "; ".join(parts)

    def publish_joints(self) -> None:
        stamp = self.get_clock().now().to_msg()
        t = time.monotonic() - self.t0
        for k, pub in enumerate(self.joint_pubs):
            msg = JointState()
            msg.header.stamp = stamp
            msg.name = list(JOINTS)
            msg.position = [0.5 * math.sin(2 * math.pi * t / 4.0 + i + k * 0.1) for i in range(len(JOINTS))]
            msg.velocity = [0.0] * len(JOINTS)
            pub.publish(msg)
        self.jseq += 1


def run_periodic(period: float, fn, stop: threading.Event) -> None:
    """Absolute-time schedule (no drift); a late tick is published at once, not skipped."""
    t_next = time.monotonic()
    while not stop.is_set():
        fn()
        t_next += period
        delay = t_next - time.monotonic()
        if delay > 0:
            stop.wait(delay)
        elif delay < -1.0:
            t_next = time.monotonic()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cameras", default="front")
    ap.add_argument("--width", type=int, default=160)
    ap.add_argument("--height", type=int, default=120)
    ap.add_argument("--fps", type=float, default=30.0)
    ap.add_argument("--depth-cameras", default="", help="name:16UC1,name:32FC1 (published with --cameras)")
    ap.add_argument("--joint-topics", default="/joint_states,/leader/joint_states")
    ap.add_argument("--joint-rate", type=float, default=100.0)
    ap.add_argument("--duration", type=float, default=0.0)
    ap.add_argument("--image-qos", choices=("sensor", "reliable"), default="sensor")
    ap.add_argument("--camera-threads", action="store_true", help="one publishing thread per camera")
    args, ros_args = ap.parse_known_args(argv)
    global IMAGE_QOS
    if args.image_qos == "reliable":
        IMAGE_QOS = QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE)
    use_large_image_transport()  # like the camera driver: images over shared memory on localhost
    rclpy.init(args=ros_args or None)
    node = Sources(args)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    threads = []
    if node.cams and not args.camera_threads:
        threads.append(
            threading.Thread(target=run_periodic, args=(1.0 / args.fps, node.publish_images, stop))
        )
    elif node.cams:  # one thread per camera, like independent camera drivers
        counters = [0] * len(node.cams)

        def camera_loop(i):
            def tick():
                node.publish_camera(i, counters[i])
                counters[i] += 1
                if i == 0:
                    node.seq = counters[0]

            run_periodic(1.0 / args.fps, tick, stop)

        threads += [threading.Thread(target=camera_loop, args=(i,)) for i in range(len(node.cams))]
    if node.joint_pubs:
        threads.append(
            threading.Thread(target=run_periodic, args=(1.0 / args.joint_rate, node.publish_joints, stop))
        )
    for t in threads:
        t.daemon = True
        t.start()
    print(
        f"live_sources: cameras {node.cams} {args.width}x{args.height}@{args.fps:g}, joints {args.joint_topics}",
        flush=True,
    )
    try:
        t_end = time.monotonic() + args.duration if args.duration > 0 else None
        while rclpy.ok() and not stop.is_set():
            if t_end is not None and time.monotonic() >= t_end:
                break
            time.sleep(0.05)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=2)
        print(f"live_sources: published {node.seq} image sets, {node.jseq} joint sets", flush=True)
        if node.cams:
            print(f"live_sources: cameras {node.camera_summary()}", flush=True)
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
