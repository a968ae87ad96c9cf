"""`lerobot-ros-dataset-viz`: look at one episode of a LeRobotDataset, in rerun or as PNG files.

    lerobot-ros-dataset-viz DATASET --episode N                  # opens the rerun viewer
    lerobot-ros-dataset-viz DATASET --episode N --save ep.rrd    # headless: a file for `rerun ep.rrd`
    lerobot-ros-dataset-viz DATASET --episode N --report DIR     # headless: PNG plots + contact sheets

Logged to rerun on two timelines, `frame_index` and `timestamp`: every camera (JPEG) under
`cameras/<name>`, each joint of `observation.state` and `action` as a scalar series under
`state/<joint>` and `action/<joint>`, and every other per-frame numeric column (`next.done`,
`next.reward`, `complementary_info.*`) under `flags/<column>`. The task text is logged once.
LeRobot's own `lerobot-dataset-viz` shows the same things for LeRobot's datasets; this one reads the
dataset with lerobot_recorder's reader, so it needs neither lerobot nor torch.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from .dataset import DatasetError, DatasetReader
from .dataset_report import ACTION, STATE, flag_columns, write_report

PROG = "lerobot-ros-dataset-viz"


def _joint_names(reader: DatasetReader, key: str, width: int) -> list[str]:
    names = reader.features[key].get("names")
    if isinstance(names, dict):
        names = next(iter(names.values()))
    if not names or len(names) != width:
        return [str(i) for i in range(width)]
    return [n[: -len(".pos")] if n.endswith(".pos") else n for n in names]


def log_episode(rec, reader: DatasetReader, episode_index: int, jpeg_quality: int = 80) -> int:
    """Log one episode to the rerun recording stream ``rec``; returns the number of frames."""
    import cv2
    import rerun as rr

    cols = reader.episode(episode_index)
    frames = np.asarray(cols["frame_index"], dtype=np.int64)
    seconds = np.asarray(cols["timestamp"], dtype=np.float64)
    indexes = [rr.TimeColumn("frame_index", sequence=frames), rr.TimeColumn("timestamp", duration=seconds)]
    tasks = sorted(set(cols["task"]))
    rec.log("task", rr.TextDocument("\n".join(tasks)), static=True)
    for key, prefix in ((STATE, "state"), (ACTION, "action")):
        if key not in cols:
            continue
        values = np.asarray(cols[key], dtype=np.float64)
        for j, name in enumerate(_joint_names(reader, key, values.shape[1])):
            rec.send_columns(
                f"{prefix}/{name}", indexes=indexes, columns=rr.Scalars.columns(scalars=values[:, j])
            )
    for key in flag_columns(reader):
        values = np.asarray(cols[key], dtype=np.float64).reshape(len(frames), -1)
        for j in range(values.shape[1]):
            path = f"flags/{key}" if values.shape[1] == 1 else f"flags/{key}/{j}"
            rec.send_columns(path, indexes=indexes, columns=rr.Scalars.columns(scalars=values[:, j]))
    for key in reader.camera_keys:
        name = key.removeprefix("observation.images.")
        video = reader.video_frames(key, episode_index)
        for i, (frame, t) in enumerate(zip(frames, seconds, strict=True)):
            if i >= len(video):
                break
            ok, jpeg = cv2.imencode(
                ".jpg", cv2.cvtColor(video[i], cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, jpeg_quality]
            )
            if not ok:
                raise DatasetError(f"{key}: cannot JPEG-encode frame {frame}")
            rec.set_time("frame_index", sequence=int(frame))
            rec.set_time("timestamp", duration=float(t))
            rec.log(f"cameras/{name}", rr.EncodedImage(contents=jpeg.tobytes(), media_type="image/jpeg"))
    return len(frames)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog=PROG, description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "dataset", type=Path, help="LeRobotDataset v3 folder, or a Hub dataset id org/name (from the cache)"
    )
    ap.add_argument("--episode", type=int, required=True, help="episode_index to show")
    ap.add_argument("--save", type=Path, help="write a rerun .rrd file instead of opening the viewer")
    ap.add_argument("--report", type=Path, help="write PNG plots and camera contact sheets into this folder")
    ap.add_argument("--sheet-frames", type=int, default=12, help="frames per contact sheet (default 12)")
    args = ap.parse_args(argv)
    from lerobot_core.hub import HubError, resolve_dataset

    try:
        reader = DatasetReader(resolve_dataset(args.dataset))
    except (DatasetError, FileNotFoundError, HubError) as exc:
        print(f"{PROG}: error: DATASET {str(args.dataset)!r}: {exc}", file=sys.stderr)
        return 2
    if not 0 <= args.episode < reader.num_episodes:
        print(
            f"{PROG}: error: --episode {args.episode}: {args.dataset} has episodes 0..{reader.num_episodes - 1}",
            file=sys.stderr,
        )
        return 2
    if args.report is not None:
        paths = write_report(reader, args.episode, args.report, args.sheet_frames)
        print(
            f"{PROG}: report of episode {args.episode}: {', '.join(str(p) for p in paths)}", file=sys.stderr
        )
    if args.save is not None or args.report is None:
        import rerun as rr

        rec = rr.RecordingStream(f"lerobot_ros/{args.dataset.name}", recording_id=f"episode_{args.episode}")
        if args.save is not None:
            args.save.parent.mkdir(parents=True, exist_ok=True)
            rec.save(str(args.save))
        else:
            rec.spawn()
        n = log_episode(rec, reader, args.episode)
        rec.flush()
        rec.disconnect()  # ends the file sink: the .rrd is complete
        where = (
            f"saved to {args.save} (open it with: rerun {args.save})" if args.save else "sent to the viewer"
        )
        print(f"{PROG}: episode {args.episode}, {n} frames, {where}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
