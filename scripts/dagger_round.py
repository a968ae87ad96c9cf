#!/usr/bin/env python
"""One DAgger round in simulation: HIL episodes driven by policy v0, fine-tune to v1, evaluate both.

    source env.sh
    python scripts/dagger_round.py --v0 outputs/closed_loop/train/checkpoints/last/pretrained_model \
        --demos outputs/closed_loop/dataset --hil-episodes 20 --steps 1000 --eval-episodes 20 \
        --out outputs/dagger_round

1. copies --demos into <out>/dataset with the HIL extras (complementary_info.is_intervention = true,
   control_mode = human on every demo frame: lerobot_dataset.edit.add_constant_features),
   then records --hil-episodes episodes into it with `lerobot-launch hil_sim_so101 resume:=true`:
   v0 drives, the scripted corrective human takes over when the rollout goes wrong (docs/hil.md).
   HIL seeds start at --hil-seed, disjoint from the demos' (0..) and the eval seeds;
2. fine-tunes v1 from v0's weights with LeRobot's `lerobot-train --policy.path=<v0>` on demos + HIL
   (v0's architecture and settings; normalization statistics of the dataset it trains on). Which HIL
   frames: --hil-frames all (LeRobot's guide: every frame, v0's own included), or interventions
   (HG-DAgger: only the frames the human drove; <out>/dataset_interventions, each run of them one
   episode, made by lerobot_dataset.edit.keep_frames, which re-encodes camera videos with
   the recording's codec; the demos count as human-driven);
3. evaluates v0 and v1 with `lerobot-sim-eval` through ROS (lockstep) on the same --eval-seed.. seeds;
4. writes <out>/metrics.json (--hil-frames interventions: metrics_interventions.json) and prints
   #demos, #HIL episodes, the intervention rate (HIL frames with is_intervention; HIL episodes with at
   least one), the fine-tune time and pc_success of v0 and v1.
The image size, and so the render size of every run, is v0's; the demos must have been recorded at it.
With --keep, a run with the other --hil-frames reuses the HIL episodes and v0's evaluation in --out
(the fine-tuning goes to <out>/finetune_interventions, v1's evaluation to eval_v1_interventions.*).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import sys
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
from closed_loop import ROOT, add_train_eval_arguments, dropped_ticks, evaluate, run, train, train_log

from lerobot_core import cli
from lerobot_dataset.edit import add_constant_features, keep_frames
from lerobot_msgs.msg import ControlStatus

INTERVENTION = "complementary_info.is_intervention"
SEED = re.compile(r"\(seed (\d+)\)")
FPS = 30  # the sim's control rate in both profiles
MIN_SIM_EPISODE_STEPS = 80  # the quickest pick ends a sim episode after ~83 steps (docs/closed_loop.md)
HIL_RESET_S = 0.0  # hil_sim_so101's reset_time_s
ENV_STATE = "observation.environment_state"
# the HIL contract's per-frame extras (so101_sim_hil_contract.yaml) on a frame the human drove
HUMAN_DROVE = {
    INTERVENTION: ({"dtype": "bool", "shape": (1,)}, True),
    "complementary_info.control_mode": ({"dtype": "int64", "shape": (1,)}, ControlStatus.MODE_HUMAN),
}


def policy_image_size(v0: Path) -> tuple[int, int] | None:
    """(H, W) of v0's camera inputs, from its config.json; every camera must have the same. None for a
    policy without camera that reads observation.environment_state (closed_loop.py --observation env_state)."""
    config = v0 / "config.json"
    if not config.exists() or not (v0 / "model.safetensors").exists():
        raise SystemExit(
            f"dagger_round: --v0 {v0} is not a LeRobot pretrained_model folder (config.json, "
            "model.safetensors), e.g. outputs/closed_loop/train/checkpoints/last/pretrained_model"
        )
    features = json.loads(config.read_text())["input_features"]
    sizes = {tuple(f["shape"][1:]) for f in features.values() if f["type"] == "VISUAL"}
    if not sizes and ENV_STATE in features:
        return None  # the privileged-state policy: joints + the cube's pose, no camera
    if len(sizes) != 1:
        raise SystemExit(f"dagger_round: --v0 {config}: expected cameras of one size, got {sorted(sizes)}")
    return sizes.pop()


def check_demos(demos: Path, size: tuple[int, int], v0: Path) -> dict:
    """info.json of the demos; they must have v0's cameras at v0's image size."""
    path = demos / "meta" / "info.json"
    if not path.exists():
        raise SystemExit(f"dagger_round: --demos {demos} is not a dataset (no meta/info.json)")
    info = json.loads(path.read_text())
    cams = {k: tuple(f["shape"][:2]) for k, f in info["features"].items() if f["dtype"] in ("video", "image")}
    if size is None:
        if cams or ENV_STATE not in info["features"]:
            raise SystemExit(
                f"dagger_round: --v0 {v0} reads {ENV_STATE} and no camera, but --demos {demos} has cameras "
                f"{sorted(cams)} and {'an' if ENV_STATE in info['features'] else 'no'} {ENV_STATE}"
            )
        return info
    wrong = {k: s for k, s in cams.items() if s != size}
    if wrong or not cams:
        raise SystemExit(
            f"dagger_round: --demos {demos} cameras {cams} (H, W) do not match --v0 {v0}'s image size {size}; "
            "fine-tune on demos recorded at the policy's size"
        )
    return info


def seeds_in_log(log: Path) -> list[int]:
    """The sim seeds a launch's log shows (the sim logs "episode k (seed s) ended")."""
    return sorted({int(m) for m in SEED.findall(log.read_text(errors="replace"))}) if log.exists() else []


