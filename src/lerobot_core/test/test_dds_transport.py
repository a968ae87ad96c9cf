"""The large-image DDS profile: used only on a localhost Fast DDS stack, and it keeps DDS on this host."""

import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from lerobot_core.dds_transport import (
    LARGE_IMAGE_PROFILE,
    LARGE_IMAGE_READER_PROFILE,
    PROFILE_VARIABLES,
    fast_dds_major,
    large_image_reader_transport,
    large_image_transport_profile,
    profile_variables,
    use_large_image_reader_transport,
    use_large_image_transport,
)

CONFIG = Path(__file__).resolve().parents[1] / "lerobot_core" / "config" / LARGE_IMAGE_PROFILE
LOCAL = {"ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST", "RMW_IMPLEMENTATION": "rmw_fastrtps_cpp"}


@pytest.mark.parametrize(
    "environ",
    [
        {**LOCAL, "FASTDDS_DEFAULT_PROFILES_FILE": "/somewhere/mine.xml"},  # the user's own profile wins
        {**LOCAL, "FASTRTPS_DEFAULT_PROFILES_FILE": "/somewhere/mine.xml"},  # ... under Fast DDS 2's name too
        {**LOCAL, "ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET"},  # the stack was asked to leave the host
        {"RMW_IMPLEMENTATION": "rmw_fastrtps_cpp"},  # no range given: ROS's default is SUBNET
        {**LOCAL, "RMW_IMPLEMENTATION": "rmw_cyclonedds_cpp"},  # not Fast DDS
    ],
)
def test_large_image_profile_is_left_out(environ):
    assert large_image_transport_profile(environ) is None


def test_large_image_profile_is_used_on_a_localhost_fast_dds_stack():
    path = large_image_transport_profile(dict(LOCAL))
    assert path is not None and Path(path).name == LARGE_IMAGE_PROFILE
    assert large_image_transport_profile({"ROS_AUTOMATIC_DISCOVERY_RANGE": "localhost"}) == path


def test_the_profile_is_named_for_the_fast_dds_generation_that_reads_it():
    """Jazzy's Fast DDS 2.14 reads only FASTRTPS_DEFAULT_PROFILES_FILE, Kilted's Fast DDS 3 only
    FASTDDS_DEFAULT_PROFILES_FILE (and warns on every participant that the other name is deprecated):
    each gets its own name, both when the generation is unknown."""
    assert profile_variables(2) == ("FASTRTPS_DEFAULT_PROFILES_FILE",)
    assert profile_variables(3) == ("FASTDDS_DEFAULT_PROFILES_FILE",)
    assert profile_variables(None) == PROFILE_VARIABLES
    environ = dict(LOCAL)
    path = use_large_image_transport(environ)
    assert path is not None
    # this run's rclpy: Kilted (fastdds 3) or Jazzy (fastrtps 2.14), from the installed wheels
    major = fast_dds_major()
    assert major == (2 if os.environ.get("LEROBOT_ROS_DISTRO") == "jazzy" else 3)
    assert {name for name in PROFILE_VARIABLES if name in environ} == set(profile_variables(major))
    assert all(environ[name] == path for name in profile_variables(major))


