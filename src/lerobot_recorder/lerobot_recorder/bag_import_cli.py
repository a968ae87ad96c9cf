"""`lerobot-bag-import`: the command line of the bag import (:mod:`~lerobot_recorder.bag_import`).

lerobot-bag-import BAG_DIR... --output DIR [--fps N] (--config contract.yaml |
    --state TOPIC --action TOPIC --image NAME=TOPIC [--task TEXT]) [--split-topic TOPIC] [--resume]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from lerobot_core import cli
from lerobot_core.contract import Contract, ContractError

from .bag_episodes import NON_FINITE_CHOICES, BagImportError, check_bags, describe_plan, open_bag
from .bag_import import import_bags


def _parse_image(value: str) -> tuple[str, str]:
    name, sep, topic = value.partition("=")
    if not sep or not name or not topic:
        raise argparse.ArgumentTypeError(f"expected NAME=TOPIC, got {value!r}")
    return name, topic


def build_parser() -> argparse.ArgumentParser:
    from lerobot_dataset.depth import X265_PRESETS

    p = argparse.ArgumentParser(
        prog="lerobot-bag-import",
        description="Convert rosbag2 recordings (sqlite3 or mcap) into a LeRobotDataset v3.",
        epilog="Example: lerobot-bag-import bags/run1 bags/run2 --output data/pick --fps 30 "
        "--state /joint_states --action /leader/joint_states --image front=/cameras/front/image_raw "
        "--task 'Pick up the cube'",
        formatter_class=cli.HelpFormatter,
    )
    p.add_argument(
        "bags", nargs="+", metavar="BAG_DIR", help="rosbag2 directories (one episode each by default)"
    )
    p.add_argument("--output", "-o", required=True, help="dataset directory (new, or existing with --resume)")
    p.add_argument(
        "--fps", type=cli.positive_int, help="dataset frames per second (overrides the contract's fps)"
    )
    p.add_argument(
        "--config",
        help="mapping contract (topics -> features): a YAML path, or a shipped one's name (so101_one_camera); "
        "see docs/recording.md",
    )
    p.add_argument("--state", metavar="TOPIC", help="JointState topic -> observation.state")
    p.add_argument("--action", metavar="TOPIC", help="JointState topic -> action")
    p.add_argument(
        "--image",
        metavar="NAME=TOPIC",
        action="append",
        type=_parse_image,
        default=[],
        help="Image/CompressedImage topic -> observation.images.NAME (repeatable)",
    )
    p.add_argument("--task", metavar="TEXT", help="task text for every frame (default with --task-topic)")
    p.add_argument("--task-topic", metavar="TOPIC", help="std_msgs/String topic giving the task")
    p.add_argument(
        "--joints", help="comma-separated joint names/order for --state/--action (default: as in the bag)"
    )
    p.add_argument("--robot-type", help="robot_type written to meta/info.json")
    p.add_argument("--split-topic", metavar="TOPIC", help="each message on TOPIC starts a new episode")
    p.add_argument("--resume", action="store_true", help="append to an existing dataset")
    p.add_argument(
        "--jobs",
        type=cli.positive_int,
        help="convert this many bags at once in separate worker processes, merged into one dataset in bag "
        "order (same episodes, rows and frames as without --jobs, which converts in this process)",
    )
    p.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="convert the bags as tasks on a Ray cluster (HOST:PORT of its head, or auto); "
        "<output>.parts must be on storage every node shares",
    )
    p.add_argument(
        "--vcodec",
        help="video codec: libsvtav1 (default), h264, hevc, a hardware encoder (h264_nvenc, av1_qsv, ...) "
        "or auto (first hardware encoder that opens here, else libsvtav1); --resume: the dataset's",
    )
    p.add_argument(
        "--crf", type=cli.non_negative_int, help="video constant-quality factor (default: 30, LeRobot's)"
    )
    p.add_argument(
        "--lerobot-version",
        default="0.6",
        help="LeRobot version the dataset is for: 0.6 (default) or 0.4.4. Both read what we write, except "
        "depth cameras (16UC1 / 32FC1 images; mono16 with a contract saying depth: true), which are stored as LeRobot 0.6's depth video and "
        "are an error for 0.4.4",
    )
    p.add_argument(
        "--depth-preset",
        choices=X265_PRESETS,
        help="libx265 speed preset for depth cameras (default: its own, as LeRobot 0.6); the depth "
        "video is lossless, so a faster preset (ultrafast: ~5x) gives the same depth, ~3%% larger files",
    )
    p.add_argument(
        "--preset",
        help="encoder speed preset (libsvtav1: 0-13, default 10 = what LeRobot 0.4.4 encodes at; h264: ultrafast..veryslow)",
    )
    p.add_argument(
        "--latency-margin",
        type=cli.non_negative_float,
        default=0.1,
        metavar="S",
        help="seconds of log time after which a tick is settled even if a stream is silent "
        "(as the live recorder: the same data gives the same dataset)",
    )
    p.add_argument(
        "--non-finite",
        choices=NON_FINITE_CHOICES,
        default="refuse",
        help="a message holding NaN or inf: refuse its bag (default; earlier bags are kept) or drop the "
        "message (counted per topic in the report)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--check", action="store_true", help="only validate the bags and show the features; write nothing"
    )
    return p


def contract_from_args(args) -> Contract:
    quick = args.state or args.action or args.image
    if args.config and quick:
        raise BagImportError("give either --config or the quick flags (--state/--action/--image), not both")
    if args.config:
        contract = Contract.load(args.config)
        if args.fps is not None:
            contract = replace(contract, fps=args.fps)
        if args.task:
            contract = replace(contract, task_text=args.task)
        return contract
    if not quick:
        raise BagImportError("nothing to import: give --config, or --state/--action/--image")
    if args.fps is None:
        raise BagImportError("--fps is required with the quick flags")
    joints = [j.strip() for j in args.joints.split(",") if j.strip()] if args.joints else None
    # the quick flags take each topic's type from the first bag (JointState, Float64MultiArray, ...)
    reader = open_bag(Path(args.bags[0]))
    try:
        types = {c.topic: c.msgtype for c in reader.connections}
    finally:
        reader.close()
    types.update({t.lstrip("/"): m for t, m in list(types.items())})
    return Contract.from_flags(
        args.fps,
        state=args.state,
        action=args.action,
        images=dict(args.image),
        task=args.task,
        task_topic=args.task_topic,
        robot_type=args.robot_type,
        joints=joints,
        types=types,
    )


def check_video_flags(args, contract: Contract, writer_options: dict) -> None:
    """--vcodec, --crf, --preset and the frame rate, tried on the encoder before any bag is read: a value
    it refuses is a BagImportError naming the flag (each camera's frame size is checked once it is known,
    before the first episode). With --resume and no --vcodec the dataset's codec is checked there."""
    from lerobot_dataset import DatasetError
    from lerobot_dataset.encoders import (
        EncoderSettingError,
        check_encoder_settings,
        codec_options,
        encoder_pix_fmt,
        resolve_encoder,
    )

    if not contract.images or (args.resume and not args.vcodec):
        return
    options = {"g": 2, "crf": 30, **writer_options}
    try:
        encoder = resolve_encoder(args.vcodec or "libsvtav1")
        check_encoder_settings(
            encoder,
            encoder_pix_fmt(encoder, "yuv420p"),
            codec_options(encoder, options["g"], options["crf"], options.get("preset")),
            int(contract.fps),
        )
    except EncoderSettingError as exc:
        flag = {"crf": "--crf", "preset": "--preset", "fps": "--fps" if args.fps else "fps (of --config)"}
        raise BagImportError(f"{flag.get(exc.setting, '--vcodec')} {exc.value}: {exc}") from None
    except DatasetError as exc:
        raise BagImportError(f"--vcodec {args.vcodec}: {exc}") from None


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # SVT-AV1 prints its whole configuration per episode at info level: errors only on a terminal tool
    os.environ.setdefault("SVT_LOG", "1")
    try:
        contract = contract_from_args(args)
        if args.robot_type and args.config:
            contract = replace(contract, robot_type=args.robot_type)
        if args.check:
            plans, resolved = check_bags(args.bags, contract, args.split_topic)
            print(describe_plan(plans, resolved))
            return 0
        writer_options = {"lerobot_version": args.lerobot_version}
        if args.depth_preset:
            writer_options["depth_preset"] = args.depth_preset
        if args.crf is not None:
            writer_options["crf"] = args.crf
        if args.preset is not None:
            writer_options["preset"] = int(args.preset) if args.preset.lstrip("-").isdigit() else args.preset
        check_video_flags(args, contract, writer_options)
        summary = import_bags(
            args.bags,
            contract,
            args.output,
            split_topic=args.split_topic,
            resume=args.resume,
            vcodec=args.vcodec,
            latency_margin_s=args.latency_margin,
            progress=not args.no_progress,
            writer_options=writer_options,
            jobs=args.jobs,
            ray_address=args.ray,
            non_finite=args.non_finite,
        )
    except (BagImportError, ContractError) as exc:
        print(f"lerobot-bag-import: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("lerobot-bag-import: interrupted; episodes saved so far are kept", file=sys.stderr)
        return 130
    print(summary.report())
    return 0


if __name__ == "__main__":
    sys.exit(main())