def seed_ranges(args, demos: Path, info: dict) -> dict[str, range]:
    """Sim seeds of the demos, the HIL run and the evaluation. Each recorded episode is one sim episode,
    but the sim runs on while the recorder saves (realtime), so a run passes more sim episodes, each
    with the next seed, than it records: the demos' come from closed_loop.py's record.log beside them,
    else from a bound, as do the HIL run's."""
    used = seeds_in_log(demos.parent / "record.log")
    demo_end = (
        used[-1] + 1 if used else info["total_frames"] // MIN_SIM_EPISODE_STEPS + info["total_episodes"] + 1
    )
    hil_s = args.hil_episodes * (args.hil_episode_time + HIL_RESET_S)
    hil_end = args.hil_seed + math.ceil(hil_s * FPS / MIN_SIM_EPISODE_STEPS) + 1
    return {
        "demos": range(0, demo_end),
        "--hil-seed": range(args.hil_seed, hil_end),
        "--eval-seed": range(args.eval_seed, args.eval_seed + args.eval_episodes),
    }


def check_seeds(ranges: dict[str, range]) -> None:
    names = list(ranges)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            if set(ranges[a]) & set(ranges[b]):
                raise SystemExit(
                    f"dagger_round: seeds of {a} {ranges[a].start}..{ranges[a].stop - 1} may overlap "
                    f"{b} {ranges[b].start}..{ranges[b].stop - 1}; choose disjoint seeds"
                )


def human_drove(columns) -> np.ndarray:
    """keep_frames' predicate for HG-DAgger: the frames recorded with is_intervention."""
    return columns[INTERVENTION].reshape(-1).astype(bool)


