"""The simulation seed of each recorded episode, kept beside the dataset's metadata.

A recording with ``episode_boundaries: sim`` knows which sim episode, and so which seed, each saved
episode holds. ``meta/sim_seeds.json`` keeps them (LeRobot reads only the files it knows in meta/,
so the dataset stays loadable), and a resumed recording starts at the first seed after them
(``seed:=auto`` of the sim profiles): appending records new demonstrations, not the same ones again.
ROS-free.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

SEEDS_PATH = "meta/sim_seeds.json"
_INFO_PATH = "meta/info.json"


def read_seeds(root: Path) -> dict[int, int]:
    """Episode index -> sim seed, for the episodes whose seed was recorded ({} when none)."""
    path = Path(root) / SEEDS_PATH
    try:
        rows = json.loads(path.read_text())["episodes"]
        return {int(r["episode_index"]): int(r["seed"]) for r in rows}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def record_seed(root: Path, episode_index: int, seed: int) -> None:
    """Add a saved episode's seed (written to a temporary file, then renamed: never half a file)."""
    root = Path(root)
    seeds = read_seeds(root)
    seeds[int(episode_index)] = int(seed)
    rows = [{"episode_index": i, "seed": s} for i, s in sorted(seeds.items())]
    tmp = root / (SEEDS_PATH + ".tmp")
    tmp.write_text(json.dumps({"episodes": rows}, indent=1) + "\n")
    os.replace(tmp, root / SEEDS_PATH)


def next_seed(root: Path) -> tuple[int, str]:
    """The first seed a recording into ``root`` has not used, and a note saying how it was found."""
    root = Path(root)
    try:
        total = int(json.loads((root / _INFO_PATH).read_text())["total_episodes"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0, f"auto: 0 (no dataset at {root} yet)"
    seeds = read_seeds(root)
    if not seeds:
        if total == 0:
            return 0, f"auto: 0 ({root} holds no episode)"
        return total, (
            f"auto: {total} ({root} holds {total} episode(s) without a seed record: taken as seeds 0..{total - 1})"
        )
    after = max(seeds.values()) + 1
    if len(seeds) < total:  # episodes recorded without a seed (an older recording): count them too
        after = max(after, total)
    return after, f"auto: {after} (the seeds {root} holds end at {max(seeds.values())})"
