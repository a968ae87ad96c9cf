"""Exact-value tests of lerobot_core.image_conversion on rosbags and rclpy messages."""

import struct

import numpy as np
import pytest
from rosbags.typesys import Stores, get_typestore

from lerobot_core.image_conversion import (
    DEPTH_ENCODINGS,
    compressed_msg_to_rgb,
    encode_compressed,
    fill_image_msg,
    image_msg_to_array,
    image_msg_to_depth,
    image_msg_to_rgb,
)

TS = get_typestore(Stores.ROS2_KILTED)
Image = TS.types["sensor_msgs/msg/Image"]
CompressedImage = TS.types["sensor_msgs/msg/CompressedImage"]
Header = TS.types["std_msgs/msg/Header"]
Time = TS.types["builtin_interfaces/msg/Time"]


def _rosbags_image(height, width, encoding, step, data, is_bigendian=0):
    return Image(
        header=Header(stamp=Time(sec=1, nanosec=2), frame_id="cam"),
        height=height,
        width=width,
        encoding=encoding,
        is_bigendian=is_bigendian,
        step=step,
        data=np.frombuffer(bytes(data), dtype=np.uint8).copy(),
    )


def _rclpy_image(height, width, encoding, step, data, is_bigendian=0):
    msg_mod = pytest.importorskip("sensor_msgs.msg", reason="rclpy sensor_msgs not importable")
    msg = msg_mod.Image()
    msg.height, msg.width, msg.encoding, msg.is_bigendian, msg.step = (
        height,
        width,
        encoding,
        is_bigendian,
        step,
    )
    msg.data = bytes(data)
    return msg


class _PlainImage:
    """Any object with the fields works (duck typing); data as plain bytes."""

    def __init__(self, height, width, encoding, step, data, is_bigendian=0):
        self.height, self.width, self.encoding, self.step = height, width, encoding, step
        self.is_bigendian, self.data = is_bigendian, bytes(data)


MAKERS = pytest.mark.parametrize(
    "make", [_rosbags_image, _rclpy_image, _PlainImage], ids=["rosbags", "rclpy", "plain"]
)

# a 2x2 image, pixel (r, c) has channel values made of distinct bytes
RGB_2x2 = [[[10, 20, 30], [40, 50, 60]], [[70, 80, 90], [100, 110, 120]]]


@MAKERS
def test_rgb8_exact(make):
    data = bytes(np.array(RGB_2x2, dtype=np.uint8).reshape(-1))
    out = image_msg_to_rgb(make(2, 2, "rgb8", 6, data))
    assert out.dtype == np.uint8 and out.shape == (2, 2, 3)
    assert out.tolist() == RGB_2x2


@MAKERS
def test_bgr8_swaps_channels(make):
    bgr = np.array(RGB_2x2, dtype=np.uint8)[:, :, ::-1]
    out = image_msg_to_rgb(make(2, 2, "bgr8", 6, bytes(bgr.reshape(-1))))
    assert out.tolist() == RGB_2x2


@MAKERS
def test_rgba8_and_bgra8_drop_alpha(make):
    rgba = np.concatenate([np.array(RGB_2x2, np.uint8), np.full((2, 2, 1), 255, np.uint8)], axis=2)
    assert image_msg_to_rgb(make(2, 2, "rgba8", 8, bytes(rgba.reshape(-1)))).tolist() == RGB_2x2
    bgra = rgba[:, :, [2, 1, 0, 3]]
    assert image_msg_to_rgb(make(2, 2, "bgra8", 8, bytes(bgra.reshape(-1)))).tolist() == RGB_2x2


@MAKERS
def test_mono8_replicated(make):
    out = image_msg_to_rgb(make(2, 3, "mono8", 3, bytes([0, 1, 2, 253, 254, 255])))
    assert out.shape == (2, 3, 3)
    assert out[:, :, 0].tolist() == [[0, 1, 2], [253, 254, 255]]
    assert (out[:, :, 0] == out[:, :, 1]).all() and (out[:, :, 1] == out[:, :, 2]).all()


