"""``lerobot-sim-eval``: N episodes with a policy in the loop over ROS 2, LeRobot's metrics as JSON.

    lerobot-sim-eval --env so101_cube --episodes 10 --policy scripted --output metrics.json \
        [--seed 0] [--videos DIR] [--max-steps N] [--cameras front wrist]
    lerobot-sim-eval --env metaworld --tasks mt10 --max-parallel-tasks 2 --episodes 10 --policy scripted
    lerobot-sim-eval --env libero --tasks libero_spatial --max-parallel-tasks 2 --episodes 10 --policy CKPT

The sim runs as a separate process in lockstep mode (one control step per command), so the same seed
gives the same result. If the sim process dies or stops answering, it is restarted and the episode rerun.
Meta-World (--env metaworld) and LIBERO (--env libero) evaluate many tasks, each with its own sim process,
N at once; the metrics follow lerobot-eval's multi-task layout (per_task, per_group, overall).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field, replace
from typing import Any

from lerobot_core import cli
from lerobot_sim.evaluation import (
    CodecRoundTripPolicy,
    EvalSettings,
    EvaluationError,
    SimUnavailableError,
    make_policy,
    metrics_document,
    run_episodes,
    write_metrics,
)
from lerobot_sim.registration import LIBERO_ID, METAWORLD_ID, SO101_CUBE_ID


@dataclass(frozen=True)
class EnvPreset:
    executable: str
    env_id: str
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    cameras: tuple[str, ...] = ()
    environment_state: bool = False  # the bridge's stamped sim/environment_state is part of the observation


PRESETS: dict[str, EnvPreset] = {
    "so101_cube": EnvPreset("sim", SO101_CUBE_ID, {}, ("front", "wrist")),
    "pusht": EnvPreset("gym_bridge", "gym_pusht/PushT-v0", {"obs_type": "pixels_agent_pos"}),
    "aloha_insertion": EnvPreset(
        "gym_bridge", "gym_aloha/AlohaInsertion-v0", {"obs_type": "pixels_agent_pos"}
    ),
    "aloha_transfer_cube": EnvPreset(
        "gym_bridge", "gym_aloha/AlohaTransferCube-v0", {"obs_type": "pixels_agent_pos"}
    ),
    # one task per sim process: --tasks picks them (the task goes into env_kwargs per task)
    "metaworld": EnvPreset(
        "gym_bridge", METAWORLD_ID, {"obs_type": "pixels_agent_pos"}, environment_state=True
    ),
    # one LIBERO task per sim process (suite and task number in env_kwargs); needs scripts/install-libero.sh
    "libero": EnvPreset("gym_bridge", LIBERO_ID, {"obs_type": "pixels_agent_pos"}),
}
MULTITASK_ENVS = ("metaworld", "libero")
INSTALLED_BY = {"metaworld": "./setup.sh installs it", "libero": "scripts/install-libero.sh installs it"}


def resolve_env(name: str, cameras: list[str] | None) -> EnvPreset:
    if name in PRESETS:
        preset = PRESETS[name]
    elif "/" in name or "-v" in name:  # any registered gymnasium id
        preset = EnvPreset("gym_bridge", name, {})
    else:
        raise EvaluationError(f"--env {name!r}: not a preset ({', '.join(PRESETS)}) nor a gymnasium id")
    if cameras is not None:
        preset = replace(preset, cameras=tuple(c for c in cameras if c))
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


def make_transport_factory(
    preset: EnvPreset, params: dict[str, Any], log=print, namespace: str = "", spaces=None
):
    """A factory of transports to a fresh sim process of ``preset``, and the env's fps.

    namespace: the sim's ROS namespace (sims that run at once must not share topics); spaces: the
    result of ``_spaces(preset)`` when known already (it builds the env once to learn it)."""
    from lerobot_sim.ros_transport import RosSimTransport, SimProcess

    _, fps, cameras, single = spaces or _spaces(preset)
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
        process = SimProcess(preset.executable, parameters, namespace=namespace)
        state["process"] = process
        log(f"started {preset.executable} (pid {process.pid}, log {process.log_path})")
        try:
            return RosSimTransport(
                fps=fps,
                cameras=cameras,
                single_image=single,
                cube_pose=preset.executable == "sim",
                environment_state=preset.environment_state,
                process=process,
                namespace=namespace,
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
        help="so101_cube, metaworld and libero images",
    )
    p.add_argument(
        "--tasks",
        default=None,
        help="metaworld: task names and groups, comma-separated (mt10, mt25, mt50, easy, medium, hard, "
        "very_hard, or e.g. pick-place-v3); libero: suites, or a suite's task numbers (libero_spatial, "
        "libero_goal:0,3, libero_object, libero_10, libero_90)",
    )
    p.add_argument(
        "--max-parallel-tasks",
        type=cli.positive_int,
        default=1,
        help="metaworld, libero: tasks evaluated at once, each with its own sim process",
    )
    p.add_argument(
        "--sim-restarts",
        type=cli.non_negative_int,
        default=2,
        help="times a dead or silent sim is restarted per episode before its task is given up",
    )
    p.add_argument(
        "--image-codec-roundtrip",
        action="store_true",
        help="serve camera frames through the dataset's video codec and back, as training saw them "
        "(the policy node's image_codec_roundtrip; docs/closed_loop.md, train/serve skew)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.output is None:
        args.output = default_output(args.env, args.policy, args.seed)
    os.environ.setdefault("MUJOCO_GL", "egl")
    if args.image_codec_roundtrip and (args.env in MULTITASK_ENVS or args.tasks is not None):
        return _usage_error(
            "--image-codec-roundtrip: only with a single-task env (so101_cube, ...), not --tasks"
        )
    if args.env in MULTITASK_ENVS or args.tasks is not None:
        return _main_multitask(args)
    if args.max_parallel_tasks != 1:
        return _usage_error(f"--max-parallel-tasks: only with a multi-task env ({', '.join(MULTITASK_ENVS)})")
    try:
        preset = resolve_env(args.env, args.cameras)
        params: dict[str, Any] = {}
        if args.image_size and preset.executable == "sim":
            params.update(image_height=args.image_size[0], image_width=args.image_size[1])
        factory, fps = make_transport_factory(preset, params, log=lambda m: print(m, flush=True))
        action_space = _spaces(preset)[0] if args.policy == "random" else None
        policy = make_policy(args.policy, action_space=action_space, fps=int(round(fps)))
        if args.image_codec_roundtrip:
            policy = CodecRoundTripPolicy(policy, fps=int(round(fps)))
        settings = EvalSettings(args.episodes, args.seed, args.max_steps, args.videos, args.sim_restarts)
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


def _usage_error(message: str) -> int:
    print(f"lerobot-sim-eval: error: {message}", file=sys.stderr)
    return 2


def _task_specs(env: str, spec: str):
    """The tasks --tasks names for a multi-task env, and each task's env_kwargs."""
    from lerobot_sim.multitask import TaskSpec, task_specs

    if env == "libero":  # a task is a suite's task number: lerobot-eval's task_id
        from lerobot_sim.envs.libero import resolve_tasks

        specs = [TaskSpec(suite, f"{suite}:{i}", i) for suite, i in resolve_tasks(spec)]
        return specs, lambda s: {"suite": s.group, "task_id": s.task_id}
    from lerobot_sim.envs.metaworld import resolve_tasks

    return task_specs(resolve_tasks(spec)), lambda s: {"task": s.task}


