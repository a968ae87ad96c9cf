"""`lerobot-launch` across real processes: messages flow, SIGINT shuts down cleanly, deaths are named."""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from lerobot_core.ament import share_path
from lerobot_core.contract import CONTRACTS_DIR
from lerobot_core.ros.testing import MessageCollector, wait_for_messages, wait_until

pytestmark = pytest.mark.ros


def launch(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "lerobot_bringup.runner", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def test_skeleton_graph_messages_cross_processes(tmp_path, ros_node):
    from sensor_msgs.msg import JointState

    summary = tmp_path / "summary.json"
    # a third process (this test) hears the source too, with the profile's remapping applied
    collector = MessageCollector(ros_node, JointState, "/joint_states")
    proc = launch(
        "skeleton", "rate_hz:=100", "expect_count:=500", "timeout_s:=60", f"summary_file:={summary}"
    )
    try:
        msgs = collector.wait(20, timeout=30)
        out, _ = proc.communicate(timeout=90)
    finally:
        proc.kill()
    assert proc.returncode == 0, out
    assert msgs[0].name == [
        "shoulder_pan",
        "shoulder_lift",
        "elbow_flex",
        "wrist_flex",
        "wrist_roll",
        "gripper",
    ]
    assert len({tuple(m.position) for m in msgs}) > 1  # values move
    data = json.loads(summary.read_text())
    assert data["/joint_states"]["count"] >= 500
    assert "node 'monitor' exited cleanly" in out
    # the non-required source was stopped by the runner with SIGINT, not killed
    assert "did not stop in time" not in out and "ended with exit code" not in out


def test_sigint_is_forwarded_and_every_node_stops(ros_node):
    from sensor_msgs.msg import JointState

    proc = launch("skeleton", "rate_hz:=50")
    try:
        wait_for_messages(ros_node, JointState, "/joint_states", count=5, timeout=30)
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, out
    assert "did not stop in time" not in out, out
    # nobody publishes any more
    assert wait_until(lambda: ros_node.count_publishers("/joint_states") == 0, timeout=10)


def test_a_dying_node_stops_the_graph_non_zero_with_its_name(tmp_path):
    profile = tmp_path / "dies.yaml"
    profile.write_text(
        """
description: the source is misconfigured (rate out of range) and dies at start
nodes:
  - name: broken_source
    package: lerobot_bringup
    executable: synthetic_joints
    parameters: {rate_hz: -5.0}
  - name: monitor
    package: lerobot_bringup
    executable: topic_monitor
"""
    )
    t0 = time.monotonic()
    proc = launch(str(profile))
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 1, out
    assert "node 'broken_source' died with exit code" in out
    assert time.monotonic() - t0 < 50


def test_unknown_executable_is_an_error_naming_file_and_key(tmp_path):
    profile = tmp_path / "typo.yaml"
    profile.write_text("nodes:\n  - {name: a, package: lerobot_bringup, executable: synthetic_jionts}\n")
    proc = launch(str(profile))
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 2
    assert str(profile) in out and "nodes[0] (a).executable" in out and "synthetic_joints" in out


def test_misspelt_parameter_of_a_node_without_defaults_file_fails_at_the_node(tmp_path):
    """synthetic_joints has no config yaml: the launcher cannot know its names, the node itself refuses."""
    profile = tmp_path / "misspelt.yaml"
    profile.write_text(
        "nodes:\n"
        "  - {name: source, package: lerobot_bringup, executable: synthetic_joints,\n"
        "     parameters: {rate_hzz: 5.0, count: 3}}\n"
    )
    proc = launch(str(profile))
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 1, out
    assert "node '/source' has no parameter 'rate_hzz' (did you mean 'rate_hz'?)" in out, out
    assert "node 'source' died with exit code 2" in out, out


def test_misspelt_parameter_of_a_node_with_defaults_file_fails_before_anything_starts(tmp_path):
    """sim's config/sim.yaml holds every declared parameter: lerobot-launch checks before starting."""
    profile = tmp_path / "misspelt.yaml"
    profile.write_text(
        "nodes:\n"
        "  - {name: sim, package: lerobot_sim, executable: sim, parameters: {autostart: true, rate_hzz: 30.0}}\n"
    )
    proc = launch(str(profile))
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2, out
    assert f"{profile}: nodes[0] (sim).parameters: node '/sim' has no parameter 'rate_hzz'" in out, out
    assert "started" not in out  # nothing was started


def test_emulated_hardware_stops_after_every_other_node(tmp_path, ros_node):
    profile = tmp_path / "staged.yaml"
    profile.write_text(
        """
nodes:
  - {name: device, package: lerobot_bringup, executable: synthetic_joints, stop_last: true}
  - {name: driver, package: lerobot_bringup, executable: topic_monitor, parameters: {topics: [/joint_states]}}
"""
    )
    proc = launch(str(profile))
    try:
        # both nodes up (a SIGINT during a node's interpreter start-up kills it, whatever the order)
        assert wait_until(
            lambda: ros_node.count_publishers("/joint_states") >= 1
            and ros_node.count_subscribers("/joint_states") >= 1,
            timeout=60,
        )
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, out
    assert out.index("stopped 'driver'") < out.index("stopped 'device'"), out


def test_show_prints_arguments_and_keeps_the_params_files(tmp_path):
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path))
    out = subprocess.run(
        [sys.executable, "-m", "lerobot_bringup.runner", "skeleton", "rate_hz:=20", "--show"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    assert re.search(r"rate_hz +:= 20.0 +\(set on the command line\)", out), out
    assert re.search(r"\n +count +:= 0\n", out), out
    params = tmp_path / "lerobot_ros" / "launch" / "skeleton" / "joint_source.params.yaml"
    assert f"--params-file {params}" in out, out
    assert "rate_hz: 20.0" in params.read_text()  # still there after the command exited


def test_runner_refuses_without_a_domain_id(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "ROS_DOMAIN_ID"}
    out = subprocess.run(
        [sys.executable, "-m", "lerobot_bringup.runner", "skeleton"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 2 and "ROS_DOMAIN_ID is not set" in out.stderr


def test_each_pytest_process_gets_its_own_domain(ros_domain_id):
    assert os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    code = "from lerobot_core.ros.testing.pytest_plugin import reserve_domain_id; print(reserve_domain_id())"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert int(other) != ros_domain_id


def test_each_test_module_gets_a_fresh_domain_and_releases_the_last(tmp_path):
    code = (
        "import fcntl; from pathlib import Path; from lerobot_core.ros.testing.pytest_plugin import reserve_domain_id\n"
        f"d = Path({str(tmp_path)!r})\n"
        "a = reserve_domain_id(d); b = reserve_domain_id(d)\n"
        "f = open(d / f'{a}.lock', 'w'); fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a is free again\n"
        "try:\n    fcntl.flock(open(d / f'{b}.lock', 'w'), fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
        "except OSError:\n    print(a, b, 'held')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[2] == "held" and int(out[0]) != int(out[1]), out  # b stays locked while its owner lives


def test_launch_files_build_descriptions():
    launch = pytest.importorskip("launch", reason="ROS 2 `launch` is not installable here (not on PyPI)")
    if not hasattr(launch, "LaunchDescription"):  # only a namespace package: a launch/ folder on sys.path
        pytest.skip(
            "ROS 2 `launch` is not installable here (not on PyPI); `launch` resolves to a data folder"
        )
    from lerobot_bringup.launch_glue import generate_profile_launch_description

    for path in sorted((Path(__file__).resolve().parent.parent / "profiles").glob("*.yaml")):
        assert isinstance(generate_profile_launch_description(path.stem), launch.LaunchDescription)


def test_nodes_do_not_outlive_a_killed_runner(ros_node):
    import psutil
    from sensor_msgs.msg import JointState

    proc = launch("skeleton", "rate_hz:=50")
    try:
        wait_for_messages(ros_node, JointState, "/joint_states", count=3, timeout=30)
        # both nodes up and running (the monitor subscribed), not one of them still importing
        assert wait_until(lambda: ros_node.count_subscribers("/joint_states") >= 1, timeout=30)
        nodes = psutil.Process(proc.pid).children(recursive=True)
        assert nodes, "the runner started no node processes"
        proc.kill()  # SIGKILL: no chance to forward anything
        proc.wait(10)
    finally:
        proc.kill()
    # the kernel's parent-death signal stops the nodes anyway: every node process ends...
    _, alive = psutil.wait_procs(nodes, timeout=30)
    left = [f"{' '.join(p.cmdline()[-3:])} {_where(p.pid)}" for p in alive if p.is_running()]
    for p in alive:
        p.kill()
    assert not left, f"node processes outlived the killed runner: {left}"
    # ...and leaves the graph (a node that said goodbye leaves at once; the DDS lease bounds the rest)
    assert wait_until(lambda: ros_node.count_publishers("/joint_states") == 0, timeout=30)


def _where(pid: int) -> str:
    """Where a process that should have ended stands: its state and signal masks, and the kernel
    function each of its threads waits in (what a failure needs, the process being gone after it)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
        keep = [
            line
            for line in status
            if line.split(":")[0] in ("State", "SigPnd", "ShdPnd", "SigBlk", "SigIgn", "SigCgt")
        ]
        waits = sorted(
            f"{t.name}:{(t / 'comm').read_text().strip()}:{(t / 'wchan').read_text().strip()}"
            for t in Path(f"/proc/{pid}/task").iterdir()
        )
    except OSError as exc:
        return f"({exc})"
    return f"[{'; '.join(keep)}; threads: {', '.join(waits)}]"


def test_teleop_profile_uses_robot_state_publisher_where_it_is_installed(tmp_path):
    """A prefix that holds a robot_state_publisher: it replaces our description and TF nodes."""
    prefix = tmp_path / "prefix"
    (prefix / "share" / "ament_index" / "resource_index" / "packages").mkdir(parents=True)
    (prefix / "share" / "ament_index" / "resource_index" / "packages" / "robot_state_publisher").touch()
    exe = prefix / "lib" / "robot_state_publisher" / "robot_state_publisher"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)

    def show(env_prefix):
        env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
        if env_prefix:
            env["AMENT_PREFIX_PATH"] = f"{env_prefix}{os.pathsep}{env['AMENT_PREFIX_PATH']}"
        cmd = [sys.executable, "-m", "lerobot_bringup.runner", "so101_teleop_demo", "--show"]
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
        assert res.returncode == 0, res.stderr
        return res.stdout

    with_rsp = show(prefix)
    assert f"  robot_state_publisher: {exe} --ros-args" in with_rsp
    assert "robot_description=<text," in with_rsp  # the URDF's text, summarized
    assert "  joint_state_tf: not started (package 'robot_state_publisher' is installed)" in with_rsp
    assert (
        "  robot_description_publisher: not started (package 'robot_state_publisher' is installed)"
        in with_rsp
    )
    params = (
        tmp_path
        / "cache"
        / "lerobot_ros"
        / "launch"
        / "so101_teleop_demo"
        / "robot_state_publisher.params.yaml"
    )
    import yaml

    description = yaml.safe_load(params.read_text())["/robot_state_publisher"]["ros__parameters"][
        "robot_description"
    ]
    assert description.startswith("<?xml") and "front_optical_frame" in description
    without = show(None)
    assert (
        "  robot_state_publisher: not started (package 'robot_state_publisher' is not installed)" in without
    )
    assert "  joint_state_tf: " in without and "joint_state_tf: not started" not in without


def run_launcher(*args: str, timeout: float = 60, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "lerobot_bringup.runner", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        **kw,
    )


def test_a_missing_required_argument_is_refused_before_anything_starts():
    """Before: hil_sim_so101 without policy_path started, and looped on 'the policy is silent' until killed."""
    t0 = time.monotonic()
    res = run_launcher("hil_sim_so101")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "profile 'hil_sim_so101' needs policy_path" in res.stderr
    assert "policy_path:=..." in res.stderr and "pretrained_model" in res.stderr  # with its description
    assert "started" not in res.stdout and time.monotonic() - t0 < 20


def test_a_checkpoint_that_is_not_there_is_refused_naming_the_argument():
    """The docs' own example path: refused before start, not a policy node that fails among hundreds of lines."""
    path = "outputs/train/act_sim/checkpoints/last/pretrained_model"
    res = run_launcher("deploy_sim_so101", f"policy_path:={path}", cwd=tempfile.mkdtemp())
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"argument policy_path:={path}: policy checkpoint directory '{path}' does not exist" in res.stderr
    assert "started" not in res.stdout


def test_a_contract_name_that_is_not_shipped_is_refused_before_anything_starts():
    """Before: record_sim_so101 contract:=<a typo> started the sim and the expert; the recorder then failed
    at configure, on a file path the user never typed."""
    res = run_launcher("record_sim_so101", "contract:=so101_sim_env_stat_contract", cwd=tempfile.mkdtemp())
    assert res.returncode == 2, res.stdout + res.stderr
    err = res.stderr.strip()
    assert err.startswith(
        "lerobot-launch: error: argument contract:=so101_sim_env_stat_contract: so101_sim_env_stat_contract: "
        "cannot read the contract"
    ), err
    assert "so101_sim_env_state_contract" in err  # the shipped ones, listed
    assert "started" not in res.stdout
    # a shipped name and a path both pass the check (--show starts nothing)
    for value in ("so101_sim_env_state_contract", str(CONTRACTS_DIR / "so101_sim_env_state_contract.yaml")):
        res = run_launcher("record_sim_so101", f"contract:={value}", "--show", cwd=tempfile.mkdtemp())
        assert res.returncode == 0, res.stdout + res.stderr
        assert f"contract='{value}'" in res.stdout


def test_a_checkpoint_the_contract_cannot_feed_is_refused_naming_the_arguments():
    """Before: hil_sim_so101 with closed_loop.py's default (env_state) checkpoint, as docs/hil.md's first
    command gives it, started the graph; the policy node failed at configure and the graph stopped."""
    fixtures = share_path("lerobot_runtime") / "test" / "fixtures"
    ckpt = fixtures / "act_env_state" / "pretrained_model"
    res = run_launcher("hil_sim_so101", f"policy_path:={ckpt}", cwd=tempfile.mkdtemp())
    assert res.returncode == 2, res.stdout + res.stderr
    err = res.stderr.strip()
    assert err.startswith(f"lerobot-launch: error: policy_path:={ckpt} contract:=so101_sim_hil_contract: "), (
        err
    )
    assert "input observation.environment_state is not a feature of the contract" in err
    assert "contract:= argument picks another one: lerobot-launch hil_sim_so101 --help" in err
    assert "started" not in res.stdout


def test_a_value_of_the_wrong_type_is_refused_before_anything_starts():
    """Before: rate_hz:=fast started the graph, the source died and the monitor printed '0 msgs' until killed."""
    res = run_launcher("skeleton", "rate_hz:=fast")
    assert res.returncode == 2
    assert res.stderr.strip() == "lerobot-launch: error: argument rate_hz:=fast: expected a number"
    assert "started" not in res.stdout


def test_profile_help_lists_its_arguments_with_defaults_and_descriptions():
    res = run_launcher("hil_sim_so101", "--help")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "usage: lerobot-launch hil_sim_so101 [name:=value ...]" in out
    assert re.search(r"  policy_path\n +checkpoint, required: checkpoint directory", out), out
    assert re.search(r"  num_episodes\n +int, default 2: episodes to record", out), out
    assert re.search(r"  rtc\n +bool, default true: real-time chunking", out), out


def test_show_takes_arguments_after_it_and_names_the_folder_used(tmp_path):
    """Before: `--show` followed by name:=value pairs was refused ('unrecognized arguments')."""
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path))
    res = run_launcher(
        "record_sim_so101", "--show", "dataset_root:=rel/ds", "num_episodes:=3", cwd=tmp_path, env=env
    )
    assert res.returncode == 0, res.stderr
    assert re.search(r"num_episodes +:= 3 +\(set on the command line\)", res.stdout), res.stdout
    assert f"folder used: {tmp_path / 'rel' / 'ds'} (does not exist yet)" in res.stdout
    assert f"auto: 0 (no dataset at {tmp_path / 'rel' / 'ds'} yet)" in res.stdout  # the seed it will start at
    shown = run_launcher("hil_sim_so101", "--show", "demonstrate:=true", cwd=tmp_path, env=env)
    assert shown.returncode == 0, shown.stderr  # demonstrations need no policy
    assert "  policy: not started (unless: ${demonstrate} is true)" in shown.stdout


def test_a_required_node_whose_configuration_fails_stops_the_graph_with_its_reason_last(tmp_path):
    """A policy node whose checkpoint cannot be loaded exits (exit_on_failure; it stayed up, silent, before), the graph
    stops non-zero, and the node's reason is the launcher's last line."""
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text("{}")
    profile = tmp_path / "policy.yaml"
    profile.write_text(
        f"""
nodes:
  - name: policy
    package: lerobot_policy_node
    executable: policy
    parameters: {{autostart: true, exit_on_failure: true, policy_path: "{ckpt}"}}
  - name: monitor
    package: lerobot_bringup
    executable: topic_monitor
    required: false
"""
    )
    t0 = time.monotonic()
    proc = launch(str(profile))
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1, out
    last = out.strip().splitlines()[-1]
    assert last.startswith("lerobot-launch: error: node 'policy' failed: "), out[-3000:]
    assert "has no 'type'" in last, out[-3000:]
    assert "stopped 'monitor'" in out
    assert time.monotonic() - t0 < 100


def test_a_recorder_that_cannot_use_its_folder_stops_the_graph_with_the_reason_last(tmp_path):
    """The recorder's configure fails (dataset_root is a folder of other files): the graph stops with
    exit code 1 and the recorder's reason, not run_node's 'autostart: configure failed; exiting'."""
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "todo.txt").write_text("mine")
    proc = launch("record_sim_so101", f"dataset_root:={folder}", "image_width:=32", "image_height:=24")
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 1, out[-3000:]
    last = out.strip().splitlines()[-1]
    assert last.startswith(
        "lerobot-launch: error: node 'recorder' failed: configure failed: dataset_root "
    ), last
    assert "is an existing folder that is not a LeRobot dataset" in last, last
    assert (folder / "todo.txt").read_text() == "mine" and len(list(folder.iterdir())) == 1


def test_a_python_that_cannot_run_the_node_is_refused_before_anything_starts(tmp_path):
    """deploy_remote_gpu python:= (a LeRobot venv's interpreter): one that is not there, or one without this
    distro's rclpy (the bare interpreter this venv was made from), is refused naming the argument."""
    ckpt = share_path("lerobot_runtime") / "test" / "fixtures" / "act_env_state" / "pretrained_model"
    missing = tmp_path / "venv" / "bin" / "python"
    res = run_launcher("deploy_remote_gpu", f"policy_path:={ckpt}", f"python:={missing}")
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"argument python:={missing}: not an executable file" in res.stderr, res.stderr
    assert "started" not in res.stdout
    bare = Path(sys.base_prefix) / "bin" / "python3"
    res = run_launcher("deploy_remote_gpu", f"policy_path:={ckpt}", f"python:={bare}")
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"argument python:={bare}: cannot run the node (ModuleNotFoundError: No module named 'rclpy')" in (
        res.stderr
    ), res.stderr
    assert "started" not in res.stdout
