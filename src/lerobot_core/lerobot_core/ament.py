"""Where installed things are, found through the ament index the way `ros2 run` finds them (ROS-free)."""

from __future__ import annotations

import os
from pathlib import Path


def prefixes() -> list[str]:
    return [p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]


def share_path(package: str) -> Path:
    """`share/<package>` under the first prefix whose ament index has `package` (what
    `get_package_share_directory` gives); FileNotFoundError says how to get it."""
    for prefix in prefixes():
        if Path(prefix, "share", "ament_index", "resource_index", "packages", package).exists():
            return Path(prefix, "share", package)
    raise FileNotFoundError(
        f"package '{package}' is not in the ament index (AMENT_PREFIX_PATH={os.environ.get('AMENT_PREFIX_PATH', '')!r});"
        " build the workspace (./setup.sh) and `source env.sh`"
    )


def find_executable(package: str, executable: str) -> Path:
    """`lib/<package>/<executable>` under the first prefix that has it; FileNotFoundError says where it looked."""
    for prefix in prefixes():
        cand = Path(prefix, "lib", package, executable)
        if cand.is_file() and os.access(cand, os.X_OK):
            return cand
    share_path(package)  # not in the ament index at all: says so, and how to get it
    available = sorted({f.name for p in prefixes() for f in Path(p, "lib", package).glob("*") if f.is_file()})
    raise FileNotFoundError(
        f"package '{package}' has no executable '{executable}' (available: {', '.join(available) or 'none'})"
    )


def die_with_parent(sig: int = 2) -> None:
    """preexec_fn for node processes: the kernel sends `sig` (default SIGINT) when the parent dies.

    Nodes run in their own session (so a terminal Ctrl-C reaches only the supervisor), which also
    means they would outlive a supervisor that is SIGKILLed; this closes that gap on Linux.
    """
    import ctypes
    import signal as _signal

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, sig)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return  # not Linux: nothing to arm
    if os.getppid() == 1:  # the parent is already gone
        os.kill(os.getpid(), sig if sig else _signal.SIGTERM)
