"""Policy node benchmarks: ACT inference latency vs LeRobot, control-loop jitter, pipeline latency.

    python benchmarks/policy_inference.py [--iters 20] [--threads 2] [--jitter-seconds 20]

1. Inference latency of the default ACT architecture (LeRobot defaults: dim_model 512, 4 encoder
   layers, 1 decoder layer, ResNet-18, chunk_size 100) on one 480x640 camera + 6-D state, batch 1,
   `--threads` torch threads. The baseline is LeRobot 0.4.4's own ACTPolicy (predict_action_chunk
   through its saved pre/post processors) run in the same benchmark as a subprocess of the
   lerobot reference venv (LEROBOT_REF_PYTHON, default $LEROBOT_REF_VENV/bin/python); it also
   creates the random-init checkpoint both sides load. Without it, only our figures are printed.
2. Control-loop period jitter |period - 1/rate| p50/p99 at 30 Hz and 100 Hz while inference runs
   continuously on the other thread (queue_mode ensemble: a new chunk is requested as soon as the
   previous one is merged), through the same PolicyController the node uses. Baselines: the loop
   without inference, and the machine's timer floor (benchmarks/rt_floor.c: a C loop at
   SCHED_FIFO 50 doing nothing but sleep to absolute deadlines; needs `cc`).
3. Observation-to-command latency excluding the model: sensor_msgs/Image + JointState conversion,
   alignment sample, resize/normalize to the model input, chunk merge, control tick, safety filter
   and command message construction.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

REF_PYTHON = os.environ.get("LEROBOT_REF_PYTHON") or os.path.join(
    os.environ.get("LEROBOT_REF_VENV") or os.path.expanduser("~/.cache/lerobot_ros/lerobot-0.4.4"),
    "bin",
    "python",
)
H, W = 480, 640

LEROBOT_SIDE = r"""
import json, sys, time, torch
from lerobot.configs.types import FeatureType, PolicyFeature
from lerobot.policies.act.configuration_act import ACTConfig
from lerobot.policies.act.modeling_act import ACTPolicy
from lerobot.policies.act.processor_act import make_act_pre_post_processors
import numpy as np
out, threads, H, W = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
torch.set_num_threads(threads)
torch.manual_seed(0)
cfg = ACTConfig(
    input_features={"observation.images.front": PolicyFeature(type=FeatureType.VISUAL, shape=(3, H, W)),
                    "observation.state": PolicyFeature(type=FeatureType.STATE, shape=(6,))},
    output_features={"action": PolicyFeature(type=FeatureType.ACTION, shape=(6,))},
    pretrained_backbone_weights=None, device="cpu")
policy = ACTPolicy(cfg).eval()
stats = {"observation.state": {"mean": torch.zeros(6), "std": torch.ones(6)},
         "action": {"mean": torch.zeros(6), "std": torch.ones(6)},
         "observation.images.front": {"mean": torch.full((3, 1, 1), 0.45), "std": torch.full((3, 1, 1), 0.25)}}
pre, post = make_act_pre_post_processors(cfg, dataset_stats=stats)
policy.save_pretrained(out); pre.save_pretrained(out); post.save_pretrained(out)
g = torch.Generator().manual_seed(1)
batch = {"observation.images.front": torch.rand((1, 3, H, W), generator=g),
         "observation.state": torch.randn((1, 6), generator=g)}
np.savez(out + "/bench_batch.npz", **{k: v.numpy() for k, v in batch.items()})
with torch.no_grad():
    chunk = post(policy.predict_action_chunk(pre(dict(batch))))
np.save(out + "/bench_chunk.npy", chunk.numpy())
print(json.dumps({"ready": True, "torch": torch.__version__}), flush=True)
for line in sys.stdin:  # one timed inference per request line
    with torch.no_grad():
        t0 = time.perf_counter()
        post(policy.predict_action_chunk(pre(dict(batch))))
        dt = time.perf_counter() - t0
    print(json.dumps({"t": dt}), flush=True)
