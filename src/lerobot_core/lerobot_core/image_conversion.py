"""sensor_msgs Image / CompressedImage <-> numpy, without cv_bridge and without rclpy.

Everything here is duck-typed on the message *fields* (``height``, ``width``, ``encoding``,
``is_bigendian``, ``step``, ``data`` / ``format``, ``data``), so the same functions work on rclpy
messages (``data`` is an ``array.array('B')``), on ``rosbags`` messages (``data`` is a numpy uint8
array) and on anything else exposing those fields (``bytes`` data is fine too).

API
    image_msg_to_array(msg) -> np.ndarray
        The pixels in their native type: HxW for one channel, HxWxC otherwise. Honours ``step``
        (row padding) and ``is_bigendian``; the result is always in the machine's byte order and
        never aliases a message buffer that can change: it owns its memory, or is a read-only view
        of an immutable one (``bytes``, what rosbags deserializes into: no copy per frame).
    image_msg_to_rgb(msg) -> HxWx3 uint8
        rgb8, bgr8, rgba8, bgra8, mono8 (and their 8UC1 / 8UC3 / 8UC4 aliases) converted to RGB.
    image_msg_to_depth(msg) -> HxW uint16 (millimetres) or float32 (metres)
        Depth images as REP 118 defines them: 16UC1 (and mono16) in millimetres, 32FC1 in metres
        (NaN / +-Inf mark invalid pixels). ``DEPTH_ENCODINGS`` maps each to its unit.
    compressed_msg_to_rgb(msg) -> HxWx3 uint8
        CompressedImage whose ``format`` names jpeg or png (``"jpeg"``, ``"png"``,
        ``"rgb8; jpeg compressed bgr8"``, ...). The bytes must really be that format.
    fill_image_msg(msg, array, encoding="rgb8") -> msg
        Sets height, width, encoding, is_bigendian, step and data on an Image message in place.
    encode_compressed(array_rgb, fmt="jpeg", quality=90) -> (format_str, bytes)
        Encodes an RGB (HxWx3) or mono (HxW) uint8 array; ``format_str`` follows the
        compressed_image_transport convention, e.g. ``"rgb8; jpeg compressed bgr8"``.

Every problem (unknown encoding, data shorter than ``step * height``, a step too small for the
width, bytes that are not the announced format) raises ``ValueError`` with a message that names
the encoding and the sizes involved.
"""

from __future__ import annotations

import array as _array
import mmap
import sys

import numpy as np

__all__ = [
    "SUPPORTED_ENCODINGS",
    "RGB_ENCODINGS",
    "DEPTH_ENCODINGS",
    "AUTO_DEPTH_ENCODINGS",
    "image_msg_to_depth",
    "image_msg_to_array",
    "image_msg_to_rgb",
    "compressed_msg_to_rgb",
    "fill_image_msg",
    "encode_compressed",
    "compressed_format_kind",
]

# encoding -> (numpy dtype without byte order, channels)
_ENCODINGS: dict[str, tuple[str, int]] = {
    "rgb8": ("u1", 3),
    "bgr8": ("u1", 3),
    "rgba8": ("u1", 4),
    "bgra8": ("u1", 4),
    "mono8": ("u1", 1),
    "rgb16": ("u2", 3),
    "bgr16": ("u2", 3),
    "rgba16": ("u2", 4),
    "bgra16": ("u2", 4),
    "mono16": ("u2", 1),
    "8UC1": ("u1", 1),
    "8UC3": ("u1", 3),
    "8UC4": ("u1", 4),
    "8SC1": ("i1", 1),
    "16UC1": ("u2", 1),
    "16UC3": ("u2", 3),
    "16SC1": ("i2", 1),
    "32SC1": ("i4", 1),
    "32FC1": ("f4", 1),
    "32FC3": ("f4", 3),
    "64FC1": ("f8", 1),
}
SUPPORTED_ENCODINGS = tuple(_ENCODINGS)

