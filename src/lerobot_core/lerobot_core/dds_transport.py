"""The Fast DDS transport profile for processes that publish large images (cameras, simulators).

Fast DDS puts a sample over shared memory only if it fits the *writer's* segment (512 KB by default):
a 640x480 rgb8 image (900 KB) does not, so it goes out as ~15 UDP fragments on loopback, which a busy
reader loses (socket buffer overflow) and reliable QoS then repairs after a heartbeat period, or
best-effort QoS drops. The shipped profile (`config/fastdds_large_images.xml` beside this module,
also installed to `share/lerobot_core/config/`) gives the publishing process a 32 MB shared-memory
segment and UDP on 127.0.0.1 only. Readers of the same Fast DDS generation need nothing: they map the
writer's segment.

Readers of the other generation (a Jazzy rclpy, Fast DDS 2.14, in a LeRobot 0.6 venv, reading the Kilted
graph's Fast DDS 3 writers) cannot use that shared memory and get every image as UDP fragments; the
reader profile (`config/fastdds_large_image_readers.xml`) gives them a 4 MB UDP receive buffer on
127.0.0.1 and keeps the default shared memory for writers of their own generation. The LeRobot plugins'
background node applies it while it makes its participant (:func:`large_image_reader_transport`).

It is applied only where the stack already keeps DDS on this host: Fast DDS is the RMW,
ROS_AUTOMATIC_DISCOVERY_RANGE is LOCALHOST (env.sh), and the user has no profile file of their own.

Two Fast DDS generations, one behaviour (both are tested in CI):
- Fast DDS 3 (Kilted) reads the profile from FASTDDS_DEFAULT_PROFILES_FILE and names its shared-memory
  files /dev/shm/fastdds_*;
- Fast DDS 2.14 (Jazzy) reads FASTRTPS_DEFAULT_PROFILES_FILE only (the other name is ignored: the
  profile silently did not apply on Jazzy, and large images stalled there) and names them fastrtps_*.
The profile is set under the name this process's Fast DDS reads (the installed `ros-fastdds` 3.x or
`ros-fastrtps` 2.x wheel, else ROS_DISTRO), under both when that cannot be told: Fast DDS 3 warns that
FASTRTPS_DEFAULT_PROFILES_FILE is deprecated on every participant when that name is set. A user's own
file under either name wins.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import sys
import time
from collections.abc import Mapping, MutableMapping

LARGE_IMAGE_PROFILE = "fastdds_large_images.xml"
LARGE_IMAGE_READER_PROFILE = "fastdds_large_image_readers.xml"
# the profile file's variable: Fast DDS 3 (Kilted and later), Fast DDS 2.x (Jazzy, Humble)
PROFILE_VARIABLES = ("FASTDDS_DEFAULT_PROFILES_FILE", "FASTRTPS_DEFAULT_PROFILES_FILE")
# shared-memory file prefixes: Fast DDS 3, Fast DDS 2.x
SHM_PREFIXES = ("fastdds_", "fastrtps_")


# distros whose Fast DDS is 2.x (FASTRTPS_DEFAULT_PROFILES_FILE); later ones ship Fast DDS 3
FAST_DDS_2_DISTROS = ("humble", "iron", "jazzy")


@functools.cache
def fast_dds_major() -> int | None:
    """The major version of the Fast DDS this Python's rclpy links (2 or 3), or None if unknown."""
    from importlib import metadata

    for dist in (
        "ros-fastdds",
        "ros-fastrtps",
    ):  # the PyPI wheels (Kilted: fastdds 3.x; Jazzy: fastrtps 2.14)
        try:
            return int(metadata.version(dist).split(".")[0])
        except (metadata.PackageNotFoundError, ValueError):
            continue
    distro = os.environ.get("ROS_DISTRO", "")  # a sourced /opt/ros/<distro>
    if distro:
        return 2 if distro in FAST_DDS_2_DISTROS else 3
    return None


def profile_variables(major: int | None) -> tuple[str, ...]:
    """The variable(s) to set for Fast DDS `major` (both when it is not known)."""
    if major == 2:
        return ("FASTRTPS_DEFAULT_PROFILES_FILE",)
    if major is not None and major >= 3:
        return ("FASTDDS_DEFAULT_PROFILES_FILE",)
    return PROFILE_VARIABLES


