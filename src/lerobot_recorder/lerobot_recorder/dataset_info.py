"""`lerobot-dataset-info DIR [--check] [--repair]`: what a LeRobotDataset v3 folder holds, and whether it is whole.

Prints fps, robot type, episodes, frames, tasks, features and per-episode lengths. With `--check`,
everything LeRobot's loader relies on is verified (lerobot_recorder.dataset.check): metadata totals,
data parquet rows, index/frame_index/timestamp columns, and every video decoded and its frame count
compared with the episode's rows. Exit 1 with one "CHECK FAILED:" line per problem, never a traceback.
`--repair` first completes an episode save a crash interrupted (the dataset opened for writing once).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lerobot_core import cli
from lerobot_recorder.dataset import DatasetError, DatasetReader, DatasetWriter
from lerobot_recorder.dataset.check import check_dataset


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
    """Problems found (see lerobot_recorder.dataset.check): one line each, naming episode/camera/file."""
    return check_dataset(root)


def repair(root) -> int:
    """--repair: reopen for writing (completes an interrupted commit, drops unsaved frames) and finalize."""
    if not (Path(root) / "meta" / "info.json").is_file():
        print(
            f"lerobot-dataset-info: error: {root} is not a dataset (no meta/info.json): nothing to repair",
            file=sys.stderr,
        )
        return 2
    try:
        DatasetWriter.resume(root).finalize(on_pending="discard")
    except (DatasetError, OSError) as e:
        print(f"lerobot-dataset-info: error: --repair {root}: {e}", file=sys.stderr)
        return 2
    print(f"repaired {root}")
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
        help="first open the dataset for writing once: completes an episode save a crash interrupted "
        "and drops an episode that was never saved, then finalizes",
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
