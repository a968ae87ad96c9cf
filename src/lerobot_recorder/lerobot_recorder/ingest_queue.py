"""The live recorder's ingest queue: serialized messages from the subscription callbacks to the
worker thread, bounded in bytes. Backpressure is visible, never silent: when the worker falls behind
the queue grows and its length is reported; only past ``max_bytes`` are the oldest messages dropped,
counted per stream."""

from __future__ import annotations

import collections
import threading
from collections.abc import Iterable


class IngestQueue:
    """(topic, serialized message, receive ns) in arrival order; thread-safe."""

    def __init__(self, max_mb: float, topics: Iterable[str] = ()):
        self.max_mb = max_mb
        self._items: collections.deque = collections.deque()
        self._bytes = 0
        self._lock = threading.Lock()
        self.dropped: dict[str, int] = dict.fromkeys(topics, 0)  # per topic, since the start

    def put(self, topic: str, data: bytes, receive_ns: int) -> None:
        """Append; past the byte limit drop the oldest messages (never the last one), counted per topic."""
        with self._lock:
            self._items.append((topic, data, receive_ns))
            self._bytes += len(data)
            limit = self.max_mb * 1024 * 1024
            while self._bytes > limit and len(self._items) > 1:
                t, d, _ = self._items.popleft()
                self._bytes -= len(d)
                self.dropped[t] = self.dropped.get(t, 0) + 1

    def pop(self) -> tuple[str, bytes, int] | None:
        """The oldest message, or None when the queue is empty."""
        with self._lock:
            if not self._items:
                return None
            item = self._items.popleft()
            self._bytes -= len(item[1])
            return item

    def backlog(self) -> tuple[int, int]:
        """(messages waiting, messages dropped so far)."""
        with self._lock:
            return len(self._items), sum(self.dropped.values())

    def drop_report(self) -> str:
        """What was dropped, for the log ('' when nothing was)."""
        dropped = sum(self.dropped.values())
        if not dropped:
            return ""
        return (
            f"backpressure: {dropped} message(s) dropped from the ingest queue so far "
            f"(> {self.max_mb:g} MB waiting): {dict((k, v) for k, v in self.dropped.items() if v)}"
        )
