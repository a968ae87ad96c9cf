"""bag_read.messages: the zero-copy MCAP path yields exactly what rosbags yields, in rosbags' order,
and refuses damaged files; other storages and compression modes go through rosbags."""

import mmap
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from rosbags.rosbag2 import Reader, StoragePlugin, Writer
from rosbags.rosbag2.enums import CompressionFormat, CompressionMode
from rosbags.rosbag2.errors import ReaderError

from lerobot_core.image_conversion import image_msg_to_array
from lerobot_recorder import bag_io, bag_read

JOINTS = ["a", "b", "c"]
T0 = 1_700_000_000 * 1_000_000_000
MS = 1_000_000


def events(n_images=12, size=(240, 320), shuffled=False):
    """Joint states at 100 Hz on two topics and images at 30 Hz; images big enough that rosbags'
    MCAP writer (1 MiB chunks) makes several chunks. `shuffled` writes log times out of order."""
    out = []
    for i in range(n_images * 4):
        t = T0 + i * 10 * MS
        out.append((t + 1 * MS, "/joint_states", bag_io.joint_state(t, JOINTS, [i, i + 1, i + 2])))
        out.append((t + 1 * MS, "/leader/joint_states", bag_io.joint_state(t, JOINTS, [-i, 0, 1])))
    rng = np.random.default_rng(0)
    for i in range(n_images):
        t = T0 + i * 33 * MS
        out.append((t + 5 * MS, "/cam", bag_io.image(t, rng.integers(0, 255, (*size, 3), np.uint8))))
    out.sort(key=lambda e: e[0])
    if shuffled:  # pairs swapped across chunk boundaries and equal log times on different topics
        rng.shuffle(out)
    return out


def write(path: Path, evs, storage="mcap", compression=None) -> Path:
    plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
    writer = Writer(path, version=9, storage_plugin=plugin)
    if compression is not None:
        writer.set_compression(compression, CompressionFormat.ZSTD)
    conns = {}
    with writer:
        for log_time, topic, msg in evs:
            if topic not in conns:
                conns[topic] = writer.add_connection(topic, msg.__msgtype__, typestore=bag_io.typestore())
            writer.write(conns[topic], log_time, bag_io.serialize(msg))
    return path


def both(path: Path, topics=None):
    with Reader(path) as reader:
        conns = [c for c in reader.connections if topics is None or c.topic in topics]
        ours = [(c.topic, t, bytes(raw)) for c, t, raw in bag_read.messages(reader, conns)]
        theirs = [(c.topic, t, bytes(raw)) for c, t, raw in reader.messages(connections=conns)]
    return ours, theirs


def mcap_file(bag: Path) -> Path:
    return next(bag.glob("*.mcap"))


def chunk_offsets(path: Path) -> list[int]:
    with Reader(path.parent) as reader:
        return [c.chunk_start_offset for c in reader.storage.storages[0].chunks]


@pytest.mark.parametrize("shuffled", [False, True])
@pytest.mark.parametrize("compression", [None, CompressionMode.STORAGE])
def test_same_messages_in_the_same_order_as_rosbags(tmp_path, shuffled, compression):
    bag = write(tmp_path / "bag", events(shuffled=shuffled), compression=compression)
    assert len(chunk_offsets(mcap_file(bag))) >= 2
    ours, theirs = both(bag)
    assert len(theirs) == 12 * 9 and ours == theirs
    ours, theirs = both(bag, topics={"/cam", "/leader/joint_states"})
    assert len(theirs) == 12 * 5 and ours == theirs


@pytest.mark.parametrize(
    "storage,compression",
    [("sqlite3", None), ("mcap", CompressionMode.MESSAGE), ("mcap", CompressionMode.FILE)],
)
def test_other_storages_and_compression_modes_read_through_rosbags(tmp_path, storage, compression):
    bag = write(tmp_path / "bag", events(n_images=4), storage=storage, compression=compression)
    ours, theirs = both(bag)
    assert len(theirs) == 4 * 9 and ours == theirs


def test_payloads_and_images_share_the_mapped_file(tmp_path):
    bag = write(tmp_path / "bag", events(n_images=3))
    with Reader(bag) as reader:
        got = list(bag_read.messages(reader, reader.connections))
        for _, _, raw in got:
            assert isinstance(raw, memoryview) and raw.readonly and isinstance(raw.obj, mmap.mmap)
        conn, _, raw = next(m for m in got if m[0].topic == "/cam")
        image = image_msg_to_array(bag_io.deserialize(raw, conn.msgtype))
        assert image.shape == (240, 320, 3) and not image.flags.writeable
        assert np.shares_memory(image, np.frombuffer(raw, np.uint8))  # no copy of the frame


