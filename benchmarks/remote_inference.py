"""Remote inference figures: the robot side (simulated SO-101 + policy node, inference: remote) driven by an
inference side (policy node, inference: serve) over DDS, at a list of injected round-trip latencies.

    source env.sh
    python benchmarks/remote_inference.py [--latencies-ms 0 25 50 100 200] [--loss-percent 0]
        [--seconds 20 | --episodes 20] [--seed 1000] [--local] [--policy-path DIR] [--contract NAME]
        [--lerobot-async [--lerobot-python PY] [--lerobot-aggregate weighted_average]]

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

A checkpoint that reads cameras is served as it was trained: the sim renders the cameras it reads at its
input size, with the front + wrist contract (so101_sim_contract) unless --contract names another; the
inference host reads them JPEG-compressed (deploy_remote_gpu's default), and the kB/s of the remote rows
counts those JPEG streams (the local row's does not: no image crosses a link there).

--lerobot-async adds, per latency, the same checkpoint, sim and seeds through LeRobot's own async
inference: its `policy_server` and its `robot_client` with this stack's robot plugin (--robot.type=ros)
on the realtime sim, run by the LeRobot venv of --lerobot-python, with LeRobot's defaults (a new chunk
when the queue is below half, overlapping actions merged 0.3 old + 0.7 new; --lerobot-aggregate) and
actions_per_chunk = the policy's chunk. The latency is injected in the server, at the application level
as for the stack's rows: each observation is enqueued half the round trip after it arrived, each chunk
returned half the round trip after it was computed; --loss-percent drops observations and chunks alike.
Its age column is the chunk's age when it returns (now minus its observation's timestamp: one clock),
its kB/s the pickled observations and chunks on the gRPC link, its holds the control periods in which the
client sent no command (its queue was empty; the sim holds the last one) out of the periods measured.
LeRobot's robot interface has no environment state: an env-state policy cannot run there.

The default checkpoint is the small random-init env-state ACT test fixture: it moves, it does not solve
the task, so success is 0 with it. Give a trained one (scripts/closed_loop.py --observation env_state)
and seeds no demo used; measure on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
from process_groups import interrupt_and_reap


def percentiles(values, qs=(50, 99)) -> str:
    if not len(values):
        return "-"
    return " / ".join(f"{np.percentile(values, q):.1f}" for q in qs)


class Probe:
    """Subscribes to what the figures are made of; counts bytes of the link's topics."""

    def __init__(
        self, node, fps: float, local: bool = False, cameras: tuple[str, ...] = (), link: bool = True
    ):
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
        if link:  # the stack's rows: the chunks that cross the link, the node's status
            node.create_subscription(ActionChunk, "/policy/remote_chunk", self._on_chunk, 10)
            node.create_subscription(
                PolicyStatus, "/policy/status", lambda m: setattr(self, "status", m), latched
            )
        if local:  # the robot's own chunks: their age when published and what they skipped (no link)
            node.create_subscription(ActionChunk, "/policy/action_chunk", self._on_local_chunk, 10)
        node.create_subscription(JointState, "/joint_states", self._count, qos_profile_sensor_data)
        if cameras and link and not local:  # what the inference host reads: each camera's JPEG stream
            from sensor_msgs.msg import CompressedImage

            for cam in cameras:
                node.create_subscription(
                    CompressedImage,
                    f"/cameras/{cam}/image_raw/compressed",
                    self._count,
                    qos_profile_sensor_data,
                )
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


DEFAULT_LEROBOT_PYTHON = os.path.join(
    os.environ.get("LEROBOT_REF_VENV") or os.path.expanduser("~/.cache/lerobot_ros/lerobot-0.4.4"),
    "bin",
    "python",
)
# what this process's environment must not pass on to the LeRobot venv (its own Python path and ROS wheels'
# bootstrap: see tests/test_lerobot_plugins.py)
NOT_INHERITED = (
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "PYTHONHOME",
    "LD_LIBRARY_PATH",
    "_ROS_WHEELS_BOOTSTRAP_COMPLETE",
)
REPO = Path(__file__).resolve().parent.parent

