"""Repair what can be rebuilt from what a dataset still holds; name the rest (`lerobot-dataset-info --repair`).

Repairs, each only from information that is complete on disk:

  * an episode save a crash interrupted after its commit journal was written: the journal's renames
    are completed; an episode that was being recorded (never committed) is dropped;
  * meta/info.json totals (total_episodes, total_frames, total_tasks, splits) behind or ahead of
    meta/episodes, when the data parquet holds exactly the rows meta/episodes describes;
  * meta/stats.json missing or counting fewer frames than the dataset holds: rebuilt from the
    per-episode statistics every episode keeps in meta/episodes.

Nothing else is rewritten: rows, videos, tasks and episode metadata that are missing or wrong can
not be rebuilt from partial information, so they are reported as not repaired and the dataset is
left as it was.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from . import format as fmt
from .check import check_dataset, data_row_count
from .errors import DatasetError
from .stats import aggregate_stats, stats_from_json, stats_to_json
from .storage import WORK_DIR, WriterLock, apply_journal, clear_staging, write_json_file
from .tables import episode_files, load_episodes, load_info, load_stats, load_tasks


def _replace_json(root: Path, rel: str, data: dict) -> None:
    tmp = root / WORK_DIR / (Path(rel).name + ".repair.tmp")
    write_json_file(tmp, data)
    os.replace(tmp, root / rel)


def _repair_totals(root: Path) -> str | None:
    info = load_info(root)
    episodes = load_episodes(root)
    n, frames = len(episodes), sum(int(e["length"]) for e in episodes)
    tasks = load_tasks(root)
    want = {"total_episodes": n, "total_frames": frames}
    if tasks or not n:  # a missing tasks file says nothing about how many tasks there are
        want["total_tasks"] = len(tasks)
    if all(int(info.get(k, -1)) == v for k, v in want.items()):
        return None
    if [int(e["episode_index"]) for e in episodes] != list(range(n)):
        return None  # the episodes themselves are out of order: not a totals problem
    if data_row_count(root, episodes) != frames:
        return None  # the data disagrees too: the totals cannot be trusted from either side
    before = {k: info.get(k) for k in want}
    info.update(want)
    info["splits"] = {"train": f"0:{n}"} if n else {}
    _replace_json(root, fmt.INFO_PATH, info)
    return f"{fmt.INFO_PATH} totals {before} -> {want} (from meta/episodes, which the data files agree with)"


def _episode_stats(root: Path) -> list[dict]:
    out = []
    for path in episode_files(root):
        table = pq.read_table(path)
        names = [c for c in table.column_names if c.startswith("stats/")]
        for row in table.select(names).to_pylist():
            ep: dict[str, dict[str, np.ndarray]] = {}
            for name, value in row.items():
                if value is None:
                    continue
                feature, stat = name[len("stats/") :].rsplit("/", 1)
                ep.setdefault(feature, {})[stat] = np.asarray(value)
            out.append(ep)
    return out


def _repair_stats(root: Path) -> str | None:
    info = load_info(root)
    total = int(info.get("total_frames", 0))
    if not int(info.get("total_episodes", 0)):
        return None
    try:
        current = load_stats(root)
    except DatasetError:
        current = None
    features = fmt.features_from_info(info)
    numeric = [
        k
        for k in fmt.data_keys(features)
        if k not in fmt.DEFAULT_FEATURES and features[k]["dtype"] != "string"
    ]
    if current is not None:
        counts = {k: np.asarray(current.get(k, {}).get("count", [total])).reshape(-1)[:1] for k in numeric}
        if all(k in current and int(c[0]) == total for k, c in counts.items() if len(c)):
            return None
    per_episode = _episode_stats(root)
    if len(per_episode) != int(info["total_episodes"]) or any(
        k not in ep or "count" not in ep[k] for ep in per_episode for k in numeric
    ):
        return None  # some episode lacks its statistics: a rebuild would cover only part of the data
    stats = aggregate_stats(per_episode)
    if current is not None:  # keep what the rebuild cannot know (statistics of other keys)
        stats = {**stats_from_json(current), **stats}
    _replace_json(root, fmt.STATS_PATH, stats_to_json(stats))
    return f"{fmt.STATS_PATH} rebuilt from the per-episode statistics of all {len(per_episode)} episodes"


def repair_dataset(root: str | os.PathLike) -> tuple[list[str], list[str]]:
    """Repair the dataset at `root`: (what was repaired, problems that remain). Raises DatasetError
    when it cannot be opened for writing (another writer holds it, or it is not a dataset)."""
    root = Path(root)
    if not (root / fmt.INFO_PATH).is_file():
        raise DatasetError(f"{root} is not a dataset (no {fmt.INFO_PATH}): nothing to repair")
    done: list[str] = []
    lock = WriterLock(root)
    try:
        if apply_journal(root):
            done.append("completed an episode save a crash interrupted (its commit journal was on disk)")
        if (root / WORK_DIR / "episode").exists():
            done.append("dropped the frames of an episode that was never saved")
        clear_staging(root)
        for step in (_repair_totals, _repair_stats):
            try:
                what = step(root)
            except (DatasetError, OSError, ValueError, KeyError) as exc:
                what = None
                _ = exc  # the check below reports what stays broken
            if what:
                done.append(what)
    finally:
        lock.release()
    shutil.rmtree(root / WORK_DIR, ignore_errors=True)
    return done, check_dataset(root)
