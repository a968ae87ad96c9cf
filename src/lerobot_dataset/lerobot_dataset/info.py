"""`lerobot-dataset-info DIR [--check] [--repair]`: what a LeRobotDataset v3 folder holds, and whether it is whole.

Prints fps, robot type, episodes, frames, tasks, features and per-episode lengths. With `--check`,
everything LeRobot's loader relies on is verified (lerobot_dataset.check): metadata totals,
data parquet rows, index/frame_index/timestamp columns, and every video decoded and its frame count
compared with the episode's rows. Exit 1 with one "CHECK FAILED:" line per problem, never a traceback.
`--repair` first repairs what can be rebuilt from what is on disk (lerobot_dataset.repair: an
interrupted save, info.json totals, stats.json), then checks; exit 1 naming what it could not repair.
"""

from __future__ import annotations

import argparse
import sys

from lerobot_core import cli
from lerobot_dataset import DatasetError, DatasetReader
from lerobot_dataset.check import check_dataset
from lerobot_dataset.repair import repair_dataset


def describe(reader: DatasetReader) -> list[str]:
    info = reader.info
    lines = [
        f"dataset   {reader.root}",
        f"format    {info['codebase_version']}, robot_type={info.get('robot_type')}, fps={reader.fps}",
        f"episodes  {reader.num_episodes}, frames {reader.num_frames} ({reader.num_frames / reader.fps:.1f} s)"
        + (
            f" (meta/info.json says total_frames {info['total_frames']})"
            if reader.num_frames != int(info["total_frames"])
            else ""
        ),
        f"tasks     {', '.join(repr(t) for t in reader.tasks) or '-'}",
        "features:",
    ]
    for key, feat in reader.features.items():
        extra = ""
        if feat["dtype"] == "video":
            vinfo = feat.get("info") or {}
            extra = f"  {vinfo.get('video.codec', '?')} {vinfo.get('video.pix_fmt', '')}"
        names = feat.get("names")
        shown = f"  names={names}" if isinstance(names, list) and feat["dtype"] != "video" else ""
        lines.append(f"  {key:32s} {feat['dtype']:8s} {tuple(feat['shape'])}{extra}{shown}")
    for e in range(reader.num_episodes):
        meta = reader.episode_meta(e)
        lines.append(f"episode {e}: {int(meta['length'])} frames, tasks {list(meta['tasks'])}")
    return lines


def check(root) -> list[str]:
    """Problems found (see lerobot_dataset.check): one line each, naming episode/camera/file."""
    return check_dataset(root)


def repair(root) -> int:
    """--repair: repair what can be rebuilt, then check; 0 only when the check then passes."""
    try:
        done, problems = repair_dataset(root)
    except (DatasetError, OSError) as e:
        print(f"lerobot-dataset-info: error: --repair {root}: {e}", file=sys.stderr)
        return 2
    for what in done:
        print(f"repaired: {what}")
    if problems:
        for p in problems:
            print(f"NOT REPAIRED: {p}")
        print(
            f"lerobot-dataset-info: error: --repair {root}: {len(problems)} problem(s) cannot be repaired from "
            "what the dataset holds (listed above); nothing else was changed",
            file=sys.stderr,
        )
        return 1
    print(f"repaired {root}: --check passes" if done else f"{root}: nothing to repair, --check passes")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="lerobot-dataset-info", description=__doc__.splitlines()[0], formatter_class=cli.HelpFormatter
    )
    ap.add_argument("root", help="dataset folder (holds meta/info.json)")
    ap.add_argument(
        "--check",
        action="store_true",
        help="verify rows, indices, timestamps, totals and every video (decoded) against each other",
    )
    ap.add_argument(
        "--repair",
        action="store_true",
        help="first repair what can be rebuilt from what is on disk (an interrupted save, info.json "
        "totals, stats.json); exit 1 naming any problem that cannot be repaired",
    )
    a = ap.parse_args(argv)
    if a.repair:
        code = repair(a.root)
        if code:
            return code
    error = None
    try:
        reader = DatasetReader(a.root)
        print("\n".join(describe(reader)))
    except Exception as e:  # a damaged dataset is reported, never a traceback
        error = e if isinstance(e, (DatasetError, FileNotFoundError)) else f"{type(e).__name__}: {e}"
        print(f"lerobot-dataset-info: error: {error}", file=sys.stderr)
    if not a.check:
        return 2 if error is not None else 0
    problems = check(a.root)
    for p in problems:
        print(f"CHECK FAILED: {p}")
    if problems:
        return 1
    if error is not None:  # the checker found nothing the reader tripped over: still not whole
        print(f"CHECK FAILED: {error}")
        return 1
    print(
        f"check: every video matches its rows; indices, timestamps and totals agree "
        f"({reader.num_episodes} episodes x {len(reader.camera_keys)} cameras, {reader.num_frames} frames)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
