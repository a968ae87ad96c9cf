"""`lerobot-ros-replay` as a real process against the simulator and against the servo emulator +
motor_bus: the robot ends at the episode's last action, the ramp from the present pose and every
command respect the step bound, and bad input is an error naming the flag."""

import re
import subprocess
import time

import numpy as np
import pytest
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory

from lerobot_core.ament import find_executable
from lerobot_core.robots import get_robot_spec
from lerobot_core.ros.testing import MessageCollector, RosProcess, wait_until
from lerobot_dataset import DatasetWriter
from lerobot_drivers.servo_emulator import EmulatorProcess

pytestmark = pytest.mark.ros
JOINTS = list(get_robot_spec("so101_follower").joint_names)
FPS = 30
MAX_STEP = 0.04  # rad per command
START = np.array([0.3, -0.4, 0.5, 0.2, -0.3, 0.4])
END = np.array([-0.2, 0.3, 0.1, -0.3, 0.4, 0.8])


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """Episode 0 holds still; episode 1 moves START -> END in 1.5 s (what gets replayed), in degrees."""
    root = tmp_path_factory.mktemp("replay") / "ds"
    names = [f"{j}.pos" for j in JOINTS]
    w = DatasetWriter.create(
        root,
        fps=FPS,
        features={
            "observation.state": {"dtype": "float32", "shape": (6,), "names": names},
            "action": {"dtype": "float32", "shape": (6,), "names": names},
        },
    )
    for episode in (np.tile(START, (10, 1)), START + (END - START) * np.linspace(0, 1, 45)[:, None]):
        for row in episode:
            deg = np.degrees(row).astype(np.float32)
            w.add_frame({"observation.state": deg, "action": deg}, task="replay me")
        w.save_episode()
    w.finalize()
    return root


def _replay(dataset, *extra):
    return RosProcess(
        "lerobot_policy_node",
        "lerobot-ros-replay",
        # two subscribers: the robot and this test's collector (it must see every command)
        args=[
            str(dataset),
            *("--episode", "1", "--units", "degrees", "--max-step-rad", str(MAX_STEP)),
            *("--min-subscribers", "2", *extra),
        ],
        ros_args=False,
    )


def _run_and_check(replay, commands_of, present_of, start_pose, tolerance):
    """Run the replay to its end; check the ramp, the step bound and where the robot ended."""
    with replay as proc:
        assert wait_until(lambda: proc.returncode is not None, 90.0), proc.output()
    out = proc.output()
    assert proc.returncode == 0, out
    assert "45 actions at 30 Hz" in out, out
    ramp = int(re.search(r"a ramp of (\d+) steps", out).group(1))
    # the ramp takes as many steps as the longest way from the pose the robot was in
    assert abs(ramp - np.abs(START - start_pose).max() / MAX_STEP) <= 1.5, (ramp, start_pose)
    commands = commands_of()
    assert len(commands) >= 45
    steps = np.abs(np.diff(commands, axis=0))
    assert steps.max() <= MAX_STEP + 1e-6, f"a command moved {steps.max():.4f} rad > {MAX_STEP}"
    np.testing.assert_allclose(commands[-1], END, atol=1e-5)  # float32 degrees -> rad
    assert wait_until(lambda: np.abs(present_of() - END).max() < tolerance, 10.0), (
        f"robot at {present_of()}, last action {END}"
    )
    return commands


def _present(collector):
    def present():
        m = collector.messages[-1]
        pos = dict(zip(m.name, m.position, strict=True))
        return np.array([pos[j] for j in JOINTS])

    return present


@pytest.mark.parametrize("interface", ["joint_state", "joint_trajectory"])
def test_replays_an_episode_on_the_sim(ros_node, dataset, interface):
    js = MessageCollector(ros_node, JointState, "/joint_states")
    if interface == "joint_state":
        cmds = MessageCollector(ros_node, JointState, "/joint_commands")
    else:
        cmds = MessageCollector(ros_node, JointTrajectory, "/joint_trajectory_controller/joint_trajectory")
    params = {"mode": "realtime", "autostart": True, "fps": 30.0, "cameras": [""], "auto_reset": False}
    with RosProcess("lerobot_sim", "sim", parameters=params):
        js.wait(1, 60.0)
        start_pose = _present(js)()

        def commands():
            if interface == "joint_state":
                assert all(list(m.name) == JOINTS for m in cmds.messages)
                return np.array([m.position for m in cmds.messages])
            assert all(list(m.joint_names) == JOINTS and len(m.points) == 1 for m in cmds.messages)
            return np.array([m.points[0].positions for m in cmds.messages])

        replay = _replay(dataset, "--command-interface", interface)
        _run_and_check(replay, commands, _present(js), start_pose, tolerance=0.05)