def intervention_rate(dataset: Path, first_episode: int) -> dict:
    """Interventions in the episodes from `first_episode` on (the HIL ones): frames and episodes."""
    cols = ["episode_index", INTERVENTION]
    tables = [pq.read_table(p, columns=cols) for p in sorted((dataset / "data").glob("*/*.parquet"))]
    episodes: dict[int, list[int]] = {}
    for t in tables:
        t = t.filter(pc.greater_equal(t["episode_index"], first_episode))
        for ep, flag in zip(t["episode_index"].to_pylist(), t[INTERVENTION].to_pylist(), strict=True):
            counts = episodes.setdefault(ep, [0, 0])
            counts[0] += 1
            counts[1] += bool(flag)
    frames = sum(n for n, _ in episodes.values())
    flagged = sum(k for _, k in episodes.values())
    return {
        "hil_episodes": len(episodes),
        "hil_frames": frames,
        "intervention_frames": flagged,
        "intervention_frame_rate": flagged / frames if frames else None,
        "episodes_with_intervention": sum(1 for _, k in episodes.values() if k),
        "per_episode": {
            str(ep): {"frames": n, "intervention_frames": k} for ep, (n, k) in sorted(episodes.items())
        },
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=cli.HelpFormatter)
    ap.add_argument("--v0", type=Path, required=True, help="policy v0: a LeRobot pretrained_model folder")
    ap.add_argument(
        "--demos",
        type=Path,
        required=True,
        help="the demonstrations v0 was trained on (closed_loop.py's dataset)",
    )
    ap.add_argument(
        "--out",
        type=Path,
        default=ROOT / "outputs" / "dagger_round",
        help="folder for everything the round makes",
    )
    ap.add_argument("--hil-episodes", type=cli.positive_int, default=20, help="HIL episodes driven by v0")
    ap.add_argument(
        "--hil-seed", type=cli.non_negative_int, default=500, help="sim seed of the first HIL episode"
    )
    ap.add_argument(
        "--hil-episode-time",
        type=cli.positive_float,
        default=10.0,
        help="HIL episode length [s] (sim: 300 steps = 10 s)",
    )
    ap.add_argument(
        "--hil-frames",
        choices=("all", "interventions"),
        default="all",
        help="HIL frames v1 trains on besides the demos: all (LeRobot's guide) or interventions (HG-DAgger: "
        "only those the human drove; camera videos are re-encoded)",
    )
    ap.add_argument("--steps", type=cli.positive_int, default=1000, help="fine-tuning steps")
    ap.add_argument(
        "--save-freq",
        type=cli.non_negative_int,
        default=0,
        help="checkpoint every N steps (0 = only at --steps)",
    )
    add_train_eval_arguments(ap)
    ap.add_argument(
        "--keep",
        action="store_true",
        help="reuse the HIL dataset, v0's evaluation and this --hil-frames' fine-tuning already in --out",
    )
    args = ap.parse_args()
    args.save_freq = args.save_freq or args.steps
    v0, demos, out = args.v0.absolute(), args.demos.absolute(), args.out.absolute()
    args.image_size = policy_image_size(v0)
    # closed_loop.evaluate and train read these: no camera -> one torch thread, the cube pose from the sim
    args.observation = "images" if args.image_size else "env_state"
    args.threads, args.num_workers = (0 if args.image_size else 1), 1
    info = check_demos(demos, args.image_size, v0)
    suffix = "" if args.hil_frames == "all" else f"_{args.hil_frames}"
    n_demos = info["total_episodes"]
    seeds = seed_ranges(args, demos, info)
    check_seeds(seeds)
    if out.exists() and not args.keep:
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    # --keep: the figures of the runs that made what is reused (either --hil-frames' metrics)
    kept = {p.stem: json.loads(p.read_text()) for p in sorted(out.glob("metrics*.json"))}
    metrics: dict = {"settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}}
    metrics["demos"], metrics["demo_frames"] = n_demos, info["total_frames"]

    # 1. demos + HIL episodes driven by v0, in one dataset
    dataset = out / "dataset"
    done = dataset / "meta" / "info.json"
    if not (done.exists() and json.loads(done.read_text())["total_episodes"] >= n_demos + args.hil_episodes):
        # what was made from other HIL data goes too
        stale = [dataset, *out.glob("dataset_*"), *out.glob("finetune*"), *out.glob("eval_*")]
        stale += list(out.glob("metrics*.json"))
        for path in stale:
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()
        kept = {}
        if INTERVENTION in info["features"]:  # recorded through the HIL contract already
            shutil.copytree(demos, dataset)
        else:  # as if recorded with hil_sim_so101 demonstrate:=true initial_mode:=human
            add_constant_features(demos, dataset, HUMAN_DROVE)
        if args.image_size is None:
            inputs = ["contract:=so101_sim_hil_env_state_contract", "cameras:=['']"]
        else:
            inputs = [f"image_height:={args.image_size[0]}", f"image_width:={args.image_size[1]}"]
        metrics["hil_record_s"] = run(
            [
                "lerobot-launch",
                "hil_sim_so101",
                f"policy_path:={v0}",
                f"dataset_root:={dataset}",
                "resume:=true",
                f"num_episodes:={args.hil_episodes}",
                f"episode_time_s:={args.hil_episode_time}",
                f"seed:={args.hil_seed}",
                *inputs,
            ],
            out / "hil.log",
        )
    else:
        metrics["hil_record_s"] = next(
            (k["hil_record_s"] for k in kept.values() if "hil_record_s" in k), None
        )
    metrics["hil_dropped_ticks"] = dropped_ticks(out / "hil.log")
    hil_seeds = seeds_in_log(out / "hil.log")
    metrics["demo_seeds"] = [seeds["demos"].start, seeds["demos"].stop - 1]
    metrics["hil_seeds"] = [hil_seeds[0], hil_seeds[-1]] if hil_seeds else None  # the sim episodes it ran
    metrics["intervention"] = intervention_rate(dataset, n_demos)
    iv = metrics["intervention"]
    print(
        f"HIL: {iv['hil_episodes']} episodes, {iv['hil_frames']} frames, {iv['intervention_frames']} with "
        f"is_intervention; {iv['episodes_with_intervention']} episodes with an intervention",
        flush=True,
    )

    # 2. fine-tune v1 from v0's weights on demos + HIL (all frames, or the human's only)
    metrics["hil_frames"] = args.hil_frames
    train_data = dataset
    if args.hil_frames == "interventions":
        train_data = out / "dataset_interventions"
        if not (train_data / "meta" / "info.json").exists():
            if train_data.exists():
                shutil.rmtree(train_data)
            keep_frames(dataset, train_data, human_drove)
    trained = json.loads((train_data / "meta" / "info.json").read_text())
    metrics["train_episodes"], metrics["train_frames"] = trained["total_episodes"], trained["total_frames"]
    print(
        f"fine-tuning data (--hil-frames {args.hil_frames}): {trained['total_episodes']} episodes, "
        f"{trained['total_frames']} frames",
        flush=True,
    )
    train_dir = out / f"finetune{suffix}"
    if not (train_dir / "checkpoints").exists():
        if train_dir.exists():
            shutil.rmtree(train_dir)
        policy = [f"--policy.path={v0}"]
        if json.loads((v0 / "config.json").read_text()).get("pretrained_backbone_weights"):
            # v0's weights replace the backbone's anyway; building it must not download (offline)
            policy.append("--policy.pretrained_backbone_weights=null")
        metrics["finetune_s"] = train(
            args, train_data, "local/dagger_round", policy, train_dir, out / f"finetune{suffix}.log"
        )
    else:
        metrics["finetune_s"] = kept.get(f"metrics{suffix}", {}).get("finetune_s")
    metrics["finetune_log"] = train_log(out / f"finetune{suffix}.log")
    v1 = train_dir / "checkpoints" / "last" / "pretrained_model"
    print(f"fine-tuning: {args.steps} steps in {metrics['finetune_s'] or float('nan'):.0f} s", flush=True)
    metrics_path = out / f"metrics{suffix}.json"
    metrics_path.write_text(json.dumps(metrics, indent=2))  # a failed evaluation keeps these

    # 3. v0 and v1 on the same seeds, never used for demos or HIL; v0's figure of an earlier run of the
    # same settings is reused (--keep), so both variants' v1 compare with one v0 run
    same = ("v0", "eval_episodes", "eval_seed", "max_steps")
    v0_eval = next(
        (
            k["eval"]["v0"]
            for k in kept.values()
            if "v0" in k.get("eval", {}) and all(k["settings"].get(s) == metrics["settings"][s] for s in same)
        ),
        None,
    )
    if v0_eval is not None:
        print(
            f"  v0: pc_success {v0_eval['pc_success']:.1f} (reused from an earlier run in {out})", flush=True
        )
    metrics["eval"] = {
        "v0": v0_eval or evaluate(str(v0), args, out, "v0"),
        "v1": evaluate(str(v1.resolve()), args, out, f"v1{suffix}"),
    }
    metrics["eval_seeds"] = [args.eval_seed, args.eval_seed + args.eval_episodes - 1]
    gain = metrics["eval"]["v1"]["pc_success"] - metrics["eval"]["v0"]["pc_success"]
    metrics["v1_minus_v0_points"] = gain

    # 4. metrics JSON + summary
    metrics_path.write_text(json.dumps(metrics, indent=2))
    rate = iv["intervention_frame_rate"]
    print()
    print(f"demos: {n_demos} ({metrics['demo_frames']} frames)")
    print(
        f"HIL episodes: {iv['hil_episodes']} ({iv['hil_frames']} frames; sim seeds "
        f"{'..'.join(map(str, metrics['hil_seeds'] or ['?']))}; {metrics['hil_dropped_ticks']} dropped ticks)"
    )
    print(
        f"intervention rate: {rate if rate is None else f'{100 * rate:.1f} %'} of HIL frames; "
        f"{iv['episodes_with_intervention']} of {iv['hil_episodes']} episodes with >= 1 intervention"
    )
    print(
        f"fine-tune time: {metrics['finetune_s'] or float('nan'):.0f} s for {args.steps} steps (batch {args.batch_size}) "
        f"on {metrics['train_frames']} frames (--hil-frames {args.hil_frames})"
    )
    print(f"pc_success on seeds {metrics['eval_seeds'][0]}..{metrics['eval_seeds'][1]}:")
    for name, r in metrics["eval"].items():
        print(f"  {name}: {r['pc_success']:5.1f}  (avg max reward {r['avg_max_reward']:.3f})")
    print(f"  v1 - v0: {gain:+.1f} points (target >= +10)")
    print(f"metrics: {metrics_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
