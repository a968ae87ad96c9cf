"""Reading a rosbag2's messages without copying them (ROS-free: rosbags plus the MCAP layout).

rosbags reads an MCAP chunk into new bytes, then every message record into new bytes again: three
copies of each camera frame before the import looks at it. For MCAP files with an index (what
`ros2 bag record` and rosbags write) this maps the file and hands out each payload as a read-only
memoryview into the mapping: uncompressed chunks are never copied, compressed ones are decompressed
once (by rosbags' own checked decompressor). The order is rosbags': file by file, by log time, ties
in chunk order and then record order. Anything else (sqlite3, unindexed MCAP, per-message
compression) is read by rosbags itself.

Also a direct decoder for sensor_msgs/JointState, most of a bag's messages, that decodes the joint
names once per distinct set instead of once per message.
"""

from __future__ import annotations

import heapq
import mmap
import struct
import zlib
from collections.abc import Collection, Iterator
from operator import itemgetter
from typing import Any

import numpy as np
from rosbags.rosbag2.errors import ReaderError
from rosbags.rosbag2.storage_mcap import McapReader, decompress

_RECORD = struct.Struct("<BQ")  # opcode, content length
_MESSAGE = struct.Struct("<HIQ")  # channel id, sequence, log time (publish time follows)
_MESSAGE_DATA = 9 + 22  # a message record's payload starts after opcode, length and 22 bytes of fields
_CHUNK_CRC = 9 + 24  # offset of a chunk record's uncompressed CRC from its opcode
_CHUNK_RECORDS = 9 + 40  # offset of its records from its opcode, plus len(compression)


def messages(reader, connections: Collection) -> Iterator[tuple[Any, int, memoryview | bytes]]:
    """(connection, log time ns, CDR payload) of `connections` in an open rosbags Reader, like
    `reader.messages(connections=...)`, the payloads zero-copy where the storage allows."""
    storages = _mapped_storages(reader)
    if storages is None:
        yield from reader.messages(connections=connections)
        return
    for storage in storages:
        cmap = {x.id: conn for x in storage.connections if (conn := _matching(x, connections)) is not None}
        if not cmap:
            continue
        if not storage.chunks:  # unindexed: rosbags scans it
            for conn, log_time, raw in storage.messages([x for x in storage.connections if x.id in cmap]):
                yield cmap[conn.id], log_time, raw
            continue
        yield from _storage_messages(storage, cmap)


def _matching(storage_conn, connections: Collection):
    """The requested connection a file's channel belongs to, by rosbags' rule (topic, type, QoS
    extension, and the type hash when both have one)."""
    for c in connections:
        if (
            c.topic == storage_conn.topic
            and c.msgtype == storage_conn.msgtype
            and c.ext == storage_conn.ext
            and (not c.digest or not storage_conn.digest or c.digest == storage_conn.digest)
        ):
            return c
    return None


def _mapped_storages(reader) -> list | None:
    directory = getattr(reader, "storage", None)
    storages = getattr(directory, "storages", None)
    if not storages or getattr(directory.metadata, "compression_mode", None) == "message":
        return None
    if not all(type(s) is McapReader and hasattr(s, "chunks") and hasattr(s, "path") for s in storages):
        return None
    return storages


def _storage_messages(storage, cmap: dict) -> Iterator[tuple[Any, int, memoryview | bytes]]:
    with open(storage.path, "rb") as f:
        size = f.seek(0, 2)
        if size == 0:
            raise ReaderError(f"{storage.path}: empty MCAP file")
        buf = memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
    sources = [
        _chunk_messages(buf, chunk, order, cmap, storage.path)
        for order, chunk in enumerate(storage.chunks)
        if any(chunk.channel_count.get(cid, 0) for cid in cmap)
    ]
    # each source first yields its chunk's start time with no message, so a chunk is read only once
    # the merge reaches it (memory stays one chunk per overlapping chunk, as with rosbags)
    for log_time, _, _, conn, data in heapq.merge(*sources):
        if conn is not None:
            yield conn, log_time, data


