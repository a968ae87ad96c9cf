"""Crash-safe file commits: temp files + fsync + a journal of renames rolled forward on recovery.

An episode save writes every changed file (data parquet, mp4s, episodes parquet, tasks, stats,
info) next to the dataset under `.lerobot_ros/`, fsyncs them, then records the planned renames in
a journal and performs them. A crash before the journal exists leaves the dataset exactly as it
was; a crash after it is completed by `recover()` (the next resume). Readers never see partial
files because every final path only ever receives a complete file through os.replace().
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
from pathlib import Path

from .errors import DatasetError

WORK_DIR = ".lerobot_ros"
JOURNAL = "commit-journal.json"
LOCK = "writer.lock"

DISK_FULL_ERRNOS = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT}
_DISK_FULL_TEXT = tuple(os.strerror(e) for e in DISK_FULL_ERRNOS) + tuple(
    f"rrno {e}]" for e in DISK_FULL_ERRNOS
)


def is_disk_full(exc: BaseException) -> bool:
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS:
            return True
        # pyarrow and PyAV report write failures with the errno only in the message text.
        text = str(exc)
        if any(marker in text for marker in _DISK_FULL_TEXT):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_json_file(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=4)
        f.flush()
        os.fsync(f.fileno())


class WriterLock:
    """Exclusive advisory lock so two writers never append to the same dataset."""

    def __init__(self, root: Path):
        self.path = root / WORK_DIR / LOCK
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                holder = os.read(self._fd, 32).decode(errors="replace").strip() or "?"
            except OSError:
                holder = "?"
            os.close(self._fd)
            raise DatasetError(
                f"{root}: another writer (process {holder}: a recorder or an import) has this dataset open; "
                "two writers would corrupt it: stop that one first, or record into another folder"
            ) from None
        os.ftruncate(self._fd, 0)
        os.write(self._fd, str(os.getpid()).encode())

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class Transaction:
    """Collects temp files for one commit; `commit()` renames them into place all together."""

    def __init__(self, root: Path, name: str):
        self.root = root
        self.dir = root / WORK_DIR / "staging" / name
        if self.dir.exists():
            shutil.rmtree(self.dir)
        self.dir.mkdir(parents=True)
        self.moves: list[tuple[str, str]] = []
        self._n = 0
        self.journaled = False  # the journal is on disk: from here a crash is completed, not lost

    def temp_path(self, final_rel: str) -> Path:
        self._n += 1
        return self.dir / f"{self._n:03d}-{Path(final_rel).name}"

    def stage(self, temp: Path, final_rel: str) -> None:
        fsync_file(temp)
        self.moves.append((str(temp.relative_to(self.root)), final_rel))

    def commit(self) -> None:
        journal = self.root / WORK_DIR / JOURNAL
        tmp = journal.with_suffix(".tmp")
        try:
            write_json_file(tmp, {"moves": self.moves})
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        os.replace(tmp, journal)
        self.journaled = True
        fsync_dir(journal.parent)
        apply_journal(self.root)

    def abort(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def apply_journal(root: Path) -> bool:
    """Complete an interrupted commit. Returns True if a journal was found."""
    journal = root / WORK_DIR / JOURNAL
    if not journal.exists():
        return False
    try:
        with open(journal, encoding="utf-8") as f:
            moves = json.load(f)["moves"]
    except (OSError, ValueError, KeyError) as exc:
        raise DatasetError(f"{journal}: unreadable commit journal ({exc}); inspect it by hand") from exc
    touched = set()
    for temp_rel, final_rel in moves:
        temp, final = root / temp_rel, root / final_rel
        if temp.exists():
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(temp, final)
            touched.add(final.parent)
        elif not final.exists():
            raise DatasetError(
                f"{journal}: neither {temp} nor {final} exists; the commit cannot be completed"
            )
    for d in touched:
        fsync_dir(d)
    journal.unlink()
    fsync_dir(journal.parent)
    return True


def clear_staging(root: Path) -> None:
    shutil.rmtree(root / WORK_DIR / "staging", ignore_errors=True)
    shutil.rmtree(root / WORK_DIR / "episode", ignore_errors=True)