"""


def pct(values, q):
    return float(np.percentile(np.asarray(values), q))


def bench_inference(args, workdir: Path) -> tuple[Path | None, dict]:
    """Interleaved rounds (LeRobot, native as shipped, native with direct convolutions only) so load
    changes hit all alike."""
    import torch

    from lerobot_runtime import load_policy

    torch.set_num_threads(args.threads)
    if not Path(REF_PYTHON).exists():
        print(f"(no lerobot reference venv at {REF_PYTHON}: baseline and figures skipped)")
        return None, {}
    ckpt = workdir / "act_default"
    ckpt.mkdir()
    server = subprocess.Popen(
        [REF_PYTHON, "-c", LEROBOT_SIDE, str(ckpt), str(args.threads), str(H), str(W)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        hello = json.loads(server.stdout.readline())
        res: dict = {"lerobot_torch": hello["torch"], "lerobot_ms": []}
        with np.load(ckpt / "bench_batch.npz") as d:
            batch = {k: d[k] for k in d.files}
        ref_chunk = np.load(ckpt / "bench_chunk.npy")
        policies = {}
        for label, use_winograd in (("native", True), ("native_direct_conv", False)):
            policies[label] = load_policy(ckpt)  # channels-last on CPU
            policies[label].set_winograd(use_winograd)
            chunk = policies[label].predict_action_chunk(batch)  # warm-up
            res[f"{label}_maxdiff"] = float(np.abs(chunk - ref_chunk).max())
            res[f"{label}_ms"] = []
        for _ in range(2):  # warm-up of the baseline
            server.stdin.write("run\n")
            server.stdin.flush()
            server.stdout.readline()
        for _ in range(args.iters):
            server.stdin.write("run\n")
            server.stdin.flush()
            res["lerobot_ms"].append(json.loads(server.stdout.readline())["t"] * 1000)
            for label, policy in policies.items():
                t0 = time.perf_counter()
                policy.predict_action_chunk(batch)
                res[f"{label}_ms"].append((time.perf_counter() - t0) * 1000)
    finally:
        server.stdin.close()
        server.wait(30)
    return ckpt, res


def bench_jitter(
    ckpt: Path, rate_hz: float, seconds: float, threads: int, inference: bool = True, priority: int = 0
) -> dict:
    import torch

    from lerobot_core.safety import SafetyFilter, SafetyLimits
    from lerobot_policy_node.action_queue import SchedulerConfig
    from lerobot_policy_node.controller import PolicyController
    from lerobot_policy_node.observation import ObservationBuilder, ObservationSpec
    from lerobot_runtime import load_policy

    torch.set_num_threads(threads)
    policy = load_policy(ckpt)
    policy.set_channels_last(True)
    obs = ObservationBuilder(
        ObservationSpec(
            state_names=tuple("abcdef"),
            image_shapes=dict(policy.config.image_features),
            fps=rate_hz,
            max_age_s=5.0,
        )
    )
    img = (np.random.default_rng(0).random((H, W, 3)) * 255).astype(np.uint8)
    sent = []
    ctl = PolicyController(
        policy,
        obs,
        SchedulerConfig(fps=rate_hz, n_action_steps=1, chunk_size=policy.config.chunk_size, mode="ensemble"),
        SafetyFilter(SafetyLimits.build(6, max_step=0.05)),
        publish_command=lambda cmd, held: sent.append(held),
        record_periods=True,
        run_inference=inference,
        control_priority=priority,
    )
    feeder_stop = time.monotonic() + seconds + 1.0

    def feed():  # camera at 30 Hz, joints at 100 Hz, like a real robot
        k = 0
        while time.monotonic() < feeder_stop:
            now = time.time_ns()
            obs.push_joints(list("abcdef"), np.zeros(6), now)
            if k % 3 == 0:
                obs.push_image("observation.images.front", img, now)
            k += 1
            time.sleep(0.01)

    import threading

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    time.sleep(0.1)
    ctl.start()
    time.sleep(seconds)
    ctl.stop()
    feeder.join()
    periods = np.asarray(ctl.stats.periods_s[5:])
    jitter_ms = np.abs(periods - 1.0 / rate_hz) * 1000
    return {
        "rate_hz": rate_hz,
        "ticks": len(periods),
        "chunks": ctl.stats.chunks,
        "p50_ms": pct(jitter_ms, 50),
        "p99_ms": pct(jitter_ms, 99),
        "max_ms": float(jitter_ms.max()),
        "mean_period_ms": float(periods.mean() * 1000),
        "inference_ms": 1000 * ctl.stats.inference_latency_sum_s / max(ctl.stats.chunks, 1),
        "note": ctl.priority_note,
    }


def cpu_times() -> list[int] | None:
    """The aggregate `cpu` line of /proc/stat (user nice system idle iowait irq softirq steal ...)."""
    try:
        return [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None


def steal_percent(before: list[int] | None, after: list[int] | None) -> float | None:
    """Share of CPU time the hypervisor gave to other guests between two cpu_times() readings."""
    if not before or not after or len(before) < 8:
        return None
    delta = [a - b for a, b in zip(after, before, strict=False)]
    total = sum(delta[:8])
    return 100.0 * delta[7] / total if total > 0 else None


def bench_floor(workdir: Path, rate_hz: float, seconds: float, priority: int) -> str | None:
    """The timer floor of this machine: benchmarks/rt_floor.c (C, absolute-deadline sleeps, no work)."""
    exe = workdir / "rt_floor"
    if not exe.exists():
        cc = shutil.which("cc") or shutil.which("gcc")
        if cc is None:
            return None
        subprocess.run([cc, "-O2", "-o", str(exe), str(Path(__file__).with_name("rt_floor.c"))], check=True)
    before = cpu_times()
    out = subprocess.run(
        [str(exe), str(rate_hz), str(int(rate_hz * seconds)), str(priority)],
        capture_output=True,
        text=True,
        check=True,
    )
    steal = steal_percent(before, cpu_times())
    return out.stdout.strip() + (f" steal {steal:.1f}" if steal is not None else " steal n/a")


def bench_pipeline(ckpt: Path, iters: int) -> dict:
    """Observation-to-command path with the model call excluded (timed around it)."""
    from sensor_msgs.msg import Image, JointState
    from std_msgs.msg import Float64MultiArray

    from lerobot_core.image_conversion import fill_image_msg, image_msg_to_rgb
    from lerobot_core.safety import SafetyFilter, SafetyLimits
    from lerobot_policy_node.action_queue import ActionScheduler, SchedulerConfig
    from lerobot_policy_node.observation import ObservationBuilder, ObservationSpec
    from lerobot_runtime import load_policy

    policy = load_policy(ckpt)
    norm = policy.pre.normalizer
    names = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
    obs = ObservationBuilder(ObservationSpec(tuple(names), dict(policy.config.image_features), 30.0, 1.0))
    sched = ActionScheduler(
        SchedulerConfig(fps=30.0, n_action_steps=100, chunk_size=100, refill_threshold=1.0)
    )
    safety = SafetyFilter(SafetyLimits.build(6, [-3] * 6, [3] * 6, 0.05))
    safety.reset(np.zeros(6))
    img_msg = fill_image_msg(
        Image(), (np.random.default_rng(0).random((H, W, 3)) * 255).astype(np.uint8), "rgb8"
    )
    chunk = np.zeros((100, 6), np.float32)
    import torch

    times = []
    for i in range(iters + 3):
        t0 = time.perf_counter_ns()
        now = time.time_ns()
        js = JointState(name=names, position=[0.1] * 6)
        obs.push_joints(js.name, js.position, now)
        obs.push_image("observation.images.front", image_msg_to_rgb(img_msg), now)
        values, _ = obs.sample(time.time_ns())
        batch = obs.to_policy_batch(values)
        with torch.inference_mode():
            _ = {k: norm.normalize(k, torch.from_numpy(v)) for k, v in batch.items()}
        # model excluded here
        ticket = sched.begin_inference()
        sched.submit(chunk, ticket)
        action = sched.tick()
        res = safety.apply(action)
        Float64MultiArray(data=[float(v) for v in res.command])
        if i >= 3:
            times.append((time.perf_counter_ns() - t0) / 1e6)
    return {"p50_ms": pct(times, 50), "p99_ms": pct(times, 99)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--jitter-seconds", type=float, default=20.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="policy-bench-") as tmp:
        ckpt, res = bench_inference(args, Path(tmp))
        if ckpt is None:
            return
        print(f"load average before: {os.getloadavg()[0]:.2f} (2 cores are shared with other work)")
        print(
            f"ACT default architecture, 1 camera {H}x{W}, batch 1, {args.threads} torch threads, "
            f"{args.iters} interleaved rounds"
        )
        base, base_min = statistics.median(res["lerobot_ms"]), min(res["lerobot_ms"])
        print(
            f"  LeRobot 0.4.4 ACTPolicy (torch {res['lerobot_torch']}): median {base:.1f} ms, min {base_min:.1f} ms"
        )
        for label in ("native", "native_direct_conv"):
            med, mn = statistics.median(res[f"{label}_ms"]), min(res[f"{label}_ms"])
            print(
                f"  lerobot_policy_node {label:<21}: median {med:.1f} ms ({med / base:.2f}x LeRobot), "
                f"min {mn:.1f} ms ({mn / base_min:.2f}x), max |chunk diff| {res[f'{label}_maxdiff']:.2e}"
            )
        for rate in (30.0, 100.0):
            floor = bench_floor(Path(tmp), rate, args.jitter_seconds, 50)
            if floor is None:
                print(f"{rate:.0f} Hz timer floor: no C compiler (cc) here, not measured")
            else:  # "SCHED_FIFO p50 x p99 y max z"
                f = floor.split()
                print(
                    f"{rate:.0f} Hz timer floor (benchmarks/rt_floor.c, C, {f[0]} 50, no work): "
                    f"period jitter p50 {f[2]} ms, p99 {f[4]} ms, max {f[6]} ms; "
                    f"hypervisor steal {f[8]}% of CPU time meanwhile"
                )
            for inference, priority, label in (
                (False, 0, "control loop alone (baseline)"),
                (True, 0, "with continuous inference"),
                (True, 50, "with continuous inference, control thread SCHED_FIFO 50"),
            ):
                j = bench_jitter(ckpt, rate, args.jitter_seconds, args.threads, inference, priority)
                extra = f", {j['chunks']} chunks of {j['inference_ms']:.0f} ms" if inference else ""
                note = f" [{j['note']}]" if j["note"] and "not permitted" in j["note"] else ""
                print(
                    f"{rate:.0f} Hz {label}{extra}: period jitter p50 {j['p50_ms']:.3f} ms, "
                    f"p99 {j['p99_ms']:.3f} ms, max {j['max_ms']:.2f} ms over {j['ticks']} ticks{note}"
                )
        p = bench_pipeline(ckpt, 200)
        print(
            f"observation-to-command latency excluding the model ({H}x{W} image, ACT input {H}x{W}): "
            f"p50 {p['p50_ms']:.2f} ms, p99 {p['p99_ms']:.2f} ms"
        )


if __name__ == "__main__":
    main()
