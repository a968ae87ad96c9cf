"""The Fast DDS transport profile for processes that publish large images (cameras, simulators).

Fast DDS puts a sample over shared memory only if it fits the *writer's* segment (512 KB by default):
a 640x480 rgb8 image (900 KB) does not, so it goes out as ~15 UDP fragments on loopback, which a busy
reader loses (socket buffer overflow) and reliable QoS then repairs after a heartbeat period, or
best-effort QoS drops. The shipped profile (`config/fastdds_large_images.xml` beside this module,
also installed to `share/lerobot_core/config/`) gives the publishing process a 32 MB shared-memory
segment and UDP on 127.0.0.1 only. Readers need nothing: they map the writer's segment.

It is applied only where the stack already keeps DDS on this host: Fast DDS is the RMW,
ROS_AUTOMATIC_DISCOVERY_RANGE is LOCALHOST (env.sh), and the user has no profile file of their own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping

LARGE_IMAGE_PROFILE = "fastdds_large_images.xml"


def large_image_transport_profile(environ: Mapping[str, str] = os.environ) -> str | None:
    """Path of the profile this process should load, or None to leave DDS as it is."""
    if environ.get("FASTDDS_DEFAULT_PROFILES_FILE"):
        return None
    if environ.get("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp") != "rmw_fastrtps_cpp":
        return None
    if environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE", "").upper() != "LOCALHOST":
        return None
    path = os.path.join(os.path.dirname(os.path.realpath(__file__)), "config", LARGE_IMAGE_PROFILE)
    return path if os.path.isfile(path) else None


def use_large_image_transport(environ: MutableMapping[str, str] = os.environ) -> str | None:
    """Select the profile for this process; call before rclpy.init (Fast DDS reads it when the
    process's first participant is made). Returns the path applied, or None."""
    profile = large_image_transport_profile(environ)
    if profile:
        environ["FASTDDS_DEFAULT_PROFILES_FILE"] = profile
    return profile