@MAKERS
def test_step_padding_is_skipped(make):
    # width 2 rgb8 -> 6 bytes per row, step 8: two padding bytes (0xEE) per row must be ignored
    rows = np.array(RGB_2x2, dtype=np.uint8).reshape(2, 6)
    data = b"".join(bytes(r) + b"\xee\xee" for r in rows)
    out = image_msg_to_rgb(make(2, 2, "rgb8", 8, data))
    assert out.tolist() == RGB_2x2
    assert out.flags["C_CONTIGUOUS"]


@MAKERS
def test_16uc1_little_and_big_endian(make):
    values = [[1, 256], [0xBEEF, 65535]]
    little = b"".join(struct.pack("<H", v) for row in values for v in row)
    big = b"".join(struct.pack(">H", v) for row in values for v in row)
    out_le = image_msg_to_array(make(2, 2, "16UC1", 4, little, is_bigendian=0))
    out_be = image_msg_to_array(make(2, 2, "16UC1", 4, big, is_bigendian=1))
    for out in (out_le, out_be):
        assert out.dtype == np.uint16 and out.dtype.isnative
        assert out.tolist() == values
    mono16 = image_msg_to_array(make(2, 2, "mono16", 4, little))
    assert mono16.tolist() == values


@MAKERS
def test_32fc1_with_padding_and_big_endian(make):
    values = [[0.5, -1.25, 3.0e8], [float("inf"), 0.0, 1e-7]]
    row_pad = b"\x00" * 4
    data = b"".join(b"".join(struct.pack(">f", v) for v in row) + row_pad for row in values)
    out = image_msg_to_array(make(2, 3, "32FC1", 16, data, is_bigendian=1))
    assert out.dtype == np.float32 and out.dtype.isnative
    assert out.tolist() == np.array(values, dtype=np.float32).tolist()


def test_result_does_not_alias_message_buffer():
    msg = _rosbags_image(1, 2, "rgb8", 6, bytes(range(6)))
    out = image_msg_to_rgb(msg)
    msg.data[:] = 0
    assert out.reshape(-1).tolist() == list(range(6))


def test_result_shares_an_immutable_buffer_read_only():
    """A deserialized bag message's pixels are a read-only view of bytes: no copy per frame is needed."""
    raw = bytes(range(6))
    msg = _rosbags_image(1, 2, "rgb8", 6, b"")
    msg.data = np.frombuffer(raw, dtype=np.uint8)  # as rosbags deserializes
    out = image_msg_to_rgb(msg)
    assert np.shares_memory(out, msg.data) and not out.flags.writeable
    assert out.reshape(-1).tolist() == list(range(6))
    writable = np.frombuffer(bytearray(raw), dtype=np.uint8)
    writable.flags.writeable = False  # read-only, but its bytearray can still change: copied
    msg.data = writable
    assert not np.shares_memory(image_msg_to_rgb(msg), writable)


@pytest.mark.parametrize("encoding", ["bgr8", "rgba8", "bgra8", "mono8"])
def test_a_converted_encoding_is_read_in_place_not_copied_first(encoding):
    """Converting to RGB makes the one new array: a writable message buffer is not copied before it
    (measured as memory: the conversion of a 640x480 frame allocates one RGB frame, not two)."""
    import tracemalloc

    channels = {"mono8": 1, "bgr8": 3}.get(encoding, 4)
    data = np.random.default_rng(0).integers(0, 256, 480 * 640 * channels, dtype=np.uint8)
    msg = _rosbags_image(480, 640, encoding, 640 * channels, b"")
    msg.data = data  # writable (as an rclpy message's array.array): image_msg_to_array copies it
    rgb_bytes = 480 * 640 * 3
    tracemalloc.start()
    try:
        out = image_msg_to_rgb(msg)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert rgb_bytes <= peak < rgb_bytes + 480 * 640 * channels // 2, peak
    assert not np.shares_memory(out, data)
    data[:] = 0  # the result is the message's pixels converted, not a view of them
    assert out.any()


