"""rosbag2 (sqlite3 or mcap) -> LeRobotDataset v3, through the mapping contract and the alignment core.

    lerobot-bag-import BAG_DIR... --output DIR [--fps N] (--config contract.yaml |
        --state TOPIC --action TOPIC --image NAME=TOPIC [--task TEXT]) [--split-topic TOPIC] [--resume]

Every bag is checked before anything is written (readable, every contract topic present with a
supported type, first messages decodable, sizes consistent across bags). Then each bag (or each
segment between two messages of ``--split-topic``) becomes one episode: messages are read in log
order, pushed into the :class:`~lerobot_core.alignment.Aligner`, and the settled ticks go to
:class:`~lerobot_dataset.DatasetWriter`. A failure mid-bag discards that episode only;
episodes saved before it stay. ``--jobs N`` / ``--ray ADDRESS`` convert bags in parallel workers and
merge them in bag order (:mod:`~lerobot_recorder.bag_import_parallel`). ROS-free: uses ``rosbags`` only.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from lerobot_core.contract import Contract

from .bag_episodes import (
    NON_FINITE_CHOICES,
    BagImportError,
    BagPlan,
    EpisodeSummary,
    ImportSummary,
    ProgressBar,
    check_bags,
    check_same_features,
    import_one,
    inspect_bag,
)

__all__ = [
    "BagImportError",
    "BagPlan",
    "EpisodeSummary",
    "ImportSummary",
    "inspect_bag",
    "import_bags",
]


def import_bags(
    bags: Sequence[str | os.PathLike],
    contract: Contract,
    output: str | os.PathLike,
    *,
    split_topic: str | None = None,
    resume: bool = False,
    vcodec: str | None = None,
    latency_margin_s: float = 0.1,
    progress: bool = True,
    progress_stream=None,
    writer_options: dict | None = None,
    log: Callable[[str], None] | None = None,
    jobs: int | None = None,
    ray_address: str | None = None,
    non_finite: str = "refuse",
) -> ImportSummary:
    """Import ``bags`` into the dataset at ``output`` (see the module docstring).

    ``jobs`` None converts in this process; a number converts in that many worker processes (1
    included: the same code path as N workers, the baseline of a scaling measurement).
    ``non_finite``: a message whose values hold NaN or inf "refuse"s its bag (the default; earlier
    bags' episodes are kept) or is "drop"ped (counted per topic in the summary).
    """
    from lerobot_dataset import DatasetError, DatasetWriter

    output = Path(output)
    if jobs is not None and jobs < 1:
        raise BagImportError(f"--jobs must be at least 1, got {jobs}")
    if non_finite not in NON_FINITE_CHOICES:
        raise BagImportError(
            f"--non-finite must be one of {', '.join(NON_FINITE_CHOICES)}, got {non_finite!r}"
        )
    if non_finite == "drop" and (jobs is not None or ray_address is not None):
        raise BagImportError("--non-finite drop converts in this process: leave out --jobs and --ray")
    # ---- phase 1: validate everything before writing anything
    plans, resolved = check_bags(bags, contract, split_topic)
    features = resolved.features()
    created = existed = False
    try:
        if resume:
            if not (output / "meta" / "info.json").is_file():
                what = "does not exist" if not output.exists() else "is not a dataset (no meta/info.json)"
                raise BagImportError(
                    f"--output {output} {what}: --resume appends to an existing dataset; "
                    "leave out --resume to create a new one there"
                )
            writer = DatasetWriter.resume(output, vcodec=vcodec, **(writer_options or {}))
            user = {k: v for k, v in writer.features.items() if k not in _DEFAULT_COLUMNS}
            existing = {
                k: {"dtype": v["dtype"], "shape": tuple(v["shape"]), "names": v.get("names")}
                for k, v in user.items()
            }
            wanted = {
                k: {"dtype": v["dtype"], "shape": tuple(v["shape"]), "names": v.get("names")}
                for k, v in features.items()
            }
            for k, v in user.items():  # units too, where the dataset recorded them (older ones did not)
                if v.get("units") is not None and k in wanted:
                    existing[k]["units"], wanted[k]["units"] = v["units"], features[k].get("units")
                if (v.get("info") or {}).get("depth_unit") and k in wanted:  # a depth camera's unit
                    existing[k]["depth_unit"] = v["info"]["depth_unit"]
                    wanted[k]["depth_unit"] = (features[k].get("info") or {}).get("depth_unit")
            if int(writer.fps) != int(resolved.fps):
                writer.finalize()
                raise BagImportError(
                    f"{output}: the dataset is {writer.fps} fps, the import asks for {resolved.fps}"
                )
            try:
                check_same_features(existing, wanted, str(output))
            except BagImportError:
                writer.finalize()
                raise
        else:
            if output.exists() and output.is_dir() and any(output.iterdir()):
                what = "a dataset" if (output / "meta" / "info.json").is_file() else "not a dataset"
                raise BagImportError(
                    f"--output {output} exists and is not empty ({what}): pass --resume to append to "
                    "the dataset there, or a new --output"
                )
            existed = output.exists()
            created = True
            writer = DatasetWriter.create(
                output,
                resolved.fps,
                features,
                robot_type=resolved.robot_type,
                vcodec=vcodec or "libsvtav1",
                **(writer_options or {}),
            )
    except DatasetError as exc:
        raise BagImportError(f"{output}: {exc}") from None

    summary = ImportSummary(output=output)
    if writer.video_keys:
        summary.video_settings = writer.encoder_settings
    bar = ProgressBar(sum(p.total_messages for p in plans), stream=progress_stream, enabled=progress)
    t0 = time.monotonic()
    try:
        if jobs is not None or ray_address is not None:
            from .bag_import_parallel import run_parallel

            run_parallel(
                [p.path for p in plans],
                contract,
                split_topic,
                writer,
                {"vcodec": writer.vcodec, "pix_fmt": writer.pix_fmt, **(writer_options or {})},
                summary,
                latency_margin_s,
                lambda i: bar.update(
                    plans[i].total_messages, f"bag {i + 1}/{len(plans)} {plans[i].path.name}"
                ),
                jobs=jobs or 1,
                ray_address=ray_address,
            )
        else:
            for i, plan in enumerate(plans):
                label = f"bag {i + 1}/{len(plans)} {plan.path.name}"
                import_one(plan, resolved, writer, summary, bar, label, latency_margin_s, log, non_finite)
                summary.bag_seconds += plan.duration_s
    except BaseException as exc:
        bar.close()
        # clean-up must not hide the original error
        with contextlib.suppress(Exception):
            if writer.episode_frames:
                writer.discard_episode()
        with contextlib.suppress(Exception):
            writer.finalize(on_pending="discard")
        if created and not summary.episodes:
            _remove_dataset(output, keep_dir=existed)
        if isinstance(exc, BagImportError) and len(plans) > 1:
            raise BagImportError(f"{exc}\n{_kept_and_skipped(plans, summary, output)}") from None
        raise
    bar.close()
    writer.finalize()
    summary.wall_seconds = time.monotonic() - t0
    return summary


_DEFAULT_COLUMNS = ("timestamp", "frame_index", "episode_index", "index", "task_index")


def _kept_and_skipped(plans, summary: ImportSummary, output: Path) -> str:
    """What a failed import of several bags left: the episodes saved (and from which bags) and the bags
    not imported, so the user knows what to import again."""
    kept: dict[str, list[int]] = {}
    for ep in summary.episodes:
        kept.setdefault(ep.bag, []).append(ep.episode_index)
    rest = [str(p.path) for p in plans if str(p.path) not in kept]
    if kept:
        lines = [f"  kept in {output}:"] + [
            f"    {bag}: episode{'s' if len(eps) > 1 else ''} {', '.join(map(str, eps))}"
            for bag, eps in kept.items()
        ]
    else:
        lines = [f"  nothing was saved to {output}"]
    if rest:
        again = "--resume " if kept else ""
        lines.append(f"  not imported: {' '.join(rest)}")
        lines.append(
            f"  once the failing bag is fixed (or left out), import these again with the same flags {again}".rstrip()
        )
    return "\n".join(lines)


def _remove_dataset(root: Path, keep_dir: bool) -> None:
    """Remove a dataset this run created and saved nothing into (an empty folder given stays)."""
    shutil.rmtree(root, ignore_errors=True)
    if keep_dir:
        root.mkdir(parents=True, exist_ok=True)
