"""The LeRobot plugins (lerobot_plugins/) inside LeRobot 0.4.4 and 0.6.1, against the real simulated SO-101
over DDS.

LeRobot runs in its own venv, one per version (scripts/make-lerobot-ref-venv.sh): 0.4.4 on Python 3.11 with
Kilted's ROS 2 wheels (default ~/.cache/lerobot_ros/lerobot-0.4.4, or $LEROBOT_REF_VENV), 0.6.1 on Python 3.12 with
Jazzy's (default ~/.cache/lerobot_ros/lerobot-0.6.1, or $LEROBOT_REF_VENV_06), each with the plugins
and lerobot_core installed. The sim graph runs from this workspace (Kilted); both sides share this test
module's ROS_DOMAIN_ID on loopback. A missing venv fails with the reason (CI builds both).

The LeRobot commands of docs/lerobot_plugins.md are read from the page (its `<!-- cmd: NAME -->` blocks)
and run verbatim, in a temporary folder (their relative paths land there).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from lerobot_core.ros.testing import wait_until
from lerobot_core.ros.testing.pytest_plugin import REF_VENV, ref_venv, ref_venv_python

REPO = Path(__file__).resolve().parents[1]
REF_VENV_06 = ref_venv("0.6.1")
VENVS = {"0.4.4": REF_VENV, "0.6.1": REF_VENV_06}
PLUGINS = ("lerobot_robot_ros", "lerobot_teleoperator_ros", "lerobot_camera_ros")
SOURCES = {  # distribution -> its source folder in this checkout
    **{p: REPO / "lerobot_plugins" / p for p in PLUGINS},
    "lerobot_core": REPO / "src" / "lerobot_core",
}
JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
# the shipped contracts (found by name; ros_so101_sim's default is so101_sim_robot, ros_so101's so101_one_camera)
CONTRACTS = REPO / "src/lerobot_core/lerobot_core/config/contracts"
SIM_PRESET = CONTRACTS / "so101_sim_robot.yaml"
DOC = REPO / "docs" / "lerobot_plugins.md"
# this run's workspace: install/ (kilted) or install-jazzy/ (env.sh exports which)
INSTALL = Path(os.environ.get("LEROBOT_ROS_INSTALL", REPO / "install"))


def doc_command(name: str) -> list[str]:
    """The command of the `<!-- cmd: NAME -->` block of docs/lerobot_plugins.md, as a shell splits it."""
    match = re.search(rf"<!-- cmd: {re.escape(name)} -->\s*```bash\n(.*?)```", DOC.read_text(), re.S)
    assert match, f"{DOC} has no block <!-- cmd: {name} -->"
    lines = [ln for ln in match.group(1).replace("\\\n", " ").splitlines() if shlex.split(ln, comments=True)]
    assert len(lines) == 1, f"block {name} of {DOC} holds {len(lines)} commands, not one"
    argv = shlex.split(lines[0], comments=True)
    if argv[0].startswith("install/"):  # the doc names colcon's default install; this distro's may differ
        argv[0] = str(INSTALL / argv[0][len("install/") :])
    return argv


# what this (Kilted) process's environment must not pass on to a LeRobot venv: its Python path, and the ROS
# wheels' bootstrap (ros_wheels_bootstrapper re-executes Python once with LD_LIBRARY_PATH set to its own
# venv's ROS libraries, guarded by _ROS_WHEELS_BOOTSTRAP_COMPLETE: inherited, the guard stops a Jazzy venv's
# bootstrap and its rclpy fails with "libfastrtps.so.2.14: cannot open shared object file")
NOT_INHERITED = (
    "PYTHONPATH",
    "VIRTUAL_ENV",
    "PYTHONHOME",
    "LD_LIBRARY_PATH",
    "_ROS_WHEELS_BOOTSTRAP_COMPLETE",
)


def clean_env() -> dict:
    return {k: v for k, v in os.environ.items() if k not in NOT_INHERITED}


def _installed_from(python: Path) -> dict:
    """{distribution: the folder its editable install points at, or None} in a venv; and rclpy's state."""
    code = """
import importlib.metadata as md, json, sys
out = {}
for name in sys.argv[1:]:
    try:
        url = json.loads(md.distribution(name).read_text("direct_url.json") or "{}").get("url", "")
        out[name] = url.removeprefix("file://") or "(not editable)"
    except md.PackageNotFoundError:
        out[name] = None
try:
    import rclpy  # noqa: F401
except ImportError as exc:
    out["rclpy"] = str(exc)
print(json.dumps(out))
"""
    env = clean_env()
    res = subprocess.run(
        [str(python), "-c", code, *SOURCES], env=env, capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


@dataclass
class Side:
    """One LeRobot venv: its version, and how to run its Python and its commands."""

    version: str
    venv: Path
    # this checkout's sources, put first on the path when the venv's editable installs point elsewhere
    # (a venv shared by several checkouts); empty when the venv runs this checkout's code as installed
    override: list[Path]

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def minor(self) -> str:
        return ".".join(self.version.split(".")[:2])  # "0.4" / "0.6": the doc's block names

    def env(self) -> dict:
        """This process's environment (domain, loopback discovery, RMW), the venv's bin first on PATH."""
        env = clean_env()
        if self.override:
            env["PYTHONPATH"] = os.pathsep.join(str(p) for p in self.override)
        env["PATH"] = f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["VIRTUAL_ENV"] = str(self.venv)
        env["HF_HUB_OFFLINE"] = "1"
        env["HF_LEROBOT_CALIBRATION"] = env.get(
            "HF_LEROBOT_CALIBRATION", "/tmp/lerobot_ros_plugin_calibration"
        )
        env.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
        return env

    def run(
        self, code: str, timeout: float = 240.0, args: list[str] | None = None
    ) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(self.python), "-c", textwrap.dedent(code), *(args or [])],
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def command(self, argv: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
        """A command line as a user types it in the activated venv (``lerobot-record ...``, ``python -m ...``)."""
        return subprocess.run(argv, env=self.env(), cwd=cwd, capture_output=True, text=True, timeout=timeout)

    def popen(self, argv: list[str], cwd: Path, log: Path, **kwargs) -> subprocess.Popen:
        """``argv`` started in the venv, its output to ``log`` unless ``stdout`` is given. The child writes
        through its own copy of the file's descriptor: ours is closed once the child has started."""
        with contextlib.ExitStack() as files:
            if "stdout" not in kwargs:
                kwargs["stdout"] = files.enter_context(open(log, "w"))
            return subprocess.Popen(
                argv,
                env=self.env(),
                cwd=cwd,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                **kwargs,
            )


def make_side(version: str) -> Side:
    venv = VENVS[version]
    if version == "0.4.4":
        ref_venv_python()  # fails naming the fix when the 0.4.4 venv is missing
    elif not (venv / ".ready").exists():
        pytest.fail(
            f"the LeRobot 0.6.1 side venv {venv} is not built: run `bash scripts/make-lerobot-ref-venv.sh "
            f"--version 0.6.1` (scripts/test.sh does this itself) or point LEROBOT_REF_VENV_06 at one"
        )
    state = _installed_from(venv / "bin" / "python")
    missing = [p for p in PLUGINS if state[p] is None]
    if missing or "rclpy" in state:
        pytest.fail(
            f"LeRobot {version} side venv {venv} lacks {missing or 'rclpy: ' + state.get('rclpy', '')}: "
            "run scripts/make-lerobot-ref-venv.sh (it installs the ROS 2 wheels and the plugins)"
        )
    override = [src for name, src in SOURCES.items() if state[name] != str(src)]
    return Side(version, venv, override)


@pytest.fixture(scope="module", params=sorted(VENVS))
def side(request) -> Side:
    """Each LeRobot version's venv in turn (the test runs once per version)."""
    return make_side(request.param)


@pytest.fixture(scope="module")
def side06() -> Side:
    """LeRobot 0.6.1's venv, for its commands 0.4.4 does not have (lerobot-rollout)."""
    return make_side("0.6.1")


def last_json(res: subprocess.CompletedProcess) -> dict:
    assert res.returncode == 0, f"side venv run failed:\n{res.stdout[-2000:]}\n{res.stderr[-6000:]}"
    return json.loads(res.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("version", sorted(VENVS))
def test_plugins_import_without_pythonpath(version):
    """A user's LeRobot venv (made by scripts/make-lerobot-ref-venv.sh): the plugins register and
    lerobot_core imports from what is installed, without env.sh's PYTHONPATH."""
    make_side(version)
    installed = _installed_from(VENVS[version] / "bin" / "python")
    assert installed["lerobot_core"], (
        f"lerobot_core is not installed in {VENVS[version]}: the plugins import it; "
        "scripts/make-lerobot-ref-venv.sh installs it"
    )
    env = clean_env()
    code = """
import json, lerobot
from lerobot.robots.config import RobotConfig
from lerobot.teleoperators.config import TeleoperatorConfig
from lerobot.cameras.configs import CameraConfig
from lerobot.utils.import_utils import register_third_party_plugins

register_third_party_plugins()  # LeRobot's own discovery, as its commands run it
import lerobot_core.contract
print(json.dumps({"version": lerobot.__version__,
                  "robots": sorted(RobotConfig.get_known_choices()),
                  "teleops": sorted(TeleoperatorConfig.get_known_choices()),
                  "cameras": sorted(CameraConfig.get_known_choices())}))
"""
    res = subprocess.run(
        [str(VENVS[version] / "bin" / "python"), "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        cwd="/",  # not this checkout: nothing is imported from the working directory
    )
    out = last_json(res)
    assert out["version"] == version
    assert {"ros", "ros_so101", "ros_so101_sim", "ros_arm"} <= set(out["robots"])
    assert "ros" in out["teleops"] and "ros" in out["cameras"]


def test_every_command_the_doc_names_exists():
    """Each `lerobot-*` command named in docs/lerobot_plugins.md is one of this workspace's (PATH after
    `source env.sh`) or one of a LeRobot venv's (its bin/). The doc once named lerobot-calibrate-arm."""
    import shutil

    named = set(re.findall(r"(?<![\w/.-])lerobot-[a-z][a-z-]*[a-z]", DOC.read_text()))
    assert {"lerobot-record", "lerobot-rollout", "lerobot-ros-calibrate"} <= named, named
    missing = [
        c
        for c in sorted(named)
        if not shutil.which(c) and not any((v / "bin" / c).exists() for v in VENVS.values())
    ]
    assert not missing, f"{DOC.name} names commands that do not exist: {missing}"


class Graph:
    """Processes of the sim graph, each its own session; stopped with SIGINT, then killed."""

    def __init__(self, log_dir: Path):
        self.log_dir = log_dir
        self.procs: list[tuple[str, subprocess.Popen]] = []

    def start(self, name: str, cmd: list[str], cwd: Path | None = None) -> None:
        with open(self.log_dir / f"{name}.log", "w") as log:  # the child keeps its own descriptor
            proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=cwd
            )
        self.procs.append((name, proc))

    def log(self, name: str) -> str:
        return (self.log_dir / f"{name}.log").read_text(errors="replace")

    def stop(self) -> None:
        for _, p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGINT)
        for _, p in self.procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()


def executable(package: str, name: str) -> str:
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        path = Path(prefix) / "lib" / package / name
        if path.exists():
            return str(path)
    pytest.fail(f"{package}/{name} not found on AMENT_PREFIX_PATH: source env.sh after ./setup.sh")


@pytest.fixture
def sim(tmp_path):
    """The realtime SO-101 sim (new episode whenever one ends), no expert: the doc's command."""
    graph = Graph(tmp_path)
    graph.start("sim", doc_command("sim"))
    yield graph
    graph.stop()


ROBOT_CHECKS = """
import json, math, sys, time
from dataclasses import dataclass
from pathlib import Path
import draccus, yaml
from lerobot.robots.config import RobotConfig
from lerobot.robots.utils import make_robot_from_config
from lerobot.utils.errors import DeviceNotConnectedError
import lerobot_robot_ros  # what register_third_party_plugins imports by distribution name

@dataclass
class Cli:
    robot: RobotConfig

preset, tmp = sys.argv[1], Path(sys.argv[2])
out = {}
# the LeRobot command line: --robot.type=ros --robot.contract=PATH. The realtime sim publishes nothing
# while it holds a finished episode (reset_delay_s, 1 s), which the contract's 0.3 s would call stale
# when an episode ends during the checks below (ros_so101_sim's own default is 2 s, for the same reason)
cfg = draccus.parse(Cli, args=["--robot.type=ros", f"--robot.contract={preset}", "--robot.max_age_s=2.0",
                               "--robot.limits_from=so101_follower", "--robot.connect_timeout_s=120"]).robot
robot = make_robot_from_config(cfg)
out["features"] = {k: (list(v) if isinstance(v, tuple) else v.__name__) for k, v in robot.observation_features.items()}
out["action_features"] = list(robot.action_features)
try:
    robot.get_observation()
except DeviceNotConnectedError:
    out["not_connected_error"] = True
robot.connect()
obs = robot.get_observation()
out["obs"] = {k: (list(v.shape) if hasattr(v, "shape") else v) for k, v in obs.items()}
out["obs_image_mean"] = float(obs["front"].mean())
start = {k: obs[k] for k in robot.action_features}
target = dict(start, **{"elbow_flex.pos": start["elbow_flex.pos"] - 0.6, "wrist_roll.pos": 10.0})
sent = [robot.send_action(target) for _ in range(1)]
time.sleep(1 / 30)
for _ in range(40):
    sent.append(robot.send_action(target))
    time.sleep(1 / 30)
out["start"], out["first_sent"], out["last_sent"] = start, sent[0], sent[-1]
# the arm follows: keep commanding until it is there (auto_reset can start a new episode, back at the
# start pose, in the middle of this; the commands then bring it over again)
deadline = time.monotonic() + 10.0
while True:
    time.sleep(1 / 30)
    end = {k: v for k, v in robot.get_observation().items() if k in start}
    if end["elbow_flex.pos"] < start["elbow_flex.pos"] - 0.3 or time.monotonic() > deadline:
        break
    robot.send_action(target)
out["end"] = end
out["max_step"] = cfg.limits["elbow_flex"][2] / 30
out["wrist_roll_upper"] = cfg.limits["wrist_roll"][1]
try:
    robot.send_action({"elbow_flex.pos": 0.0})
except ValueError as exc:
    out["missing_joint_error"] = str(exc)
cfg.max_age_s = 1e-6  # every observation is now too old
try:
    robot.get_observation()
except RuntimeError as exc:
    out["stale_error"] = str(exc)
robot.disconnect()
try:
    robot.disconnect()
except DeviceNotConnectedError:
    out["disconnect_twice_error"] = True

# a topic nobody publishes: connect() times out naming it
data = yaml.safe_load(Path(preset).read_text())
data["features"]["observation.images.front"]["topic"] = "/cameras/nowhere/image_raw"
(tmp / "silent.yaml").write_text(yaml.safe_dump(data))
silent = make_robot_from_config(draccus.parse(Cli, args=["--robot.type=ros", f"--robot.contract={tmp / 'silent.yaml'}",
                                                        "--robot.connect_timeout_s=2"]).robot)
try:
    silent.connect()
except TimeoutError as exc:
    out["timeout_error"] = str(exc)
# a message type the contract does not support: an error when the config is parsed
data["features"]["observation.state"]["type"] = "sensor_msgs/msg/Imu"
(tmp / "imu.yaml").write_text(yaml.safe_dump(data))
try:
    draccus.parse(Cli, args=["--robot.type=ros", f"--robot.contract={tmp / 'imu.yaml'}"])
except Exception as exc:  # draccus wraps the config's ValueError (shown as the cause on the CLI)
    chain = []
    while exc is not None:
        chain.append(f"{type(exc).__name__}: {exc}")
        exc = exc.__cause__ or exc.__context__
    out["type_error"] = " <- ".join(chain)
print(json.dumps(out))
"""


def test_robot_plugin_on_the_sim(side, sim, tmp_path):
    out = last_json(side.run(ROBOT_CHECKS, args=[str(SIM_PRESET), str(tmp_path)], timeout=400))
    assert out["features"] == {
        **{f"{j}.pos": "float" for j in JOINTS},
        "front": [240, 320, 3],
        "wrist": [240, 320, 3],
    }
    assert out["action_features"] == [f"{j}.pos" for j in JOINTS]
    assert out["not_connected_error"] and out["disconnect_twice_error"]
    assert out["obs"]["front"] == [240, 320, 3] and out["obs_image_mean"] > 5  # a rendered image, not zeros
    step = out["max_step"]
    # the first command moves at most one step from the measured position (the safety filter's anchor).
    # The anchor is the newest joint_states sample when send_action runs, which can be one sample after
    # `start`: the realtime sim's arm still settles by a few micro-radians per step (CI saw 1.8e-6)
    assert out["first_sent"]["elbow_flex.pos"] == pytest.approx(
        out["start"]["elbow_flex.pos"] - step, abs=1e-4
    )
    # out-of-range targets are clamped to the joint limit, and what was sent is what send_action returns
    assert out["last_sent"]["wrist_roll.pos"] <= out["wrist_roll_upper"] + 1e-9
    assert out["last_sent"]["elbow_flex.pos"] == pytest.approx(out["start"]["elbow_flex.pos"] - 0.6, abs=1e-6)
    # the simulated arm followed
    assert out["end"]["elbow_flex.pos"] < out["start"]["elbow_flex.pos"] - 0.3
    assert "lacks" in out["missing_joint_error"] and "shoulder_pan.pos" in out["missing_joint_error"]
    assert "old" in out["stale_error"] and "/joint_states" in out["stale_error"]
    assert "/cameras/nowhere/image_raw" in out["timeout_error"] and "2 s" in out["timeout_error"]
    assert "--robot.contract" in out["type_error"] and "sensor_msgs/msg/Imu" in out["type_error"]


CAMERA_PROBE = """
import json, time
from lerobot_core.ros.device import BackgroundNode

node = BackgroundNode("camera_probe")  # the plugins' node, as the robot and camera plugins make it
node.subscribe("/cameras/front/image_raw", "sensor_msgs/msg/Image", "sensor")
node.wait_for(["/cameras/front/image_raw"], 120)
time.sleep(1.0)
start, first = time.monotonic(), node.counts()["/cameras/front/image_raw"]
time.sleep(10.0)
end, last = time.monotonic(), node.counts()["/cameras/front/image_raw"]
node.close()
print(json.dumps({"start": start, "end": end, "frames": last - first}))
"""


def test_camera_frames_reach_lerobot_as_they_reach_the_graph(side, sim, tmp_path):
    """The sim's 320x240 images, read by the plugins' background node in each LeRobot venv, against the same
    reader run at the same time by the graph's own ROS (this checkout's venv, a process of its own). Across
    Fast DDS majors (Jazzy's 2.14 reading Kilted's 3.2) shared memory does not interoperate and each image
    comes as UDP fragments; with the kernel's default socket buffer the Jazzy reader got 15-50 % of the
    frames (gaps up to 2.7 s, which the robot calls stale). The plugins' reader profile
    (lerobot_core.dds_transport) fixes it. (The reference once ran in the pytest process itself, whose
    executor serves every test's subscriptions: under load it read 83 frames while LeRobot's read 271.)"""
    with open(tmp_path / "reference.log", "w") as log:  # the child keeps its own descriptor
        reference = subprocess.Popen(
            [sys.executable, "-c", CAMERA_PROBE], stdout=subprocess.PIPE, stderr=log, text=True
        )
    try:
        out = last_json(side.run(CAMERA_PROBE, timeout=300))
        stdout, _ = reference.communicate(timeout=300)
    finally:
        if reference.poll() is None:
            reference.kill()
            reference.wait()
    assert reference.returncode == 0, (tmp_path / "reference.log").read_text()[-3000:]
    here = json.loads(stdout.strip().splitlines()[-1])["frames"]
    print(f"LeRobot {side.version}: {out['frames']} frames in 10 s; the graph's ROS: {here}")
    assert here >= 100, here  # the sim published (30 Hz less its resets and the machine's load)
    assert out["frames"] >= 0.8 * here, (out["frames"], here)


def test_without_rclpy_the_error_says_how_to_get_it(side):
    res = side.run(
        f"""
        import sys
        sys.modules["rclpy"] = None  # as in a LeRobot venv without ROS 2
        from lerobot.robots.utils import make_robot_from_config
        from lerobot_robot_ros import RosRobotConfig
        cfg = RosRobotConfig(contract={str(SIM_PRESET)!r})  # configs parse without rclpy
        try:
            make_robot_from_config(cfg)
        except Exception as exc:
            print("ERROR", exc)
        """,
        timeout=180,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert "requirements-ros-wheels.txt" in res.stdout and "/opt/ros/" in res.stdout


def start_expert_as_leader(graph: Graph) -> None:
    """The scripted expert publishes its joint targets on leader/joint_states (not to the sim): a leader arm.
    The doc's command, run from the repository's root as the doc says."""
    graph.start("expert", doc_command("leader"), cwd=REPO)


def wait_for_graph(ros_node, graph: Graph, leader: bool = True) -> None:
    """Until the sim's joint states (and the leader's) arrive here: the LeRobot command then finds the
    graph within its default connect timeout (10 s), as a user who started the graph first does."""
    topics = [Recorder(ros_node, "/joint_states")] + (
        [Recorder(ros_node, "/leader/joint_states")] if leader else []
    )
    assert wait_until(lambda: all(r.values for r in topics), timeout=180, interval=0.2), "\n".join(
        f"--- {name}:\n{graph.log(name)[-2000:]}" for name, _ in graph.procs
    )


TELEOP_ARGS = [
    "--teleop.type=ros",
    "--teleop.topic=/leader/joint_states",
    f"--teleop.joints=[{','.join(JOINTS)}]",
    "--teleop.connect_timeout_s=120",
    # this leader answers the sim's joint states, so it pauses while the sim holds a finished episode (1 s)
    "--teleop.max_age_s=3",
]


class Recorder:
    """Positions of the JointState messages of one topic (in JOINTS order), in arrival order."""

    def __init__(self, node, topic: str):
        from rclpy.qos import QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import JointState

        self.values: list[list[float]] = []

        def on_msg(m):
            index = {n: i for i, n in enumerate(m.name)}
            self.values.append([m.position[index[j]] for j in JOINTS])

        node.create_subscription(
            JointState,
            topic,
            on_msg,
            QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE),
        )


def test_lerobot_record_then_replay_on_the_sim(side, sim, tmp_path, ros_node):
    """The doc's lerobot-record (its block for this LeRobot version) and lerobot-replay, verbatim, on the
    doc's graph: two episodes recorded from the sim with the expert as the leader, one replayed."""
    start_expert_as_leader(sim)
    wait_for_graph(ros_node, sim)
    record = doc_command(f"record-{side.minor}")
    res = side.command(record, cwd=tmp_path)
    assert res.returncode == 0, (
        f"{res.stdout[-2000:]}\n{res.stderr[-6000:]}\nexpert:\n{sim.log('expert')[-1500:]}"
    )
    from lerobot_dataset.reader import DatasetReader

    root = tmp_path / "outputs/lerobot_sim_so101"  # the doc's --dataset.root, relative to where it ran
    reader = DatasetReader(root)
    assert reader.num_episodes == 2
    assert reader.info["robot_type"] == "so101_follower"
    features = reader.info["features"]
    assert features["observation.state"]["names"] == [f"{j}.pos" for j in JOINTS]
    assert features["action"]["names"] == [f"{j}.pos" for j in JOINTS]
    assert set(reader.camera_keys) == {"observation.images.front", "observation.images.wrist"}
    assert features["observation.images.front"]["info"]["video.codec"] == "h264"  # the doc's codec flag
    moved = 0.0
    for ep in range(2):
        frames = reader.episode(ep)
        n = len(frames["action"])
        # 8 s at 30 fps; LeRobot's loop makes fewer frames when a tick overruns (2 loaded cores)
        assert 100 <= n <= 240, n
        action, state = np.asarray(frames["action"]), np.asarray(frames["observation.state"])
        assert np.all(np.isfinite(action))
        # the simulated follower moved with the relayed commands (it does not reach every target: the
        # expert presses into the table and the cube)
        moved = max(moved, min(np.ptp(action, axis=0).max(), np.ptp(state, axis=0).max()))
        video = reader.video_frames("observation.images.front", ep)
        assert video.shape[0] == n and video.shape[1:] == (240, 320, 3)
    assert moved > 0.05  # the expert moved the arm (it holds still at the end of its plan)

    # lerobot-replay sends episode 0's actions to the sim through the plugin, one per tick
    sent = Recorder(ros_node, "/joint_commands")
    res = side.command(doc_command("replay"), cwd=tmp_path)
    assert res.returncode == 0, f"{res.stdout[-2000:]}\n{res.stderr[-6000:]}"
    actions = np.asarray(reader.episode(0)["action"], dtype=np.float64)
    deadline = time.monotonic() + 10
    while len(sent.values) < len(actions) and time.monotonic() < deadline:
        time.sleep(0.05)  # replay has returned: wait only for the last messages in flight
    replayed = np.asarray(sent.values)
    # the first commands can go out before DDS matched this test's subscriber (the plugin waits for the
    # sim's subscriber, not for this one); the rest arrive in order. A participant that misses the first
    # announcements of a new one meets it at the next periodic announcement, which Fast DDS sends every
    # 3 s by default: 84 of 150 commands were missed once in a quiet full run. At least 1 s must arrive.
    assert 30 <= len(replayed) <= len(actions), (len(replayed), len(actions))
    tail = len(replayed) // 2
    # what the robot sent is the recorded action on most ticks; where the recording jumps (the sim began a
    # new episode) the safety filter walks there in bounded steps instead
    errors = np.abs(replayed[-tail:] - actions[-tail:]).max(axis=1)
    assert np.median(errors) < 1e-5, np.median(errors)
    assert np.abs(np.diff(replayed, axis=0)).max() <= 4.7 / 30 + 1e-6


def test_lerobot_teleoperate_leader_to_simulated_follower(side, sim, tmp_path, ros_node):
    """The doc's lerobot-teleoperate, verbatim, runs until Ctrl-C: across the sim's episode resets (the
    leader pauses with the sim for its 1 s hold; --teleop.max_age_s=3 in the doc keeps that from being
    a StaleLeaderError), then stops cleanly on SIGINT."""
    from lerobot_msgs.msg import EpisodeInfo

    start_expert_as_leader(sim)
    wait_for_graph(ros_node, sim)
    episodes: list[int] = []
    ros_node.create_subscription(
        EpisodeInfo, "/sim/episode_info", lambda m: episodes.append(m.episode_index), 100
    )
    leader = Recorder(ros_node, "/leader/joint_states")
    follower = Recorder(ros_node, "/joint_commands")
    proc = side.popen(doc_command("teleoperate"), cwd=tmp_path, log=tmp_path / "teleoperate.log")

    def output() -> str:
        return (tmp_path / "teleoperate.log").read_text(errors="replace")

    try:
        # two sim resets while it runs (the expert lifts the cube, the sim holds 1 s and starts anew)
        assert wait_until(lambda: len(follower.values) >= 1 or proc.poll() is not None, timeout=120)
        first = max(episodes, default=-1)
        ok = wait_until(
            lambda: max(episodes, default=-1) >= first + 2 or proc.poll() is not None, timeout=120
        )
        assert ok and proc.poll() is None, f"episodes {sorted(set(episodes))}\n{output()[-4000:]}"
        assert (
            wait_until(lambda: proc.poll() is not None, timeout=3.0) is False
        )  # still running after the reset
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert "StaleLeaderError" not in output(), output()[-4000:]
    assert len(follower.values) >= 60, len(follower.values)
    leader_values, sent = np.asarray(leader.values), np.asarray(follower.values)
    # most follower commands are the leader's targets as they are (relayed; float32 like a dataset's action)...
    copies = [np.abs(leader_values - cmd).max(axis=1).min() < 1e-5 for cmd in sent]
    assert np.mean(copies) > 0.5, np.mean(copies)
    # ...and none moves a joint more than one bounded step (4.7 rad/s / 30 fps) from the previous one, even
    # when the leader jumps (the sim starts a new episode and the expert's target goes back home)
    assert np.abs(np.diff(sent, axis=0)).max() <= 4.7 / 30 + 1e-6


def test_lerobot_teleoperate_between_emulated_arms(side, tmp_path, ros_node):
    """The real-robot preset (ros_so101) on lerobot_drivers' bus nodes over emulated servos: LeRobot's
    teleoperate loop reads the leader bus node's joint_states and commands the follower bus node."""
    import yaml

    profile = yaml.safe_load((REPO / "src/lerobot_bringup/profiles/so101_teleop_demo.yaml").read_text())
    keep = {"leader_emulator", "follower_emulator", "leader_bus", "follower_bus", "camera_front"}
    profile["nodes"] = [n for n in profile["nodes"] if n["name"] in keep]  # LeRobot is the teleop here
    path = tmp_path / "arms.yaml"
    path.write_text(yaml.safe_dump(profile))
    graph = Graph(tmp_path)
    graph.start(
        "arms",
        [
            "lerobot-launch",
            str(path),
            f"leader_port:={tmp_path}/leader",
            f"follower_port:={tmp_path}/follower",
        ],
    )
    try:
        from sensor_msgs.msg import JointState

        commands: list[list[float]] = []
        ros_node.create_subscription(
            JointState, "/joint_commands", lambda m: commands.append(list(m.position)), 100
        )
        res = side.command(
            [
                "lerobot-teleoperate",
                "--robot.type=ros_so101",
                "--robot.connect_timeout_s=120",
                "--robot.max_age_s=1.0",  # the contract's 0.2 s is for a dedicated machine, not 2 loaded cores
                "--teleop.type=ros",
                "--teleop.contract=so101_one_camera",  # a shipped contract, by name
                "--teleop.connect_timeout_s=120",
                "--fps=30",
                "--teleop_time_s=4",
            ],
            cwd=tmp_path,
        )
        assert res.returncode == 0, (
            f"{res.stdout[-2000:]}\n{res.stderr[-6000:]}\narms:\n{graph.log('arms')[-3000:]}"
        )
    finally:
        graph.stop()
    assert len(commands) >= 20, len(
        commands
    )  # of ~120 ticks in 4 s at 30 Hz: as many as the load lets through
    moving = np.ptp(np.asarray(commands), axis=0)
    assert moving.max() > 0.01  # the virtual hand moves the leader, and the follower is told to follow


HIL_HOOKS = """
import json, sys, time
from lerobot.teleoperators.utils import make_teleoperator_from_config
from lerobot_teleoperator_ros import RosTeleoperatorConfig

tel = make_teleoperator_from_config(RosTeleoperatorConfig(contract=sys.argv[1], connect_timeout_s=120))
tel.connect()
start = tel.get_action()
tel.enable_torque()
goal = dict(start, **{"elbow_flex.pos": start["elbow_flex.pos"] + 0.3})
for _ in range(60):
    tel.write_goal_positions(goal)
    time.sleep(1 / 30)
time.sleep(0.5)
reached = tel.get_action()
tel.disable_torque()
print(json.dumps({"start": start, "goal": goal, "reached": reached}))
time.sleep(2.0)  # the bus node's command timeout (0.5 s) turns torque off
tel.disconnect()
"""


def test_active_leader_hooks_on_an_emulated_leader(side, tmp_path):
    """HIL hooks: enable_torque / write_goal_positions / disable_torque through a commandable leader bus node."""
    import yaml

    profile = yaml.safe_load((REPO / "src/lerobot_bringup/profiles/so101_teleop_demo.yaml").read_text())
    profile["nodes"] = [n for n in profile["nodes"] if n["name"] in ("leader_emulator", "leader_bus")]
    for node in profile["nodes"]:
        if node["name"] == "leader_bus":  # an active leader: commandable, released when commands stop
            node["parameters"].update(read_only=False, safe_state="torque_off", command_timeout_s=0.5)
    path = tmp_path / "leader.yaml"
    path.write_text(yaml.safe_dump(profile))
    graph = Graph(tmp_path)
    graph.start(
        "leader", ["lerobot-launch", str(path), f"leader_port:={tmp_path}/leader", "hand_motion_ticks:=0.0"]
    )
    try:
        out = last_json(side.run(HIL_HOOKS, args=[str(CONTRACTS / "so101_one_camera.yaml")], timeout=300))
    finally:
        graph.stop()
    assert out["reached"]["elbow_flex.pos"] == pytest.approx(out["goal"]["elbow_flex.pos"], abs=0.02)
    assert out["reached"]["shoulder_pan.pos"] == pytest.approx(out["start"]["shoulder_pan.pos"], abs=0.02)
    assert "torque_off" in graph.log("leader")  # released after disable_torque


ACT_CHECKPOINT = REPO / "src/lerobot_runtime/test/fixtures/act_small/pretrained_model"

# LeRobot's own policy server (lerobot.async_inference.policy_server.serve), with a tap that appends every
# action chunk it returns to a JSON-lines file: the test compares the sim's commands with those
POLICY_SERVER_WITH_TAP = """
import json, sys
from lerobot.async_inference import policy_server

tap = open(sys.argv[1], "a")
predict = policy_server.PolicyServer._predict_action_chunk

def predict_and_log(self, observation):
    chunk = predict(self, observation)
    tap.write(json.dumps({"timestep": observation.get_timestep(),
                          "actions": [a.get_action().tolist() for a in chunk]}) + "\\n")
    tap.flush()
    return chunk

policy_server.PolicyServer._predict_action_chunk = predict_and_log
sys.argv = [sys.argv[0], *sys.argv[2:]]
policy_server.serve()
"""


def async_inference_files(cwd: Path) -> None:
    """What the doc's async-inference and rollout commands name, made in ``cwd``: the sim preset with the
    front camera only (the ACT fixture sees one camera), and a LeRobot ACT checkpoint where lerobot-train
    writes it (the policy node's act_small fixture: safetensors + JSON)."""
    import shutil

    import yaml

    contract = yaml.safe_load(SIM_PRESET.read_text())
    del contract["features"]["observation.images.wrist"]
    (cwd / "my_sim_front_only.yaml").write_text(yaml.safe_dump(contract))
    shutil.copytree(ACT_CHECKPOINT, cwd / "outputs/train/act/checkpoints/last/pretrained_model")


def test_async_inference_client_on_the_sim(side, sim, tmp_path, ros_node):
    """LeRobot's async inference, the doc's two commands verbatim: robot_client with --robot.type=ros on the
    sim, LeRobot's policy server (a small ACT checkpoint) on 127.0.0.1:8080. The server runs with a tap on
    its chunks (the doc's flags, through POLICY_SERVER_WITH_TAP). The sim's commands are the server's actions."""
    import socket

    async_inference_files(tmp_path)
    tap = tmp_path / "chunks.jsonl"
    server_argv = doc_command("policy-server")
    assert server_argv[:3] == ["python", "-m", "lerobot.async_inference.policy_server"], server_argv
    with socket.socket() as s:  # the doc's fixed port: a clear failure when something else holds it
        try:
            s.bind(("127.0.0.1", 8080))
        except OSError as exc:
            pytest.fail(f"127.0.0.1:8080, the doc's policy-server port, is taken: {exc}")
    wait_for_graph(ros_node, sim, leader=False)
    commands = Recorder(ros_node, "/joint_commands")
    server = side.popen(
        ["python", "-c", POLICY_SERVER_WITH_TAP, str(tap), *server_argv[3:]],
        cwd=tmp_path,
        log=tmp_path / "server.log",
    )

    def logs() -> str:
        return "".join(
            f"\n--- {n}:\n{(tmp_path / f'{n}.log').read_text(errors='replace')[-3000:]}"
            for n in ("server", "client")
            if (tmp_path / f"{n}.log").exists()
        )

    def accepts() -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", 8080)) == 0

    # the doc's order: the client once the server listens (the client does not retry: it exits)
    listening = wait_until(lambda: accepts() or server.poll() is not None, timeout=180)
    assert listening and server.poll() is None, f"the policy server did not start{logs()}"
    client = side.popen(doc_command("robot-client"), cwd=tmp_path, log=tmp_path / "client.log")

    try:
        # three chunks' worth of commands: the client asked for more than one chunk and played them
        ok = wait_until(
            lambda: len(commands.values) >= 30 or server.poll() is not None or client.poll() is not None,
            timeout=180,
        )
        assert ok and len(commands.values) >= 30, (
            f"{len(commands.values)} commands on /joint_commands{logs()}"
        )
    finally:
        for p in (client, server):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGINT)
        for p in (client, server):
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    chunks = [json.loads(line) for line in tap.read_text().splitlines()]
    assert len(chunks) >= 2, f"{len(chunks)} chunks from the server{logs()}"
    produced = np.asarray([a for c in chunks for a in c["actions"]], dtype=np.float64)
    assert produced.shape[1] == len(JOINTS)
    sent = np.asarray(commands.values)
    # every command on the sim's topic is one of the server's actions (float32 tensors -> float64 messages)
    nearest = np.abs(sent[:, None, :] - produced[None, :, :]).max(axis=2).min(axis=1)
    assert nearest.max() < 1e-6, nearest.max()
    # ...and more than one chunk was asked for and played: the server answered observations of different
    # timesteps, and the client, which plays each of a chunk's actions once, sent more commands than a
    # chunk holds. (Which chunk a command came from cannot be told when the arm is still: two chunks for the
    # same image and joints are the same numbers.)
    assert len({c["timestep"] for c in chunks}) >= 2, [c["timestep"] for c in chunks]
    assert len(sent) > max(len(c["actions"]) for c in chunks), (
        len(sent),
        [len(c["actions"]) for c in chunks],
    )


