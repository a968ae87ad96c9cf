"""Watch topics and report what flows: message counts, measured rates, gaps, and the latest value.

The walking skeleton's consumer and a handy field tool (`ros2 topic hz` for several topics at once,
also where the `ros2` CLI is absent). With `expect_count` it exits 0 once every topic delivered that
many messages, or 1 with the starved topics named when `timeout_s` passes first.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from functools import partial

from rclpy.node import Node

from lerobot_core.rate import RateMeter
from lerobot_core.ros import qos
from lerobot_core.ros.device import message_class
from lerobot_core.ros.node import run_node
from lerobot_core.ros.params import declare


@dataclass(frozen=True)
class MonitorConfig:
    topics: tuple[str, ...]
    types: tuple[str, ...]
    report_period_s: float
    expect_count: int
    timeout_s: float
    summary_file: str


class TopicMonitorNode(Node):
    def __init__(self, **kwargs) -> None:
        super().__init__("topic_monitor", **kwargs)
        p = partial(declare, self)
        self.cfg = MonitorConfig(
            topics=tuple(p("topics", ["joint_states"], "topics to watch")),
            types=tuple(p("types", ["sensor_msgs/msg/JointState"], "message type per topic")),
            report_period_s=p("report_period_s", 1.0, "seconds between log reports [s]", read_only=False),
            expect_count=p(
                "expect_count", 0, "exit 0 once each topic got this many; 0 = run forever", read_only=False
            ),
            timeout_s=p(
                "timeout_s", 0.0, "with expect_count: give up after this long [s]; 0 = never", read_only=False
            ),
            summary_file=p("summary_file", "", "write a JSON summary here on exit", read_only=False),
        )
        if len(self.cfg.types) not in (1, len(self.cfg.topics)):
            raise ValueError(
                f"'types' must have 1 or {len(self.cfg.topics)} entries, got {len(self.cfg.types)}"
            )
        types = (
            self.cfg.types
            if len(self.cfg.types) == len(self.cfg.topics)
            else self.cfg.types * len(self.cfg.topics)
        )
        self.meters: dict[str, RateMeter] = {}
        self.latest: dict[str, object] = {}
        for topic, tname in zip(self.cfg.topics, types, strict=True):
            msg_type = message_class(tname)
            sub = self.create_subscription(msg_type, topic, lambda m, t=topic: self._on_msg(t, m), qos.SENSOR)
            self.meters[sub.topic_name] = RateMeter()
        self.t0 = time.monotonic()
        self.create_timer(self.cfg.report_period_s, self._report)
        self.exit_code: int | None = None

    def _on_msg(self, topic: str, msg) -> None:
        self.meters[self.resolve_topic_name(topic)].tick(time.monotonic())
        self.latest[self.resolve_topic_name(topic)] = msg

    def _report(self) -> None:
        now = time.monotonic()
        parts = []
        for topic, m in self.meters.items():
            parts.append(f"{topic}: {m.count} msgs, {m.rate(now):.1f} Hz")
            last = self.latest.get(topic)
            if last is not None and hasattr(last, "position") and len(last.position):
                parts[-1] += " pos=[" + ", ".join(f"{p:+.3f}" for p in last.position) + "]"
        self.get_logger().info(" | ".join(parts))
        if self.cfg.expect_count:
            if all(m.count >= self.cfg.expect_count for m in self.meters.values()):
                self.get_logger().info(f"every topic delivered >= {self.cfg.expect_count} messages")
                self.exit_code = 0
            elif self.cfg.timeout_s and now - self.t0 > self.cfg.timeout_s:
                starved = [t for t, m in self.meters.items() if m.count < self.cfg.expect_count]
                self.get_logger().error(
                    f"timeout after {self.cfg.timeout_s:g} s; too few messages on {starved}"
                )
                self.exit_code = 1

    def summary(self) -> dict:
        now = time.monotonic()
        return {
            t: {"count": m.count, "rate_hz": m.rate(now), "max_gap_s": m.max_gap}
            for t, m in self.meters.items()
        }


def _wait_for_verdict(node: TopicMonitorNode, running) -> int:
    while running() and node.exit_code is None:
        time.sleep(0.1)
    return node.exit_code or 0


def _write_summary(node: TopicMonitorNode) -> None:
    if node.cfg.summary_file:
        with open(node.cfg.summary_file, "w") as f:
            json.dump(node.summary(), f, indent=1)


def main(args=None) -> int:
    return run_node(TopicMonitorNode, args, main_loop=_wait_for_verdict, on_exit=_write_summary)


if __name__ == "__main__":
    raise SystemExit(main())
