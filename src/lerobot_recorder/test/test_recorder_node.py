"""The recorder node across real processes: a source process (cameras + joint states) -> recorder -> dataset.

Every test starts real executables on loopback DDS (per-pytest-process ROS_DOMAIN_ID from the
lerobot_bringup plugin): `live_sources.py` publishes rgb8 images at 30 fps and two JointState
streams at 100 Hz, the installed `recorder` node records them.
"""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rclpy")

from rclpy.action import ActionClient
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from std_srvs.srv import Trigger

from lerobot_core.contract import Contract
from lerobot_core.ros.testing import MessageCollector, RosProcess, wait_until
from lerobot_dataset import DatasetReader
from lerobot_msgs.action import RecordEpisode
from lerobot_msgs.msg import RecorderStatus
from lerobot_msgs.srv import StartEpisode
from lerobot_recorder.bag_import import import_bags

pytestmark = pytest.mark.ros

HERE = Path(__file__).resolve().parent
CONTRACT = HERE / "contracts" / "live_test.yaml"
FPS = 30
STATUS_QOS = QoSProfile(
    depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL
)


class Sources:
    """test/live_sources.py as its own process (cameras + joint states)."""

    def __init__(self, *args: str):
        self.cmd = [sys.executable, str(HERE / "live_sources.py"), *args]
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> Sources:
        env = dict(os.environ, PYTHONUNBUFFERED="1", ROS_AUTOMATIC_DISCOVERY_RANGE="LOCALHOST")
        self.proc = subprocess.Popen(
            self.cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
        )
        return self

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)

    def __exit__(self, *exc) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.kill()


def recorder(tmp_path: Path, **params) -> RosProcess:
    base = {
        "autostart": True,
        "contract": str(CONTRACT),
        "dataset_root": str(tmp_path / "ds"),
        "vcodec": "libx264",
        "episode_time_s": 3.0,
        "reset_time_s": 0.0,
        "status_rate_hz": 5.0,
    }
    base.update(params)
    return RosProcess("lerobot_recorder", "recorder", parameters=base)


def latest(collector: MessageCollector) -> RecorderStatus | None:
    return collector.messages[-1] if collector.messages else None


def wait_status(collector, predicate, timeout=60.0, proc=None) -> RecorderStatus:
    ok = wait_until(lambda: latest(collector) is not None and predicate(latest(collector)), timeout)
    if not ok:
        out = proc.output()[-3000:] if proc is not None else ""
        raise AssertionError(f"status never matched; last: {latest(collector)}\n{out}")
    return latest(collector)


def streams_ready(s: RecorderStatus) -> bool:
    return bool(s.streams) and all(st.age_s >= 0 and not st.stale for st in s.streams)


def call(node, srv_type, name, request=None, timeout=60.0):
    client = node.create_client(srv_type, name)
    try:
        assert client.wait_for_service(timeout_sec=10.0), f"{name} not available"
        fut = client.call_async(request or srv_type.Request())
        assert wait_until(fut.done, timeout), f"{name}: no answer in {timeout} s"
        return fut.result()
    finally:
        node.destroy_client(client)


def episode_ticks(output: str) -> dict[int, tuple[int, int]]:
    """{episode: (frames, dropped ticks)} from the recorder's "episode N saved" log lines."""
    found = re.findall(r"episode (\d+) saved: (\d+) frames[^(]*\((\d+) frames, (\d+) dropped ticks", output)
    return {int(e): (int(f), int(d)) for e, f, _, d in found}


def episode_windows(output: str) -> dict[int, tuple[float, float, float]]:
    """{episode: (first tick after start, last tick before stop, start-stop) [s]} from the log."""
    found = re.findall(
        r"episode (\d+) saved: .*?\[ticks (-?[\d.]+) s after start to (-?[\d.]+) s before stop; "
        r"start-stop ([\d.]+) s\]",
        output,
    )
    return {int(e): (float(a), float(b), float(w)) for e, a, b, w in found}