def _chunk_messages(buf: memoryview, chunk, order: int, cmap: dict, path) -> Iterator[tuple]:
    yield (chunk.message_start_time, order, -1, None, None)
    start = chunk.chunk_start_offset + _CHUNK_RECORDS + len(chunk.compression)
    end = start + chunk.compressed_size
    if end > len(buf):
        raise ReaderError(
            f"{path}: chunk at byte {chunk.chunk_start_offset} ends at byte {end}, after the end of the "
            f"file ({len(buf)} bytes): the file is truncated"
        )
    (crc,) = struct.unpack_from("<I", buf, chunk.chunk_start_offset + _CHUNK_CRC)
    data = buf[start:end]
    if chunk.compression:
        data = memoryview(decompress(data, chunk.compression, chunk.uncompressed_size, crc))
    elif crc and zlib.crc32(data) != crc:
        raise ReaderError(f"{path}: chunk at byte {chunk.chunk_start_offset}: checksum mismatch")
    found = []
    record, message = _RECORD.unpack_from, _MESSAGE.unpack_from
    pos, size = 0, len(data)
    while pos < size:
        if pos + 9 > size:
            raise ReaderError(f"{path}: chunk at byte {chunk.chunk_start_offset}: truncated record")
        op, length = record(data, pos)
        nxt = pos + 9 + length
        if nxt > size:
            raise ReaderError(f"{path}: chunk at byte {chunk.chunk_start_offset}: record overruns the chunk")
        if op == 0x05:
            if length < 22:
                raise ReaderError(f"{path}: invalid message record length {length}")
            cid, _, log_time = message(data, pos + 9)
            conn = cmap.get(cid)
            if conn is not None:
                found.append((log_time, order, len(found), conn, data[pos + _MESSAGE_DATA : nxt]))
        pos = nxt
    found.sort(key=itemgetter(0))  # by log time; stable: equal stamps keep record order
    yield from found


# ---------------------------------------------------------------------- sensor_msgs/JointState
# The bulk of a bag's messages (100-1000 Hz per arm). rosbags decodes and checks every joint name of
# every message; a recorder's names never change, so the name block's bytes key a cache of the
# decoded names.
_U32 = struct.Struct("<I").unpack_from
_STAMP = struct.Struct("<iII").unpack_from  # sec, nanosec, frame_id length
_NAME_LISTS: dict[bytes, tuple[str, ...]] = {}


def decode_joint_state(raw: bytes | memoryview, types: dict) -> Any | None:
    """A sensor_msgs/JointState from little-endian CDR as rosbags' class (equal to what rosbags
    decodes: arrays are read-only float64 views of `raw`); None for big-endian CDR (rosbags decodes
    it). ValueError on a truncated or malformed payload."""
    buf = memoryview(raw)
    if len(buf) < 4 or bytes(buf[:2]) != b"\x00\x01":
        return None
    try:
        sec, nanosec, n = _STAMP(buf, 4)
        pos = 16 + n
        frame_id = _cdr_text(buf, 16, n)
        pos += -(pos - 4) % 4
        (count,) = _U32(buf, pos)
        pos += 4
        start = pos
        for _ in range(count):
            pos += -(pos - 4) % 4
            (n,) = _U32(buf, pos)
            pos += 4 + n
        if pos > len(buf):
            raise ValueError("joint names run past the end of the message")
        block = bytes(buf[start:pos])
        names = _NAME_LISTS.get(block)
        if names is None:
            names = tuple(_decode_names(buf, start, count))
            if len(_NAME_LISTS) > 64:
                _NAME_LISTS.clear()
            _NAME_LISTS[block] = names
        arrays = []
        for _ in range(3):
            pos += -(pos - 4) % 4
            (n,) = _U32(buf, pos)
            pos += 4
            if n:  # an empty sequence has no padding before its (absent) elements
                pos += -(pos - 4) % 8
            arrays.append(np.frombuffer(buf, np.float64, n, pos))
            pos += 8 * n
    except struct.error as exc:
        raise ValueError(f"truncated JointState: {exc}") from None
    if pos + 3 < len(buf):  # rosbags' rule: at most 3 bytes of padding after the message
        raise ValueError(f"JointState of {len(buf)} bytes has {len(buf) - pos} bytes after its end")
    header = types["std_msgs/msg/Header"](
        stamp=types["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec), frame_id=frame_id
    )
    return types["sensor_msgs/msg/JointState"](
        header=header, name=list(names), position=arrays[0], velocity=arrays[1], effort=arrays[2]
    )


def _cdr_text(buf: memoryview, pos: int, n: int) -> str:
    """A CDR string of length `n` (with its NUL) at `pos`."""
    if n == 0 or pos + n > len(buf) or buf[pos + n - 1] != 0:
        raise ValueError(f"bad CDR string of length {n} at byte {pos}")
    return bytes(buf[pos : pos + n - 1]).decode()


def _decode_names(buf: memoryview, pos: int, count: int) -> list[str]:
    names = []
    for _ in range(count):
        pos += -(pos - 4) % 4
        (n,) = _U32(buf, pos)
        names.append(_cdr_text(buf, pos + 4, n))
        pos += 4 + n
    return names
