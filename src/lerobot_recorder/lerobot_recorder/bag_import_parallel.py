"""Bag import on several processes (`--jobs N`) or a Ray cluster (`--ray ADDRESS|auto`).

Each bag is converted on its own by a worker into a private partial dataset (a fresh temporary
folder per attempt, under ``<output>.parts/``), with exactly the main writer's settings. The worker
reads its episodes back (columns, tasks, image statistics) and returns them with the mp4 paths; the
main process merges them into the output in bag order, episode by episode, without re-encoding
(DatasetWriter.save_encoded_episode: parquet rows written, mp4 remuxed). Each bag is merged as soon
as it and every bag before it are converted, while the workers go on with the next bags: the merge
overlaps the conversion instead of following it. The result has the same episodes, rows and frames
as a serial import. A worker that dies mid-bag (killed, out of
memory, lost node) is retried with a new folder, up to ``RETRIES`` times; what it had written is never
merged. A bag that is bad (BagImportError) is not retried: as in a serial import, the episodes before
it (its own saved ones included) are kept and the error is raised.

With Ray, ``<output>.parts/`` must be on storage every worker node can write and the main process can
read (a shared filesystem); on one machine that is given.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from pathlib import Path

from .bag_episodes import BagImportError, EpisodeSummary, ImportSummary, ProgressBar, check_bags, import_one

RETRIES = 2  # extra attempts per bag after a worker died
RAY_CONNECT_TIMEOUT_S = 5.0


def convert_bag_to_part(
    bag: str,
    contract,
    split_topic: str | None,
    parts_dir: str,
    index: int,
    writer_kwargs: dict,
    latency_margin_s: float,
) -> dict:
    """Worker: bag -> a new partial dataset. Returns what the merge needs (picklable, small)."""
    from lerobot_dataset import DatasetReader, DatasetWriter
    from lerobot_dataset import format as fmt

    os.environ.setdefault("SVT_LOG", "1")
    part = Path(parts_dir) / f"bag-{index:05d}-{uuid.uuid4().hex[:8]}"
    plans, resolved = check_bags([bag], contract, split_topic)
    writer = DatasetWriter.create(
        part,
        resolved.fps,
        resolved.features(),
        robot_type=resolved.robot_type,
        # one file per episode: the merge then takes each episode's mp4 as it is
        data_files_size_in_mb=1e-9,
        video_files_size_in_mb=1e-9,
        **writer_kwargs,
    )
    summary = ImportSummary(output=part)
    error = None
    try:
        import_one(
            plans[0], resolved, writer, summary, ProgressBar(0, enabled=False), "", latency_margin_s, None
        )
    except BagImportError as exc:
        error = str(exc)
        if writer.episode_frames:
            writer.discard_episode()
    writer.finalize(on_pending="discard")
    # What the merge needs, read back here rather than in the main process (which merges every bag)
    episodes = []
    if summary.episodes:
        reader = DatasetReader(part)
        user = [k for k in writer.features if k not in fmt.DEFAULT_FEATURES and k not in writer.video_keys]
        for e, ep in enumerate(summary.episodes):
            cols = reader.episode(e)
            meta = reader.episode_meta(e)
            image_stats = reader.episode_stats(e)
            videos = {
                key: (
                    str(
                        part
                        / fmt.video_path(
                            key, meta[f"videos/{key}/chunk_index"], meta[f"videos/{key}/file_index"]
                        )
                    ),
                    image_stats.get(key),
                )
                for key in writer.video_keys
            }
            episodes.append(
                {
                    "frames": ep.frames,
                    "stats": ep.stats,
                    "columns": {k: cols[k] for k in user},
                    "tasks": [str(t) for t in cols["task"]],
                    "videos": videos,
                }
            )
    return {
        "part": str(part),
        "settings": writer.encoder_settings if writer.video_keys else "",
        "episodes": episodes,
        "skipped_segments": summary.skipped_segments,
        "duration_s": plans[0].duration_s,
        "error": error,
    }


def merge_part(writer, result: dict, bag: str, summary) -> None:
    """Append the partial dataset's episodes to `writer`, in order (serial, main process)."""

    for e in result["episodes"]:
        videos = {key: (Path(path), stats) for key, (path, stats) in e["videos"].items()}
        ep = writer.total_episodes
        writer.save_encoded_episode(e["columns"], e["tasks"], videos)
        summary.episodes.append(EpisodeSummary(bag, ep, e["frames"], e["stats"]))
    summary.skipped_segments += result["skipped_segments"]
    summary.bag_seconds += result["duration_s"]