# encodings image_msg_to_rgb accepts; 8UCx follow OpenCV's convention (BGR channel order)
RGB_ENCODINGS = ("rgb8", "bgr8", "rgba8", "bgra8", "mono8", "8UC1", "8UC3", "8UC4")

# depth encodings -> the unit of their values (REP 118: 16-bit millimetres, 32-bit float metres);
# a RealSense aligned depth image (aligned_depth_to_color/image_raw) is 16UC1 in millimetres
DEPTH_ENCODINGS = {"16UC1": "mm", "mono16": "mm", "32FC1": "m"}
# the encodings REP 118 gives depth images: a camera in one of these is taken as depth unless told;
# mono16 (a 16-bit grey image, e.g. infrared) is depth only when a contract says so
AUTO_DEPTH_ENCODINGS = ("16UC1", "32FC1")

_JPEG_MAGIC = b"\xff\xd8\xff"
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _as_bytes_view(data) -> np.ndarray:
    """A flat uint8 view of a message's data field (numpy array, array.array, bytes, list)."""
    if isinstance(data, np.ndarray):
        return data.reshape(-1).view(np.uint8) if data.dtype != np.uint8 else data.reshape(-1)
    if isinstance(data, (bytes, bytearray, memoryview, _array.array)):
        return np.frombuffer(data, dtype=np.uint8)
    return np.asarray(data, dtype=np.uint8).reshape(-1)


def image_msg_to_array(msg) -> np.ndarray:
    """Pixels of a sensor_msgs/Image as a numpy array in native byte order (HxW or HxWxC)."""
    out, buf = _pixels(msg)
    # the pixels may be the message buffer itself (no padding): never alias a buffer that can
    # change; an immutable one (bytes, as rosbags deserializes, or a read-only mapping of a bag
    # file) is shared read-only
    if np.may_share_memory(out, buf) and not _immutable(buf):
        out = out.copy()
    return out


def _pixels(msg) -> tuple[np.ndarray, np.ndarray]:
    """(the pixels, possibly a view of the message's buffer; that buffer as flat uint8)."""
    encoding = str(msg.encoding)
    if encoding not in _ENCODINGS:
        raise ValueError(
            f"unsupported image encoding {encoding!r}; supported: {', '.join(SUPPORTED_ENCODINGS)}"
        )
    base, channels = _ENCODINGS[encoding]
    height, width, step = int(msg.height), int(msg.width), int(msg.step)
    itemsize = np.dtype(base).itemsize
    row_bytes = width * channels * itemsize
    if height < 0 or width < 0:
        raise ValueError(f"image ({encoding}) has a negative size {height}x{width}")
    if step < row_bytes:
        raise ValueError(
            f"image ({encoding}, {width}x{height}) has step {step} bytes, less than one row "
            f"({width} px * {channels} ch * {itemsize} B = {row_bytes} B)"
        )
    buf = _as_bytes_view(msg.data)
    needed = step * height
    if buf.size < needed:
        raise ValueError(
            f"image ({encoding}, {width}x{height}, step {step}) needs {needed} bytes of data, got {buf.size}"
        )
    if buf.size > needed:
        # more data than step*height is tolerated (some drivers pad the buffer), the rest ignored
        buf = buf[:needed]
    order = ">" if int(msg.is_bigendian) and itemsize > 1 else "<" if itemsize > 1 else "|"
    rows = buf.reshape(height, step)[:, :row_bytes]
    out = np.ascontiguousarray(rows).view(np.dtype(order + base))
    out = out.reshape((height, width) if channels == 1 else (height, width, channels))
    native = "<" if sys.byteorder == "little" else ">"
    if itemsize > 1 and order != native:
        out = out.byteswap().view(out.dtype.newbyteorder(native))
    return out, buf  # ascontiguousarray returns the buffer itself when rows are not padded