@pytest.mark.ros
def test_this_distros_fast_dds_applies_the_profile(tmp_path):
    """A participant made after use_large_image_transport() owns the profile's 32 MB segment, with the
    rclpy of this run (Kilted: Fast DDS 3; Jazzy: Fast DDS 2.14, which ignored the profile before)."""
    import os
    import subprocess
    import sys

    code = (
        "import os, time\n"
        "from lerobot_core.dds_transport import use_large_image_transport, SHM_PREFIXES\n"
        "assert use_large_image_transport()\n"
        "import rclpy\n"
        "from sensor_msgs.msg import Image\n"
        "rclpy.init(); node = rclpy.create_node('profile_probe')\n"
        "node.create_publisher(Image, 'probe_image', 1)\n"
        "sizes = {}\n"
        "for line in open('/proc/self/maps'):\n"
        "    parts = line.split()\n"
        "    if len(parts) >= 6 and os.path.basename(parts[5]).startswith(SHM_PREFIXES) and '_port' not in parts[5]:\n"
        "        lo, hi = (int(x, 16) for x in parts[0].split('-'))\n"
        "        sizes[parts[5]] = sizes.get(parts[5], 0) + hi - lo\n"
        "print(max(sizes.values(), default=0))\n"
        "node.destroy_node(); rclpy.shutdown()\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in PROFILE_VARIABLES}
    env.update(LOCAL)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert int(out.stdout.split()[-1]) >= 32 * 2**20, out.stdout
    # Kilted's Fast DDS 3 warned "FASTRTPS_DEFAULT_PROFILES_FILE ... is deprecated" at every start
    assert "deprecated" not in out.stderr, out.stderr


NS = {"d": "http://www.eprosima.com"}


def _default_participant(path: Path):
    """The profile's transports by id and its default participant's rtps element, whose builtin
    transports must be off (the user transports are all it has)."""
    root = ET.parse(path).getroot()
    transports = {
        t.findtext("d:transport_id", namespaces=NS): t for t in root.iterfind(".//d:transport_descriptor", NS)
    }
    participant = root.find("d:participant", NS)
    assert participant.get("is_default_profile") == "true"
    rtps = participant.find("d:rtps", NS)
    assert rtps.findtext("d:useBuiltinTransports", namespaces=NS).strip() == "false"
    return transports, rtps


def test_large_image_profile_keeps_dds_on_this_host():
    ns = NS
    transports, rtps = _default_participant(CONFIG)
    used = [t.text for t in rtps.iterfind("d:userTransports/d:transport_id", ns)]
    assert sorted(used) == sorted(transports)
    kinds = {}
    for tid in used:
        kind = transports[tid].findtext("d:type", namespaces=ns)
        kinds[kind] = transports[tid]
    assert set(kinds) == {"SHM", "UDPv4"}
    assert int(kinds["SHM"].findtext("d:segment_size", namespaces=ns)) >= 2 * 480 * 640 * 3 * 4
    whitelist = [a.text for a in kinds["UDPv4"].iterfind("d:interfaceWhiteList/d:address", ns)]
    assert whitelist == ["127.0.0.1"]


def test_dead_segments_are_removed_and_live_ones_kept(tmp_path):
    """A segment whose lock file nobody holds is a dead participant's: removed. One whose lock is held
    (a live participant) stays, and so does a fresh one (its owner may not have locked it yet)."""
    import fcntl
    import os
    import time

    from lerobot_core.dds_transport import main, remove_dead_segments

    old = time.time() - 60
    for name in ("fastdds_dead", "fastdds_live", "fastdds_fresh", "fastdds_port7000"):
        (tmp_path / name).write_bytes(b"x" * 1000)
        (tmp_path / f"{name}_el").write_bytes(b"")
        if name != "fastdds_fresh":
            os.utime(tmp_path / f"{name}_el", (old, old))
    (tmp_path / "unrelated").write_bytes(b"y")
    holder = os.open(tmp_path / "fastdds_live_el", os.O_RDONLY)
    fcntl.flock(holder, fcntl.LOCK_EX)  # another open file description: a live owner
    try:
        removed = remove_dead_segments(str(tmp_path))
    finally:
        os.close(holder)
    assert sorted(os.path.basename(p) for p, _ in removed) == [
        "fastdds_dead",
        "fastdds_dead_el",
        "fastdds_port7000",
        "fastdds_port7000_el",
    ]
    assert sum(size for _, size in removed) == 2000
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["fastdds_fresh", "fastdds_fresh_el", "fastdds_live", "fastdds_live_el", "unrelated"]
    assert main(["clean", str(tmp_path)]) == 0  # the live one's owner is gone now
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fastdds_fresh", "fastdds_fresh_el", "unrelated"]
    assert main(["wipe"]) == 2


READER_CONFIG = CONFIG.parent / LARGE_IMAGE_READER_PROFILE


@pytest.mark.parametrize(
    "environ",
    [
        {**LOCAL, "FASTDDS_DEFAULT_PROFILES_FILE": "/somewhere/mine.xml"},
        {**LOCAL, "FASTRTPS_DEFAULT_PROFILES_FILE": "/somewhere/mine.xml"},  # Fast DDS 2's name for it
        {**LOCAL, "ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET"},
        {**LOCAL, "RMW_IMPLEMENTATION": "rmw_cyclonedds_cpp"},
    ],
)
def test_reader_profile_is_left_out(environ):
    before = dict(environ)
    assert use_large_image_reader_transport(environ) is None
    assert environ == before


def test_reader_profile_goes_in_this_generations_variable():
    environ = dict(LOCAL)
    path = use_large_image_reader_transport(environ)
    assert Path(path).name == LARGE_IMAGE_READER_PROFILE
    assert {k: v for k, v in environ.items() if k in PROFILE_VARIABLES} == {
        name: path for name in profile_variables(fast_dds_major())
    }


def test_reader_profile_keeps_shared_memory_and_dds_on_this_host_with_a_large_udp_buffer():
    ns = NS
    transports, rtps = _default_participant(READER_CONFIG)
    kinds = {
        transports[t.text].findtext("d:type", namespaces=ns): transports[t.text]
        for t in rtps.iterfind("d:userTransports/d:transport_id", ns)
    }
    assert set(kinds) == {"SHM", "UDPv4"}
    udp = kinds["UDPv4"]
    assert [a.text for a in udp.iterfind("d:interfaceWhiteList/d:address", ns)] == ["127.0.0.1"]
    # several 320x240 rgb8 images (230 KB each), not less than one as with the kernel's 208 KB default
    assert int(udp.findtext("d:receiveBufferSize", namespaces=ns)) >= 4 * 2**20


def test_the_reader_profile_is_set_only_while_the_participant_is_made():
    """Left in the environment, the reader profile passed to every process started later (a test's sim),
    which took it for the user's own profile and skipped its large-image one (0.5 MB segments: the
    shared-memory test of the sim failed after a plugin test had made a BackgroundNode in the process)."""
    environ = dict(LOCAL)
    with large_image_reader_transport(environ):
        for name in profile_variables(fast_dds_major()):
            assert Path(environ[name]).name == LARGE_IMAGE_READER_PROFILE
    assert environ == LOCAL
    mine = {**LOCAL, "FASTRTPS_DEFAULT_PROFILES_FILE": "/somewhere/mine.xml"}
    with large_image_reader_transport(mine):
        assert "FASTDDS_DEFAULT_PROFILES_FILE" not in mine  # the user's profile wins, under either name
    assert mine == {**LOCAL, "FASTRTPS_DEFAULT_PROFILES_FILE": "/somewhere/mine.xml"}


@pytest.mark.ros
def test_a_background_node_leaves_the_process_environment_as_it_was():
    import os

    from lerobot_core.ros.device import BackgroundNode

    before = {name: os.environ.get(name) for name in PROFILE_VARIABLES}
    node = BackgroundNode("test_reader_profile_env")
    try:
        assert {name: os.environ.get(name) for name in PROFILE_VARIABLES} == before
    finally:
        node.close()