@pytest.mark.parametrize("encoding", ["yuv422", "bayer_rggb8", "nonsense"])
def test_unknown_encoding_names_it(encoding):
    with pytest.raises(ValueError, match=encoding):
        image_msg_to_array(_rosbags_image(1, 1, encoding, 2, b"\x00\x00"))
    with pytest.raises(ValueError, match=encoding):
        image_msg_to_rgb(_rosbags_image(1, 1, encoding, 2, b"\x00\x00"))


def test_rgb_refuses_depth_encodings_with_clear_message():
    with pytest.raises(ValueError, match="16UC1.*cannot be converted to RGB"):
        image_msg_to_rgb(_rosbags_image(1, 1, "16UC1", 2, b"\x00\x00"))


def test_size_mismatch_errors():
    with pytest.raises(ValueError, match=r"needs 12 bytes of data, got 11"):
        image_msg_to_rgb(_rosbags_image(2, 2, "rgb8", 6, bytes(11)))
    with pytest.raises(ValueError, match=r"step 5 bytes, less than one row"):
        image_msg_to_rgb(_rosbags_image(2, 2, "rgb8", 5, bytes(12)))


@pytest.mark.parametrize("make", [_rosbags_image, _rclpy_image], ids=["rosbags", "rclpy"])
@pytest.mark.parametrize(
    ("encoding", "array"),
    [
        ("rgb8", np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)),
        ("mono8", np.arange(6, dtype=np.uint8).reshape(2, 3)),
        ("16UC1", np.array([[0, 1, 65535], [300, 4000, 50000]], dtype=np.uint16)),
        ("32FC1", np.array([[0.5, -2.0, 1e9], [3.25, 0.0, -0.125]], dtype=np.float32)),
    ],
)
def test_fill_image_msg_round_trip(make, encoding, array):
    msg = make(0, 0, "rgb8", 0, b"")
    fill_image_msg(msg, array, encoding=encoding)
    assert (msg.height, msg.width, msg.encoding) == (2, 3, encoding)
    assert msg.step == 3 * array.itemsize * (1 if array.ndim == 2 else array.shape[2])
    assert len(msg.data) == msg.step * msg.height
    back = image_msg_to_array(msg)
    assert back.dtype == array.dtype and back.tolist() == array.tolist()


def test_fill_image_msg_rejects_wrong_shape_or_dtype():
    msg = _rosbags_image(0, 0, "rgb8", 0, b"")
    with pytest.raises(ValueError, match="does not fit encoding 'rgb8'"):
        fill_image_msg(msg, np.zeros((2, 2), np.uint8), "rgb8")
    with pytest.raises(ValueError, match="dtype float32 does not fit encoding '16UC1'"):
        fill_image_msg(msg, np.zeros((2, 2), np.float32), "16UC1")


def _compressed(fmt, data):
    return CompressedImage(
        header=Header(stamp=Time(sec=0, nanosec=0), frame_id=""),
        format=fmt,
        data=np.frombuffer(data, dtype=np.uint8).copy(),
    )


def _test_image(h=16, w=24):
    yy, xx = np.mgrid[0:h, 0:w]
    return np.stack([xx * 10 % 256, yy * 15 % 256, (xx + yy) * 5 % 256], axis=2).astype(np.uint8)


def test_png_round_trip_is_lossless_and_rgb_ordered():
    img = _test_image()
    fmt, data = encode_compressed(img, "png")
    assert fmt == "rgb8; png compressed bgr8"
    assert data.startswith(b"\x89PNG")
    out = compressed_msg_to_rgb(_compressed(fmt, data))
    assert out.dtype == np.uint8 and np.array_equal(out, img)
    # the bare "png" format string works too
    assert np.array_equal(compressed_msg_to_rgb(_compressed("png", data)), img)


def test_mono_png_becomes_three_equal_channels():
    mono = np.arange(64, dtype=np.uint8).reshape(8, 8) * 3
    fmt, data = encode_compressed(mono, "png")
    assert fmt == "mono8; png compressed mono8"
    out = compressed_msg_to_rgb(_compressed(fmt, data))
    assert out.shape == (8, 8, 3) and all(np.array_equal(out[:, :, c], mono) for c in range(3))