def test_lerobot_rollout_dagger_records_a_hil_dataset_on_the_sim(side06, sim, tmp_path, ros_node):
    """LeRobot 0.6's lerobot-rollout --strategy.type=dagger, the doc's command verbatim: the ACT policy drives
    the sim through the robot plugin, and the scripted expert, through the teleoperator plugin, is the
    human. The keys come through the terminal it runs in (a pseudo-terminal here): Space pauses, Tab starts
    a correction, Tab ends it, Space resumes. Every frame is recorded (record_autonomous) with LeRobot's
    `intervention` feature: the correction's frames are true and their actions are the leader's messages,
    the others are the policy's (not the leader's)."""
    import pty

    from lerobot_dataset.reader import DatasetReader

    async_inference_files(tmp_path)
    start_expert_as_leader(sim)
    wait_for_graph(ros_node, sim)
    leader = Recorder(ros_node, "/leader/joint_states")
    commands = Recorder(ros_node, "/joint_commands")
    log = tmp_path / "rollout.log"
    master, slave = pty.openpty()
    proc = side06.popen(doc_command("rollout-dagger"), cwd=tmp_path, log=log, stdin=slave)
    os.close(slave)

    def output() -> str:
        return log.read_text(errors="replace")

    def key(k: bytes, then: str) -> None:
        os.write(master, k)
        assert wait_until(lambda: then in output() or proc.poll() is not None, timeout=60), output()[-4000:]
        assert proc.poll() is None, output()[-4000:]

    try:
        assert wait_until(
            lambda: "DAgger continuous recording started" in output() or proc.poll() is not None, timeout=300
        ), output()[-4000:]
        assert proc.poll() is None, output()[-4000:]
        n = len(commands.values)
        assert wait_until(lambda: len(commands.values) >= n + 10, timeout=120), output()[
            -3000:
        ]  # the policy drives
        key(b" ", "autonomous -> paused")
        key(b"\t", "paused -> correcting")
        # the human drives: after the handover (the follower slid to the leader's pose), 3 s of leader commands
        key(b"", "Entering correction mode")
        n, t0 = len(commands.values), time.monotonic()
        assert wait_until(
            lambda: len(commands.values) >= n + 60 and time.monotonic() - t0 > 3.0, timeout=60
        ), output()[-3000:]
        key(b"\t", "correcting -> paused")
        key(b" ", "paused -> autonomous")
        assert proc.wait(timeout=180) == 0, output()[-6000:]  # --duration ends it
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        os.close(master)
    reader = DatasetReader(tmp_path / "outputs/rollout_sim_dagger")  # the doc's root, no stamp
    info = reader.info
    assert info["features"]["intervention"]["dtype"] == "bool", info["features"]["intervention"]
    assert set(reader.camera_keys) == {"observation.images.front"}
    frames = {k: [] for k in ("action", "observation.state", "intervention")}
    for ep in range(reader.num_episodes):
        episode = reader.episode(ep)
        for k in frames:
            frames[k].extend(np.asarray(episode[k]).reshape(len(episode[k]), -1))
    action = np.asarray(frames["action"], dtype=np.float64)
    intervention = np.asarray(frames["intervention"]).reshape(-1).astype(bool)
    print("rollout frames", len(action), "intervention frames", int(intervention.sum()))
    assert intervention.sum() >= 30 and (~intervention).sum() >= 10, intervention.sum()
    # the correction's actions are the leader's messages (float32 of the float64 message)...
    leader_values = np.asarray(leader.values)
    nearest = np.abs(action[:, None, :] - leader_values[None, :, :]).max(axis=2).min(axis=1)
    assert np.median(nearest[intervention]) < 1e-5, nearest[intervention]
    # ...the policy's are not
    assert np.median(nearest[~intervention]) > 1e-3, nearest[~intervention]


