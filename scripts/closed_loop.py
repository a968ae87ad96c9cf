#!/usr/bin/env python
"""The closed loop in simulation, one command: record through ROS, train with LeRobot, deploy through ROS.

    source env.sh
    python scripts/closed_loop.py --demos 20 --steps 2000 --eval-episodes 20 --out outputs/closed_loop

1. records --demos scripted-expert episodes with `lerobot-launch record_sim_so101` (lockstep, sim
   time: the sim waits for the expert and the recorder, so no tick is dropped), seeds from 0; one demo
   is one sim episode, from its reset to the step the cube is lifted (or the sim's step limit);
2. trains ACT (or Diffusion Policy: --policy diffusion) with LeRobot's own `lerobot-train` (scripts/lerobot_train_offline.py, run by the
   interpreter of a LeRobot 0.4.4 venv: --lerobot-python, default $LEROBOT_REF_VENV/bin/python, else
   ~/.cache/lerobot_ros/lerobot-0.4.4/bin/python);
3. evaluates every saved checkpoint (the learning curve), the scripted expert and a random policy with
   `lerobot-sim-eval` through ROS (lockstep) on the same --eval-seed.. seeds, never used for demos;
4. writes <out>/metrics.json and prints #demos, training time and pc_success of each policy.

With --env metaworld --task TASK (e.g. reach-v3) the same loop runs on a Meta-World task: demos of its
scripted policy recorded with `lerobot-launch record_sim_metaworld` (hand state + Meta-World's 39-value
observation, no camera), and `lerobot-sim-eval --env metaworld --tasks TASK` for every policy.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from lerobot_core import cli

ROOT = Path(__file__).resolve().parent.parent
# the LeRobot 0.4.4 side venv of scripts/make-lerobot-ref-venv.sh
DEFAULT_LEROBOT_PYTHON = os.path.join(
    os.environ.get("LEROBOT_REF_VENV") or os.path.expanduser("~/.cache/lerobot_ros/lerobot-0.4.4"),
    "bin",
    "python",
)
# the recording profile of each env and the first demo's longest length [s sim time]
RECORD_PROFILE = {"so101_cube": "record_sim_so101", "metaworld": "record_sim_metaworld"}
EPISODE_TIME = {"so101_cube": 12.0, "metaworld": 7.0}  # the sims end theirs by 300 steps / 500 steps (80 Hz)
NORMALIZATION = {"VISUAL": "MEAN_STD", "STATE": "MEAN_STD", "ENV": "MEAN_STD", "ACTION": "MEAN_STD"}


def run(cmd: list[str], log: Path, env: dict | None = None) -> float:
    """Run ``cmd`` with its output in ``log``; returns the wall time; raises naming the step on failure."""
    print(f"$ {' '.join(cmd)}  (log {log})", flush=True)
    t0 = time.monotonic()
    with open(log, "w") as f:
        code = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT, env=env)
    took = time.monotonic() - t0
    if code != 0:
        tail = "".join(open(log, errors="replace").readlines()[-20:])
        raise SystemExit(
            f"{Path(sys.argv[0]).stem}: {cmd[0]} failed with code {code} after {took:.0f} s; {log}:\n{tail}"
        )
    return took


def dropped_ticks(log: Path) -> int:
    """Ticks the recorder dropped, summed over the episodes it saved (0 if `log` does not exist)."""
    if not log.exists():
        return 0
    lines = [line for line in open(log) if "dropped ticks" in line and "saved" in line]
    return sum(int(line.split(" dropped ticks")[0].rsplit(" ", 1)[-1]) for line in lines)


def train(args, dataset: Path, repo_id: str, policy: list[str], train_dir: Path, log: Path) -> float:
    """LeRobot's `lerobot-train` on `dataset` into `train_dir` (--steps, --save-freq, --batch-size of
    `args`); `policy` = the --policy.* arguments (a new policy's type and size, or --policy.path=...
    to start from a pretrained one). Returns the wall time."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", WANDB_MODE="disabled")
    threads = args.threads
    if threads:  # a small model's matmuls gain nothing from a second thread that waits for a busy core
        env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    cmd = [args.lerobot_python, str(ROOT / "scripts" / "lerobot_train_offline.py")]
    cmd += [f"--dataset.repo_id={repo_id}", f"--dataset.root={dataset}", "--dataset.video_backend=pyav"]
    cmd += policy
    cmd += ["--policy.device=cpu", "--policy.push_to_hub=false"]
    cmd += [
        f"--batch_size={args.batch_size}",
        f"--steps={args.steps}",
        f"--save_freq={args.save_freq}",
        "--log_freq=10",
        f"--num_workers={args.num_workers}",
        "--eval_freq=0",
        "--wandb.enable=false",
        f"--output_dir={train_dir}",
    ]
    return run(cmd, log, env=env)


