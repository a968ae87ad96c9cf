"""YAML as users write it for ROS 2 (ROS-free): PyYAML follows YAML 1.1, which reads ``1e-9`` or
``3e2`` (no dot) as strings, where YAML 1.2 and ROS 2's own parameter files read numbers. ``load``
is PyYAML's safe loader with YAML 1.2's float forms added, so ``max_staleness: 1e-9`` is a number."""

from __future__ import annotations

import re

import yaml


class SafeLoader(yaml.SafeLoader):
    """yaml.SafeLoader that also reads YAML 1.2 floats without a dot (``1e-9``, ``-2E+3``)."""


SafeLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def load(stream):
    """Parse one YAML document (a string or a file object) with :class:`SafeLoader`."""
    return yaml.load(stream, Loader=SafeLoader)


__all__ = ["SafeLoader", "load"]
