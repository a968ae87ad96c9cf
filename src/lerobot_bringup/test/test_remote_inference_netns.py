"""Remote inference across a real network link: two network namespaces joined by a veth pair, the robot
graph (`lerobot-launch deploy_remote_robot sim:=true`: the MuJoCo SO-101 in realtime mode and the policy
node in remote mode) in one, the inference host (`deploy_remote_gpu`, with an injected link delay and
loss) in the other. DDS discovery runs on the veth's subnet only (--discovery SUBNET, an explicit
ROS_DOMAIN_ID, no other interface in the namespaces: nothing leaves the machine), Fast DDS's shared
memory transport is off (FASTDDS_BUILTIN_TRANSPORTS=UDPv4), and the veth's counters show the traffic.
The link dies (the inference host stops): the arm holds naming the cause; a new inference host: it drives
again, nothing restarted on the robot side."""

import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from lerobot_core.ament import find_executable, share_path

pytestmark = pytest.mark.ros

ACT_ENV_STATE = share_path("lerobot_runtime") / "test" / "fixtures" / "act_env_state" / "pretrained_model"
CONTRACT = "so101_sim_env_state_contract"

PROBE = textwrap.dedent(
    """
    import rclpy
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from lerobot_msgs.msg import PolicyStatus
    rclpy.init()
    node = rclpy.create_node("netns_probe")
    qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    node.create_subscription(
        PolicyStatus, "/policy/status",
        lambda m: print(f"STATUS {m.state} chunks={m.chunks} steps={m.steps} | {m.message}", flush=True), qos)
    rclpy.spin(node)
    """
)


def sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True, text=True)


@pytest.fixture
def veth_pair():
    """(robot namespace, inference namespace, robot-side veth), removed afterwards."""
    tag = f"{os.getpid() % 10000}{random.randrange(100):02d}"
    a, b, va, vb = f"lrrob{tag}", f"lrgpu{tag}", f"vrob{tag}", f"vgpu{tag}"
    net = f"10.{random.randrange(200, 250)}.{random.randrange(256)}"
    try:
        subprocess.run(["ip", "netns", "add", a], check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(
            f"network namespaces are not permitted here (ip netns add: {getattr(exc, 'stderr', exc)})"
        )
    try:
        sh("ip", "netns", "add", b)
        sh("ip", "link", "add", va, "type", "veth", "peer", "name", vb)
        sh("ip", "link", "set", va, "netns", a)
        sh("ip", "link", "set", vb, "netns", b)
        for ns, dev, addr in ((a, va, f"{net}.1/24"), (b, vb, f"{net}.2/24")):
            sh("ip", "-n", ns, "addr", "add", addr, "dev", dev)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "-n", ns, "link", "set", dev, "up", "multicast", "on")
        yield a, b, va
    finally:
        for ns in (a, b):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


class InNamespace:
    """A command run in a network namespace, its output kept (lines) for the test to wait on."""

    def __init__(self, ns: str, cmd: list[str]):
        env = dict(
            os.environ,
            ROS_AUTOMATIC_DISCOVERY_RANGE="SUBNET",
            FASTDDS_BUILTIN_TRANSPORTS="UDPv4",  # no shared memory: the veth carries everything
            MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl"),
            PYTHONUNBUFFERED="1",
        )
        assert env.get("ROS_DOMAIN_ID"), "the lerobot_ros pytest plugin sets ROS_DOMAIN_ID"
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", ns, *cmd],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip())

    def wait_for(self, predicate, timeout: float) -> str | None:
        end = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < end:
            while seen < len(self.lines):
                seen += 1
                if predicate(self.lines[seen - 1]):
                    return self.lines[seen - 1]
            if self.proc.poll() is not None and seen == len(self.lines):
                return None
            time.sleep(0.05)
        return None

    def stop(self) -> int:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        return self.proc.returncode

    def tail(self, n: int = 40) -> str:
        return "\n".join(self.lines[-n:])


def veth_bytes(ns: str, dev: str) -> int:
    out = subprocess.run(
        ["ip", "netns", "exec", ns, "cat", f"/sys/class/net/{dev}/statistics/rx_bytes"],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(out.stdout)


def chunks_of(line: str) -> int:
    return int(line.split("chunks=")[1].split()[0])


def test_remote_inference_across_a_veth_link(veth_pair, tmp_path):
    robot_ns, gpu_ns, veth = veth_pair
    launch = str(find_executable("lerobot_bringup", "lerobot-launch"))
    common = [f"policy_path:={ACT_ENV_STATE}", f"contract:={CONTRACT}"]
    robot_cmd = [
        launch,
        "--discovery",
        "SUBNET",
        "deploy_remote_robot",
        *common,
        "sim:=true",
        "cameras:=['']",
    ]
    gpu_cmd = [launch, "--discovery", "SUBNET", "deploy_remote_gpu", *common, "link_delay_ms:=40.0"]
    (tmp_path / "probe.py").write_text(PROBE)
    procs = []
    try:
        robot = InNamespace(robot_ns, robot_cmd)
        procs.append(robot)
        probe = InNamespace(robot_ns, [sys.executable, str(tmp_path / "probe.py")])
        procs.append(probe)
        assert probe.wait_for(lambda s: "waiting for the first chunk on policy/remote_chunk" in s, 120), (
            probe.tail() + "\n" + robot.tail()
        )
        rx0 = veth_bytes(robot_ns, veth)
        gpu = InNamespace(gpu_ns, [*gpu_cmd, "link_loss_percent:=1.0"])
        procs.append(gpu)
        running = probe.wait_for(lambda s: s.startswith("STATUS 2 ") and chunks_of(s) >= 5, 180)
        assert running, probe.tail() + "\n" + robot.tail() + "\n" + gpu.tail()
        rx = veth_bytes(robot_ns, veth) - rx0
        # every chunk crossed the veth: at least its 6 joints x chunk steps x 8 bytes, for each of them
        assert rx > chunks_of(running) * 6 * 8 * 10, (rx, running)
        # the link dies: the arm holds, naming the cause
        assert gpu.stop() is not None
        assert probe.wait_for(lambda s: s.startswith("STATUS 3 ") and "policy host silent" in s, 60), (
            probe.tail()
        )
        # a new inference host: the arm is driven again, nothing restarted on the robot side
        n = chunks_of(running)
        gpu2 = InNamespace(gpu_ns, gpu_cmd)
        procs.append(gpu2)
        again = probe.wait_for(lambda s: s.startswith("STATUS 2 ") and chunks_of(s) > n, 180)
        assert again, probe.tail() + "\n" + gpu2.tail()
        assert robot.proc.poll() is None, robot.tail()
    finally:
        for p in reversed(procs):
            p.stop()
