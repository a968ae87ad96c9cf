"""Joint names -> a joint vector (ROS-free): one cached index plan per message layout.

A JointState (or JointTrajectory) names its values; a node wants them in its own joint order. The
mapping depends only on the message's names and the wanted order, so it is built once per layout
(``index_plan`` caches it) and each message costs one fancy-index. Every node and the contract
extraction use this module; the callers keep their own words for a refusal (``IndexPlan.require``
gives the contract's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np


@dataclass(frozen=True, eq=False)
class IndexPlan:
    """Where a message's values go in a joint vector.

    ``src[k]`` indexes the message's arrays, ``dst[k]`` the joint vector, for each wanted joint the
    message names (in the wanted order; a name given twice: its last value, as a dict would keep).
    """

    joints: tuple[str, ...]  # the wanted joint order
    names: tuple[str, ...]  # the message's names (its layout)
    src: np.ndarray
    dst: np.ndarray
    missing: tuple[str, ...]  # wanted joints the message does not name, in the wanted order
    unknown: tuple[str, ...]  # names of the message that are not wanted joints, in the message order

    @property
    def complete(self) -> bool:
        return not self.missing

    def require(self, where: str) -> IndexPlan:
        """This plan if every wanted joint is in the message; else ValueError naming the first missing."""
        if self.missing:
            raise ValueError(
                f"{where}: joint {self.missing[0]!r} is not in the message (it has {list(self.names)})"
            )
        return self

    def take(self, values: Sequence[float]) -> np.ndarray:
        """The message's values of the joints it names, in the wanted order (the joints ``dst`` gives)."""
        return np.asarray(values, dtype=np.float64)[self.src]

    def gather(self, values: Sequence[float], out: np.ndarray | None = None) -> np.ndarray:
        """``out`` (default: NaN per joint) with the named joints' values written in; returns it."""
        if out is None:
            out = np.full(len(self.joints), np.nan)
        out[self.dst] = self.take(values)
        return out


@lru_cache(maxsize=256)
def _build(names: tuple[str, ...], joints: tuple[str, ...]) -> IndexPlan:
    at = {n: i for i, n in enumerate(names)}
    wanted = set(joints)
    src, dst, missing = [], [], []
    for k, joint in enumerate(joints):
        i = at.get(joint)
        if i is None:
            missing.append(joint)
        else:
            src.append(i)
            dst.append(k)
    src_a, dst_a = np.array(src, dtype=np.intp), np.array(dst, dtype=np.intp)
    src_a.setflags(write=False)
    dst_a.setflags(write=False)
    unknown = tuple(n for n in names if n not in wanted)
    return IndexPlan(joints, names, src_a, dst_a, tuple(missing), unknown)


def index_plan(names: Sequence[str], joints: Sequence[str]) -> IndexPlan:
    """The (cached) plan mapping a message named ``names`` onto the joint order ``joints``."""
    return _build(tuple(names), tuple(joints))


def plan_cache_info():
    """Hits and misses of the plan cache (one miss per message layout)."""
    return _build.cache_info()
