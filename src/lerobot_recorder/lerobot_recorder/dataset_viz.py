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
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from lerobot_core import cli
from lerobot_dataset import DatasetError, DatasetReader
from lerobot_dataset.depth import depth_preview

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
        depth = reader.depth_quantizer(key)
        if depth is not None:  # a depth camera: its depth through a colour map
            video = depth_preview(video, depth)
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


def has_display() -> bool:
    """Whether a native window can open here (Linux needs an X11 or Wayland display; others always can)."""
    if not sys.platform.startswith("linux"):
        return True
    return any(os.environ.get(v) for v in ("DISPLAY", "WAYLAND_DISPLAY", "WAYLAND_SOCKET"))


def _port_open(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.2)
        return sock.connect_ex((host, port)) == 0


class ViewerError(RuntimeError):
    """The rerun viewer did not start or dropped the connection."""


def open_viewer(bind: str, port: int, timeout_s: float = 15.0):
    """The rerun viewer's gRPC address, after starting one that listens on ``bind``:``port`` (or reusing
    the viewer already there). rerun's own spawn() always listens on every interface; this starts the
    same viewer with ``--bind``. Returns (url, process or None)."""
    host = "127.0.0.1" if bind in ("0.0.0.0", "::") else bind
    url = f"rerun+http://{host}:{port}/proxy"
    if _port_open(host, port):
        return url, None  # a viewer is already running there: rerun's spawn() reuses it too
    env = dict(os.environ, RERUN_APP_ONLY="true")
    cmd = [sys.executable, "-m", "rerun_cli", "--bind", bind, "--port", str(port), "--expect-data-soon"]
    proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + timeout_s
    while not _port_open(host, port):
        if proc.poll() is not None:
            raise ViewerError(
                f"the rerun viewer exited (code {proc.returncode}) before it listened on {bind}:{port}"
            )
        if time.monotonic() > deadline:
            proc.terminate()
            raise ViewerError(f"the rerun viewer did not listen on {bind}:{port} within {timeout_s:g} s")
        time.sleep(0.05)
    return url, proc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog=PROG, description=__doc__.split("\n\n")[0], formatter_class=cli.HelpFormatter
    )
    ap.add_argument(
        "dataset", type=Path, help="LeRobotDataset v3 folder, or a Hub dataset id org/name (from the cache)"
    )
    ap.add_argument("--episode", type=cli.non_negative_int, required=True, help="episode_index to show")
    ap.add_argument("--save", type=Path, help="write a rerun .rrd file instead of opening the viewer")
    ap.add_argument("--report", type=Path, help="write PNG plots and camera contact sheets into this folder")
    ap.add_argument("--sheet-frames", type=cli.positive_int, default=12, help="frames per contact sheet")
    ap.add_argument(
        "--bind",
        default="127.0.0.1",
        help="address the viewer's gRPC server listens on; 0.0.0.0 serves the episode to the whole network",
    )
    ap.add_argument(
        "--port", type=cli.number(int, minimum=1, maximum=65535), default=9876, help="viewer's port"
    )
    args = ap.parse_args(argv)
    viewer = args.save is None and args.report is None
    if viewer and not has_display():
        print(
            f"{PROG}: error: no display here (DISPLAY and WAYLAND_DISPLAY are unset), so no viewer can open: "
            f"write a file with --save EPISODE.rrd (then `rerun EPISODE.rrd` where there is a display) "
            f"or PNG plots with --report DIR",
            file=sys.stderr,
        )
        return 2
    from lerobot_core.hub import HubError, resolve_dataset

    try:
        reader = DatasetReader(resolve_dataset(args.dataset))
    except (DatasetError, FileNotFoundError, HubError) as exc:
        print(f"{PROG}: error: DATASET {str(args.dataset)!r}: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # a damaged dataset is reported, never a traceback
        print(
            f"{PROG}: error: DATASET {str(args.dataset)!r} cannot be read: {_why(exc)}{_CHECK.format(args.dataset)}",
            file=sys.stderr,
        )
        return 2
    if not 0 <= args.episode < reader.num_episodes:
        print(
            f"{PROG}: error: --episode {args.episode}: {args.dataset} has episodes 0..{reader.num_episodes - 1}",
            file=sys.stderr,
        )
        return 2
    try:
        if args.report is not None:
            paths = write_report(
                reader, args.episode, args.report, args.sheet_frames, title=str(args.dataset)
            )
            print(
                f"{PROG}: report of episode {args.episode}: {', '.join(str(p) for p in paths)}",
                file=sys.stderr,
            )
        if args.save is not None or viewer:
            import rerun as rr

            rec = rr.RecordingStream(
                f"lerobot_ros/{args.dataset.name}", recording_id=f"episode_{args.episode}"
            )
            proc = None
            if args.save is not None:
                args.save.parent.mkdir(parents=True, exist_ok=True)
                rec.save(str(args.save))
            else:
                url, proc = open_viewer(args.bind, args.port)
                rec.connect_grpc(url)
            n = log_episode(rec, reader, args.episode)
            try:
                rec.flush()
                rec.disconnect()  # ends the file sink: the .rrd is complete
            except RuntimeError as exc:  # the viewer went away while the episode was sent
                raise ViewerError(f"the rerun viewer closed the connection ({exc})") from None
            if proc is not None:
                try:  # a viewer that cannot open its window exits at once (its own messages say why)
                    proc.wait(timeout=2.0)
                    raise ViewerError(
                        f"the rerun viewer exited (code {proc.returncode}); its messages above say why"
                    )
                except subprocess.TimeoutExpired:
                    pass
            where = (
                f"saved to {args.save} (open it with: rerun {args.save})"
                if args.save
                else f"sent to the viewer on {args.bind}:{args.port}"
            )
            print(f"{PROG}: episode {args.episode}, {n} frames, {where}", file=sys.stderr)
    except ViewerError as exc:
        print(
            f"{PROG}: error: {exc}; --save EPISODE.rrd or --report DIR work without a viewer", file=sys.stderr
        )
        return 1
    except Exception as exc:  # a damaged dataset is reported, never a traceback
        print(
            f"{PROG}: error: episode {args.episode} of {args.dataset} cannot be read: {_why(exc)}"
            f"{_CHECK.format(args.dataset)}",
            file=sys.stderr,
        )
        return 1
    return 0


_CHECK = " (lerobot-dataset-info {} --check lists what is damaged)"


def _why(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return text if isinstance(exc, (DatasetError, OSError)) and text else f"{type(exc).__name__}: {text}"


if __name__ == "__main__":
    sys.exit(main())
