"""The sim and gym_bridge nodes as real processes, talked to over DDS (loopback)."""

import os
import time
from pathlib import Path

import numpy as np
import pytest
from rclpy.qos import qos_profile_sensor_data
from rosgraph_msgs.msg import Clock
from sensor_msgs.msg import CameraInfo, Image, JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from lerobot_core.dds_transport import SHM_PREFIXES
from lerobot_core.robots import get_robot_spec
from lerobot_core.ros.testing import MessageCollector, RosProcess, wait_until
from lerobot_msgs.msg import EpisodeInfo
from lerobot_msgs.srv import ResetSim
from lerobot_sim.so101_model import JOINT_NAMES

pytestmark = pytest.mark.ros
SPEC = get_robot_spec("so101_follower")
MAX_STEP = min(SPEC.limits[n].velocity for n in JOINT_NAMES) / 30.0


def _ns(stamp):
    return stamp.sec * 1_000_000_000 + stamp.nanosec


def _reset(node, seed, service="/sim/reset"):
    client = node.create_client(ResetSim, service)
    assert client.wait_for_service(timeout_sec=20.0), f"{service} not available"
    future = client.call_async(ResetSim.Request(use_seed=True, seed=seed))
    assert wait_until(future.done, 20.0)
    return future.result()


def _steps(info_collector):
    """Distinct (episode, step) observations seen (idle republishing repeats the same step)."""
    return sorted({(m.episode_index, m.step) for m in info_collector.messages})


def _wait_step(info, episode, step, timeout=20.0):
    assert wait_until(lambda: (episode, step) in _steps(info), timeout), f"step {step} never published"


def _at(collector, stamp, timeout=20.0):
    """The message of ``collector`` stamped ``stamp`` (topics may be delivered in any order)."""

    def find():
        return next((m for m in reversed(collector.messages) if _ns(m.header.stamp) == _ns(stamp)), None)

    assert wait_until(lambda: find() is not None, timeout), (
        f"nothing stamped {_ns(stamp)} on {collector.topic}"
    )
    return find()


def _matched(node, topics, timeout=30.0):
    assert wait_until(lambda: all(node.count_publishers(t) > 0 for t in topics), timeout), topics