def test_jpeg_round_trip_close_and_channel_order_kept():
    # flat colour blocks survive jpeg almost exactly; a swapped channel order would be off by ~200
    img = np.zeros((16, 16, 3), np.uint8)
    img[:, :8] = (220, 30, 40)
    img[:, 8:] = (20, 40, 200)
    fmt, data = encode_compressed(img, "jpeg", quality=95)
    assert fmt == "rgb8; jpeg compressed bgr8" and data.startswith(b"\xff\xd8\xff")
    out = compressed_msg_to_rgb(_compressed("jpeg", data))
    assert out.shape == img.shape
    assert np.abs(out[4:12, 1:6].astype(int) - (220, 30, 40)).max() <= 6
    assert np.abs(out[4:12, 10:15].astype(int) - (20, 40, 200)).max() <= 6


def test_compressed_errors_are_clear():
    _, png = encode_compressed(_test_image(), "png")
    with pytest.raises(ValueError, match="announces jpeg but the data .* is png"):
        compressed_msg_to_rgb(_compressed("jpeg", png))
    with pytest.raises(ValueError, match="unsupported CompressedImage format 'tiff'"):
        compressed_msg_to_rgb(_compressed("tiff", png))
    with pytest.raises(ValueError, match="compressedDepth"):
        compressed_msg_to_rgb(_compressed("16UC1; compressedDepth png", png))
    with pytest.raises(ValueError, match="could not be decoded"):
        compressed_msg_to_rgb(_compressed("png", png[:40]))
    with pytest.raises(ValueError, match="quality"):
        encode_compressed(_test_image(), "jpeg", quality=101)


@MAKERS
def test_depth_images_keep_their_unit_and_byte_order(make):
    """16UC1 (REP 118: millimetres) and 32FC1 (metres, NaN = no reading), little and big endian."""
    assert DEPTH_ENCODINGS == {"16UC1": "mm", "mono16": "mm", "32FC1": "m"}
    mm = np.array([[0, 500], [1234, 65535]], dtype=np.uint16)
    out = image_msg_to_depth(make(2, 2, "16UC1", 4, mm.astype(">u2").tobytes(), is_bigendian=1))
    assert out.dtype == np.uint16 and out.tolist() == mm.tolist()
    m = np.array([[np.nan, 0.5], [1.25, np.inf]], dtype=np.float32)
    out = image_msg_to_depth(make(2, 2, "32FC1", 8, m.astype("<f4").tobytes()))
    assert out.dtype == np.float32 and np.isnan(out[0, 0]) and out[1].tolist() == [1.25, np.inf]
    with pytest.raises(ValueError, match="image encoding 'rgb8' is not a depth encoding; supported: 16UC1"):
        image_msg_to_depth(make(1, 1, "rgb8", 3, b"abc"))


@pytest.mark.parametrize("encoding", ["rgb8", "bgr8"])
def test_a_serialized_frame_reaches_rgb_copied_at_most_once(encoding):
    """What the policy node's and the recorder's raw camera subscriptions do (ros.serialized): an rgb8
    frame is a view of the bytes rclpy's raw take returned, a converted encoding is the conversion's one
    new array; rclpy's deserialize_message path copies an rgb8 frame."""
    pytest.importorskip("rclpy")
    from rclpy.serialization import deserialize_message, serialize_message
    from sensor_msgs.msg import Image

    from lerobot_core.image_conversion import fill_image_msg, image_msg_to_rgb
    from lerobot_core.ros.serialized import decode_message

    rgb = np.arange(4 * 6 * 3, dtype=np.uint8).reshape(4, 6, 3)
    pixels = rgb if encoding == "rgb8" else np.ascontiguousarray(rgb[:, :, ::-1])
    data = serialize_message(fill_image_msg(Image(), pixels, encoding))
    out = image_msg_to_rgb(decode_message(data, "sensor_msgs/msg/Image", Image))
    assert np.array_equal(out, rgb)
    view = np.frombuffer(data, np.uint8)
    assert np.shares_memory(out, view) == (encoding == "rgb8")
    assert not np.shares_memory(image_msg_to_rgb(deserialize_message(data, Image)), view)
