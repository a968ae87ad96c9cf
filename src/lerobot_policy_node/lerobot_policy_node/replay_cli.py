"""`lerobot-ros-replay`: play a recorded episode's actions back on a robot or the simulator.

    lerobot-ros-replay DATASET --episode N [--command-interface joint_state] [--units radians]

Reads the robot's present pose on `joint_states`, ramps to the episode's first action at no more
than --max-step-rad per step, then publishes one action per frame at the dataset's fps, every
command through the safety filter (joint limits of --robot, per-step bound). Topics are relative:
`--ros-args -r __ns:=/arm` replays on a namespaced robot.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time

import numpy as np

from lerobot_core import cli
from lerobot_core.command import COMMAND_INTERFACES
from lerobot_core.hub import HubError, resolve_dataset
from lerobot_core.joint_map import index_plan
from lerobot_core.safety import SafetyLimits
from lerobot_dataset import DatasetError
from lerobot_dataset.episode_actions import UNITS, load_episode_actions, to_radians

from .replay import plan_replay

PROG = "lerobot-ros-replay"


def _get_robot_spec(robot: str):
    from lerobot_core.robots import get_robot_spec

    return get_robot_spec(robot)


def _load_contract(path: str):
    from lerobot_core.contract import Contract, ContractError

    try:
        return Contract.load(path)
    except ContractError as exc:
        raise ReplayError(f"--contract {path}: {exc}") from None


class ReplayError(RuntimeError):
    """Something the user can fix; the message names the flag or topic."""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG, description=__doc__.split("\n\n")[0], formatter_class=cli.HelpFormatter
    )
    p.add_argument("dataset", help="LeRobotDataset v3 folder, or a Hub dataset id org/name (from the cache)")
    p.add_argument("--episode", type=cli.non_negative_int, required=True, help="episode_index to replay")
    p.add_argument(
        "--command-interface",
        choices=tuple(COMMAND_INTERFACES),
        default="joint_state",
        help="joint_state: sensor_msgs/JointState on joint_commands; forward_position: "
        "Float64MultiArray on forward_position_controller/commands (the robot's joint order); "
        "joint_trajectory: one-point JointTrajectory on joint_trajectory_controller/joint_trajectory",
    )
    p.add_argument(
        "--units",
        choices=UNITS,
        default=None,
        help="units the dataset stores joints in (default: the --contract's, else radians)",
    )
    p.add_argument(
        "--contract",
        default="",
        help="the recording's contract (a YAML path, or a shipped one's name): its units and calibration "
        "convert the actions to radians (needed for units normalized)",
    )
    p.add_argument("--feature", default="action", help="column to replay")
    p.add_argument(
        "--robot",
        default="so101_follower",
        help="robot type for joint limits and joint order (lerobot_core.robots); '' = no limits",
    )
    p.add_argument(
        "--max-step-rad",
        type=cli.positive_float,
        default=0.05,
        help="max change of any joint per command [rad]",
    )
    p.add_argument(
        "--fps", type=cli.non_negative_float, default=0.0, help="command rate [Hz]; 0 = the dataset's fps"
    )
    p.add_argument(
        "--hold-s",
        type=cli.non_negative_float,
        default=1.0,
        help="keep sending the last action this long at the end [s]",
    )
    p.add_argument(
        "--wait-s",
        type=cli.positive_float,
        default=10.0,
        help="how long to wait for the first joint_states [s]",
    )
    p.add_argument(
        "--min-subscribers",
        type=cli.non_negative_int,
        default=1,
        help="start once this many subscribers take the commands (the robot, plus e.g. a recorder or a "
        "monitor that must see every command)",
    )
    return p


def _limits(robot: str, joints: list[str], max_step: float) -> SafetyLimits:
    n = len(joints)
    if not robot:
        return SafetyLimits.build(n, None, None, max_step)
    try:
        spec = _get_robot_spec(robot)
    except (KeyError, ValueError) as exc:
        raise ReplayError(f"--robot {robot!r}: {exc}") from None
    missing = [j for j in joints if j not in spec.limits]
    if missing:
        raise ReplayError(
            f"--robot {robot}: the dataset's joints {missing} are not joints of {robot} "
            f"({', '.join(spec.joint_names)}); pass the right --robot, or --robot '' for no joint limits"
        )
    return SafetyLimits.build(
        n, [spec.limits[j].lower for j in joints], [spec.limits[j].upper for j in joints], max_step
    )


def load_actions(args) -> tuple[list[str], np.ndarray, float]:
    """(joint names, actions in rad, fps) of the episode, with errors naming the flag."""
    try:
        episode = load_episode_actions(resolve_dataset(args.dataset), args.episode, args.feature)
    except HubError as exc:
        raise ReplayError(f"DATASET: {exc}") from None
    except DatasetError as exc:
        text = str(exc)
        flag = (
            "--episode" if text.startswith("episode ") else "--feature" if "no feature" in text else "DATASET"
        )
        raise ReplayError(f"{flag}: {text}") from None
    joints = list(episode.names)
    scale = offset = None
    units = args.units or "radians"
    if args.contract:
        contract = _load_contract(args.contract)
        try:
            scale, offset = contract.unit_conversion(args.feature)
        except (KeyError, ValueError) as exc:
            raise ReplayError(
                f"--contract {args.contract}: no usable {args.feature!r} feature ({exc})"
            ) from None
        if args.units:
            raise ReplayError("--units and --contract: give one (the contract says its units)")
    try:
        actions = to_radians(episode.values, units, scale, offset)
    except DatasetError as exc:
        raise ReplayError(f"--units {units}: {exc} (pass --contract)") from None
    return joints, actions, args.fps or episode.fps


def _robot_order(robot: str, joints: list[str]) -> list[str]:
    """forward_position sends values by position: the robot's joint order, not the dataset's."""
    spec_joints = list(_get_robot_spec(robot).joint_names) if robot else []
    if sorted(spec_joints) != sorted(joints):
        raise ReplayError(
            f"--command-interface forward_position sends values in the robot's joint order, but the "
            f"dataset's joints {joints} are not those of --robot {robot!r} {spec_joints}"
        )
    return spec_joints


class _Replayer:
    """The rclpy side: a joint_states subscription and the command publisher."""

    def __init__(self, interface: str, joints: list[str], fps: float):
        import rclpy
        from sensor_msgs.msg import JointState

        from lerobot_core.ros import qos
        from lerobot_core.ros.device import message_class

        self.rclpy, self.interface, self.joints, self.fps = rclpy, interface, joints, fps
        self.node = rclpy.create_node("lerobot_ros_replay")
        self._latest = np.full(len(self.joints), np.nan)
        self._seen = np.zeros(len(self.joints), dtype=bool)
        self._lock = threading.Lock()
        self.node.create_subscription(
            JointState,
            "joint_states",
            self._on_joints,
            qos.JOINTS_IN,
        )
        self.msgtype, topic = COMMAND_INTERFACES[interface]
        self.pub = self.node.create_publisher(message_class(self.msgtype), topic, qos.RELIABLE)

    def _on_joints(self, msg) -> None:
        plan = index_plan(msg.name[: len(msg.position)], self.joints)
        with self._lock:
            plan.gather(msg.position, self._latest)
            self._seen[plan.dst] = True
            self._received = time.monotonic()

    def age_s(self) -> float:
        """Seconds since the last joint_states arrived."""
        with self._lock:
            return time.monotonic() - getattr(self, "_received", 0.0)

    def present(self) -> np.ndarray | None:
        with self._lock:
            if self._seen.all():
                return self._latest.copy()
        return None

    def topic(self, relative: str) -> str:
        return self.node.resolve_topic_name(relative)

    def publish(self, positions: np.ndarray, order: list[str]) -> None:
        from lerobot_core.ros.commands import command_message

        by_name = dict(zip(self.joints, (float(v) for v in positions), strict=True))
        stamp = self.node.get_clock().now().to_msg()
        self.pub.publish(
            command_message(self.msgtype, order, [by_name[j] for j in order], stamp, 1.0 / self.fps)
        )


def _spin(executor, stop: threading.Event) -> None:
    from rclpy.executors import ExternalShutdownException

    try:
        while not stop.is_set() and executor.context.ok():
            executor.spin_once(timeout_sec=0.05)
    except ExternalShutdownException:
        pass


def _run(args, ros_args: list[str]) -> int:
    joints, actions, fps = load_actions(args)
    limits = _limits(args.robot, joints, args.max_step_rad)
    order = _robot_order(args.robot, joints) if args.command_interface == "forward_position" else joints

    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from lerobot_core.ros.node import until_shutdown

    rclpy.init(args=ros_args)
    executor = SingleThreadedExecutor()
    replayer = spinner = None
    stop = threading.Event()
    try:
        with until_shutdown():
            replayer = _Replayer(args.command_interface, joints, fps)
            executor.add_node(replayer.node)
            spinner = threading.Thread(target=_spin, args=(executor, stop), daemon=True)
            spinner.start()
            deadline = time.monotonic() + args.wait_s
            while (present := replayer.present()) is None:
                if time.monotonic() > deadline:
                    raise ReplayError(
                        f"no joint_states with joints {joints} on {replayer.topic('joint_states')} within "
                        f"{args.wait_s:g} s (--wait-s): is the robot or the sim running, in this ROS_DOMAIN_ID?"
                    )
                time.sleep(0.02)
            command_topic = replayer.topic(COMMAND_INTERFACES[args.command_interface][1])
            # else the first commands go nowhere (or to the robot but not to a monitor matched later)
            while (subscribers := replayer.pub.get_subscription_count()) < args.min_subscribers:
                if time.monotonic() > deadline:
                    raise ReplayError(
                        f"{subscribers} of --min-subscribers {args.min_subscribers} subscriber(s) on "
                        f"{command_topic} within {args.wait_s:g} s (--wait-s): does the robot take "
                        f"--command-interface {args.command_interface}?"
                    )
                time.sleep(0.02)
            present = replayer.present()
            plan = plan_replay(present, actions, limits)
            print(
                f"{PROG}: episode {args.episode} of {args.dataset}: {len(actions)} actions at {fps:g} Hz on "
                f"{command_topic}, after a ramp of {plan.ramp_steps} "
                f"steps from the present pose",
                file=sys.stderr,
            )
            period = 1.0 / fps
            hold = int(round(args.hold_s * fps))
            commands = [*plan.commands, *([plan.final] * hold)]
            t0 = time.monotonic()
            for k, command in enumerate(commands):
                replayer.publish(command, order)
                delay = t0 + (k + 1) * period - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
            err = np.abs(replayer.present() - plan.final)
            worst = int(np.argmax(err))
            age = replayer.age_s()
            print(
                f"{PROG}: done in {time.monotonic() - t0:.2f} s; {plan.clamped_steps} commands clamped to the "
                f"joint limits, {plan.rate_limited_steps} slowed by --max-step-rad; largest error to the "
                f"last command {err[worst]:.4f} rad ({joints[worst]})",
                file=sys.stderr,
            )
            for line in plan.explain(joints, limits):
                print(f"{PROG}:   {line}", file=sys.stderr)
            if age > 2 * period + 0.5:  # the error is measured on a pose that stopped coming
                print(
                    f"{PROG}: warning: the last joint_states is {age:.1f} s old: the robot or the sim "
                    "stopped publishing during the replay, so the error above is measured on a stale pose",
                    file=sys.stderr,
                )
    finally:
        stop.set()
        if spinner is not None:
            spinner.join()  # the executor thread ends before its node is destroyed
        executor.shutdown(timeout_sec=1.0)
        if replayer is not None:
            replayer.node.destroy_node()
        rclpy.try_shutdown()
    return 0


def main(argv: list[str] | None = None) -> int:
    from rclpy.utilities import remove_ros_args

    argv = sys.argv if argv is None else [PROG, *argv]
    args = _parser().parse_args(remove_ros_args(argv)[1:])
    try:
        return _run(args, argv)
    except (ReplayError, ValueError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