def _main_multitask(args) -> int:
    from lerobot_sim.multitask import effective_parallelism, multitask_document, run_tasks

    log = lambda m: print(m, flush=True)  # noqa: E731
    if args.env not in MULTITASK_ENVS:
        return _usage_error(
            f"--tasks: only with a multi-task env ({', '.join(MULTITASK_ENVS)}), not --env {args.env}"
        )
    if not args.tasks:
        return _usage_error(f"--env {args.env} needs --tasks (e.g. mt10, or pick-place-v3,reach-v3)")
    try:
        specs, task_kwargs = _task_specs(args.env, args.tasks)
    except ImportError as exc:
        return _usage_error(f"--env {args.env} needs its package ({exc}); {INSTALLED_BY[args.env]}")
    except ValueError as exc:
        return _usage_error(str(exc))
    parallel = effective_parallelism(args.max_parallel_tasks, len(specs), log)
    base = resolve_env(args.env, None)
    kwargs = dict(base.env_kwargs)
    if args.image_size:
        kwargs.update(observation_height=args.image_size[0], observation_width=args.image_size[1])
    base = replace(base, env_kwargs=kwargs)

    def preset_for(spec):
        return replace(base, env_kwargs={**kwargs, **task_kwargs(spec)})

    try:
        spaces = _spaces(preset_for(specs[0]))  # the same for every task of a family
        fps = int(round(spaces[1]))
        policies = TaskPolicies(args.policy, spaces[0], fps, parallel, log, env=args.env)

        def factory_for(spec):
            namespace = f"eval_{spec.group}_{spec.task_id}".replace("-", "_")
            factory, _ = make_transport_factory(
                preset_for(spec), {}, log=log, namespace=namespace, spaces=spaces
            )
            return factory

        settings = EvalSettings(args.episodes, args.seed, args.max_steps, args.videos, args.sim_restarts)
        results, eval_s = run_tasks(specs, factory_for, policies.for_task, settings, parallel, log)
    except (EvaluationError, SimUnavailableError, ValueError, FileNotFoundError) as exc:
        return _usage_error(str(exc))
    doc = multitask_document(
        results,
        eval_s,
        meta={
            "env": args.env,
            "env_id": base.env_id,
            "tasks": args.tasks,
            "policy": args.policy,
            "seed": args.seed,
            "max_parallel_tasks": parallel,
            "mode": "lockstep",
            "transport": "ros2",
        },
    )
    write_metrics(args.output, doc)
    for entry in doc["per_task"]:
        m = entry["metrics"]
        failed = f" FAILED: {entry['error'].splitlines()[0]}" if entry.get("error") else ""
        log(f"{entry['task_group']}/{entry['task']}: pc_success={m['pc_success']:.1f}{failed}")
    agg = doc["overall"]
    log(
        f"overall: pc_success={agg['pc_success']:.1f} avg_sum_reward={agg['avg_sum_reward']:.3f} "
        f"avg_max_reward={agg['avg_max_reward']:.3f} episodes={agg['n_episodes']} failed={agg['n_failed']} "
        f"eval_s={agg['eval_s']:.1f} -> {args.output}"
    )
    return 0