def test_lockstep_sim_speaks_the_robot_topics_and_obeys_safely(ros_node):
    js = MessageCollector(ros_node, JointState, "/joint_states")
    lr = MessageCollector(ros_node, JointState, "/joint_states_lerobot")
    info = MessageCollector(ros_node, EpisodeInfo, "/sim/episode_info")
    clock = MessageCollector(ros_node, Clock, "/clock")
    front = MessageCollector(ros_node, Image, "/cameras/front/image_raw")
    wrist = MessageCollector(ros_node, Image, "/cameras/wrist/image_raw")
    cinfo = MessageCollector(ros_node, CameraInfo, "/cameras/front/camera_info")
    fwd = ros_node.create_publisher(Float64MultiArray, "/forward_position_controller/commands", 10)
    jcmd = ros_node.create_publisher(JointState, "/joint_commands", 10)
    traj = ros_node.create_publisher(JointTrajectory, "/joint_trajectory_controller/joint_trajectory", 10)
    params = {
        "mode": "lockstep",
        "autostart": True,
        "seed": 5,
        "image_width": 64,
        "image_height": 48,
        "idle_republish_s": 0.5,
    }
    with RosProcess("lerobot_sim", "sim", parameters=params) as proc:
        _matched(ros_node, ["/joint_states", "/sim/episode_info", "/cameras/front/image_raw", "/clock"])
        response = _reset(ros_node, 9)
        assert response.success and response.info.seed == 9 and response.info.step == 0
        ep = response.info.episode_index
        _wait_step(info, ep, 0)
        assert wait_until(lambda: fwd.get_subscription_count() > 0 and jcmd.get_subscription_count() > 0, 20)
        assert wait_until(lambda: traj.get_subscription_count() > 0, 20)
        start = np.array(_at(js, response.info.header.stamp).position)

        def joints_at(step):
            stamp = next(m for m in info.messages if (m.episode_index, m.step) == (ep, step)).header.stamp
            return _at(js, stamp).position

        # Float64MultiArray, beyond the shoulder_pan limit: one bounded step per command
        pans = []
        for k in range(1, 21):
            fwd.publish(Float64MultiArray(data=[3.0, *start[1:]]))
            _wait_step(info, ep, k)
            pans.append(joints_at(k)[0])
        assert len(_steps(info)) >= 21  # lockstep: exactly one step per command
        # target change bounded per step: after k commands the arm is at most k bounded steps away
        assert all(p - start[0] <= (i + 1) * MAX_STEP + 0.02 for i, p in enumerate(pans))
        assert pans[-1] > start[0] + 1.0  # it did move toward the (clamped) target
        for _ in range(30):
            k += 1
            fwd.publish(Float64MultiArray(data=[3.0, *start[1:]]))
            _wait_step(info, ep, k)
        assert joints_at(k)[0] <= SPEC.limits["shoulder_pan"].upper + 0.01

        # JointState by name and a single-point JointTrajectory
        for _ in range(15):
            k += 1
            jcmd.publish(JointState(name=["elbow_flex"], position=[0.3]))
            _wait_step(info, ep, k)
        assert abs(joints_at(k)[2] - 0.3) < 0.05
        for _ in range(15):
            k += 1
            traj.publish(
                JointTrajectory(joint_names=["wrist_roll"], points=[JointTrajectoryPoint(positions=[0.5])])
            )
            _wait_step(info, ep, k)
        assert abs(joints_at(k)[4] - 0.5) < 0.05

        # rejected commands do not step or move anything
        before = len(_steps(info))
        fwd.publish(Float64MultiArray(data=[0.0] * 5))
        time.sleep(1.2)  # rejection warnings are throttled to one per second
        fwd.publish(Float64MultiArray(data=[float("nan")] * 6))
        time.sleep(0.5)
        assert len(_steps(info)) == before
        assert "expected 6 values" in proc.output() and "non-finite" in proc.output()

        # stamps = sim time, one control period apart; /clock carries it
        stamps = sorted({_ns(m.header.stamp) for m in info.messages if m.episode_index == ep})
        assert set(np.diff(stamps)) == {round(1e9 / 30)}
        assert wait_until(lambda: clock.messages and _ns(clock.messages[-1].clock) == stamps[-1], 10)
        last = next(m for m in info.messages if (m.episode_index, m.step) == (ep, k)).header.stamp
        joint_msg = _at(js, last)
        assert joint_msg.name == list(JOINT_NAMES) and len(joint_msg.velocity) == 6
        assert _at(lr, last).name == list(JOINT_NAMES)
        img = _at(front, last)
        assert (img.height, img.width, img.encoding, img.step) == (48, 64, "rgb8", 64 * 3)
        assert _at(wrist, last).height == 48
        cam_info = _at(cinfo, last)
        assert cam_info.k[0] > 0 and cam_info.width == 64

        # same seed -> same initial state
        again = _reset(ros_node, 9)
        assert again.info.episode_index == ep + 1
        _wait_step(info, ep + 1, 0)
        first = _at(js, again.info.header.stamp)
        assert np.allclose(first.position, start)
    assert proc.returncode is not None


def test_realtime_sim_steps_on_its_own_and_holds_without_commands(ros_node):
    js = MessageCollector(ros_node, JointState, "/joint_states")
    info = MessageCollector(ros_node, EpisodeInfo, "/sim/episode_info")
    params = {"mode": "realtime", "autostart": True, "cameras": [""], "fps": 30.0}
    with RosProcess("lerobot_sim", "sim", parameters=params):
        js.wait(10, timeout=60)
        time.sleep(1.0)  # let the arm settle on its initial target
        p0 = np.array(js.messages[-1].position)
        steps0 = info.messages[-1].step
        time.sleep(1.0)
        assert info.messages[-1].step > steps0  # steps without any command (wall-clock timer)
        assert np.allclose(js.messages[-1].position, p0, atol=0.01)  # no command: holds
        stamps = [_ns(m.header.stamp) for m in js.messages]
        assert all(b > a for a, b in zip(stamps, stamps[1:], strict=False))
        now = ros_node.get_clock().now().nanoseconds
        assert abs(stamps[-1] - now) < 5e9  # wall-clock stamps (lockstep would start at 0)


