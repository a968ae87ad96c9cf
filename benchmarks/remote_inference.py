"""Remote inference figures: the robot side (simulated SO-101 + policy node, inference: remote) driven by an
inference side (policy node, inference: serve) over DDS, at a list of injected round-trip latencies.

    source env.sh
    python benchmarks/remote_inference.py [--latencies-ms 0 25 50 100 200] [--loss-percent 0]
        [--seconds 20 | --episodes 20] [--seed 1000] [--local] [--policy-path DIR] [--contract NAME]

    python benchmarks/remote_inference.py --images [--jpeg-qualities 50 75 90 95] [--image-seeds 5]

Per latency: success (sim episodes that ended in success / episodes ended; with --episodes, the first N
episodes from --seed on, seed i = --seed + i, the same seeds at every latency), the robot-side command
rate and its period jitter (|period - 1/fps| p50/p99 of joint_commands as received by this process,
so it includes one DDS hop), chunk age at arrival on the robot side (p50/p99, robot clock: now minus the
chunk's observation stamp; the local row: when the robot's own node publishes it), the leading actions a
chunk skipped (local row: from policy/action_chunk), holds (held_steps / steps from policy/status), and bandwidth between the two
sides (serialized bytes per second of the topics that would cross the link: the observations the
inference side reads, and the chunks). Latency and loss are injected by the inference-side node
(link_delay_ms, link_loss_percent: application level; the kernel's netem is not available here). Both
sides run on this machine over loopback; across a real link see
src/lerobot_bringup/test/test_remote_inference_netns.py.

--local adds the baseline first: the same checkpoint served in the robot's own policy node
(`lerobot-launch deploy_sim_so101`, the same sim, seeds and contract, no inference host).

With --episodes, the floor comes first: the same checkpoint on the same seeds in `lerobot-sim-eval`'s
lockstep loop (one observation and one action per sim step, no clock, a new chunk when the queue is
empty as LeRobot schedules it, no per-step bound, the realtime sim's 300-step limit), i.e. what the
policy makes when serving costs nothing. Outcomes are read from the sim's `sim/episode_info` (the step
that ends an episode), and each episode's seed is checked.

The default checkpoint is the small random-init env-state ACT test fixture: it moves, it does not solve
the task, so success is 0 with it. Give a trained one (scripts/closed_loop.py --observation env_state)
and seeds no demo used; measure on a quiet machine.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import threading
import time

import numpy as np
from process_groups import interrupt_and_reap


def percentiles(values, qs=(50, 99)) -> str:
    if not len(values):
        return "-"
    return " / ".join(f"{np.percentile(values, q):.1f}" for q in qs)


class Probe:
    """Subscribes to what the figures are made of; counts bytes of the link's topics."""

    def __init__(self, node, fps: float, local: bool = False):
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
        from rclpy.serialization import serialize_message
        from sensor_msgs.msg import JointState

        from lerobot_core.time import stamp_to_ns
        from lerobot_msgs.msg import ActionChunk, EpisodeInfo, PolicyStatus

        self.node, self.fps = node, fps
        self.cmd_t: list[float] = []
        self.ages_ms: list[float] = []
        self.skipped: list[int] = []  # local rows: leading actions each chunk skipped
        self.bytes = 0
        self.status = None
        self.ended: dict[int, tuple[int, bool]] = {}  # sim episode index -> (seed, success)
        self._ser, self._stamp = serialize_message, stamp_to_ns
        latched = QoSProfile(
            depth=5, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
        )
        node.create_subscription(
            JointState, "/joint_commands", lambda m: self.cmd_t.append(time.monotonic()), 10
        )
        node.create_subscription(ActionChunk, "/policy/remote_chunk", self._on_chunk, 10)
        if local:  # the robot's own chunks: their age when published and what they skipped (no link)
            node.create_subscription(ActionChunk, "/policy/action_chunk", self._on_local_chunk, 10)
        node.create_subscription(
            PolicyStatus, "/policy/status", lambda m: setattr(self, "status", m), latched
        )
        node.create_subscription(JointState, "/joint_states", self._count, qos_profile_sensor_data)
        reliable = QoSProfile(depth=50, reliability=ReliabilityPolicy.RELIABLE)
        node.create_subscription(EpisodeInfo, "/sim/episode_info", self._on_episode_info, reliable)
        from geometry_msgs.msg import PoseStamped

        node.create_subscription(PoseStamped, "/sim/cube_pose", self._count, qos_profile_sensor_data)

    def _count(self, msg):
        self.bytes += len(self._ser(msg))

    def _age_ms(self, msg) -> float:
        return (self.node.get_clock().now().nanoseconds - self._stamp(msg.header.stamp)) / 1e6

    def _on_chunk(self, msg):
        self.ages_ms.append(self._age_ms(msg))
        self._count(msg)

    def _on_local_chunk(self, msg):
        self.ages_ms.append(self._age_ms(msg))
        self.skipped.append(msg.actions_skipped)

    def _on_episode_info(self, msg):
        if msg.terminated or msg.truncated:  # the step that ended the episode
            self.ended[msg.episode_index] = (msg.seed, msg.is_success)


