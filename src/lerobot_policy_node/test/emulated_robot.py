"""A small emulated arm for the policy node tests, run as its own process.

Publishes `joint_states` (100 Hz) and an rgb8 camera `cameras/front/image_raw` (30 Hz, 320x240,
a pattern that follows the joints), and moves its joints toward the latest command received on
any of the three command topics (first-order lag, bounded speed). Options:
    --camera-stop-after S   stop publishing images after S seconds (stale input)
SIGUSR1 stops the images too, when the test has seen what it waits for (stale input on cue).
    --duration S            exit after S seconds
    --jpeg-quality Q        also publish cameras/front/image_raw/compressed (JPEG at quality Q)
"""

import argparse
import signal
import time

import numpy as np
import rclpy
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import CompressedImage, Image, JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory

from lerobot_core.image_conversion import encode_compressed, fill_image_msg

JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]


def camera_image(pos) -> np.ndarray:
    """The camera's 320x240 picture of the arm at joint positions `pos` (the tests compute it too)."""
    img = np.zeros((240, 320, 3), np.uint8)
    img[..., 0] = int(127 + 100 * np.tanh(pos[0]))
    img[:120, :, 1] = int(127 + 100 * np.tanh(pos[1]))
    img[:, :160, 2] = 200
    return img


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--camera-stop-after", type=float, default=-1.0)
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--jpeg-quality", type=int, default=-1)
    args = ap.parse_args()
    camera_stopped = {"on_cue": False}
    signal.signal(signal.SIGUSR1, lambda *_: camera_stopped.update(on_cue=True))
    rclpy.init()
    node = rclpy.create_node("emulated_robot")
    pos = np.zeros(6)
    target = np.zeros(6)
    t0 = time.monotonic()
    commands = {"n": 0}

    def set_target(values, names=None):
        nonlocal target
        v = np.asarray(values, float)
        if names:
            order = {n: i for i, n in enumerate(names)}
            v = np.array([v[order[j]] if j in order else target[k] for k, j in enumerate(JOINTS)])
        if v.shape == (6,) and np.all(np.isfinite(v)):
            target = v
            commands["n"] += 1

    cmd_qos = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
    node.create_subscription(
        JointState, "joint_commands", lambda m: set_target(m.position, list(m.name)), cmd_qos
    )
    node.create_subscription(
        Float64MultiArray, "forward_position_controller/commands", lambda m: set_target(m.data), cmd_qos
    )
    node.create_subscription(
        JointTrajectory,
        "joint_trajectory_controller/joint_trajectory",
        lambda m: set_target(m.points[0].positions, list(m.joint_names)) if m.points else None,
        cmd_qos,
    )
    pub_js = node.create_publisher(JointState, "joint_states", QoSProfile(depth=10))
    pub_img = node.create_publisher(Image, "cameras/front/image_raw", qos_profile_sensor_data)
    pub_jpeg = node.create_publisher(
        CompressedImage, "cameras/front/image_raw/compressed", qos_profile_sensor_data
    )

    def joints_tick():
        nonlocal pos
        pos = pos + np.clip(target - pos, -0.02, 0.02)
        msg = JointState(name=JOINTS, position=pos.tolist(), velocity=[0.0] * 6, effort=[0.0] * 6)
        msg.header.stamp = node.get_clock().now().to_msg()
        pub_js.publish(msg)

    def camera_tick():
        if camera_stopped["on_cue"]:
            return
        if args.camera_stop_after >= 0 and time.monotonic() - t0 > args.camera_stop_after:
            return
        img = camera_image(pos)
        msg = fill_image_msg(Image(), img, "rgb8")
        msg.header.stamp = node.get_clock().now().to_msg()
        msg.header.frame_id = "front"
        pub_img.publish(msg)
        if args.jpeg_quality >= 0:
            comp = CompressedImage(header=msg.header)
            comp.format, comp.data = encode_compressed(img, "jpeg", args.jpeg_quality)
            pub_jpeg.publish(comp)

    node.create_timer(0.01, joints_tick)
    node.create_timer(1 / 30, camera_tick)
    try:
        while rclpy.ok() and time.monotonic() - t0 < args.duration:
            rclpy.spin_once(node, timeout_sec=0.05)
    except KeyboardInterrupt:
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == "__main__":
    main()