def lr_schedule(args) -> list[str]:
    """lerobot-train flags for --lr-schedule: none for ACT's constant preset; for cosine, the preset's
    optimizer spelled out (AdamW, ACT's weight decay 1e-4) and LeRobot's warm-up + cosine decay over
    --steps (it scales the schedule to the run itself when the run is shorter)."""
    if args.lr_schedule == "constant":
        return []
    return [
        "--use_policy_training_preset=false",
        "--optimizer.type=adamw",
        f"--optimizer.lr={args.lr}",
        "--optimizer.weight_decay=1e-4",
        "--scheduler.type=cosine_decay_with_warmup",
        f"--scheduler.num_warmup_steps={min(500, args.steps // 10)}",
        f"--scheduler.num_decay_steps={args.steps}",
        f"--scheduler.peak_lr={args.lr}",
        f"--scheduler.decay_lr={args.lr / 100}",
    ]


def act_flags(args) -> list[str]:
    """lerobot-train's --policy.* flags for a new ACT: small (dim 128, 2 encoder layers, 1 decoder
    layer), its ResNet-18 from scratch (nothing downloaded), the chunk of --chunk-size."""
    n_action_steps = args.chunk_size if args.n_action_steps == 0 else args.n_action_steps or 10
    policy = ["--policy.type=act", "--policy.pretrained_backbone_weights=null"]
    policy += [f"--policy.chunk_size={args.chunk_size}", f"--policy.n_action_steps={n_action_steps}"]
    policy += ["--policy.dim_model=128", "--policy.dim_feedforward=512"]
    # LeRobot's ACT normalizes VISUAL, STATE and ACTION only: the cube pose would enter raw (a few
    # cm of variation on a 0.2 m offset); normalize it like the state
    policy += [f"--policy.normalization_mapping={json.dumps(NORMALIZATION)}"]
    policy += ["--policy.n_encoder_layers=2", "--policy.n_decoder_layers=1"]
    policy += [f"--policy.use_vae={str(args.vae).lower()}", f"--policy.optimizer_lr={args.lr}"]
    policy += [f"--policy.optimizer_lr_backbone={args.lr}"]
    return policy + lr_schedule(args)


def diffusion_flags(args) -> list[str]:
    """lerobot-train's --policy.* flags for a new Diffusion Policy: LeRobot's defaults (2 observation
    steps, horizon 16, 8 actions per chunk, its own AdamW + cosine preset, GroupNorm ResNet-18 from
    scratch) except a UNet of --down-dims, a crop of 7/8 of the camera image (random in training,
    centred when served) and DDIM with --inference-steps when served (it trains the same either way)."""
    h, w = args.image_size
    policy = ["--policy.type=diffusion", "--policy.pretrained_backbone_weights=null"]
    policy += ["--policy.use_group_norm=true", f"--policy.down_dims={json.dumps(args.down_dims)}"]
    # LeRobot's defaults: 8 actions run per chunk, at most horizon 16 - 2 observation steps + 1 = 15
    n_action_steps = 15 if args.n_action_steps == 0 else args.n_action_steps or 8
    policy += [f"--policy.n_action_steps={n_action_steps}", f"--policy.optimizer_lr={args.lr}"]
    if args.observation == "images":
        policy += [f"--policy.crop_shape=[{h * 7 // 8},{w * 7 // 8}]"]
    else:  # the cube pose, scaled to [-1, 1] like the state (LeRobot's Diffusion leaves ENV raw)
        mapping = {"VISUAL": "MEAN_STD", "STATE": "MIN_MAX", "ENV": "MIN_MAX", "ACTION": "MIN_MAX"}
        policy += [f"--policy.normalization_mapping={json.dumps(mapping)}"]
    policy += ["--policy.noise_scheduler_type=DDIM", f"--policy.num_inference_steps={args.inference_steps}"]
    return policy