def floor(args) -> dict:
    """The lockstep row: `lerobot-sim-eval` with the same checkpoint, seeds and step limit."""
    import json
    import tempfile

    from lerobot_core.ament import find_executable

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "eval.json")
        cmd = [str(find_executable("lerobot_sim", "lerobot-sim-eval")), "--env", "so101_cube"]
        cmd += ["--policy", args.policy_path, "--episodes", str(args.episodes), "--seed", str(args.seed)]
        cmd += ["--max-steps", "0", "--output", out, "--cameras"]  # the env's own 300 steps, as in real time
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(
                f"the lockstep floor failed ({' '.join(cmd)}):\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
            )
        episodes = json.loads(open(out).read())["per_episode"]
    return {"delay_ms": "lockstep", "success": f"{sum(e['success'] for e in episodes)}/{len(episodes)}"}


def run_one(args, delay_ms: float | None) -> dict:
    """One row: `delay_ms` None = the local baseline (deploy_sim_so101), else the remote pair."""
    import rclpy

    from lerobot_core.ament import find_executable

    launch = str(find_executable("lerobot_bringup", "lerobot-launch"))
    common = [f"policy_path:={args.policy_path}", f"contract:={args.contract}", f"seed:={args.seed}"]
    env = dict(os.environ, MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl"))
    profile = "deploy_sim_so101" if delay_ms is None else "deploy_remote_robot"
    robot = subprocess.Popen(
        [launch, profile, *common, *(["sim:=true"] if delay_ms is not None else []), "cameras:=['']"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    gpu = None if delay_ms is None else subprocess.Popen(
        [launch, "deploy_remote_gpu", *common[:2], f"link_delay_ms:={delay_ms}", f"link_loss_percent:={args.loss_percent}"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    log: list[str] = []  # the robot side's output, for a start-up that fails
    threading.Thread(target=lambda: log.extend(line.rstrip() for line in robot.stdout), daemon=True).start()
    rclpy.init()
    node = rclpy.create_node("remote_inference_bench")
    probe = Probe(node, args.fps, local=delay_ms is None)
    try:
        end = time.monotonic() + 120  # start-up: until the robot side commands
        while time.monotonic() < end and not (probe.status is not None and probe.status.steps > 0):
            rclpy.spin_once(node, timeout_sec=0.1)
        if probe.status is None or probe.status.steps == 0:
            tail = "\n".join(log[-30:])
            raise SystemExit(f"{profile}: no command within 120 s of the start; its output ends:\n{tail}")
        probe.cmd_t.clear(), probe.ages_ms.clear(), probe.skipped.clear()
        probe.bytes, s0 = 0, probe.status
        t0 = time.monotonic()

        def measuring() -> bool:
            if args.episodes:  # until episodes 0..N-1 have ended (an hour at most)
                ended = probe.ended  # filled by spin_once below, on this thread
                return time.monotonic() - t0 < 3600 and not all(i in ended for i in range(args.episodes))
            return time.monotonic() - t0 < args.seconds

        while measuring():
            rclpy.spin_once(node, timeout_sec=0.05)
        elapsed, s1 = time.monotonic() - t0, probe.status
    finally:
        node.destroy_node()
        rclpy.shutdown()
        interrupt_and_reap([p for p in (gpu, robot) if p is not None], 20)
    periods = np.diff(probe.cmd_t)
    ended = {i: r for i, r in probe.ended.items() if not args.episodes or i < args.episodes}
    wrong = {i: seed for i, (seed, _) in ended.items() if seed != args.seed + i}
    if wrong:
        raise SystemExit(f"{profile}: episodes ran on other seeds than --seed {args.seed} + i: {wrong}")
    steps = (s1.steps - s0.steps) if s0 and s1 else 0
    held = (s1.held_steps - s0.held_steps) if s0 and s1 else 0
    return {
        "delay_ms": "local" if delay_ms is None else f"{delay_ms:.0f}",
        "success": f"{sum(success for _, success in ended.values())}/{len(ended)}",
        "rate_hz": len(probe.cmd_t) / elapsed,
        "jitter_ms": percentiles(np.abs(periods - 1 / args.fps) * 1e3),
        "age_ms": percentiles(probe.ages_ms),
        "skipped": percentiles(probe.skipped),
        "holds": f"{held}/{steps + held}",
        "kB_s": probe.bytes / elapsed / 1e3,
    }


def image_figures(args) -> None:
    """--images: what JPEG costs and changes on the link, ROS-free: rendered SO-101 sim frames (640x480,
    front and wrist), encoded at each quality: bytes per frame and per second at --fps per camera, and the
    largest change of the policy's predicted chunk when every camera it reads is JPEG-decoded instead of
    raw (resized to its inputs). The policy: --policy-path when it reads cameras, else the ACT fixture."""
    from types import SimpleNamespace

    from lerobot_core.ament import share_path
    from lerobot_core.image_conversion import compressed_msg_to_rgb, encode_compressed
    from lerobot_policy_node.observation import rgb_to_chw_float
    from lerobot_runtime import load_policy, read_policy_config
    from lerobot_sim.envs.so101_cube import SO101CubeEnv

    path = share_path("lerobot_runtime") / "test/fixtures/act_small/pretrained_model"
    if args.policy_path and read_policy_config(args.policy_path)[1].image_features:
        path = args.policy_path
    policy = load_policy(path)
    shapes = dict(policy.config.image_features)  # observation.images.<camera> -> (3, H, W)
    print(f"policy: {path} (cameras {[k.rsplit('.', 1)[-1] for k in shapes]})")
    env = SO101CubeEnv(cameras=("front", "wrist"), image_height=480, image_width=640)
    frames = []
    for seed in range(args.image_seeds):
        obs, _ = env.reset(seed=seed)
        frames.append(obs)
    env.close()

    def chunk(images: dict, state):
        batch = {"observation.state": state[None].astype(np.float32)}
        for key, shape in shapes.items():
            batch[key] = rgb_to_chw_float(images[key.rsplit(".", 1)[-1]], shape)[None]
        return np.asarray(policy.predict_action_chunk(batch))[0]

    print(
        f"{len(frames)} sim frames per camera, 640x480 rgb8 = {640 * 480 * 3 / 1e3:.0f} kB raw ({640 * 480 * 3 * args.fps / 1e6:.1f} MB/s at {args.fps:g} fps)"
    )
    print(
        f"{'quality':>7} {'front kB/frame':>15} {'front MB/s':>10} {'wrist kB/frame':>15} {'wrist MB/s':>10} {'max |d action| rad':>19}"
    )
    for q in args.jpeg_qualities:
        sizes = {"front": [], "wrist": []}
        diffs = []
        for obs in frames:
            decoded = {}
            for cam in sizes:
                fmt, data = encode_compressed(obs["pixels"][cam], "jpeg", q)
                sizes[cam].append(len(data))
                decoded[cam] = compressed_msg_to_rgb(SimpleNamespace(format=fmt, data=data))
            state = np.asarray(obs["agent_pos"], dtype=np.float64)
            diffs.append(float(np.abs(chunk(decoded, state) - chunk(obs["pixels"], state)).max()))
        f, w = np.mean(sizes["front"]), np.mean(sizes["wrist"])
        print(
            f"{q:7d} {f / 1e3:15.1f} {f * args.fps / 1e6:10.2f} {w / 1e3:15.1f} {w * args.fps / 1e6:10.2f} {max(diffs):19.2e}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--latencies-ms", type=float, nargs="*", default=[0.0, 25.0, 50.0, 100.0, 200.0])
    ap.add_argument("--loss-percent", type=float, default=0.0)
    ap.add_argument("--seconds", type=float, default=20.0, help="measured time per latency, after start-up")
    ap.add_argument(
        "--episodes", type=int, default=0, help="instead of --seconds: until sim episodes 0..N-1 have ended"
    )
    ap.add_argument(
        "--seed", type=int, default=1000, help="the first sim episode's seed (episode i: seed + i)"
    )
    ap.add_argument(
        "--local", action="store_true", help="first a row with the policy served on the robot side"
    )
    ap.add_argument("--fps", type=float, default=30.0)
    ap.add_argument("--policy-path", default="", help="default: the env-state ACT test fixture")
    ap.add_argument("--contract", default="so101_sim_env_state_contract")
    ap.add_argument(
        "--images", action="store_true", help="only the image figures: JPEG size and action change"
    )
    ap.add_argument("--jpeg-qualities", type=int, nargs="+", default=[50, 75, 90, 95])
    ap.add_argument("--image-seeds", type=int, default=5, help="--images: sim resets (frames) per camera")
    args = ap.parse_args()
    if args.images:
        image_figures(args)
        return
    if not args.policy_path:
        from lerobot_core.ament import share_path

        args.policy_path = str(share_path("lerobot_runtime") / "test/fixtures/act_env_state/pretrained_model")
    span = f"episodes {args.episodes} (seeds {args.seed}..)" if args.episodes else f"{args.seconds:g} s"
    print(
        f"policy {args.policy_path}, contract {args.contract}, {span} per latency, loss {args.loss_percent:g} %"
    )
    print(
        f"{'RTT ms':>7} {'success':>8} {'rate Hz':>8} {'jitter p50/p99 ms':>18} {'age p50/p99 ms':>15} {'skip p50/p99':>13} {'holds':>10} {'kB/s':>7}"
    )
    if args.episodes:
        r = floor(args)
        print(f"{r['delay_ms']:>7} {r['success']:>8}   (no clock: one action per sim step)", flush=True)
    for delay in ([None] if args.local else []) + list(args.latencies_ms):
        r = run_one(args, delay)
        print(
            f"{r['delay_ms']:>7} {r['success']:>8} {r['rate_hz']:8.1f} {r['jitter_ms']:>18} {r['age_ms']:>15} {r['skipped']:>13} "
            f"{r['holds']:>10} {r['kB_s']:7.1f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