def _immutable(arr: np.ndarray) -> bool:
    """True if `arr` is a read-only view of ``bytes`` or of a read-only ``mmap`` (a bag file being
    read: nothing in this process can change its contents)."""
    if arr.flags.writeable:
        return False
    base = arr
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, memoryview):
        return base.readonly and isinstance(base.obj, (bytes, mmap.mmap))
    return isinstance(base, bytes)


def image_msg_to_rgb(msg) -> np.ndarray:
    """A sensor_msgs/Image as an HxWx3 uint8 RGB array (rgb8, bgr8, rgba8, bgra8, mono8)."""
    encoding = str(msg.encoding)
    if encoding not in RGB_ENCODINGS:
        raise ValueError(
            f"image encoding {encoding!r} cannot be converted to RGB; supported: {', '.join(RGB_ENCODINGS)}"
        )
    if encoding == "rgb8":
        return image_msg_to_array(msg)
    # every other encoding is converted into a new array: the message's pixels are read in place
    arr = _pixels(msg)[0]
    if encoding in ("bgr8", "8UC3"):
        return np.ascontiguousarray(arr[:, :, ::-1])
    if encoding == "rgba8":
        return np.ascontiguousarray(arr[:, :, :3])
    if encoding in ("bgra8", "8UC4"):
        return np.ascontiguousarray(arr[:, :, 2::-1])
    # mono8 / 8UC1
    return np.repeat(arr[:, :, None], 3, axis=2)


def image_msg_to_depth(msg) -> np.ndarray:
    """A depth sensor_msgs/Image as an HxW array: uint16 millimetres (16UC1, mono16) or float32
    metres (32FC1), in the unit ``DEPTH_ENCODINGS[msg.encoding]`` names."""
    encoding = str(msg.encoding)
    if encoding not in DEPTH_ENCODINGS:
        raise ValueError(
            f"image encoding {encoding!r} is not a depth encoding; supported: {', '.join(DEPTH_ENCODINGS)}"
        )
    return image_msg_to_array(msg)


def compressed_format_kind(fmt: str) -> str:
    """'jpeg' or 'png' from a CompressedImage.format string; ValueError for anything else."""
    text = str(fmt).lower()
    if "compresseddepth" in text:
        raise ValueError(f"CompressedImage format {fmt!r} (compressedDepth) is not a colour image")
    if "jpeg" in text or "jpg" in text:
        return "jpeg"
    if "png" in text:
        return "png"
    raise ValueError(f"unsupported CompressedImage format {fmt!r}; supported: jpeg, png")


def compressed_msg_to_rgb(msg) -> np.ndarray:
    """A sensor_msgs/CompressedImage (jpeg or png) decoded to an HxWx3 uint8 RGB array."""
    import cv2  # lazy: only the compressed path needs OpenCV

    kind = compressed_format_kind(msg.format)
    buf = _as_bytes_view(msg.data)
    head = buf[:8].tobytes()
    actual = "jpeg" if head.startswith(_JPEG_MAGIC) else "png" if head.startswith(_PNG_MAGIC) else None
    if actual != kind:
        raise ValueError(
            f"CompressedImage format {msg.format!r} announces {kind} but the data "
            f"({buf.size} bytes) is {actual or 'neither jpeg nor png'}"
        )
    decoded = cv2.imdecode(buf, cv2.IMREAD_UNCHANGED)
    if decoded is None:
        raise ValueError(f"CompressedImage ({kind}, {buf.size} bytes) could not be decoded (corrupt data?)")
    if decoded.dtype == np.uint16:
        decoded = (decoded >> 8).astype(np.uint8)
    if decoded.ndim == 2:
        return np.repeat(decoded[:, :, None], 3, axis=2)
    if decoded.shape[2] == 4:
        return cv2.cvtColor(decoded, cv2.COLOR_BGRA2RGB)
    return cv2.cvtColor(decoded, cv2.COLOR_BGR2RGB)