def train_log(log: Path) -> list[str]:
    """The loss lines of a `lerobot-train` log, from "step:" on."""
    lines = [line.strip() for line in open(log) if " loss:" in line]
    return [line[line.find("step:") :] for line in lines]


def evaluate(policy: str, args, out: Path, name: str) -> dict:
    path = out / f"eval_{name}.json"
    env = getattr(args, "env", "so101_cube")
    cmd = ["lerobot-sim-eval", "--env", env, "--episodes", str(args.eval_episodes)]
    cmd += ["--policy", policy, "--output", str(path), "--seed", str(args.eval_seed)]
    if env == "metaworld":
        # the evaluator renders Meta-World's camera whatever the policy reads: the smallest image costs least
        cmd += ["--tasks", args.task, "--image-size", "32", "32"]
    elif args.observation == "env_state":
        cmd += ["--cameras"]  # none rendered: the policies read joints and the cube pose
    else:
        cmd += ["--image-size", str(args.image_size[0]), str(args.image_size[1])]
    if args.max_steps:
        cmd += ["--max-steps", str(args.max_steps)]
    took = run(cmd, out / f"eval_{name}.log")
    doc = json.loads(path.read_text())
    agg = doc["overall"] if "overall" in doc else doc["aggregated"]  # multi-task layout (metaworld) or not
    print(f"  {name}: pc_success {agg['pc_success']:.1f} ({took:.0f} s)", flush=True)
    return {"policy": policy, "pc_success": agg["pc_success"], "avg_max_reward": agg["avg_max_reward"]}