def check_span(e: int, frames: int, dropped: int, seconds: float, output: str) -> None:
    """Episode e's frames + reported drops are every tick from its first to its last one.

    The start-stop window is the requested duration (the stop comes on time) and the ticks fill it,
    except before every source has a sample after the start and after the last common sample before
    the stop (about a frame period at each end on a quiet machine; bounded loosely for a loaded one).
    """
    lead, tail, window = episode_windows(output)[e]
    assert seconds - 0.001 <= window < seconds + 0.5, f"episode {e}: start-stop {window} s"
    assert 0 <= lead < 1.0 and 0 <= tail < 1.0, f"episode {e}: ticks start {lead} s in, end {tail} s early"
    spanned = (window - lead - tail) * FPS + 1  # grid points from the first tick to the last
    assert abs(frames + dropped - spanned) < 0.1, (
        f"episode {e}: {frames} frames + {dropped} dropped ticks, but the ticks span {spanned:.2f}"
    )


def check_dataset(root: Path, episodes: int, seconds: float, output: str) -> DatasetReader:
    """Every episode: as many rows and video frames as the log says, and they fill its span."""
    r = DatasetReader(root)
    assert r.num_episodes == episodes
    ticks = episode_ticks(output)
    for e in range(episodes):
        n = int(r.episode_meta(e)["length"])
        assert ticks[e][0] == n, f"episode {e}: log says {ticks[e][0]} frames, dataset {n}"
        check_span(e, n, ticks[e][1], seconds, output)
        assert len(r.video_frames("observation.images.front", e)) == n
    return r


# ---------------------------------------------------------------------------------- a session
@pytest.fixture(scope="module")
def session(tmp_path_factory):
    """lerobot-record's loop: 2 episodes of 3 s, recorded live AND raw (mode both), then exit."""
    tmp = tmp_path_factory.mktemp("session")
    with Sources():
        proc = recorder(
            tmp, auto_record=True, num_episodes=2, reset_time_s=1.0, exit_when_done=True, mode="both"
        )
        with proc:
            assert wait_until(lambda: proc.returncode is not None, 120), proc.output()[-3000:]
    return tmp, proc


def test_session_records_two_episodes_and_exits(session):
    tmp, proc = session
    out = proc.output()
    assert proc.returncode == 0, out[-3000:]
    assert "episode 0 saved" in out and "episode 1 saved" in out and "exiting (exit_when_done)" in out
    r = check_dataset(tmp / "ds", episodes=2, seconds=3.0, output=out)
    assert r.tasks == ["Record the synthetic arm"]
    frame = r[5]
    assert frame["observation.images.front"].shape == (120, 160, 3)
    assert frame["observation.state"].shape == (6,) and frame["action"].shape == (6,)
    # the published joint values are 0.5*sin(...): bounded, and not constant
    states = r.episode(0)["observation.state"]
    assert np.all(np.abs(states) <= 0.5 + 1e-6) and np.ptp(states[:, 0]) > 0.01


def test_raw_bags_import_to_the_same_dataset_as_live_recording(session, tmp_path):
    tmp, _ = session
    bags = sorted((tmp / "ds_raw").glob("episode_*"))
    assert [b.name for b in bags] == ["episode_000000", "episode_000001"]
    import_bags(
        [str(b) for b in bags],
        Contract.load(CONTRACT),
        tmp_path / "imported",
        vcodec="libx264",
        latency_margin_s=0.1,
        progress=False,
    )
    live, imported = DatasetReader(tmp / "ds"), DatasetReader(tmp_path / "imported")
    assert imported.num_episodes == live.num_episodes == 2
    for e in range(2):
        a, b = live.episode(e), imported.episode(e)
        for key in ("observation.state", "action", "timestamp", "frame_index"):
            np.testing.assert_array_equal(np.asarray(a[key]), np.asarray(b[key]), err_msg=f"{key} ep {e}")
        va = live.video_frames("observation.images.front", e)
        vb = imported.video_frames("observation.images.front", e)
        assert va.shape == vb.shape
        # same source frames through the same encoder settings: the sequence marker agrees
        np.testing.assert_array_equal(va[:, 2, 2, 0], vb[:, 2, 2, 0])