def test_replays_an_episode_on_the_emulated_arm(ros_node, dataset, tmp_path):
    js = MessageCollector(ros_node, JointState, "/joint_states")
    fwd = MessageCollector(ros_node, Float64MultiArray, "/forward_position_controller/commands")
    with EmulatorProcess("so101_follower", str(tmp_path / "ttySO101"), tau_s=0.03) as emu:
        params = {
            "robot": "so101_follower",
            "port": emu.port,
            "autostart": True,
            "rate_hz": 100.0,
            "timeout_ms": 200.0,
            "max_step_rad": 0.35,
        }
        with RosProcess("lerobot_drivers", "motor_bus", parameters=params):
            js.wait(1, 60.0)
            start_pose = _present(js)()
            replay = _replay(dataset, "--command-interface", "forward_position")
            commands = _run_and_check(
                replay, lambda: np.array([m.data for m in fwd.messages]), _present(js), start_pose, 0.02
            )
            # forward_position: values in the robot's joint order
            np.testing.assert_allclose(commands[-1], END, atol=1e-5)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--episode", "5"], r"--episode: episode 5 is not in .* \(it has episodes 0..1\)"),
        (
            ["--episode", "0", "--feature", "observation.effort"],
            r"--feature: .*no feature 'observation.effort'",
        ),
        (
            ["--episode", "0", "--units", "normalized"],
            r"--units normalized: .*calibration.*\(pass --contract\)",
        ),
        (["--episode", "0", "--robot", "koch_follower_x"], r"--robot 'koch_follower_x'"),
    ],
)
def test_bad_input_is_an_error_naming_the_flag(dataset, args, message):
    exe = find_executable("lerobot_policy_node", "lerobot-ros-replay")
    run = subprocess.run([str(exe), str(dataset), *args], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2, run.stderr
    assert re.search(message, run.stderr), run.stderr


def test_a_missing_dataset_names_it(tmp_path):
    exe = find_executable("lerobot_policy_node", "lerobot-ros-replay")
    run = subprocess.run(
        [str(exe), str(tmp_path / "nope"), "--episode", "0"], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 2
    assert f"DATASET: dataset '{tmp_path / 'nope'}' does not exist" in run.stderr


def test_no_robot_is_an_error_naming_the_topic(dataset):
    t0 = time.monotonic()
    exe = find_executable("lerobot_policy_node", "lerobot-ros-replay")
    run = subprocess.run(
        [str(exe), str(dataset), "--episode", "1", "--wait-s", "1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2
    assert "no joint_states with joints" in run.stderr and "/joint_states within 1 s (--wait-s)" in run.stderr
    assert time.monotonic() - t0 < 30


def test_too_few_command_subscribers_is_an_error_naming_the_flag(ros_node, dataset):
    """joint_states arrive but nothing takes the commands: the replay names the topic and the flag."""
    pub = ros_node.create_publisher(JointState, "/joint_states", 10)

    def publish():
        pub.publish(JointState(name=JOINTS, position=START.tolist()))

    timer = ros_node.create_timer(0.05, publish)
    try:
        exe = find_executable("lerobot_policy_node", "lerobot-ros-replay")
        run = subprocess.run(
            # long enough for discovery and the first joint_states on a loaded machine (3 s was not)
            [str(exe), str(dataset), "--episode", "1", "--wait-s", "10", "--min-subscribers", "1"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        # cancelled, not destroyed: the fixture's executor thread may be waiting on the timer (on
        # Jazzy's rclpy a destroy under it raised in that thread); the fixture destroys the node
        timer.cancel()
    assert run.returncode == 2, run.stderr
    assert "0 of --min-subscribers 1 subscriber(s) on /joint_commands within 10 s (--wait-s)" in run.stderr, (
        run.stderr
    )


def test_normalized_units_go_back_to_radians_through_the_contract(tmp_path):
    """--contract: the recording's calibration ranges turn normalized actions back into radians."""
    import yaml

    from lerobot_core.contract import Contract
    from lerobot_policy_node.replay_cli import _parser, load_actions

    contract_path = tmp_path / "contract.yaml"
    contract_path.write_text(
        yaml.safe_dump(
            {
                "fps": FPS,
                "task": "t",
                "units": "normalized",
                "calibration": {
                    j: {"range": [-1.5, 1.5 + 0.1 * i], "mode": "m100_100"} for i, j in enumerate(JOINTS)
                },
                "features": {"action": {"topic": "/leader/joint_states", "joints": JOINTS}},
            }
        )
    )
    scale, offset = Contract.load(contract_path).unit_conversion("action")
    radians = START + (END - START) * np.linspace(0, 1, 7)[:, None]
    w = DatasetWriter.create(
        tmp_path / "ds",
        fps=FPS,
        features={"action": {"dtype": "float32", "shape": (6,), "names": [f"{j}.pos" for j in JOINTS]}},
    )
    for row in radians:
        w.add_frame({"action": (row * scale + offset).astype(np.float32)}, task="t")
    w.save_episode()
    w.finalize()
    args = _parser().parse_args([str(tmp_path / "ds"), "--episode", "0", "--contract", str(contract_path)])
    joints, actions, fps = load_actions(args)
    assert joints == JOINTS and fps == FPS
    np.testing.assert_allclose(actions, radians, atol=1e-4)
    both = _parser().parse_args(
        [str(tmp_path / "ds"), "--episode", "0", "--contract", str(contract_path), "--units", "degrees"]
    )
    with pytest.raises(Exception, match="--units and --contract: give one"):
        load_actions(both)