def user_profile(environ: Mapping[str, str] = os.environ) -> str | None:
    """The Fast DDS profile file named in the environment under either generation's variable."""
    for name in PROFILE_VARIABLES:
        if environ.get(name):
            return environ[name]
    return None


def large_image_transport_profile(
    environ: Mapping[str, str] = os.environ, name: str = LARGE_IMAGE_PROFILE
) -> str | None:
    """Path of the profile ``name`` this process should load, or None to leave DDS as it is."""
    if user_profile(environ):
        return None
    if environ.get("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp") != "rmw_fastrtps_cpp":
        return None
    if environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE", "").upper() != "LOCALHOST":
        return None
    path = os.path.join(os.path.dirname(os.path.realpath(__file__)), "config", name)
    return path if os.path.isfile(path) else None


def use_large_image_transport(
    environ: MutableMapping[str, str] = os.environ, name: str = LARGE_IMAGE_PROFILE
) -> str | None:
    """Select the profile ``name`` for this process; call before rclpy.init (Fast DDS reads it when the
    process's first participant is made). Returns the path applied, or None."""
    profile = large_image_transport_profile(environ, name)
    if profile:
        for variable in profile_variables(fast_dds_major()):  # the name this process's Fast DDS reads
            environ[variable] = profile
    return profile


def use_large_image_reader_transport(environ: MutableMapping[str, str] = os.environ) -> str | None:
    """Select the reader profile for this process (before its first participant, as above), under the
    variable name its Fast DDS reads. Returns the path applied, or None."""
    return use_large_image_transport(environ, LARGE_IMAGE_READER_PROFILE)


@contextlib.contextmanager
def large_image_reader_transport(environ: MutableMapping[str, str] = os.environ):
    """The reader profile while this process makes its participant, the environment as it was after.

    Fast DDS reads the variable once, when the process's first participant is made. Left set, it would
    pass to every process started later from this one (a test starting a sim), where it reads as the
    user's own profile: that sim would then skip its large-image profile.
    """
    saved = {name: environ.get(name) for name in PROFILE_VARIABLES}
    use_large_image_reader_transport(environ)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                environ.pop(name, None)
            else:
                environ[name] = value


def remove_dead_segments(shm_dir: str = "/dev/shm", min_age_s: float = 10.0) -> list[tuple[str, int]]:
    """Remove the Fast DDS shared-memory files whose owner is gone; returns (path, bytes) removed.

    A participant keeps its segment's lock file (``<name>_el``) locked while it lives. A process that
    was killed (SIGKILL, a crash) cannot remove its segment, and the file stays in ``shm_dir``, which
    is RAM (32 MB per sim or camera process with the large-image profile). A file whose lock can be
    taken has no owner; files younger than `min_age_s` are left alone (a participant being made may
    not hold its lock yet).
    """
    removed = []
    now = time.time()
    for name in sorted(os.listdir(shm_dir)):
        if not (name.startswith(SHM_PREFIXES) and name.endswith("_el")):
            continue
        lock_path = os.path.join(shm_dir, name)
        data_path = lock_path[: -len("_el")]
        try:
            if now - os.stat(lock_path).st_mtime < min_age_s:
                continue
            fd = os.open(lock_path, os.O_RDONLY)
        except OSError:  # removed meanwhile
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:  # its owner lives
                continue
            for path in (data_path, lock_path):
                try:
                    size = os.path.getsize(path)
                    os.unlink(path)
                except OSError:
                    continue
                removed.append((path, size))
        finally:
            os.close(fd)
    return removed


def main(argv: list[str] | None = None) -> int:
    """``python -m lerobot_core.dds_transport clean``: remove dead Fast DDS shared-memory files."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] != ["clean"] or len(argv) > 2:
        print("usage: python -m lerobot_core.dds_transport clean [SHM_DIR]", file=sys.stderr)
        return 2
    removed = remove_dead_segments(argv[1] if len(argv) == 2 else "/dev/shm")
    total = sum(size for _, size in removed)
    print(f"removed {len(removed)} file(s) of dead Fast DDS participants, {total / 2**20:.1f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