# one step per line on stdin: the test checks the emulated servos' torque between the steps
TORQUE_SERVICE_STEPS = """
import json, sys, time
from lerobot.teleoperators.utils import make_teleoperator_from_config
from lerobot_teleoperator_ros import RosTeleoperatorConfig

def report(**values):
    print(json.dumps(values), flush=True)
    sys.stdin.readline()

def follow(goal, timeout_s):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        tel.write_goal_positions(goal)
        time.sleep(1 / 30)
        if abs(tel.get_action()["elbow_flex.pos"] - goal["elbow_flex.pos"]) < 0.01:
            break
    return tel.get_action()

tel = make_teleoperator_from_config(RosTeleoperatorConfig(contract=sys.argv[1], connect_timeout_s=120))
tel.connect()
start = tel.get_action()
t = time.monotonic()
tel.enable_torque()
report(step="enabled", enable_s=time.monotonic() - t)
goal = dict(start, **{"elbow_flex.pos": start["elbow_flex.pos"] + 0.3})
reached = follow(goal, 10.0)
t = time.monotonic()
tel.disable_torque()
report(step="released", disable_s=time.monotonic() - t, start=start, goal=goal, reached=reached)
# released: the bus node no longer takes commands, so these move nothing
after = follow(start, 1.0)
tel.disconnect()
report(step="done", after=after)
"""