# ---------------------------------------------------------------------------------- services / action
def test_services_action_feedback_and_status(tmp_path, ros_node):
    status = MessageCollector(ros_node, RecorderStatus, "/recorder/status", qos=STATUS_QOS)
    with Sources(), recorder(tmp_path, episode_time_s=2.0, reset_time_s=0.0) as proc:
        wait_status(status, lambda s: s.state == RecorderStatus.STATE_IDLE and streams_ready(s), proc=proc)
        resp = call(ros_node, Trigger, "/recorder/stop_episode")
        assert not resp.success and "nothing to stop" in resp.message
        # the action: one episode, feedback while recording, per-stream counts in the result
        client = ActionClient(ros_node, RecordEpisode, "/recorder/record_episode")
        assert client.wait_for_server(timeout_sec=10)
        feedback = []
        goal = RecordEpisode.Goal(task="action task", episode_time_s=2.0, reset_time_s=0.0)
        send = client.send_goal_async(goal, feedback_callback=lambda m: feedback.append(m.feedback))
        assert wait_until(send.done, 10)
        handle = send.result()
        assert handle.accepted
        res_fut = handle.get_result_async()
        assert wait_until(res_fut.done, 30), proc.output()[-2000:]
        result = res_fut.result().result
        assert result.result_code == RecordEpisode.Result.RESULT_SAVED, result.message
        check_span(result.episode_index, result.frames, result.dropped_ticks, 2.0, result.message)
        assert {s.topic for s in result.streams} == {
            "/joint_states",
            "/leader/joint_states",
            "/cameras/front/image_raw",
        }
        for s in result.streams:
            assert s.received >= (150 if "joint" in s.topic else 50), s
            assert s.rate_ok, s
        assert any(f.state == RecorderStatus.STATE_RECORDING and f.frames > 0 for f in feedback)
        assert max(f.elapsed_s for f in feedback) > 1.0
        # services: start, discard (re-record), start again, stop early
        resp = call(
            ros_node, StartEpisode, "/recorder/start_episode", StartEpisode.Request(episode_time_s=30.0)
        )
        assert resp.success and resp.episode_index == 1, resp.message
        again = call(ros_node, StartEpisode, "/recorder/start_episode")
        assert not again.success and "already being recorded" in again.message
        wait_status(status, lambda s: s.state == RecorderStatus.STATE_RECORDING and s.frames > 10)
        assert call(ros_node, Trigger, "/recorder/discard_episode").success
        resp = call(
            ros_node, StartEpisode, "/recorder/start_episode", StartEpisode.Request(episode_time_s=30.0)
        )
        assert resp.success and resp.episode_index == 1, resp.message
        wait_status(status, lambda s: s.state == RecorderStatus.STATE_RECORDING and s.frames >= 30)
        t_stop = time.monotonic()
        resp = call(ros_node, Trigger, "/recorder/stop_episode")
        assert resp.success, resp.message
        assert time.monotonic() - t_stop < 20
        resp = call(ros_node, Trigger, "/recorder/finalize")
        assert resp.success, resp.message
        s = wait_status(status, lambda s: s.state == RecorderStatus.STATE_FINALIZED)
        assert s.total_episodes == 2 and s.episodes_recorded == 2
    r = DatasetReader(tmp_path / "ds")
    assert r.num_episodes == 2 and r.tasks[0] == "action task"
    assert int(r.episode_meta(1)["length"]) < 30 * FPS  # stopped early