def test_a_writable_buffer_is_still_copied():
    """The zero-copy rule is only for buffers nothing can change: a writable mapping is copied."""
    msg = bag_io.image(T0, np.zeros((4, 6, 3), np.uint8))
    writable = mmap.mmap(-1, msg.data.size)
    writable[:] = msg.data.tobytes()
    msg.data = np.frombuffer(memoryview(writable), np.uint8)
    out = image_msg_to_array(msg)
    assert not np.shares_memory(out, msg.data)


def test_truncated_file_and_damaged_chunk_are_errors(tmp_path):
    bag = write(tmp_path / "bag", events())
    path = mcap_file(bag)
    offsets = chunk_offsets(path)
    full = path.read_bytes()
    with Reader(bag) as reader:  # rosbags reads the index at open: cut the data under an open reader
        path.write_bytes(full[: offsets[1] + 100])
        with pytest.raises(ReaderError, match="truncated"):
            list(bag_read.messages(reader, reader.connections))

    # a chunk whose records run past its end: the length of its first record is made too large
    path.write_bytes(full)
    records = offsets[0] + 9 + 40  # uncompressed: no compression name
    damaged = bytearray(full)
    struct.pack_into("<Q", damaged, records + 1, 10**9)
    path.write_bytes(bytes(damaged))
    with Reader(bag) as reader, pytest.raises(ReaderError, match="overruns the chunk"):
        list(bag_read.messages(reader, reader.connections))


def test_chunk_checksum_is_verified_when_present(tmp_path):
    """rosbags writes no chunk CRC; `ros2 bag record` does. A CRC is checked like rosbags checks it."""
    bag = write(tmp_path / "bag", events(n_images=3))
    path = mcap_file(bag)
    offset = chunk_offsets(path)[0]
    data = bytearray(path.read_bytes())
    (length,) = struct.unpack_from("<Q", data, offset + 9 + 32)
    records = offset + 9 + 40
    struct.pack_into("<I", data, offset + 9 + 24, zlib.crc32(data[records : records + length]))
    path.write_bytes(bytes(data))
    ours, theirs = both(bag)
    assert ours == theirs and len(ours) == 3 * 9
    data[records + 100] ^= 0xFF  # inside the first record of the chunk
    path.write_bytes(bytes(data))
    with Reader(bag) as reader, pytest.raises(ReaderError, match="checksum"):
        list(bag_read.messages(reader, reader.connections))


def _equal(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    if hasattr(a, "__dataclass_fields__"):
        return all(_equal(getattr(a, f), getattr(b, f)) for f in a.__dataclass_fields__)
    if isinstance(a, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def test_joint_state_decoder_equals_rosbags():
    """Names of every length mod 4 (alignment), empty and short arrays, frame ids, negative stamps."""
    rng = np.random.default_rng(1)
    store = bag_io.typestore()
    for i in range(300):
        names = ["j" * int(rng.integers(1, 9)) + str(k) for k in range(int(rng.integers(0, 8)))]
        sizes = [len(names) if rng.random() < 0.7 else int(rng.integers(0, 4)) for _ in range(3)]
        msg = bag_io.joint_state(
            int(rng.integers(-(10**18), 10**18)), names, *(rng.normal(size=s) for s in sizes)
        )
        msg.header.frame_id = "f" * int(rng.integers(0, 6))
        raw = bytes(bag_io.serialize(msg))
        theirs = store.deserialize_cdr(raw, "sensor_msgs/msg/JointState")
        ours = bag_read.decode_joint_state(raw, store.types)
        assert _equal(ours, theirs), i
        assert _equal(bag_io.deserialize(raw, "sensor_msgs/msg/JointState"), theirs)
        ours.name.append("x")  # the cached names are not shared with the caller
        assert _equal(bag_read.decode_joint_state(raw, store.types), theirs)


def test_joint_state_decoder_refuses_truncated_and_padded_payloads():
    store = bag_io.typestore()
    raw = bytes(bag_io.serialize(bag_io.joint_state(T0, JOINTS, [1.0, 2.0, 3.0], [0.1] * 3, [])))
    for cut in range(4, len(raw) - 3):
        with pytest.raises(ValueError):
            bag_read.decode_joint_state(raw[:cut], store.types)
    with pytest.raises(ValueError, match="after its end"):
        bag_read.decode_joint_state(raw + bytes(8), store.types)
    big_endian = bytes(
        bag_io.typestore().serialize_cdr(
            bag_io.joint_state(T0, JOINTS, [1.0, 2.0, 3.0]), "sensor_msgs/msg/JointState", little_endian=False
        )
    )
    assert bag_read.decode_joint_state(big_endian, store.types) is None  # rosbags decodes it
    assert list(bag_io.deserialize(big_endian, "sensor_msgs/msg/JointState").position) == [1.0, 2.0, 3.0]