def test_teleoperator_torque_through_the_read_only_leader_bus(side, tmp_path):
    """enable_torque / disable_torque call the torque_enable service of a read-only leader bus node
    (lerobot_drivers motor_bus, as in the teleop and HIL profiles); the servos' torque registers follow."""
    from lerobot_core.ros.testing import RosProcess
    from lerobot_drivers.servo_emulator import EmulatorProcess

    bus_params = {"robot": "so101_leader", "read_only": True, "autostart": True, "rate_hz": 100.0}
    with (
        EmulatorProcess("so101_leader", str(tmp_path / "leader"), tau_s=0.05) as leader,
        RosProcess(
            "lerobot_drivers",
            "motor_bus",
            name="leader_bus",
            namespace="leader",
            parameters={**bus_params, "port": leader.port, "timeout_ms": 200.0},
        ) as bus,
    ):
        with open(tmp_path / "side.log", "w") as log:  # the child keeps its own descriptor
            side = subprocess.Popen(
                [str(side.python), "-c", TORQUE_SERVICE_STEPS, str(CONTRACTS / "so101_one_camera.yaml")],
                env=side.env(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )

        def step() -> dict:
            line = side.stdout.readline()
            assert line, (
                f"side process ended:\n{(tmp_path / 'side.log').read_text()[-4000:]}\n{bus.output()[-2000:]}"
            )
            return json.loads(line)

        try:
            assert not any(leader.call("torque").values())  # a leader bus node starts with torque off
            enabled = step()
            torque_on = leader.call("torque")
            side.stdin.write("\n")
            side.stdin.flush()
            released = step()
            torque_after = leader.call("torque")
            side.stdin.write("\n")
            side.stdin.flush()
            done = step()
            side.stdin.write("\n")
            side.stdin.flush()
            assert side.wait(timeout=30) == 0
        finally:
            if side.poll() is None:
                side.kill()
                side.wait()
    assert enabled["step"] == "enabled" and all(torque_on.values()), torque_on
    # the leader followed the mirror commands while its torque was on
    assert released["reached"]["elbow_flex.pos"] == pytest.approx(
        released["goal"]["elbow_flex.pos"], abs=0.02
    )
    assert released["reached"]["shoulder_pan.pos"] == pytest.approx(
        released["start"]["shoulder_pan.pos"], abs=0.02
    )
    # disable_torque is immediate (the service answers once the bus thread has written the registers)
    assert not any(torque_after.values()), torque_after
    assert released["disable_s"] < 2.0
    # ...and a released leader ignores commands
    assert done["after"]["elbow_flex.pos"] == pytest.approx(released["reached"]["elbow_flex.pos"], abs=0.02)
    assert "torque on: following joint_commands" in bus.output()
    assert "torque off: free to move" in bus.output()


# lerobot-record's H.264 flags: 0.6 moved the codec under --dataset.rgb_encoder and stamps the repo id
CODEC_FLAGS = {
    "0.4": ["--dataset.vcodec=h264"],
    "0.6": ["--dataset.rgb_encoder.vcodec=h264", "--dataset.no_stamp=true"],
}


def test_lerobot_record_equals_the_recorder_node_frame_for_frame(side, tmp_path, ros_node):
    """One lockstep run recorded twice: by lerobot-record through the plugins and by our recorder node,
    from the same topics with the same contract (the plugin's sim preset).

    The alignment: lerobot-record drives the lockstep sim (--robot.lockstep: each get_observation is the
    next tick, each command is stamped with it; --teleop.lockstep: the scripted expert's answer to that
    tick), so each of its frames is one sim tick; the recorder node is a required consumer of the sim (it
    acknowledges each tick on sim/tick_ack), so it takes in every tick too. Its one long episode (stopped
    with SIGINT after lerobot-record is done) holds exactly LeRobot's episode, its last frame included.
    Compared: observation.state and action exactly (float32 of the same float64 messages); the two
    cameras' decoded videos within codec tolerance (both sides encode the same raw frames with H.264).
    """
    from lerobot_core.ros.testing import RosProcess
    from lerobot_dataset.reader import DatasetReader

    ours, theirs = tmp_path / "recorder_node", tmp_path / "lerobot_record"
    with (
        RosProcess(
            "lerobot_sim",
            "sim",
            parameters={
                "autostart": True,
                "mode": "lockstep",
                "required_consumers": ["recorder"],
                "fps": 30.0,
                "seed": 0,
                "cameras": ["front", "wrist"],
                "image_width": 320,
                "image_height": 240,
            },
        ) as sim,
        RosProcess(
            "lerobot_sim",
            "scripted_expert",
            parameters={"fps": 30.0},
            remappings={"joint_commands": "/leader/joint_states"},  # the expert is the leader arm
        ),
        RosProcess(
            "lerobot_recorder",
            "recorder",
            name="recorder",
            parameters={
                "autostart": True,
                "contract": SIM_PRESET.stem,  # the shipped contract by name, as the robot's
                "dataset_root": str(ours),
                "num_episodes": 1,
                "episode_time_s": 600.0,  # ended by SIGINT, which saves the episode in progress
                "reset_time_s": 0.0,
                "vcodec": "libx264",
                "auto_record": True,
                "exit_when_done": True,
                "use_sim_time": True,
                "tick_ack": True,
            },
        ) as recorder,
    ):
        # the recorder node begins its episode once every stream of the contract has spoken, and the
        # action stream speaks with lerobot-record's first command: too late for the first ticks. So the
        # test speaks first, with a command for a tick long past (stamp 1 ns), which the lockstep sim ignores
        from builtin_interfaces.msg import Time
        from sensor_msgs.msg import JointState

        prime = ros_node.create_publisher(JointState, "/joint_commands", 10)
        primer = JointState(name=JOINTS, position=[0.0] * len(JOINTS))
        primer.header.stamp = Time(sec=0, nanosec=1)

        def recording() -> bool:
            prime.publish(primer)
            return "recording episode 0" in recorder.output()

        assert wait_until(recording, timeout=120, interval=0.2), (
            f"sim:\n{sim.output()[-2000:]}\nrecorder:\n{recorder.output()[-2000:]}"
        )
        res = side.command(
            [
                "lerobot-record",
                "--robot.type=ros",
                f"--robot.contract={SIM_PRESET.stem}",  # no limits: what is sent is the teleop's action
                "--robot.lockstep=true",
                "--robot.connect_timeout_s=120",
                # a loaded machine (the suite beside other work) can take seconds per tick: the sim, the
                # expert, the recorder node and lerobot-record on two cores
                "--robot.lockstep_timeout_s=60",
                *TELEOP_ARGS,
                "--teleop.lockstep=true",
                "--teleop.lockstep_timeout_s=60",
                "--dataset.repo_id=local/ros_plugin_lockstep",
                f"--dataset.root={theirs}",
                "--dataset.single_task=Pick up the cube and lift it",
                "--dataset.num_episodes=1",
                "--dataset.episode_time_s=4",
                "--dataset.reset_time_s=0",
                "--dataset.push_to_hub=false",
                *CODEC_FLAGS[side.minor],
                "--display_data=false",
                "--play_sounds=false",
            ],
            cwd=tmp_path,
        )
        assert res.returncode == 0, (
            f"{res.stdout[-2000:]}\n{res.stderr[-6000:]}\nsim:\n{sim.output()[-2000:]}\n"
            f"recorder:\n{recorder.output()[-2000:]}"
        )
        os.killpg(recorder.pid, signal.SIGINT)
        assert recorder.proc.wait(timeout=60) == 0, recorder.output()[-3000:]
    a, b = DatasetReader(theirs), DatasetReader(ours)
    assert a.num_episodes == 1 and b.num_episodes == 1
    fa, fb = a.episode(0), b.episode(0)
    sa, aa = np.asarray(fa["observation.state"]), np.asarray(fa["action"])
    sb, ab = np.asarray(fb["observation.state"]), np.asarray(fb["action"])
    n = len(sa)
    assert n >= 20, n  # 4 s of wall time at what lockstep allows on this machine

    # the recorder node's frames are a run of lerobot-record's, frame for frame, bit for bit (state and
    # action): find where its first frame sits (a still arm can repeat a frame, so try each candidate)
    def run_from(i: int) -> int:
        k = min(len(sb), n - i)
        return k if np.array_equal(sa[i : i + k], sb[:k]) and np.array_equal(aa[i : i + k], ab[:k]) else 0

    starts = [i for i in range(n) if run_from(i)]
    assert starts, (
        "no run of lerobot-record's frames equals the recorder node's",
        sa[:3],
        sb[:3],
        aa[:3],
        ab[:3],
    )
    d = starts[0]
    common = run_from(d)
    print("lerobot-record frames", n, "recorder node frames", len(sb), "offset", d, "equal", common)
    # every one of LeRobot's frames, from its first (the primed recorder was recording before the first
    # tick) to its last (complete once its command arrived, though nothing passes it before the SIGINT),
    # and nothing after it (the sim's next tick has no command)
    assert d == 0 and common == n == len(sb), (d, common, n, len(sb), recorder.output()[-1500:])
    assert np.ptp(sa, axis=0).max() > 0.01  # the arm moved: equal frames are not a still arm's
    for key in ("observation.images.front", "observation.images.wrist"):
        va = a.video_frames(key, 0)[d : d + common].astype(np.int16)
        vb = b.video_frames(key, 0)[:common].astype(np.int16)
        assert va.shape == vb.shape == (common, 240, 320, 3), (va.shape, vb.shape)
        error = np.abs(va - vb).mean(axis=(1, 2, 3))
        print(key, "mean abs error per frame: max", error.max(), "median", np.median(error))
        assert error.max() < 4.0, error


LOCKSTEP_TIMEOUTS = """
import json, sys, threading, time
from dataclasses import dataclass
import draccus
from lerobot.robots.config import RobotConfig
from lerobot.robots.utils import make_robot_from_config
from lerobot.teleoperators.config import TeleoperatorConfig
from lerobot.teleoperators.utils import make_teleoperator_from_config
import lerobot_robot_ros, lerobot_teleoperator_ros  # what register_third_party_plugins imports
from lerobot_core.ros.device import BackgroundNode, message_class

@dataclass
class Cli:
    robot: RobotConfig

@dataclass
class TeleopCli:
    teleop: TeleoperatorConfig

contract, joints = sys.argv[1], json.loads(sys.argv[2])
S, P = 12_345_000_000, 33_333_333  # a lockstep sim at tick 12.345 s, 30 fps
# a lockstep sim that waits for a command: its keep-alive repeats the current tick (same stamp) every 50 ms
feeder = BackgroundNode("lockstep_feeder")
pubs = {
    "/joint_states": feeder.publisher("/joint_states", "sensor_msgs/msg/JointState"),
    "/cameras/front/image_raw": feeder.publisher("/cameras/front/image_raw", "sensor_msgs/msg/Image"),
    "/leader/joint_states": feeder.publisher("/leader/joint_states", "sensor_msgs/msg/JointState"),
}
stamps = dict.fromkeys(pubs, S)
Time, JointState, Image = (message_class(t) for t in
    ("builtin_interfaces/msg/Time", "sensor_msgs/msg/JointState", "sensor_msgs/msg/Image"))

def publish_forever():
    while True:
        for topic, pub in pubs.items():
            t = stamps[topic]
            if topic.endswith("image_raw"):
                msg = Image(height=8, width=8, encoding="rgb8", step=24, data=bytes(8 * 8 * 3))
            else:
                msg = JointState(name=joints, position=[0.1] * len(joints))
            msg.header.stamp = Time(sec=t // 1_000_000_000, nanosec=t % 1_000_000_000)
            pub.publish(msg)
        time.sleep(0.05)

threading.Thread(target=publish_forever, daemon=True).start()

def attempt(call):
    t0 = time.monotonic()
    try:
        call()
        return {"ok": True, "s": time.monotonic() - t0}
    except Exception as exc:
        return {"ok": False, "s": time.monotonic() - t0, "type": type(exc).__name__, "error": str(exc)}

out = {}
robot = make_robot_from_config(draccus.parse(Cli, args=[
    "--robot.type=ros", f"--robot.contract={contract}", "--robot.lockstep=true",
    "--robot.lockstep_timeout_s=1", "--robot.connect_timeout_s=60"]).robot)
robot.connect()
out["first"] = attempt(robot.get_observation)  # the tick at S
robot.send_action({name: 0.2 for name in robot.action_features})  # S's answer
# a node that matched the robot's publisher only after that command (a recorder that must take it in
# before the sim steps): it gets S's command while the sim repeats S, or never
late = BackgroundNode("late_consumer")
late.subscribe("/joint_commands", "sensor_msgs/msg/JointState")
deadline = time.monotonic() + 60
while robot._publisher.get_subscription_count() < 1 and time.monotonic() < deadline:
    time.sleep(0.02)
out["same_tick"] = attempt(robot.get_observation)  # only repeats of S: no next tick
got = late.latest("/joint_commands")
out["late_consumer"] = None if got.msg is None else {
    "stamp": got.msg.header.stamp.sec * 1_000_000_000 + got.msg.header.stamp.nanosec,
    "joints": list(got.msg.name), "count": got.count}
late.close()
stamps["/joint_states"] = S + P
out["half_tick"] = attempt(robot.get_observation)  # the joints moved on, the camera did not
stamps["/cameras/front/image_raw"] = S + P
out["next_tick"] = attempt(robot.get_observation)
robot.disconnect()

teleop = make_teleoperator_from_config(draccus.parse(TeleopCli, args=[
    "--teleop.type=ros", "--teleop.topic=/leader/joint_states", f"--teleop.joints=[{','.join(joints)}]",
    "--teleop.lockstep=true", "--teleop.lockstep_timeout_s=1", "--teleop.connect_timeout_s=60"]).teleop)
teleop.connect()
out["action"] = attempt(teleop.get_action)
out["same_action"] = attempt(teleop.get_action)  # the leader has not answered a newer tick
stamps["/leader/joint_states"] = S + P
out["next_action"] = attempt(teleop.get_action)
teleop.disconnect()
feeder.close()
print(json.dumps(out))
"""


def test_lockstep_timeouts_name_the_flag_the_topics_and_the_tick(side, tmp_path):
    """--robot.lockstep: get_observation fails when no complete newer tick comes in lockstep_timeout_s (a
    repeated tick or one whose topics disagree is not one), naming the flag, each topic's latest stamp and
    the last tick; while the sim repeats the tick, the tick's command goes out again, so a subscriber that
    matched after it was sent still gets it; --teleop.lockstep: get_action fails alike when the leader
    sends nothing newer."""
    import yaml

    contract = {
        "fps": 30,
        "robot_type": "so101_follower",
        "task": "Wait for the next tick",
        "units": "radians",
        "features": {
            "observation.state": {"topic": "/joint_states", "fields": ["position"], "joints": JOINTS},
            "action": {"topic": "/joint_commands", "fields": ["position"], "joints": JOINTS},
            "observation.images.front": {"topic": "/cameras/front/image_raw", "height": 8, "width": 8},
        },
    }
    path = tmp_path / "lockstep.yaml"
    path.write_text(yaml.safe_dump(contract))
    out = last_json(side.run(LOCKSTEP_TIMEOUTS, args=[str(path), json.dumps(JOINTS)], timeout=180))
    print(json.dumps(out, indent=1))
    assert out["first"]["ok"] and out["next_tick"]["ok"], out
    late = out["late_consumer"]
    assert late is not None, "the tick's command was not sent again while the sim repeated the tick"
    assert late["stamp"] == 12_345_000_000 and late["joints"] == JOINTS, late
    for key, latest in (("same_tick", "12.345"), ("half_tick", "12.378")):
        res = out[key]
        assert not res["ok"] and res["type"] == "StaleObservationError", res
        assert 1.0 <= res["s"] < 10.0, res  # after lockstep_timeout_s, not before
        assert (
            "so101_follower: --robot.lockstep: no complete tick after sim time 12.345 s within 1 s"
            in res["error"]
        ), res
        assert f"/joint_states at {latest} s" in res["error"], res
        assert "/cameras/front/image_raw at 12.345 s" in res["error"], res
    assert out["action"]["ok"] and out["next_action"]["ok"], out
    res = out["same_action"]
    assert not res["ok"] and res["type"] == "StaleLeaderError", res
    assert 1.0 <= res["s"] < 10.0, res
    assert (
        "ros teleoperator: --teleop.lockstep: no leader message newer than sim time 12.345 s on "
        "/leader/joint_states within 1 s" in res["error"]
    ), res