# ---------------------------------------------------------------------------------- failures
def test_sigkill_mid_episode_keeps_earlier_episodes_and_resume_appends(tmp_path, ros_node):
    status = MessageCollector(ros_node, RecorderStatus, "/recorder/status", qos=STATUS_QOS)
    with Sources():
        proc = recorder(tmp_path, auto_record=True, num_episodes=3, episode_time_s=2.0)
        with proc:
            wait_status(
                status,
                lambda s: s.episodes_recorded == 1
                and s.state == RecorderStatus.STATE_RECORDING
                and s.frames > 15,
                timeout=30,
                proc=proc,
            )
            proc.signal(signal.SIGKILL)
            assert wait_until(lambda: proc.returncode is not None, 5)
        # loadable as is, episode 0 intact
        check_dataset(tmp_path / "ds", episodes=1, seconds=2.0, output=proc.output())
        status.messages.clear()
        proc2 = recorder(
            tmp_path, resume=True, auto_record=True, num_episodes=1, episode_time_s=2.0, exit_when_done=True
        )
        with proc2:
            assert wait_until(lambda: proc2.returncode is not None, 90), proc2.output()[-3000:]
        assert proc2.returncode == 0, proc2.output()[-3000:]
        assert "resuming" in proc2.output()
    check_dataset(tmp_path / "ds", episodes=2, seconds=2.0, output=proc.output() + proc2.output())


def test_ctrl_c_mid_episode_saves_it_and_says_it_was_cut_short(tmp_path, ros_node):
    """As lerobot-record on Ctrl-C: the episode in progress is saved and the dataset finalized; the log
    says the episode was cut short (it used to read like one that ran its full time)."""
    status = MessageCollector(ros_node, RecorderStatus, "/recorder/status", qos=STATUS_QOS)
    with Sources():
        proc = recorder(tmp_path, auto_record=True, num_episodes=2, episode_time_s=20.0)
        with proc:
            wait_status(
                status, lambda s: s.state == RecorderStatus.STATE_RECORDING and s.frames > 15, 30, proc
            )
            proc.signal(signal.SIGINT)
            assert wait_until(lambda: proc.returncode is not None, 60), proc.output()[-3000:]
    out = proc.output()
    assert proc.returncode == 0, out[-3000:]
    found = re.search(r"episode 0 saved: (\d+) frames, cut short by the shutdown ([\d.]+) s into it", out)
    assert found, out[-3000:]
    assert 0.5 < float(found.group(2)) < 20.0
    assert DatasetReader(tmp_path / "ds").num_episodes == 1
    assert int(DatasetReader(tmp_path / "ds").episode_meta(0)["length"]) == int(found.group(1))


def test_source_dying_mid_episode_warns_and_reports_without_crashing(tmp_path, ros_node):
    status = MessageCollector(ros_node, RecorderStatus, "/recorder/status", qos=STATUS_QOS)
    src = Sources()
    with src, recorder(tmp_path, episode_time_s=120.0) as proc:
        wait_status(status, lambda s: s.state == RecorderStatus.STATE_IDLE and streams_ready(s), proc=proc)
        assert call(ros_node, StartEpisode, "/recorder/start_episode").success
        wait_status(status, lambda s: s.state == RecorderStatus.STATE_RECORDING and s.frames > 20, proc=proc)
        src.kill()
        s = wait_status(status, lambda s: all(st.stale for st in s.streams), timeout=30, proc=proc)
        assert s.state == RecorderStatus.STATE_RECORDING
        assert all(not st.rate_ok or st.stale for st in s.streams), s.streams
        assert proc.wait_for_output("stale: last message", timeout=15), proc.output()[-2000:]
        resp = call(ros_node, Trigger, "/recorder/stop_episode")
        assert resp.success, resp.message
        assert proc.wait_for_output("episode 0 saved", 30), proc.output()[-2000:]
        assert proc.returncode is None  # still alive, still answering
        resp = call(ros_node, Trigger, "/recorder/finalize")
        assert resp.success, resp.message
        wait_status(status, lambda s: s.state == RecorderStatus.STATE_FINALIZED)
    r = DatasetReader(tmp_path / "ds")
    assert r.num_episodes == 1 and int(r.episode_meta(0)["length"]) > 20


