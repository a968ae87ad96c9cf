"""What Foxglove needs to open lerobot-bag-export's file (docs/first_day.md): an MCAP file whose
schemas are ROS 2 message definitions (encoding ros2msg) and whose channels carry CDR, one channel
per exported topic with its ROS type. Read with a minimal MCAP record walker (no mcap library)."""

import struct
import subprocess
import sys
from pathlib import Path

from lerobot_core.ament import share_path

FIXTURE = share_path("lerobot_dataset") / "test" / "fixtures" / "lerobot_v30_small"


def _string(buf: bytes, pos: int) -> tuple[str, int]:
    n = struct.unpack_from("<I", buf, pos)[0]
    return buf[pos + 4 : pos + 4 + n].decode(), pos + 4 + n


def mcap_schemas_and_channels(path: Path):
    buf = path.read_bytes()
    assert buf[:8] == b"\x89MCAP0\r\n" and buf[-8:] == b"\x89MCAP0\r\n", "not an MCAP file"
    schemas, channels, pos = {}, {}, 8
    while pos < len(buf) - 8:
        op, length = buf[pos], struct.unpack_from("<Q", buf, pos + 1)[0]
        body = pos + 9
        if op == 0x03:  # Schema: id, name, encoding, data
            sid = struct.unpack_from("<H", buf, body)[0]
            name, p = _string(buf, body + 2)
            encoding, p = _string(buf, p)
            schemas[sid] = (name, encoding, struct.unpack_from("<I", buf, p)[0])
        elif op == 0x04:  # Channel: id, schema id, topic, message encoding, metadata
            schema_id = struct.unpack_from("<H", buf, body + 2)[0]
            topic, p = _string(buf, body + 4)
            encoding, _ = _string(buf, p)
            channels[topic] = (schema_id, encoding)
        elif op == 0x02:  # Footer
            break
        pos = body + length
    return schemas, channels


def test_the_export_is_an_mcap_foxglove_decodes(tmp_path):
    out = tmp_path / "bag"
    cmd = [
        sys.executable,
        "-m",
        "lerobot_recorder.bag_export",
        str(FIXTURE),
        "--episode",
        "1",
        "--output",
        str(out),
    ]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    (mcap,) = out.glob("*.mcap")
    schemas, channels = mcap_schemas_and_channels(mcap)
    assert set(channels) == {"/joint_states", "/action/joint_states", "/cameras/front/image_raw", "/task"}
    types = {topic: schemas[sid][0] for topic, (sid, _) in channels.items()}
    assert types["/cameras/front/image_raw"] == "sensor_msgs/msg/Image"
    assert types["/joint_states"] == types["/action/joint_states"] == "sensor_msgs/msg/JointState"
    assert types["/task"] == "std_msgs/msg/String"
    assert {enc for _, enc in channels.values()} == {"cdr"}
    assert all(enc == "ros2msg" and size > 0 for _, enc, size in schemas.values())
