"""Steps/s of the simulated SO-101: bare gymnasium loop vs the same loop bridged over ROS 2 (lockstep).

    python benchmarks/sim_steps.py [--steps 300] [--height 240 --width 320]

For 0, 1 and 2 rendered cameras, in the same run:
  bare  - SimSession.step in this process (MuJoCo physics + rendering + LeRobot key mapping)
  ros   - the `sim` node as a separate process in lockstep mode; this process publishes each action on
          forward_position_controller/commands and waits for that step's joint_states, camera images
          and episode_info (matched by stamp), converted back to numpy (the evaluator's transport)
The ratio bare/ros is the cost of going over ROS (target <= 1.3x). Both loops replay the same scripted
expert actions from the same seeds. Run with `source env.sh` (needs the built workspace).
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("MUJOCO_GL", "egl")

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
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--height", type=int, default=240)
    ap.add_argument("--width", type=int, default=320)
    args = ap.parse_args()
    print(
        f"SO-101 cube, {args.steps} steps per measurement, images {args.height}x{args.width}, "
        f"MUJOCO_GL={os.environ['MUJOCO_GL']}, {os.cpu_count()} CPUs"
    )
    print(f"{'cameras':>8} {'bare steps/s':>13} {'ros steps/s':>12} {'ratio bare/ros':>15}")
    rows = []
    for cams in ((), ("front",), ("front", "wrist")):
        kwargs = {
            "cameras": list(cams),
            "obs_type": "pixels_agent_pos" if cams else "state",
            "image_height": args.height,
            "image_width": args.width,
        }
        bare_t = LocalEnvTransport(SimSession(make_env(SO101_CUBE_ID, kwargs)))
        run(bare_t, 20)  # warm-up (renderer context, caches)
        bare = run(bare_t, args.steps)
        bare_t.close()
        factory, _ = make_transport_factory(
            resolve_env("so101_cube", list(cams) or [""]),
            {"image_height": args.height, "image_width": args.width},
            log=lambda m: None,
        )
        ros_t = factory()
        run(ros_t, 20)
        ros = run(ros_t, args.steps)
        ros_t.close()
        rows.append((len(cams), bare, ros))
        print(f"{len(cams):>8} {bare:>13.1f} {ros:>12.1f} {bare / ros:>14.2f}x", flush=True)
    worst = max(b / r for _, b, r in rows if _ > 0)
    print(
        f"baseline: bare gymnasium loop (same process, same actions); worst rendered-camera ratio "
        f"{worst:.2f}x (target <= 1.3x)"
    )


if __name__ == "__main__":
    main()