# LeRobot's policy_server with the link injected at the application level, and a tap: argv = tap file,
# round trip [ms], loss [%], then the server's own flags. Observations are enqueued half the round trip
# after they arrive (a timer: the client's call returns at once, as it would on a real link), chunks are
# returned half the round trip after they are computed; a lost one is dropped. The tap writes one JSON
# line per observation and per chunk: its time, its pickled size and, for a chunk, its age on return.
POLICY_SERVER_WITH_LINK = """
import json, pickle, random, sys, threading, time
from lerobot.async_inference import policy_server as ps

tap, half, loss = open(sys.argv[1], "a"), float(sys.argv[2]) / 2e3, float(sys.argv[3]) / 100
lock, rng = threading.Lock(), random.Random(0)

def log(**record):
    with lock:
        tap.write(json.dumps(record) + "\\n")
        tap.flush()

enqueue, predict, get_actions = (ps.PolicyServer._enqueue_observation, ps.PolicyServer._predict_action_chunk,
                                 ps.PolicyServer.GetActions)

def enqueue_later(self, obs):
    log(kind="obs", t=time.time(), bytes=len(pickle.dumps(obs)))
    if rng.random() < loss:
        return False
    threading.Timer(half, enqueue, (self, obs)).start()
    return True

def predict_and_stamp(self, obs):
    self.tap_obs_time = obs.get_timestamp()
    return predict(self, obs)

def get_actions_later(self, request, context):
    reply = get_actions(self, request, context)
    data = getattr(reply, "data", b"")
    if not data:
        return reply
    if rng.random() < loss:
        return ps.services_pb2.Empty()
    time.sleep(half)
    log(kind="chunk", t=time.time(), bytes=len(data), age_ms=(time.time() - self.tap_obs_time) * 1e3)
    return reply

ps.PolicyServer._enqueue_observation = enqueue_later
ps.PolicyServer._predict_action_chunk = predict_and_stamp
ps.PolicyServer.GetActions = get_actions_later
sys.argv = [sys.argv[0], *sys.argv[4:]]
ps.serve()
"""


def policy_cameras(path: str) -> tuple[tuple[str, ...], tuple[int, int] | None]:
    """The cameras a checkpoint reads and their (height, width) input size (none: ((), None))."""
    from lerobot_runtime import read_policy_config

    features = read_policy_config(path)[1].image_features  # observation.images.<camera> -> (3, H, W)
    if not features:
        return (), None
    sizes = {tuple(shape[1:]) for shape in features.values()}
    if len(sizes) > 1:
        raise SystemExit(f"{path}: its cameras have different sizes {sorted(sizes)}; the sim renders one")
    return tuple(key.rsplit(".", 1)[-1] for key in features), sizes.pop()


def sim_cameras(args) -> list[str]:
    """The profile arguments that make the sim render what the policy reads (nothing for a state policy)."""
    if not args.cameras:
        return ["cameras:=['']"]
    h, w = args.image_size
    return [f"cameras:=[{','.join(args.cameras)}]", f"image_height:={h}", f"image_width:={w}"]