class TaskPolicies:
    """One policy object per task. scripted: the task's own Meta-World expert; random: a seeded sampler of
    its own; a checkpoint: loaded once, every task's copy shares its weights and keeps its own per-episode
    state (observation history, action queue and ACT's temporal ensembler live in each copy's action path,
    not in the weights object). A policy run through LeRobot's own classes with observation queues
    (diffusion, vqbet) refills those queues inside the shared object on each prediction: its predictions
    are serialised (one at a time, a lock), the sims still run in parallel."""

    def __init__(self, spec: str, action_space, fps: int, parallel: int, log=print, env: str = "metaworld"):
        import copy
        import threading

        if spec == "scripted" and env != "metaworld":
            raise EvaluationError(
                f"--policy scripted: --env {env} has no scripted policy (a checkpoint or random)"
            )

        self.spec, self.fps = spec, fps
        self._space = action_space
        self._copy = copy.deepcopy
        self._shared = None
        if spec not in ("scripted", "random"):
            from lerobot_sim.evaluation import CheckpointPolicy

            first = make_policy(spec, fps=fps)
            if not isinstance(first, CheckpointPolicy):
                raise EvaluationError(f"--policy {spec!r}: not usable with --tasks")
            self._shared = first.path.policy
            queue_backed = getattr(self._shared.config, "backend", "native") == "lerobot"
            if queue_backed and parallel > 1:
                lock = threading.Lock()
                predict = self._shared.predict_action_chunk

                def serialised(*a, **kw):
                    with lock:
                        return predict(*a, **kw)

                self._shared.predict_action_chunk = serialised
                log(
                    f"note: {self._shared.config.type} runs through LeRobot's own classes, whose observation "
                    "queues are not safe to share: its predictions run one at a time (the sims in parallel)"
                )
            if self._shared.config.temporal_ensemble_coeff is not None and parallel > 1:
                log(
                    "note: ACT temporal ensembling: each task keeps its own ensembler (in its action path), "
                    "so tasks run in parallel on shared weights"
                )

    def for_task(self, task_spec):
        if self.spec == "scripted":
            from lerobot_sim.envs.metaworld import MetaWorldExpert

            return MetaWorldExpert(task_spec.task)
        if self.spec == "random":
            from lerobot_sim.evaluation import RandomPolicy

            return RandomPolicy(self._copy(self._space))  # seeded per episode, never shared across threads
        from lerobot_sim.evaluation import CheckpointPolicy

        return CheckpointPolicy(self.spec, fps=self.fps, policy=self._shared)


if __name__ == "__main__":
    sys.exit(main())