def add_train_eval_arguments(ap: argparse.ArgumentParser) -> None:
    """The training and evaluation flags closed_loop.py and dagger_round.py share."""
    ap.add_argument("--batch-size", type=cli.positive_int, default=8, help="training batch size")
    ap.add_argument(
        "--eval-episodes", type=cli.positive_int, default=20, help="evaluation episodes per policy"
    )
    ap.add_argument(
        "--eval-seed",
        type=cli.non_negative_int,
        default=1000,
        help="first eval seed (demos use seeds from 0, HIL episodes from --hil-seed)",
    )
    ap.add_argument(
        "--max-steps",
        type=cli.non_negative_int,
        default=150,
        help="eval episode step limit; 0 = the env's own limit (300 steps for so101_cube)",
    )
    ap.add_argument(
        "--lerobot-python",
        default=DEFAULT_LEROBOT_PYTHON,
        help="the Python of a LeRobot 0.4.4 venv that runs lerobot-train (scripts/make-lerobot-ref-venv.sh)",
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=cli.HelpFormatter)
    ap.add_argument(
        "--out",
        type=Path,
        default=ROOT / "outputs" / "closed_loop",
        help="folder for everything the run makes",
    )
    ap.add_argument(
        "--env",
        choices=tuple(RECORD_PROFILE),
        default="so101_cube",
        help="so101_cube: the simulated SO-101 lifting a cube; metaworld: one Meta-World task (--task)",
    )
    ap.add_argument(
        "--task",
        default="reach-v3",
        help="--env metaworld: the Meta-World task (one of its 50 v3 tasks, e.g. button-press-topdown-v3)",
    )
    ap.add_argument("--demos", type=cli.positive_int, default=20, help="recorded scripted-expert episodes")
    ap.add_argument(
        "--episode-time",
        type=cli.positive_float,
        default=None,
        help="longest demo [s sim time] (a demo is one sim episode; default: 12 for so101_cube, whose sim ends "
        "its own by 300 steps = 10 s; 7 for metaworld, 500 steps at 80 Hz)",
    )
    ap.add_argument(
        "--observation",
        choices=("env_state", "images"),
        default="env_state",
        help="env_state: joints + the cube's pose (observation.environment_state), no camera: trains in "
        "minutes on 2 CPU cores; images: joints + front and wrist cameras (a ResNet-18 from scratch)",
    )
    ap.add_argument(
        "--image-size",
        type=cli.positive_int,
        nargs=2,
        default=(96, 128),
        metavar=("H", "W"),
        help="camera size the sim renders and the policy sees (--observation images)",
    )
    ap.add_argument("--lr", type=cli.positive_float, default=1e-4, help="learning rate (policy and backbone)")
    ap.add_argument(
        "--lr-schedule",
        choices=("constant", "cosine"),
        default="constant",
        help="constant: ACT's preset (AdamW, --lr throughout); cosine: the same AdamW, a warm-up of 500 steps (a tenth "
        "of --steps if that is fewer), then --lr decayed to 1 %% of it by --steps (LeRobot's cosine_decay_with_warmup)",
    )
    ap.add_argument(
        "--policy",
        choices=("act", "diffusion"),
        default="act",
        help="the policy lerobot-train trains: act (--chunk-size, --vae, --lr-schedule) or diffusion "
        "(--down-dims, --inference-steps; LeRobot's own cosine schedule)",
    )
    ap.add_argument("--vae", action="store_true", help="ACT's VAE on (the scripted expert is unimodal)")
    ap.add_argument(
        "--down-dims",
        type=cli.positive_int,
        nargs=3,
        default=[128, 256, 512],
        metavar="C",
        help="diffusion: the UNet's channels per level (LeRobot's default 512 1024 2048 is 263 M parameters)",
    )
    ap.add_argument(
        "--inference-steps",
        type=cli.positive_int,
        default=10,
        help="diffusion: DDIM denoising steps per chunk when served (training uses 100 noise levels)",
    )
    ap.add_argument(
        "--threads",
        type=cli.number(int, minimum=-1),
        default=-1,
        help="torch threads for training (-1: 1 for env_state, all for images)",
    )
    ap.add_argument(
        "--num-workers", type=cli.non_negative_int, default=1, help="LeRobot data-loader worker processes"
    )
    ap.add_argument("--steps", type=cli.positive_int, default=2000, help="training steps")
    ap.add_argument(
        "--save-freq",
        type=cli.non_negative_int,
        default=500,
        help="checkpoint (and learning-curve point) every N steps",
    )
    ap.add_argument(
        "--chunk-size", type=cli.positive_int, default=20, help="ACT's chunk: actions per inference"
    )
    ap.add_argument(
        "--n-action-steps",
        type=cli.non_negative_int,
        default=None,
        help="actions run per chunk before the next inference (default: 10 for ACT, 8 for diffusion; "
        "0 = all: ACT's --chunk-size, diffusion's 15)",
    )
    add_train_eval_arguments(ap)
    ap.add_argument("--keep", action="store_true", help="reuse an existing dataset / training in --out")
    args = ap.parse_args()
    if args.env == "metaworld":
        if args.observation != "env_state":
            ap.error("--env metaworld records state only: --observation env_state")
        try:
            from lerobot_sim.envs.metaworld import task_names

            names = task_names()
        except ImportError as exc:
            ap.error(f"--env metaworld needs the metaworld package ({exc}); ./setup.sh installs it")
        if args.task not in names:
            ap.error(f"--task {args.task!r} is not a Meta-World task; tasks: {', '.join(names)}")
    if args.policy == "diffusion" and args.lr_schedule != "constant":
        ap.error("--lr-schedule is ACT's: --policy diffusion always uses LeRobot's warm-up + cosine preset")
    if args.episode_time is None:
        args.episode_time = EPISODE_TIME[args.env]
    if args.threads < 0:
        args.threads = 1 if args.observation == "env_state" else 0
    out = args.out.absolute()
    if out.exists() and not args.keep:
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    dataset = out / "dataset"
    metrics: dict = {"settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}}

    # 1. record through ROS, lockstep
    if not (dataset / "meta" / "info.json").exists():
        h, w = args.image_size
        cmd = ["lerobot-launch", RECORD_PROFILE[args.env], f"dataset_root:={dataset}"]
        cmd += [f"num_episodes:={args.demos}", f"episode_time_s:={args.episode_time}"]
        if args.env == "metaworld":
            cmd += [f"task:={args.task}"]  # state only: its contract has no camera
        elif args.observation == "env_state":
            cmd += ["reset_time_s:=0.0", "contract:=so101_sim_env_state_contract", "cameras:=['']"]
        else:
            cmd += ["reset_time_s:=0.0", f"image_height:={h}", f"image_width:={w}"]
        rec_s = run(cmd, out / "record.log")
        metrics["record_s"] = rec_s
    info = json.loads((dataset / "meta" / "info.json").read_text())
    metrics["demos"] = info["total_episodes"]
    metrics["demo_frames"] = info["total_frames"]
    metrics["record_dropped_ticks"] = dropped_ticks(out / "record.log")
    print(
        f"demos: {metrics['demos']} episodes, {metrics['demo_frames']} frames, "
        f"{metrics['record_dropped_ticks']} dropped ticks",
        flush=True,
    )

    # 2. train with LeRobot's lerobot-train
    train_dir = out / "train"
    if not (train_dir / "checkpoints").exists():
        if train_dir.exists():
            shutil.rmtree(train_dir)
        metrics["train_s"] = train(
            args,
            dataset,
            "local/closed_loop" if args.env == "so101_cube" else f"local/closed_loop_{args.task}",
            act_flags(args) if args.policy == "act" else diffusion_flags(args),
            train_dir,
            out / "train.log",
        )
    metrics["train_log"] = train_log(out / "train.log")
    print(f"training: {args.steps} steps in {metrics.get('train_s', float('nan')):.0f} s", flush=True)

    # 3. evaluate through ROS on seeds never used for demos
    results = {}
    checkpoints = sorted(p for p in (train_dir / "checkpoints").iterdir() if p.name.isdigit())
    for ckpt in checkpoints:
        results[f"{args.policy}_step_{int(ckpt.name)}"] = evaluate(
            str(ckpt / "pretrained_model"), args, out, f"{args.policy}_{ckpt.name}"
        )
    results["scripted"] = evaluate("scripted", args, out, "scripted")
    results["random"] = evaluate("random", args, out, "random")
    metrics["eval"] = results
    metrics["eval_seeds"] = [args.eval_seed, args.eval_seed + args.eval_episodes - 1]
    final = (
        results[f"{args.policy}_step_{int(checkpoints[-1].name)}"]["pc_success"]
        if checkpoints
        else float("nan")
    )
    expert = results["scripted"]["pc_success"]
    metrics["trained_vs_expert"] = final / expert if expert else None

    # 4. metrics JSON + summary
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2))
    print()
    print(
        f"demos: {metrics['demos']} ({metrics['demo_frames']} frames, {metrics['record_dropped_ticks']} dropped ticks)"
    )
    print(
        f"training time: {metrics.get('train_s', float('nan')):.0f} s for {args.steps} steps (batch {args.batch_size})"
    )
    print(f"pc_success on seeds {metrics['eval_seeds'][0]}..{metrics['eval_seeds'][1]}:")
    for name, r in results.items():
        print(f"  {name:>16}: {r['pc_success']:5.1f}  (avg max reward {r['avg_max_reward']:.3f})")
    print(f"metrics: {out / 'metrics.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
