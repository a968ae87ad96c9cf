"""Multi-task evaluation (ROS-free): many tasks, each with its own sim, N of them at once.

:func:`run_tasks` runs :func:`lerobot_sim.evaluation.run_episodes` once per task, on a thread pool of
``max_parallel`` workers. Each task gets its own transport factory (its own sim process) and its own
policy object from ``policy_for_task``: a checkpoint's copies share the weights, per-episode state
(observation history, action queue, ensembler) is per copy. A task whose sim fails for good (the restarts
of :class:`EvalSettings` used up) keeps the episodes it finished; its other episodes are recorded failed
with the reason, and the other tasks go on.

:func:`multitask_document` lays the results out as lerobot-eval's multi-task metrics: ``per_task``,
``per_group``, ``overall``.
"""

from __future__ import annotations

import concurrent.futures as cf
import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from lerobot_sim.evaluation import (
    EpisodeMetrics,
    EvalSettings,
    EvaluationError,
    Policy,
    SimGoneError,
    run_episodes,
)


@dataclass(frozen=True)
class TaskSpec:
    group: str  # a benchmark set / difficulty group, or the task's own name when given alone
    task: str
    task_id: int  # index of the task in its group (lerobot-eval's task_id)


@dataclass
class TaskResult:
    spec: TaskSpec
    episodes: list[EpisodeMetrics] = field(default_factory=list)
    eval_s: float = 0.0
    videos: list[str] = field(default_factory=list)
    error: str = ""  # why the task stopped early ("" when all its episodes ran)
    failed: list[EpisodeMetrics] = field(default_factory=list)  # episodes that never ran (error)


def task_specs(pairs: list[tuple[str, str]]) -> list[TaskSpec]:
    """[(group, task), ...] -> TaskSpecs with task_id = position within the group."""
    counts: dict[str, int] = {}
    specs = []
    for group, task in pairs:
        specs.append(TaskSpec(group, task, counts.get(group, 0)))
        counts[group] = counts.get(group, 0) + 1
    return specs


def effective_parallelism(requested: int, n_tasks: int, log: Callable[[str], None] = print) -> int:
    """``requested`` capped at the number of tasks (with a note)."""
    if requested > n_tasks:
        log(f"note: --max-parallel-tasks {requested} is more than the {n_tasks} task(s); using {n_tasks}")
        return n_tasks
    return max(1, requested)


def run_tasks(
    specs: list[TaskSpec],
    factory_for_task: Callable[[TaskSpec], Callable],
    policy_for_task: Callable[[TaskSpec], Policy],
    settings: EvalSettings,
    max_parallel: int = 1,
    log: Callable[[str], None] = print,
    on_step: Callable[[TaskSpec, int, int], None] | None = None,
) -> tuple[list[TaskResult], float]:
    """Run every task's episodes; results in the order of ``specs``. An EvaluationError that is the
    policy's fault (any but SimGoneError) stops the whole evaluation, as in a single-task run."""
    t0 = time.perf_counter()
    stop = threading.Event()

    def one(spec: TaskSpec) -> TaskResult:
        result = TaskResult(spec)
        task_settings = settings
        if settings.video_dir:
            task_settings = replace(
                settings, video_dir=os.path.join(settings.video_dir, f"{spec.group}_{spec.task_id}")
            )
        started = time.perf_counter()

        def step_cb(i: int, k: int) -> None:
            if stop.is_set():  # another task failed for the policy's sake, or Ctrl-C: end this one now
                raise EvaluationError(f"[{spec.task}] stopped: the evaluation is ending")
            if on_step:
                on_step(spec, i, k)

        try:
            episodes, _, videos = run_episodes(
                factory_for_task(spec),
                policy_for_task(spec),
                task_settings,
                on_step=step_cb,
                log=lambda m: log(f"[{spec.task}] {m}"),
                done=result.episodes,
            )
            result.videos = videos
        except SimGoneError as exc:  # the sim's fault: this task stops, the others go on
            result.error = str(exc)
            log(f"[{spec.task}] failed: {exc}; its remaining episodes are recorded as failed")
            for i in range(len(result.episodes), settings.n_episodes):
                result.failed.append(
                    EpisodeMetrics(
                        episode_index=i,
                        seed=settings.seed + i,
                        sum_reward=math.nan,
                        max_reward=math.nan,
                        success=False,
                        steps=0,
                        duration_s=0.0,
                        ended="failed",
                    )
                )
        result.eval_s = time.perf_counter() - started
        return result

    if max_parallel <= 1:
        results = [one(spec) for spec in specs]
    else:
        with cf.ThreadPoolExecutor(max_workers=max_parallel, thread_name_prefix="eval-task") as pool:
            futures = [pool.submit(one, spec) for spec in specs]
            try:
                for f in cf.as_completed(futures):
                    f.result()  # the first failure, as soon as it happens
                results = [f.result() for f in futures]
            except BaseException:
                # the running tasks end at their next step (closing their sims), the queued ones never start
                stop.set()
                for f in futures:
                    f.cancel()
                raise
    return results, time.perf_counter() - t0


