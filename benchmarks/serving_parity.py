"""Serving adds nothing: the same policy on the same seeds, in-process and through ROS in lockstep.

    python benchmarks/serving_parity.py [--checkpoint DIR | --checkpoint scripted] [--episodes 3]
        [--seed 1000] [--max-steps 150] [--cameras front wrist] [--image-size 96 128]

Prints, per side, the success of each episode and the evaluation time, and the largest absolute
difference between the actions of the two sides at the same step (lerobot_sim.parity). The default
checkpoint is the ACT test fixture (front camera 48 x 64).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ACT_FIXTURE = (
    Path(__file__).resolve().parents[1] / "src/lerobot_runtime/test/fixtures/act_small/pretrained_model"
)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", default=str(ACT_FIXTURE), help="checkpoint directory or 'scripted'")
    p.add_argument("--episodes", type=int, default=3)
    p.add_argument("--seed", type=int, default=1000)
    p.add_argument("--max-steps", type=int, default=150)
    p.add_argument("--cameras", nargs="*", default=["front"])
    p.add_argument("--image-size", nargs=2, type=int, default=[48, 64], metavar=("H", "W"))
    args = p.parse_args()
    os.environ.setdefault("MUJOCO_GL", "egl")
    from lerobot_sim.parity import compare

    print(
        f"policy {args.checkpoint}; seeds {args.seed}..{args.seed + args.episodes - 1}; max steps "
        f"{args.max_steps}; cameras {args.cameras} at {args.image_size[0]}x{args.image_size[1]}; "
        "both sides: CheckpointPolicy (refill when empty), sim command safety (so101_safety)",
        flush=True,
    )
    r = compare(
        args.checkpoint,
        n_episodes=args.episodes,
        seed=args.seed,
        max_steps=args.max_steps,
        cameras=tuple(args.cameras),
        image_size=tuple(args.image_size),
    )
    print(f"steps per episode      {r.steps}")
    print(f"success in-process     {r.success_local}   eval {r.eval_s_local:.1f} s")
    print(f"success ROS lockstep   {r.success_ros}   eval {r.eval_s_ros:.1f} s")
    print(f"max |a_local - a_ros|  {r.max_abs_diff:.3g}  ({'identical' if r.identical else 'DIFFERENT'})")
    return 0 if r.identical else 1


if __name__ == "__main__":
    sys.exit(main())
