"""``lerobot-sim-eval``: N episodes with a policy in the loop over ROS 2, LeRobot's metrics as JSON.

    lerobot-sim-eval --env so101_cube --episodes 10 --policy scripted --output metrics.json \
        [--seed 0] [--videos DIR] [--max-steps N] [--cameras front wrist]

The sim runs as a separate process in lockstep mode (one control step per command), so the same seed
gives the same result. If the sim process dies or stops answering, it is restarted and the episode rerun.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field
from typing import Any

from lerobot_core import cli
from lerobot_sim.evaluation import (
    EvalSettings,
    EvaluationError,
    SimUnavailableError,
    make_policy,
    metrics_document,
    run_episodes,
    write_metrics,
)
from lerobot_sim.registration import SO101_CUBE_ID


@dataclass(frozen=True)
class EnvPreset:
    executable: str
    env_id: str
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    cameras: tuple[str, ...] = ()


PRESETS: dict[str, EnvPreset] = {
    "so101_cube": EnvPreset("sim", SO101_CUBE_ID, {}, ("front", "wrist")),
    "pusht": EnvPreset("gym_bridge", "gym_pusht/PushT-v0", {"obs_type": "pixels_agent_pos"}),
    "aloha_insertion": EnvPreset(
        "gym_bridge", "gym_aloha/AlohaInsertion-v0", {"obs_type": "pixels_agent_pos"}
    ),
    "aloha_transfer_cube": EnvPreset(
        "gym_bridge", "gym_aloha/AlohaTransferCube-v0", {"obs_type": "pixels_agent_pos"}
    ),
}


def resolve_env(name: str, cameras: list[str] | None) -> EnvPreset:
    if name in PRESETS:
        preset = PRESETS[name]
    elif "/" in name or "-v" in name:  # any registered gymnasium id
        preset = EnvPreset("gym_bridge", name, {})
    else:
        raise EvaluationError(f"--env {name!r}: not a preset ({', '.join(PRESETS)}) nor a gymnasium id")
    if cameras is not None:
        preset = EnvPreset(
            preset.executable, preset.env_id, preset.env_kwargs, tuple(c for c in cameras if c)
        )
    return preset


def _spaces(preset: EnvPreset):
    """Action space, fps and camera layout, from a local instance of the env (never stepped)."""
    from gymnasium import spaces

    from lerobot_sim.session import env_fps, make_env

    kwargs = dict(preset.env_kwargs)
    if preset.executable == "sim":
        kwargs.update(
            cameras=list(preset.cameras), obs_type="pixels_agent_pos" if preset.cameras else "state"
        )
    env = make_env(preset.env_id, kwargs)
    try:
        obs_space = env.observation_space
        pixels = obs_space.spaces.get("pixels") if isinstance(obs_space, spaces.Dict) else None
        if isinstance(pixels, spaces.Dict):
            cameras, single = tuple(pixels.spaces), False
        elif pixels is not None:
            cameras, single = ("image",), True
        else:
            cameras, single = (), False
        return env.action_space, env_fps(env), cameras, single
    finally:
        env.close()


def make_transport_factory(preset: EnvPreset, params: dict[str, Any], log=print):
    from lerobot_sim.ros_transport import RosSimTransport, SimProcess

    _, fps, cameras, single = _spaces(preset)
    if preset.executable == "sim":
        cameras, single = preset.cameras, False
    parameters = {
        "env_id": preset.env_id,
        "env_kwargs": json.dumps(preset.env_kwargs),
        "mode": "lockstep",
        "auto_reset": False,
        # no keep-alive repeats: the client matches endpoints before its first reset and retries a reset
        # whose observation did not arrive; repeats would only add load to a stalled transport
        "idle_republish_s": 0.0,
        "autostart": True,
        **params,
    }
    if preset.executable == "sim":
        parameters["cameras"] = list(cameras) or [""]
    state = {"process": None}

    def factory():
        process = SimProcess(preset.executable, parameters)
        state["process"] = process
        log(f"started {preset.executable} (pid {process.pid}, log {process.log_path})")
        try:
            return RosSimTransport(
                fps=fps,
                cameras=cameras,
                single_image=single,
                cube_pose=preset.executable == "sim",
                process=process,
            )
        except BaseException:
            process.stop()
            raise

    factory.state = state  # lets callers (tests) see the current sim process
    return factory, fps


def default_output(env: str, policy: str, seed: int) -> str:
    """Where the metrics go without --output: one file per env, policy and first seed. A LeRobot
    checkpoint (``<run>/checkpoints/<step>/pretrained_model``) is named ``<run>-<step>``."""
    parts = os.path.normpath(policy).split(os.sep)
    if len(parts) >= 4 and parts[-1] == "pretrained_model" and parts[-3] == "checkpoints":
        name = f"{parts[-4]}-{parts[-2]}"
    else:
        name = "_".join(p for p in parts[-2:] if p not in ("", ".", "..")) or "policy"
    return os.path.join("outputs", "eval", f"{env.replace('/', '_')}-{name}-seed{seed}.json")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="lerobot-sim-eval", description=__doc__.split("\n\n")[0], formatter_class=cli.HelpFormatter
    )
    p.add_argument("--env", required=True, help=f"preset ({', '.join(PRESETS)}) or a gymnasium id")
    p.add_argument("--episodes", type=cli.positive_int, required=True, help="number of episodes")
    p.add_argument(
        "--policy",
        required=True,
        help="checkpoint directory, Hub id org/name (cached), 'scripted' or 'random'",
    )
    p.add_argument(
        "--output",
        default=None,
        help="metrics JSON file to write (default: outputs/eval/<env>-<policy name>-seed<seed>.json)",
    )
    p.add_argument(
        "--seed",
        type=cli.non_negative_int,
        default=0,
        help="seed of the first episode; episode i uses seed + i",
    )
    p.add_argument("--videos", default="", help="directory for one mp4 per episode")
    p.add_argument(
        "--max-steps",
        type=cli.non_negative_int,
        default=0,
        help="stop an episode after this many steps (0 = env's)",
    )
    p.add_argument(
        "--cameras", nargs="*", default=None, help="so101_cube: rendered cameras (default: front wrist)"
    )
    p.add_argument(
        "--image-size",
        nargs=2,
        type=cli.positive_int,
        default=None,
        metavar=("H", "W"),
        help="so101_cube images",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.output is None:
        args.output = default_output(args.env, args.policy, args.seed)
    os.environ.setdefault("MUJOCO_GL", "egl")
    try:
        preset = resolve_env(args.env, args.cameras)
        params: dict[str, Any] = {}
        if args.image_size and preset.executable == "sim":
            params.update(image_height=args.image_size[0], image_width=args.image_size[1])
        factory, fps = make_transport_factory(preset, params, log=lambda m: print(m, flush=True))
        action_space = _spaces(preset)[0] if args.policy == "random" else None
        policy = make_policy(args.policy, action_space=action_space, fps=int(round(fps)))
        settings = EvalSettings(args.episodes, args.seed, args.max_steps, args.videos)
        episodes, eval_s, videos = run_episodes(factory, policy, settings, log=lambda m: print(m, flush=True))
    except (EvaluationError, SimUnavailableError, ValueError, FileNotFoundError) as exc:
        print(f"lerobot-sim-eval: error: {exc}", file=sys.stderr)
        return 2
    doc = metrics_document(
        episodes,
        eval_s,
        videos,
        meta={
            "env": args.env,
            "env_id": preset.env_id,
            "policy": args.policy,
            "seed": args.seed,
            "mode": "lockstep",
            "transport": "ros2",
        },
    )
    write_metrics(args.output, doc)
    agg = doc["aggregated"]
    print(
        f"pc_success={agg['pc_success']:.1f} avg_sum_reward={agg['avg_sum_reward']:.3f} "
        f"avg_max_reward={agg['avg_max_reward']:.3f} eval_s={agg['eval_s']:.1f} -> {args.output}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
