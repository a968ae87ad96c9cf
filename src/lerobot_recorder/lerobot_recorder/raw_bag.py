"""Raw rosbag2 (mcap) recording of serialized messages, with `rosbags` (ROS-free).

"Record raw, convert later": the recorder node can write what it subscribes to into one mcap
bag per episode, byte for byte as received (CDR), and ``lerobot-bag-import`` turns the bags into
the same dataset live recording would have written.

Layout of a raw recording folder::

    <root>/episode_000000/          a rosbag2 folder (metadata.yaml + .mcap), one per saved episode
    <root>/episode_000001/
    <root>/.partial-episode_000002-<pid>/   an episode being written (renamed when saved; a crash
                                            leaves it there untouched and it is never reused)

API
    RawBagWriter(path, topics, typestore=None)      topics: {topic: "pkg/msg/Type"}
        .write(topic, timestamp_ns, data)  .close()  .abort()
    ThreadedBagWriter(path, topics)                 the same, written by its own thread
        .put(topic, timestamp_ns, data)  .backlog()  .close() -> messages written  .abort()
    RawRecording(root)                              episode folders: .next_index(), .begin(i, topics),
                                                    .commit(writer, i), .discard(writer)
"""

from __future__ import annotations

import collections
import os
import queue
import re
import shutil
import threading
import time
from pathlib import Path

from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores

from lerobot_core import cdr

__all__ = ["RawBagError", "RawBagWriter", "ThreadedBagWriter", "RawRecording", "EPISODE_DIR"]

EPISODE_DIR = "episode_{:06d}"
_EPISODE_RE = re.compile(r"^episode_(\d{6})$")


class RawBagError(RuntimeError):
    pass


class RawBagWriter:
    """An mcap rosbag2 being written: one connection per topic, serialized CDR messages in."""

    def __init__(self, path: str | os.PathLike, topics: dict[str, str], typestore=None):
        self.path = Path(path)
        if self.path.exists():
            raise RawBagError(
                f"{self.path} already exists; a raw bag is never written over an existing folder"
            )
        typestore = typestore or cdr.typestore()
        unknown = {t: m for t, m in topics.items() if m not in typestore.types}
        if unknown:
            raise RawBagError(
                f"cannot record {unknown} raw: message type(s) unknown to the rosbags typestore "
                f"({Stores.ROS2_KILTED.value})"
            )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._writer = Writer(self.path, version=9, storage_plugin=StoragePlugin.MCAP)
        self._writer.open()
        self._conns = {t: self._writer.add_connection(t, m, typestore=typestore) for t, m in topics.items()}
        self.counts = dict.fromkeys(topics, 0)
        self.closed = False

    def write(self, topic: str, timestamp_ns: int, data: bytes | memoryview) -> None:
        conn = self._conns.get(topic)
        if conn is None:
            raise RawBagError(f"{self.path}: topic {topic!r} was not declared for this bag")
        self._writer.write(conn, int(timestamp_ns), data)
        self.counts[topic] += 1

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._writer.close()

    def abort(self) -> None:
        """Stop writing and delete the bag."""
        if not self.closed:
            self.closed = True
            try:
                self._writer.close()
            except Exception:  # the folder goes away anyway
                pass
        shutil.rmtree(self.path, ignore_errors=True)


class ThreadedBagWriter:
    """A RawBagWriter fed through an unbounded queue and written by its own thread.

    The queue never drops: a slow disk shows up as ``backlog()`` growing (reported by the node).
    The first write error stops the thread; ``close()`` then raises it.
    """

    def __init__(self, path: str | os.PathLike, topics: dict[str, str], typestore=None):
        self._bag = RawBagWriter(path, topics, typestore)
        self.path = self._bag.path
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._pending = 0
        self._lock = threading.Lock()
        self.error: BaseException | None = None
        self.latencies_ns: collections.deque = collections.deque(maxlen=200_000)  # stamp -> written
        self._thread = threading.Thread(target=self._run, name=f"rawbag-{self.path.name}", daemon=True)
        self._thread.start()

    @property
    def counts(self) -> dict[str, int]:
        return dict(self._bag.counts)

    def put(
        self, topic: str, timestamp_ns: int, data: bytes | memoryview, stamp_ns: int | None = None
    ) -> None:
        """Queue one message; ``stamp_ns`` (its header stamp, optional) feeds ``latencies_ns``."""
        if self.error is not None:
            raise RawBagError(f"{self.path}: raw bag writing failed: {self.error}") from self.error
        with self._lock:
            self._pending += 1
        self._q.put((topic, timestamp_ns, data, stamp_ns))

    def backlog(self) -> int:
        return self._pending

    def _run(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            try:
                if self.error is None:
                    topic, t_ns, data, stamp_ns = item
                    self._bag.write(topic, t_ns, data)
                    if stamp_ns:
                        self.latencies_ns.append(time.time_ns() - stamp_ns)
            except BaseException as exc:
                self.error = exc
            finally:
                with self._lock:
                    self._pending -= 1

    def close(self) -> int:
        """Write everything queued, close the bag; returns the number of messages written."""
        self._q.put(None)
        self._thread.join()
        if self.error is not None:
            self._bag.abort()
            raise RawBagError(f"{self.path}: raw bag writing failed: {self.error}") from self.error
        self._bag.close()
        return sum(self._bag.counts.values())

    def abort(self) -> None:
        self.error = self.error or RawBagError("aborted")
        self._q.put(None)
        self._thread.join()
        self._bag.abort()


class RawRecording:
    """A folder of per-episode raw bags (see the module docstring)."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        if self.root.exists() and not self.root.is_dir():
            raise RawBagError(f"raw bag folder {self.root} exists and is not a directory")
        if self.root.is_dir():
            foreign = [
                p.name
                for p in self.root.iterdir()
                if not (_EPISODE_RE.match(p.name) or p.name.startswith(".partial-"))
            ]
            if foreign:
                raise RawBagError(
                    f"raw bag folder {self.root} holds other files ({', '.join(sorted(foreign)[:5])}); "
                    "give an empty or new folder, or one written by the recorder"
                )

    def episodes(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        return sorted(p for p in self.root.iterdir() if _EPISODE_RE.match(p.name))

    def partials(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        return sorted(p for p in self.root.iterdir() if p.name.startswith(".partial-"))

    def next_index(self) -> int:
        eps = self.episodes()
        return int(_EPISODE_RE.match(eps[-1].name).group(1)) + 1 if eps else 0

    def begin(self, index: int, topics: dict[str, str]) -> ThreadedBagWriter:
        path = self.root / f".partial-{EPISODE_DIR.format(index)}-{os.getpid()}"
        if path.exists():
            shutil.rmtree(path)
        return ThreadedBagWriter(path, topics)

    def commit(self, writer: ThreadedBagWriter, index: int) -> Path:
        writer.close()
        final = self.root / EPISODE_DIR.format(index)
        if final.exists():
            raise RawBagError(f"{final} already exists; the raw episode stays in {writer.path}")
        os.replace(writer.path, final)
        return final

    def discard(self, writer: ThreadedBagWriter) -> None:
        writer.abort()
