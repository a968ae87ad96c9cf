"""``lerobot-record-control``: drive a running recorder node from a terminal, as lerobot-record's keys do.

    right arrow (or n)   end the episode early and save it / end the reset period
    left arrow (or r)    discard the episode and record it again
    Esc (or q)           stop: save the episode in progress and finalize the dataset, then exit
    space (or s)         start an episode (when idle)

Raw termios input: works over SSH and in a plain console, no X server or pynput needed. The tool
talks to the node over ROS only (its services, and recorder/status for the status line), so it can
run on another machine of the same ROS graph. ``--command stop|discard|finalize|start`` sends one
request and exits (scripts, tests).

With ``--arbiter [NAME]`` (human-in-the-loop, a ``control_arbiter`` node running), LeRobot's HIL keys:

    space                pause the policy: the follower holds, the leader arm mirrors it
    c                    take control with the leader arm (an intervention)
    p                    return control to the policy (same episode)
    s                    start an episode (when idle)

and ``--command pause|takeover|resume`` sends one arbiter input.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import rclpy
from rclpy.node import Node
from std_srvs.srv import Trigger

from lerobot_core import cli
from lerobot_core.ros import qos
from lerobot_core.ros.node import run_node
from lerobot_msgs.msg import RecorderStatus
from lerobot_msgs.srv import StartEpisode
from lerobot_recorder.keyboard import (
    ESC,
    LEFT,
    PAUSE,
    RESUME,
    RIGHT,
    START,
    TAKEOVER,
    KeyDecoder,
    RawTerminal,
)

STATE_NAMES = {
    RecorderStatus.STATE_UNCONFIGURED: "unconfigured",
    RecorderStatus.STATE_IDLE: "idle",
    RecorderStatus.STATE_RECORDING: "RECORDING",
    RecorderStatus.STATE_RESETTING: "resetting",
    RecorderStatus.STATE_SAVING: "saving",
    RecorderStatus.STATE_FINALIZED: "finalized",
    RecorderStatus.STATE_ERROR: "ERROR",
}
KEY_COMMANDS = {RIGHT: "stop", LEFT: "discard", ESC: "finalize", START: "start"}
ARBITER_COMMANDS = {PAUSE: "pause", TAKEOVER: "takeover", RESUME: "resume"}
MODE_NAMES = {0: "POLICY", 1: "HUMAN", 2: "PAUSED"}  # lerobot_msgs/ControlStatus.MODE_*


def status_line(s: RecorderStatus) -> str:
    state = STATE_NAMES.get(s.state, str(s.state))
    bad = [st.name for st in s.streams if st.stale or not st.rate_ok]
    line = (
        f"[{state}] episode {s.episode_index} | {s.elapsed_s:5.1f}/{s.episode_time_s:g} s | "
        f"{s.frames} frames | dropped {s.dropped_ticks} | backlog {s.encoder_backlog} | "
        f"saved {s.episodes_recorded} (dataset {s.total_episodes})"
    )
    if bad:
        line += f" | check: {', '.join(bad)}"
    return line


class RecordControl(Node):
    def __init__(self, recorder: str = "recorder", arbiter: str = ""):
        super().__init__("record_control")
        self.arbiter_client = None
        self.control = None  # the arbiter's latest lerobot_msgs/ControlStatus
        if arbiter:
            from lerobot_msgs.msg import ControlStatus
            from lerobot_msgs.srv import ArbiterCommand

            ans = arbiter.rstrip("/")
            self.arbiter_client = self.create_client(ArbiterCommand, f"{ans}/command")
            self.create_subscription(
                ControlStatus,
                f"{ans}/status",
                lambda m: setattr(self, "control", m),
                qos.LATCHED,
            )
        ns = recorder.rstrip("/")
        self.recorder = recorder
        self.services_by_command = {
            "stop": self.create_client(Trigger, f"{ns}/stop_episode"),
            "discard": self.create_client(Trigger, f"{ns}/discard_episode"),
            "finalize": self.create_client(Trigger, f"{ns}/finalize"),
            "start": self.create_client(StartEpisode, f"{ns}/start_episode"),
        }
        self.status: RecorderStatus | None = None
        self.create_subscription(RecorderStatus, f"{ns}/status", self._on_status, qos.LATCHED)

    def _on_status(self, msg: RecorderStatus) -> None:
        self.status = msg

    def call(self, command: str, timeout: float = 120.0, task: str = "") -> tuple[bool, str]:
        if command in ARBITER_COMMANDS.values():
            client = self.arbiter_client
            if client is None:
                return False, f"{command} needs --arbiter (the control_arbiter node's namespace)"
            if not client.wait_for_service(timeout_sec=5.0):
                return False, f"service {client.srv_name} not available: is the control_arbiter node running?"
            req = client.srv_type.Request(command=command)
        else:
            client = self.services_by_command[command]
            if not client.wait_for_service(timeout_sec=5.0):
                return False, (
                    f"service {client.srv_name} not available: is the recorder node running, under the name "
                    f"--recorder gives ({self.recorder!r})?"
                )
            req = client.srv_type.Request()
        if command == "start":
            req.task = task
        fut = client.call_async(req)
        deadline = time.monotonic() + timeout
        while not fut.done() and time.monotonic() < deadline:
            time.sleep(0.02)
        if not fut.done():
            return False, f"{client.srv_name}: no answer within {timeout:g} s"
        resp = fut.result()
        return bool(resp.success), str(resp.message)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        prog="lerobot-record-control", description=__doc__.split("\n\n")[0], formatter_class=cli.HelpFormatter
    )
    ap.add_argument("--recorder", default="recorder", help="recorder namespace/name")
    ap.add_argument(
        "--arbiter",
        nargs="?",
        const="arbiter",
        default="",
        help="human-in-the-loop: the control_arbiter's namespace (default when given: arbiter)",
    )
    ap.add_argument(
        "--command",
        choices=sorted([*KEY_COMMANDS.values(), *ARBITER_COMMANDS.values()]),
        help="send one request and exit",
    )
    ap.add_argument("--task", default="", help="task text for start (default: the node's)")
    args, ros_args = ap.parse_known_args(argv)

    def control(node: RecordControl, _running) -> int:
        if args.command:
            ok, message = node.call(args.command, task=args.task)
            print(("ok: " if ok else "error: ") + message)
            return 0 if ok else 1
        return interactive(node, args.task, hil=bool(args.arbiter))

    return run_node(lambda: RecordControl(args.recorder, args.arbiter), ros_args or None, main_loop=control)


def interactive(node: RecordControl, task: str, hil: bool = False) -> int:
    fd = sys.stdin.fileno()
    out = sys.stdout
    if not os.isatty(fd):
        # e.g. a profile started from a script, or with stdin redirected: say so instead of a key list
        out.write(
            "record_control: stdin is not a terminal, so the keys are off (recording goes on); "
            "run lerobot-record-control in a terminal for the keys, or use its --command\n"
        )
        out.flush()
        return 0
    if hil:
        out.write(
            "keys: space pause   c take control   p back to the policy   -> end episode   "
            "<- re-record   Esc/q stop+finalize   s start   (Ctrl-C quit)\n"
        )
    else:
        out.write(
            "keys: -> end episode/reset   <- re-record   Esc/q stop+finalize   space start   (Ctrl-C quit)\n"
        )
    decoder = KeyDecoder(hil=hil)
    last = ""
    with RawTerminal(fd) as term:
        while rclpy.ok():
            keys = term.read_keys(decoder, timeout=0.2)
            if keys is None:  # stdin closed
                return 0
            for key in keys:
                command = KEY_COMMANDS.get(key) or ARBITER_COMMANDS.get(key)
                if command is None:
                    continue
                ok, message = node.call(command, task=task)
                out.write(f"\r\x1b[K{'ok' if ok else 'error'}: {message}\n")
                out.flush()
                if command == "finalize" and ok:
                    return 0
            if node.status is not None:
                line = status_line(node.status)
                if node.control is not None:
                    line = f"[{MODE_NAMES.get(node.control.mode, node.control.mode)}] " + line
                if line != last:
                    out.write("\r\x1b[K" + line)
                    out.flush()
                    last = line
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
