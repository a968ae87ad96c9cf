"""`lerobot-dataset-info DIR [--check]`: what a LeRobotDataset v3 folder holds, and whether it is whole.

Prints fps, robot type, episodes, frames, tasks, features and per-episode lengths. With `--check`,
every episode's video is decoded and its frame count compared with its parquet rows (exit 1 on any
mismatch), which is what LeRobot's loader relies on.
"""

from __future__ import annotations

import argparse
import sys

from lerobot_recorder.dataset import DatasetError, DatasetReader


def describe(reader: DatasetReader) -> list[str]:
    info = reader.info
    lines = [
        f"dataset   {reader.root}",
        f"format    {info['codebase_version']}, robot_type={info.get('robot_type')}, fps={reader.fps}",
        f"episodes  {reader.num_episodes}, frames {reader.num_frames} ({reader.num_frames / reader.fps:.1f} s)",
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


def check(reader: DatasetReader) -> list[str]:
    """Problems found: video frame counts that differ from the episode's rows."""
    problems = []
    for e in range(reader.num_episodes):
        rows = int(reader.episode_meta(e)["length"])
        for key in reader.camera_keys:
            n = len(reader.video_frames(key, e))
            if n != rows:
                problems.append(f"episode {e}: {key} has {n} video frames for {rows} rows")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="lerobot-dataset-info", description=__doc__.splitlines()[0])
    ap.add_argument("root", help="dataset folder (holds meta/info.json)")
    ap.add_argument(
        "--check", action="store_true", help="decode every video and compare frame counts with rows"
    )
    a = ap.parse_args(argv)
    try:
        reader = DatasetReader(a.root)
        print("\n".join(describe(reader)))
        if a.check:
            problems = check(reader)
            for p in problems:
                print(f"CHECK FAILED: {p}")
            if problems:
                return 1
            print(
                f"check: every video matches its rows ({reader.num_episodes} episodes x {len(reader.camera_keys)} cameras)"
            )
    except (DatasetError, FileNotFoundError) as e:
        print(f"lerobot-dataset-info: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