# ---------------------------------------------------------------------- metrics
def _record(result: TaskResult, e: EpisodeMetrics, error: str = "") -> dict:
    record = {
        "task": result.spec.task,
        "task_group": result.spec.group,
        "task_id": result.spec.task_id,
        "episode_ix": e.episode_index,
        "sum_reward": None if math.isnan(e.sum_reward) else e.sum_reward,
        "max_reward": None if math.isnan(e.max_reward) else e.max_reward,
        "success": e.success,
        "seed": e.seed,
        "steps": e.steps,
        "restarts": e.restarts,
        "ended": e.ended,
    }
    if error:
        record["error"] = error
    return record


def _records(result: TaskResult) -> list[dict]:
    return [_record(result, e) for e in result.episodes] + [
        _record(result, e, result.error) for e in result.failed
    ]


def _aggregate(records: list[dict]) -> dict:
    """pc_success over every episode (a failed one counts as not successful); reward averages over the
    episodes that ran (a failed episode has no reward)."""

    def mean(key):
        values = [r[key] for r in records if r[key] is not None]
        return float(np.mean(values)) if values else math.nan

    return {
        "avg_sum_reward": mean("sum_reward"),
        "avg_max_reward": mean("max_reward"),
        "pc_success": float(100.0 * np.mean([r["success"] for r in records])) if records else math.nan,
        "n_episodes": len(records),
        "n_failed": sum(1 for r in records if r["ended"] == "failed"),
    }


def multitask_document(results: list[TaskResult], eval_s: float, meta: dict) -> dict:
    """lerobot-eval's multi-task layout (per_task, per_group, overall) with every level's per-episode records."""
    per_task = []
    groups: dict[str, list[dict]] = {}
    group_videos: dict[str, list[str]] = {}
    everything: list[dict] = []
    for r in results:
        records = _records(r)
        metrics = {
            "sum_rewards": [x["sum_reward"] for x in records],
            "max_rewards": [x["max_reward"] for x in records],
            "successes": [x["success"] for x in records],
            "video_paths": list(r.videos),
            **_aggregate(records),
            "eval_s": r.eval_s,
            "per_episode": records,
        }
        entry = {
            "task_group": r.spec.group,
            "task_id": r.spec.task_id,
            "task": r.spec.task,
            "metrics": metrics,
        }
        if r.error:
            entry["error"] = r.error
        per_task.append(entry)
        groups.setdefault(r.spec.group, []).extend(records)
        group_videos.setdefault(r.spec.group, []).extend(r.videos)
        everything += records
    per_group = {
        g: {**_aggregate(recs), "video_paths": group_videos[g], "per_episode": recs}
        for g, recs in groups.items()
    }
    overall = {
        **_aggregate(everything),
        "eval_s": eval_s,
        "eval_ep_s": eval_s / max(1, len(everything)),
        "video_paths": [v for r in results for v in r.videos],
        "per_episode": everything,
    }
    return {"per_task": per_task, "per_group": per_group, "overall": overall, "meta": meta}
