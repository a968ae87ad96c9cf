"""Moved to lerobot_core.dds_transport; this re-export keeps the old import path working."""

from lerobot_core.dds_transport import (  # noqa: F401
    LARGE_IMAGE_PROFILE,
    large_image_transport_profile,
    use_large_image_transport,
)