def lerobot_env(python: str) -> dict:
    """The LeRobot venv's environment: this process's DDS settings, the venv first on PATH, this checkout's
    plugin and lerobot_core sources first on its path (the venv's editable installs may be another's)."""
    env = {k: v for k, v in os.environ.items() if k not in NOT_INHERITED}
    venv = Path(python).parent.parent
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    plugins = [REPO / "lerobot_plugins" / p for p in ("lerobot_robot_ros", "lerobot_camera_ros")]
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in [*plugins, REPO / "src" / "lerobot_core"])
    env["HF_HUB_OFFLINE"] = "1"
    env.setdefault(
        "HF_LEROBOT_CALIBRATION", os.path.join(tempfile.gettempdir(), "lerobot_ros_plugin_calibration")
    )
    env.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def lerobot_async_row(args, delay_ms: float) -> dict:
    """One row through LeRobot's async inference: the realtime sim (sim_so101_robot, auto reset, --seed),
    LeRobot's policy_server with the injected link, its robot_client with --robot.type=ros."""
    import rclpy
    import yaml

    from lerobot_core.ament import find_executable
    from lerobot_core.contract.shipped import find_contract
    from lerobot_runtime import read_policy_config

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        contract = yaml.safe_load(Path(find_contract("so101_sim_robot")).read_text())
        h, w = args.image_size
        for key in list(contract["features"]):
            if key.startswith("observation.images."):
                if key.rsplit(".", 1)[-1] in args.cameras:
                    contract["features"][key].update(height=h, width=w)
                else:
                    del contract["features"][key]
        (tmp / "contract.yaml").write_text(yaml.safe_dump(contract))
        port, tap = free_port(), tmp / "tap.jsonl"
        env = lerobot_env(args.lerobot_python)
        launch = str(find_executable("lerobot_bringup", "lerobot-launch"))
        sim = subprocess.Popen(
            [launch, "sim_so101_robot", "auto_reset:=true", f"seed:={args.seed}", f"fps:={args.fps:g}",
             f"image_height:={h}", f"image_width:={w}"],
            env=dict(os.environ, MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl")),
            stdout=open(tmp / "sim.log", "w"), stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        server = subprocess.Popen(
            [args.lerobot_python, "-c", POLICY_SERVER_WITH_LINK, str(tap), str(delay_ms), str(args.loss_percent),
             "--host=127.0.0.1", f"--port={port}", f"--fps={args.fps:g}"],
            env=env, cwd=tmp, stdout=open(tmp / "server.log", "w"), stderr=subprocess.STDOUT,
            start_new_session=True,  # cwd: LeRobot's server writes logs/ where it runs
        )  # fmt: skip
        procs, client = [sim, server], None

        def logs() -> str:
            return "".join(
                f"\n--- {n}.log:\n{(tmp / f'{n}.log').read_text(errors='replace')[-2500:]}"
                for n in ("sim", "server", "client")
                if (tmp / f"{n}.log").exists()
            )

        rclpy.init()
        node = rclpy.create_node("remote_inference_bench")
        probe = Probe(node, args.fps, cameras=args.cameras, link=False)
        try:
            end = time.monotonic() + 120
            while server.poll() is None and time.monotonic() < end:
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", port)) == 0:
                        break
                time.sleep(0.2)
            else:
                raise SystemExit(f"LeRobot's policy server did not listen on 127.0.0.1:{port}{logs()}")
            config = read_policy_config(args.policy_path)[1]
            client = subprocess.Popen(
                [args.lerobot_python, "-m", "lerobot.async_inference.robot_client", "--robot.type=ros",
                 f"--robot.contract={tmp / 'contract.yaml'}", "--robot.max_age_s=2",
                 f"--server_address=127.0.0.1:{port}", f"--policy_type={config.type}",
                 "--policy_device=cpu", f"--pretrained_name_or_path={Path(args.policy_path).absolute()}",
                 f"--actions_per_chunk={config.chunk_size}", "--chunk_size_threshold=0.5",
                 f"--aggregate_fn_name={args.lerobot_aggregate}", f"--fps={args.fps:g}",
                 f"--task={contract.get('task', '')}"],
                env=env, cwd=tmp, stdout=open(tmp / "client.log", "w"), stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
            procs.insert(0, client)
            end = time.monotonic() + 300  # start-up: until the client commands
            while time.monotonic() < end and not probe.cmd_t and all(p.poll() is None for p in procs):
                rclpy.spin_once(node, timeout_sec=0.1)
            if not probe.cmd_t:
                raise SystemExit(f"LeRobot's async inference: no command within 300 s of the start{logs()}")
            probe.cmd_t.clear()
            t0, wall0 = time.monotonic(), time.time()
            while (
                time.monotonic() - t0 < 3600
                and not all(i in probe.ended for i in range(args.episodes))
                and all(p.poll() is None for p in procs)
            ):
                rclpy.spin_once(node, timeout_sec=0.05)
            elapsed, wall1 = time.monotonic() - t0, time.time()
            dead = [
                n for n, p in zip(("client", "sim", "server"), procs, strict=True) if p.poll() is not None
            ]
            if dead:
                raise SystemExit(
                    f"LeRobot's async inference: {', '.join(dead)} exited during the run{logs()}"
                )
        finally:
            node.destroy_node()
            rclpy.shutdown()
            interrupt_and_reap(procs, 20)
        records = [json.loads(line) for line in tap.read_text().splitlines()] if tap.exists() else []
    window = [r for r in records if wall0 <= r["t"] <= wall1]
    ended = {i: r for i, r in probe.ended.items() if i < args.episodes}
    wrong = {i: seed for i, (seed, _) in ended.items() if seed != args.seed + i}
    if wrong:
        raise SystemExit(f"sim_so101_robot: episodes ran on other seeds than --seed {args.seed} + i: {wrong}")
    ticks = round(elapsed * args.fps)  # control periods; the client sends nothing in one its queue left empty
    return {
        "delay_ms": f"LR {delay_ms:.0f}",
        "success": f"{sum(success for _, success in ended.values())}/{len(ended)}",
        "rate_hz": len(probe.cmd_t) / elapsed,
        "jitter_ms": percentiles(np.abs(np.diff(probe.cmd_t) - 1 / args.fps) * 1e3),
        "age_ms": percentiles([r["age_ms"] for r in window if r["kind"] == "chunk"]),
        "skipped": "-",
        "holds": f"{max(0, ticks - len(probe.cmd_t))}/{ticks}",
        "kB_s": sum(r["bytes"] for r in window) / elapsed / 1e3,
    }


def floor(args) -> dict:
    """The lockstep row: `lerobot-sim-eval` with the same checkpoint, seeds and step limit."""
    import json
    import tempfile

    from lerobot_core.ament import find_executable

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "eval.json")
        cmd = [str(find_executable("lerobot_sim", "lerobot-sim-eval")), "--env", "so101_cube"]
        cmd += ["--policy", args.policy_path, "--episodes", str(args.episodes), "--seed", str(args.seed)]
        cmd += ["--max-steps", "0", "--output", out]  # the env's own 300 steps, as in real time
        cmd += ["--image-size", *map(str, args.image_size)] if args.cameras else ["--cameras"]
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
        [launch, profile, *common, *(["sim:=true"] if delay_ms is not None else []), *sim_cameras(args)],
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
    probe = Probe(node, args.fps, local=delay_ms is None, cameras=args.cameras)
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
    ap.add_argument(
        "--contract",
        default="",
        help="default: so101_sim_contract for a policy that reads cameras, else so101_sim_env_state_contract",
    )
    ap.add_argument(
        "--lerobot-async",
        action="store_true",
        help="after the stack's rows, the same latencies through LeRobot's policy_server + robot_client",
    )
    ap.add_argument(
        "--lerobot-python",
        default=DEFAULT_LEROBOT_PYTHON,
        help="--lerobot-async: the Python of a LeRobot venv with the plugins (scripts/make-lerobot-ref-venv.sh)",
    )
    ap.add_argument(
        "--lerobot-aggregate",
        default="weighted_average",
        help="--lerobot-async: robot_client's aggregate_fn_name (weighted_average, latest_only, average, conservative)",
    )
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
    args.cameras, args.image_size = policy_cameras(args.policy_path)
    if not args.contract:
        args.contract = "so101_sim_contract" if args.cameras else "so101_sim_env_state_contract"
    if args.lerobot_async and not args.cameras:
        ap.error(
            "--lerobot-async needs a policy that reads cameras: LeRobot's robot has no environment state"
        )
    if args.lerobot_async and not args.episodes:
        ap.error("--lerobot-async counts episodes: give --episodes")
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
    rows = [(run_one, None)] if args.local else []
    rows += [(run_one, d) for d in args.latencies_ms]
    rows += [(lerobot_async_row, d) for d in args.latencies_ms] if args.lerobot_async else []
    for measure, delay in rows:
        r = measure(args, delay)
        print(
            f"{r['delay_ms']:>7} {r['success']:>8} {r['rate_hz']:8.1f} {r['jitter_ms']:>18} {r['age_ms']:>15} {r['skipped']:>13} "
            f"{r['holds']:>10} {r['kB_s']:7.1f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
