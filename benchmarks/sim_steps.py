"""Steps/s of the simulated SO-101: bare gymnasium loop vs the same loop bridged over ROS 2 (lockstep).

    python benchmarks/sim_steps.py [--steps 300] [--rounds 3] [--height 240 --width 320] [--cameras 0 1 2]

For 0, 1 and 2 rendered cameras, in the same run:
  bare  - SimSession.step in this process (MuJoCo physics + rendering + LeRobot key mapping)
  ros   - the `sim` node as a separate process in lockstep mode; this process publishes each action on
          forward_position_controller/commands and waits for that step's joint_states, camera images
          and episode_info (matched by stamp), converted back to numpy (the evaluator's transport)
The ratio bare/ros is the cost of going over ROS (target <= 1.3x). Both loops replay the same scripted
expert actions from the same seeds. The steps are split into rounds that alternate bare and ros, so a
load change on a shared machine hits both sides alike; the ratio is total over total, and the range of
the per-round ratios is printed too. Run with `source env.sh` (needs the built workspace).
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("MUJOCO_GL", "egl")

from lerobot_core.dds_transport import large_image_transport_profile, user_profile
from lerobot_sim.eval_cli import make_transport_factory, resolve_env
from lerobot_sim.evaluation import LocalEnvTransport, ScriptedPolicy
from lerobot_sim.registration import SO101_CUBE_ID
from lerobot_sim.session import SimSession, make_env

EPISODE = 100  # steps per episode (the expert lifts the cube in ~85; shorter ones are reset early)


def run(transport, steps: int) -> float:
    policy = ScriptedPolicy()
    done = 0
    seed = 0
    t0 = time.perf_counter()
    while done < steps:
        obs = transport.reset(seed)
        policy.reset(seed)
        for _ in range(min(EPISODE, steps - done)):
            obs, ep = transport.step(policy.select_action(obs))
            done += 1
            if ep.terminated or ep.truncated:
                break
        seed += 1
    return done / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=300, help="steps per side and camera count")
    ap.add_argument(
        "--rounds", type=int, default=3, help="alternating bare/ros rounds the steps are split in"
    )
    ap.add_argument("--height", type=int, default=240)
    ap.add_argument("--width", type=int, default=320)
    ap.add_argument("--cameras", type=int, nargs="+", default=[0, 1, 2], choices=[0, 1, 2])
    args = ap.parse_args()
    # the sim process loads the large-image profile itself on a localhost Fast DDS stack (docs/sim.md)
    profile = user_profile() or large_image_transport_profile() or ""
    print(
        f"SO-101 cube, {args.steps} steps per measurement in {args.rounds} rounds, images "
        f"{args.height}x{args.width}, MUJOCO_GL={os.environ['MUJOCO_GL']}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.2f}, sim's Fast DDS profile: {os.path.basename(profile) or 'none'}"
    )
    print(f"{'cameras':>8} {'bare steps/s':>13} {'ros steps/s':>12} {'ratio bare/ros':>15} {'per round':>12}")
    rows = []
    per_round = max(1, args.steps // args.rounds)
    for n in args.cameras:
        cams = ("front", "wrist")[:n]
        kwargs = {
            "cameras": list(cams),
            "obs_type": "pixels_agent_pos" if cams else "state",
            "image_height": args.height,
            "image_width": args.width,
        }
        bare_t = LocalEnvTransport(SimSession(make_env(SO101_CUBE_ID, kwargs)))
        factory, _ = make_transport_factory(
            resolve_env("so101_cube", list(cams) or [""]),
            {"image_height": args.height, "image_width": args.width},
            log=lambda m: None,
        )
        ros_t = factory()
        try:
            run(bare_t, 20)  # warm-up (renderer context, caches, DDS matching)
            run(ros_t, 20)
            bare_s = ros_s = 0.0
            ratios = []
            for r in range(args.rounds):
                order = ((bare_t, True), (ros_t, False)) if r % 2 == 0 else ((ros_t, False), (bare_t, True))
                took = {}
                for transport, is_bare in order:
                    took[is_bare] = per_round / run(transport, per_round)
                bare_s += took[True]
                ros_s += took[False]
                ratios.append(took[False] / took[True])
        finally:
            bare_t.close()
            ros_t.close()
        steps = per_round * args.rounds
        bare, ros = steps / bare_s, steps / ros_s
        rows.append((n, bare, ros))
        print(
            f"{n:>8} {bare:>13.1f} {ros:>12.1f} {bare / ros:>14.2f}x {min(ratios):>5.2f}-{max(ratios):.2f}x",
            flush=True,
        )
    rendered = [b / r for n, b, r in rows if n > 0]
    if rendered:
        print(
            f"baseline: bare gymnasium loop (same process, same actions); worst rendered-camera ratio "
            f"{max(rendered):.2f}x (target <= 1.3x)"
        )


if __name__ == "__main__":
    main()