def fill_image_msg(msg, array: np.ndarray, encoding: str = "rgb8"):
    """Fill an Image message (rclpy or rosbags) from ``array``; returns the same message.

    The array's shape and dtype must match ``encoding`` (e.g. HxWx3 uint8 for rgb8, HxW uint16 for
    16UC1). Data is written tightly packed (step = width * channels * itemsize) in native byte order.
    """
    if encoding not in _ENCODINGS:
        raise ValueError(
            f"unsupported image encoding {encoding!r}; supported: {', '.join(SUPPORTED_ENCODINGS)}"
        )
    base, channels = _ENCODINGS[encoding]
    arr = np.asarray(array)
    if channels == 1 and arr.ndim == 3 and arr.shape[2] == 1:
        arr = arr[:, :, 0]
    expected_ndim = 2 if channels == 1 else 3
    if arr.ndim != expected_ndim or (channels > 1 and arr.shape[2] != channels):
        raise ValueError(
            f"array of shape {arr.shape} does not fit encoding {encoding!r} "
            f"({'HxW' if channels == 1 else f'HxWx{channels}'} expected)"
        )
    if arr.dtype.kind != np.dtype(base).kind or arr.dtype.itemsize != np.dtype(base).itemsize:
        raise ValueError(
            f"array dtype {arr.dtype} does not fit encoding {encoding!r} ({np.dtype(base)} expected)"
        )
    arr = np.ascontiguousarray(arr, dtype=np.dtype(base).newbyteorder("="))
    height, width = arr.shape[:2]
    msg.height = int(height)
    msg.width = int(width)
    msg.encoding = encoding
    msg.is_bigendian = 1 if (sys.byteorder == "big" and arr.dtype.itemsize > 1) else 0
    msg.step = int(width * channels * arr.dtype.itemsize)
    raw = arr.view(np.uint8).reshape(-1)
    current = getattr(msg, "data", None)
    if isinstance(current, np.ndarray) or hasattr(msg, "__msgtype__"):
        msg.data = raw.copy()  # rosbags messages hold numpy arrays
    else:
        data = _array.array("B")
        # the one copy on the way to rclpy: the message must own its pixels (the caller may reuse its
        # array before rclpy converts the message at publish), and rclpy takes an array.array('B')
        # without a per-item check
        data.frombytes(memoryview(raw))
        msg.data = data
    return msg


def encode_compressed(array_rgb: np.ndarray, fmt: str = "jpeg", quality: int = 90) -> tuple[str, bytes]:
    """Encode an RGB (HxWx3) or mono (HxW) uint8 array to jpeg or png.

    Returns ``(format_str, data)`` where ``format_str`` is what compressed_image_transport puts in
    CompressedImage.format (``"rgb8; jpeg compressed bgr8"``, ``"mono8; png compressed mono8"``).
    """
    import cv2

    kind = compressed_format_kind(fmt)
    arr = np.asarray(array_rgb)
    if arr.dtype != np.uint8:
        raise ValueError(f"encode_compressed needs a uint8 array, got {arr.dtype}")
    if arr.ndim == 2 or (arr.ndim == 3 and arr.shape[2] == 1):
        src, enc, img = "mono8", "mono8", arr.reshape(arr.shape[0], arr.shape[1])
    elif arr.ndim == 3 and arr.shape[2] == 3:
        src, enc, img = "rgb8", "bgr8", cv2.cvtColor(arr, cv2.COLOR_RGB2BGR)
    else:
        raise ValueError(f"encode_compressed needs HxW or HxWx3 uint8, got shape {arr.shape}")
    if kind == "jpeg":
        if not 0 <= int(quality) <= 100:
            raise ValueError(f"jpeg quality must be in [0, 100], got {quality}")
        ok, data = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, int(quality)])
    else:
        ok, data = cv2.imencode(".png", img)
    if not ok:
        raise ValueError(f"OpenCV failed to encode a {arr.shape} image as {kind}")
    return f"{src}; {kind} compressed {enc}", data.tobytes()