def run_parallel(
    bags: Sequence[str],
    contract,
    split_topic: str | None,
    writer,
    writer_kwargs: dict,
    summary,
    latency_margin_s: float,
    on_bag_done: Callable[[int], None],
    jobs: int = 1,
    ray_address: str | None = None,
) -> None:
    """Convert `bags` in workers, then merge them into `writer` in bag order."""

    parts_dir = Path(f"{writer.root}.parts")
    parts_dir.mkdir(parents=True, exist_ok=True)
    # Each worker's libsvtav1 on its share of the cores (a Ray task reserves one CPU), unless told: N
    # encoders each starting a thread per core only contend. Its bitstream does not depend on it (x264's
    # may: other codecs keep the serial import's threads, so the frames stay the serial import's).
    if writer_kwargs.get("vcodec") == "libsvtav1" and not writer_kwargs.get("encoder_threads"):
        share = 1 if ray_address is not None else max(1, (os.cpu_count() or 1) // max(1, jobs))
        writer_kwargs = {**writer_kwargs, "encoder_threads": share}
    args = [
        (str(b), contract, split_topic, str(parts_dir), i, writer_kwargs, latency_margin_s)
        for i, b in enumerate(bags)
    ]
    results = None
    try:
        if ray_address is not None:
            results = _ray_results(args, ray_address, on_bag_done)
        else:
            results = _process_results(args, jobs, on_bag_done)
        expected = writer.encoder_settings if writer.video_keys else ""
        for bag, result in zip(bags, results, strict=True):
            if result["settings"] != expected:
                raise BagImportError(
                    f"{bag}: the worker encoded with {result['settings']!r}, the dataset uses {expected!r}"
                )
            merge_part(writer, result, str(bag), summary)
            if result["error"]:
                raise BagImportError(result["error"])
            shutil.rmtree(result["part"], ignore_errors=True)
    finally:
        if results is not None:  # after an error above: stop the workers, drop the queued bags
            results.close()
        shutil.rmtree(parts_dir, ignore_errors=True)


def _process_results(args: list[tuple], jobs: int, on_bag_done) -> Iterator[dict]:
    """The workers' results in bag order, each as soon as it and every earlier one are in."""

    results: dict[int, dict] = {}
    attempts = dict.fromkeys(range(len(args)), 0)
    ctx = get_context("spawn")  # no fork of a process that may hold codec threads
    next_out = 0
    while next_out < len(args):
        pending = [i for i in range(next_out, len(args)) if i not in results]
        died: list[int] = []
        # one pool for all bags: its processes start once and convert bag after bag
        pool = ProcessPoolExecutor(max_workers=max(1, min(jobs, len(pending))), mp_context=ctx)
        try:
            futures = {i: pool.submit(convert_bag_to_part, *args[i]) for i in pending}
            for i, fut in futures.items():  # in bag order: the merge needs them so
                try:
                    results[i] = fut.result()
                    on_bag_done(i)
                except BrokenProcessPool:
                    died.append(i)
                    continue
                while not died and next_out in results:
                    yield results.pop(next_out)
                    next_out += 1
        finally:
            # normal end, a dead worker, or the merge stopped (error, interrupt): drop the queued bags
            pool.shutdown(wait=True, cancel_futures=True)
        for i in died:
            attempts[i] += 1
            if attempts[i] > RETRIES:
                raise BagImportError(
                    f"{args[i][0]}: the worker converting it died {attempts[i]} times; nothing of it was written"
                )
        while next_out in results:
            yield results.pop(next_out)
            next_out += 1
        # a bad bag comes back as result["error"] (deterministic: not retried); other exceptions propagate


def check_ray_address(address: str) -> None:
    """Fail within seconds, with the address in the message, when a Ray cluster is not reachable."""

    if address in ("auto", "local"):
        return
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        raise BagImportError(f"--ray {address!r}: expected HOST:PORT of a Ray cluster's head node, or 'auto'")
    try:
        with socket.create_connection((host, int(port)), timeout=RAY_CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        raise BagImportError(
            f"--ray {address}: no Ray cluster reachable there within {RAY_CONNECT_TIMEOUT_S:.0f} s ({exc}); "
            "start one (`ray start --head`) or give the head node's HOST:PORT"
        ) from None


def _ray_results(args: list[tuple], address: str, on_bag_done) -> Iterator[dict]:
    """Connect (errors raised here, before any bag is converted) and start every bag as a Ray task;
    the iterator of their results in bag order."""

    try:
        import ray
    except ImportError:
        raise BagImportError("--ray needs the `ray` package (pip install ray)") from None
    if not ray.is_initialized():
        check_ray_address(address)
        try:
            ray.init(
                address=None if address == "local" else address, include_dashboard=False, log_to_driver=False
            )
        except Exception as exc:
            raise BagImportError(f"--ray {address}: cannot connect ({type(exc).__name__}: {exc})") from None
    # max_retries: a worker process or node that dies mid-bag reruns the task (new part folder).
    remote = ray.remote(max_retries=RETRIES, retry_exceptions=False)(convert_bag_to_part)
    refs = [remote.remote(*a) for a in args]
    return _ray_in_order(ray, refs, args, on_bag_done)


def _ray_in_order(ray, refs: list, args: list[tuple], on_bag_done) -> Iterator[dict]:
    done = 0
    try:
        for i, ref in enumerate(refs):
            try:
                result = ray.get(ref)
            except ray.exceptions.RayTaskError as exc:
                cause = exc.as_instanceof_cause()
                if isinstance(cause, BagImportError):
                    raise BagImportError(str(cause).splitlines()[-1]) from None
                raise BagImportError(f"{args[i][0]}: the Ray task failed: {exc}") from None
            except (ray.exceptions.WorkerCrashedError, ray.exceptions.RayError) as exc:
                raise BagImportError(
                    f"{args[i][0]}: the Ray worker converting it died {RETRIES + 1} times ({type(exc).__name__}); "
                    "nothing of it was written"
                ) from None
            on_bag_done(i)
            done = i + 1
            yield result
    finally:  # stopped early (an error, an interrupt): the bags not converted yet are not needed
        for ref in refs[done:]:
            with contextlib.suppress(Exception):
                ray.cancel(ref)
