"""Multi-task evaluation over ROS: episodes per minute with 1, 2, 4 tasks at once, and memory.

    python benchmarks/sim_eval_parallel.py [--tasks mt10] [--episodes 2] [--max-steps 100] \
        [--parallel 1 2 4] [--policies random scripted] [--image-size 128 128 | --state-only]

For each policy and each N in --parallel, `lerobot-sim-eval --env metaworld`'s own loop (one sim process
per task, N tasks at once, lockstep over ROS 2) evaluates every task of --tasks; printed: episodes per
minute, its ratio to N=1, and the peak memory (PSS of the evaluator plus its sim processes, sampled every
0.2 s) and its ratio to N=1. The floor is the bare gymnasium loop: the same env (MetaWorldEnv, same image
size), the same tasks, seeds, policy and step limit, in this process, one task after the other, no ROS.
--state-only: no camera (Meta-World's obs_type 'state'), so nothing is rendered: where the parallel gain
is bounded by the evaluator and the lockstep messages, not by the renderer.
Every row prints its settings. Run with `source env.sh` on a quiet machine (each sim is a process: N
sims need N free cores).
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from dataclasses import replace

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np

from lerobot_sim.envs.metaworld import MetaWorldEnv, resolve_tasks
from lerobot_sim.eval_cli import TaskPolicies, _spaces, make_transport_factory, resolve_env
from lerobot_sim.evaluation import EvalSettings
from lerobot_sim.multitask import run_tasks, task_specs
from lerobot_sim.session import lerobot_observation_keys


def pss_mb(pid: int) -> float:
    """Proportional set size of one process (shared pages split among their users), MB; 0 if gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


class MemorySampler:
    """Peak of the summed PSS of this process and the sim processes it started."""

    def __init__(self, processes: list):
        self.processes = processes
        self.peak = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            pids = [os.getpid()] + [p.pid for p in list(self.processes) if p is not None and p.alive()]
            self.peak = max(self.peak, sum(pss_mb(pid) for pid in pids))

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def over_ros(specs, preset_for, spaces, policy: str, parallel: int, settings: EvalSettings) -> dict:
    processes: list = []
    factories = []

    def factory_for(spec):
        namespace = f"bench_{spec.group}_{spec.task_id}".replace("-", "_")
        factory, _ = make_transport_factory(
            preset_for(spec), {}, log=lambda m: None, namespace=namespace, spaces=spaces
        )
        factories.append(factory)

        def tracked():
            transport = factory()
            processes.append(factory.state["process"])
            return transport

        return tracked

    policies = TaskPolicies(policy, spaces[0], int(round(spaces[1])), parallel, log=lambda m: None)
    with MemorySampler(processes) as memory:
        results, eval_s = run_tasks(
            specs, factory_for, policies.for_task, settings, parallel, log=lambda m: None
        )
    episodes = sum(len(r.episodes) for r in results)
    failed = [r.spec.task for r in results if r.error]
    steps = sum(e.steps for r in results for e in r.episodes)
    success = np.mean([e.success for r in results for e in r.episodes]) * 100 if episodes else float("nan")
    return {
        "eps_per_min": episodes / eval_s * 60.0,
        "steps_per_s": steps / eval_s,
        "memory_mb": memory.peak,
        "pc_success": success,
        "failed": failed,
        "eval_s": eval_s,
    }


def bare_loop(specs, kwargs, policy: str, settings: EvalSettings) -> dict:
    """The floor: MetaWorldEnv stepped in this process, the same policy objects, no ROS, no process."""
    policies = None
    episodes = steps = 0
    successes = []
    t0 = time.perf_counter()
    for spec in specs:
        env = MetaWorldEnv(task=spec.task, **kwargs)
        try:
            if policies is None:
                policies = TaskPolicies(
                    policy, env.action_space, int(env.metadata["render_fps"]), 1, lambda m: None
                )
            agent = policies.for_task(spec)
            for i in range(settings.n_episodes):
                seed = settings.seed + i
                raw, _ = env.reset(seed=seed)
                agent.reset(seed)
                success = False
                for _ in range(settings.max_steps):
                    raw, _r, terminated, truncated, info = env.step(
                        agent.select_action(lerobot_observation_keys(raw))
                    )
                    steps += 1
                    success = success or bool(info.get("is_success"))
                    if terminated or truncated:
                        break
                episodes += 1
                successes.append(success)
        finally:
            env.close()
    eval_s = time.perf_counter() - t0
    return {
        "eps_per_min": episodes / eval_s * 60.0,
        "steps_per_s": steps / eval_s,
        "pc_success": float(np.mean(successes) * 100),
        "eval_s": eval_s,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", default="mt10")
    p.add_argument("--episodes", type=int, default=2, help="episodes per task")
    p.add_argument(
        "--max-steps", type=int, default=100, help="step limit per episode (Meta-World's own: 500)"
    )
    p.add_argument("--parallel", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--policies", nargs="+", default=["random", "scripted"])
    p.add_argument("--image-size", type=int, nargs=2, default=[128, 128], metavar=("H", "W"))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--state-only", action="store_true", help="no camera: nothing rendered")
    args = p.parse_args()

    specs = task_specs(resolve_tasks(args.tasks))
    kwargs = {
        "obs_type": "state" if args.state_only else "pixels_agent_pos",
        "observation_height": args.image_size[0],
        "observation_width": args.image_size[1],
    }
    camera = "no camera" if args.state_only else f"image {args.image_size[0]}x{args.image_size[1]} corner2"
    base = resolve_env("metaworld", None)

    def preset_for(spec):
        return replace(base, env_kwargs={**kwargs, "task": spec.task})

    spaces = _spaces(preset_for(specs[0]))
    settings = EvalSettings(args.episodes, args.seed, args.max_steps)
    print(
        f"settings: tasks={args.tasks} ({len(specs)}), episodes/task={args.episodes}, max_steps={args.max_steps}, "
        f"{camera}, seed {args.seed}, lockstep over ROS 2, "
        f"cores {os.cpu_count()}, load {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    header = f"{'policy':9} {'run':18} {'eps/min':>8} {'x N=1':>6} {'x floor':>7} {'steps/s':>8} {'mem MB':>8} {'x N=1':>6} {'success %':>9}"
    print(header)
    for policy in args.policies:
        floor = bare_loop(specs, kwargs, policy, settings)
        print(
            f"{policy:9} {'bare gymnasium':18} {floor['eps_per_min']:8.1f} {'':>6} {1.0:7.2f} "
            f"{floor['steps_per_s']:8.1f} {'':>8} {'':>6} {floor['pc_success']:9.1f}",
            flush=True,
        )
        first = None
        for n in args.parallel:
            n_eff = min(n, len(specs))
            r = over_ros(specs, preset_for, spaces, policy, n_eff, settings)
            first = first or r
            failed = f"  FAILED: {','.join(r['failed'])}" if r["failed"] else ""
            print(
                f"{policy:9} {f'ROS, {n_eff} at once':18} {r['eps_per_min']:8.1f} "
                f"{r['eps_per_min'] / first['eps_per_min']:6.2f} {r['eps_per_min'] / floor['eps_per_min']:7.2f} "
                f"{r['steps_per_s']:8.1f} {r['memory_mb']:8.0f} {r['memory_mb'] / first['memory_mb']:6.2f} "
                f"{r['pc_success']:9.1f}{failed}",
                flush=True,
            )


if __name__ == "__main__":
    main()