def test_gym_bridge_pusht_lockstep(ros_node):
    info = MessageCollector(ros_node, EpisodeInfo, "/sim/episode_info")
    img = MessageCollector(ros_node, Image, "/cameras/image/image_raw")
    state = MessageCollector(ros_node, JointState, "/joint_states")
    cmd = ros_node.create_publisher(Float64MultiArray, "/forward_position_controller/commands", 10)
    params = {
        "env_id": "gym_pusht/PushT-v0",
        "env_kwargs": '{"obs_type": "pixels_agent_pos"}',
        "mode": "lockstep",
        "autostart": True,
        "state_names": ["agent_x", "agent_y"],
        "idle_republish_s": 0.5,
    }
    with RosProcess("lerobot_sim", "gym_bridge", parameters=params) as proc:
        _matched(ros_node, ["/joint_states", "/sim/episode_info", "/cameras/image/image_raw"])
        r = _reset(ros_node, 1)
        assert r.success, r.message
        ep = r.info.episode_index
        _wait_step(info, ep, 0)
        assert wait_until(lambda: cmd.get_subscription_count() > 0, 20)
        for k in range(1, 6):
            cmd.publish(Float64MultiArray(data=[300.0, 300.0]))
            _wait_step(info, ep, k)
        cmd.publish(Float64MultiArray(data=[1.0, 2.0, 3.0]))  # wrong size: rejected, no step
        time.sleep(0.3)
        assert max(s for e, s in _steps(info) if e == ep) == 5
        assert "expects (2,)" in proc.output()
        last = next(m for m in info.messages if (m.episode_index, m.step) == (ep, 5)).header.stamp
        assert _at(state, last).name == ["agent_x", "agent_y"]
        frame = _at(img, last)
        assert frame.encoding == "rgb8" and frame.height > 0


def _own_shm_segments(pid: int) -> dict[str, int]:
    """The Fast DDS shared-memory segments process `pid` owns, with their sizes: an owner keeps its
    segment's lock file (``<segment>_el``) open. (Readers map the segments of the writers they read,
    so the mappings do not tell owners apart; the port files are shared by every local participant.)"""
    own = {}
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # closed meanwhile
            continue
        shm_file = target.startswith(tuple(f"/dev/shm/{prefix}" for prefix in SHM_PREFIXES))
        if shm_file and target.endswith("_el") and "_port" not in target:
            segment = target[: -len("_el")]
            if os.path.exists(segment):
                own[segment] = os.path.getsize(segment)
    return own


@pytest.mark.parametrize("mode", ["realtime", "lockstep"])
def test_a_stopped_sim_leaves_no_shared_memory_behind(ros_node, mode):
    """Stopped with Ctrl-C, the sim's DDS participant is destroyed, and with it its shared-memory
    segments (32 MB each with the large-image profile). The sim used to leave them in /dev/shm on
    every exit (its frozen garbage was never collected, so the context was never finalized): a day of
    runs filled the 24 GB of RAM that /dev/shm shares, until processes were OOM-killed."""
    params = {"mode": mode, "autostart": True, "cameras": ["front"], "image_width": 32, "image_height": 24}
    info = MessageCollector(ros_node, EpisodeInfo, "/sim/episode_info")
    with RosProcess("lerobot_sim", "sim", parameters=params) as proc:
        assert wait_until(lambda: len(info.messages) > 0, 60), proc.output()[-2000:]
        # the large-image profile's 32 MB segment comes with the sim's first large writer
        assert wait_until(lambda: max(_own_shm_segments(proc.pid).values(), default=0) >= 32 * 2**20, 30), (
            _own_shm_segments(proc.pid)
        )
        segments = set(_own_shm_segments(proc.pid))
        assert proc.stop() == 0, proc.output()[-2000:]
    left = sorted(p for p in segments if os.path.exists(p))
    assert not left, f"left in /dev/shm after the sim exited: {left}"


def test_compressed_images_are_the_raw_frames_as_jpeg_at_the_set_quality(ros_node):
    """cameras/<name>/image_raw/compressed, built while subscribed: each message is the raw frame of
    the same stamp encoded at jpeg_quality (what a policy on another host reads by default)."""
    from sensor_msgs.msg import CompressedImage

    from lerobot_core.image_conversion import compressed_msg_to_rgb, encode_compressed, image_msg_to_rgb

    raw = MessageCollector(ros_node, Image, "/cameras/front/image_raw", qos=qos_profile_sensor_data)
    jpeg = MessageCollector(
        ros_node, CompressedImage, "/cameras/front/image_raw/compressed", qos=qos_profile_sensor_data
    )
    params = {
        "mode": "realtime",
        "autostart": True,
        "cameras": ["front"],
        "image_width": 64,
        "image_height": 48,
        "jpeg_quality": 35,
    }
    with RosProcess("lerobot_sim", "sim", parameters=params):
        got = jpeg.wait(3, timeout=60)
        frame = _at(raw, got[-1].header.stamp)
    assert "jpeg" in got[-1].format and got[-1].header.frame_id == "front_optical_frame"
    rgb = image_msg_to_rgb(frame)
    fmt, data = encode_compressed(rgb, "jpeg", 35)
    assert bytes(got[-1].data) == data  # the raw frame at quality 35, not another frame or quality
    decoded = compressed_msg_to_rgb(got[-1])
    assert decoded.shape == rgb.shape and not np.array_equal(decoded, rgb)