@pytest.mark.parametrize(
    "params, expected",
    [
        ({"dataset_root": "{tmp}/photos"}, "is an existing folder that is not a LeRobot dataset"),
        ({"episode_time_s": -2.0}, "episode_time_s must be a finite number of seconds > 0"),
        ({"streams": ["observation.images.nope"]}, "unknown stream(s) ['observation.images.nope']"),
        ({"contract": "{tmp}/missing.yaml"}, "cannot read the contract"),
        (
            {"episode_boundaries": "steps"},
            "parameter 'episode_boundaries' must be one of ('time', 'sim'), got 'steps'",
        ),
        (
            {"lerobot_version": "0.5"},
            "parameter 'lerobot_version': lerobot_version '0.5' is not one we write for; supported: 0.4.4, 0.6",
        ),
    ],
)
def test_bad_configuration_fails_clearly(tmp_path, params, expected):
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "cat.jpg").write_bytes(b"\xff\xd8")
    params = {k: (v.format(tmp=tmp_path) if isinstance(v, str) else v) for k, v in params.items()}
    with recorder(tmp_path, **params) as proc:
        assert wait_until(lambda: proc.returncode is not None, 90), proc.output()[-2000:]
    assert proc.returncode == 1
    assert expected in proc.output(), proc.output()[-2000:]
    assert (tmp_path / "photos" / "cat.jpg").read_bytes() == b"\xff\xd8"  # nothing touched


# ---------------------------------------------------------------------------------- keyboard tool
def test_keyboard_control_in_a_terminal(tmp_path, ros_node):
    """lerobot-record-control in a pty (like an SSH session): -> saves early, <- re-records, Esc finalizes."""
    from lerobot_core.ament import find_executable

    status = MessageCollector(ros_node, RecorderStatus, "/recorder/status", qos=STATUS_QOS)
    with (
        Sources(),
        recorder(tmp_path, auto_record=True, num_episodes=5, episode_time_s=60.0, reset_time_s=60.0) as proc,
    ):
        wait_status(status, lambda s: s.state == RecorderStatus.STATE_RECORDING and s.frames > 15, proc=proc)
        exe = str(find_executable("lerobot_recorder", "lerobot-record-control"))
        pid, fd = pty.fork()
        if pid == 0:  # child: the tool on the pty's slave side
            os.execv(exe, [exe])
        output = b""

        def send(keys: bytes) -> None:
            os.write(fd, keys)

        def read_some(t=0.3) -> None:
            nonlocal output
            end = time.monotonic() + t
            while time.monotonic() < end:
                r, _, _ = select.select([fd], [], [], 0.05)
                if r:
                    try:
                        output += os.read(fd, 4096)
                    except OSError:
                        return

        try:
            t_end = time.monotonic() + 60
            while b"keys:" not in output and time.monotonic() < t_end:
                read_some(0.5)  # the tool starts, puts the terminal in cbreak mode, prints its help
            read_some(1.0)
            send(b"\x1b[C")  # right: end episode 0 early (saved), reset begins
            read_some(8.0)
            assert b"ok:" in output, output.decode(errors="replace")
            wait_status(
                status, lambda s: s.state == RecorderStatus.STATE_RESETTING and s.episodes_recorded == 1
            )
            send(b"\x1b[C")  # right during reset: next episode now
            wait_status(status, lambda s: s.state == RecorderStatus.STATE_RECORDING and s.frames > 10)
            send(b"\x1b[D")  # left: re-record
            wait_status(status, lambda s: s.state == RecorderStatus.STATE_RESETTING)
            send(b"\x1b[C")
            wait_status(status, lambda s: s.state == RecorderStatus.STATE_RECORDING and s.frames > 10)
            send(b"\x1b")  # Esc: save and finalize
            wait_status(status, lambda s: s.state == RecorderStatus.STATE_FINALIZED, timeout=30)
            read_some(1.0)
            _, code = os.waitpid(pid, 0)
            assert os.WEXITSTATUS(code) == 0, output.decode(errors="replace")
        finally:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
            os.close(fd)
        text = output.decode(errors="replace")
        assert "RECORDING" in text and "ok:" in text, text
    r = DatasetReader(tmp_path / "ds")
    assert r.num_episodes == 2  # episode 0 (ended early) and the re-recorded episode 1 saved by Esc
