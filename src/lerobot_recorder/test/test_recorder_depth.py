"""The recorder node records depth cameras live over DDS as LeRobot 0.6's depth video.

test/live_sources.py (its own process) publishes an rgb8 camera, a 16UC1 depth camera (RealSense's
aligned-depth encoding, millimetres) and a 32FC1 one (metres) with known content; the recorder
(its own process, the real node) records one episode and exits. Every depth frame must be one of
the published images within the quantisation error, invalid pixels as depth_min.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("rclpy")

from lerobot_core.ros.testing import RosProcess, wait_until
from lerobot_dataset import DatasetReader
from lerobot_dataset.depth import DepthQuantizer

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from live_sources import depth_image  # noqa: E402
from test_recorder_node import Sources  # noqa: E402

pytestmark = pytest.mark.ros

CONTRACT = HERE / "contracts" / "live_depth.yaml"
WIDTH, HEIGHT = 160, 120


def _recorder(tmp_path: Path, **params) -> RosProcess:
    base = {
        "autostart": True,
        "contract": str(CONTRACT),
        "dataset_root": str(tmp_path / "ds"),
        "vcodec": "libx264",
        "episode_time_s": 2.0,
        "reset_time_s": 0.0,
        "auto_record": True,
        "num_episodes": 1,
        "exit_when_done": True,
    }
    base.update(params)
    return RosProcess("lerobot_recorder", "recorder", parameters=base)


def _matches_a_published_image(frame: np.ndarray, encoding: str, q: DepthQuantizer) -> int:
    """The sequence number of the published image `frame` decodes to (within the quantisation error)."""
    for seq in range(400):
        ref = depth_image(HEIGHT, WIDTH, seq, encoding).astype(np.float64)
        valid = np.isfinite(ref) & (ref > 0)
        if np.all(np.abs(frame[valid] - ref[valid]) <= q.max_error(ref[valid]) * (1 + 1e-4)):
            invalid = frame[~valid]
            assert invalid.size == 16 and np.allclose(invalid, q.depth_min * (1000 if q.unit == "mm" else 1))
            return seq
    raise AssertionError(f"a recorded {encoding} frame matches no published image")


def test_recorder_records_16uc1_and_32fc1_depth_topics_live(tmp_path):
    with Sources("--width", str(WIDTH), "--height", str(HEIGHT), "--depth-cameras", "wrist:16UC1,top:32FC1"):
        proc = _recorder(tmp_path)
        with proc:
            assert wait_until(lambda: proc.returncode is not None, 120), proc.output()[-3000:]
    out = proc.output()
    assert proc.returncode == 0, out[-3000:]
    assert "episode 0 saved" in out
    info = json.loads((tmp_path / "ds/meta/info.json").read_text())["features"]
    for key, unit in (("observation.images.wrist_depth", "mm"), ("observation.images.top_depth", "m")):
        assert info[key]["shape"] == [HEIGHT, WIDTH, 1]
        vinfo = info[key]["info"]
        assert vinfo["is_depth_map"] is True and vinfo["depth_unit"] == unit
        assert (vinfo["video.codec"], vinfo["video.pix_fmt"]) == ("hevc", "gray12le")
    assert info["observation.images.front"]["info"]["is_depth_map"] is False
    r = DatasetReader(tmp_path / "ds")
    n = int(r.episode_meta(0)["length"])
    assert n >= 30  # 2 s at 30 fps, minus the ticks before every stream has a sample
    for key, enc in (("observation.images.wrist_depth", "16UC1"), ("observation.images.top_depth", "32FC1")):
        frames = r.video_frames(key, 0)[..., 0]
        assert len(frames) == n
        q = DepthQuantizer("mm" if enc == "16UC1" else "m")
        seqs = [_matches_a_published_image(f, enc, q) for f in frames]
        # frames follow the published sequence (nearest image per tick; a tick may repeat one)
        assert seqs == sorted(seqs) and seqs[-1] - seqs[0] >= n // 2


def test_recorder_for_lerobot_044_refuses_depth_cameras(tmp_path):
    with Sources("--width", str(WIDTH), "--height", str(HEIGHT), "--depth-cameras", "wrist:16UC1,top:32FC1"):
        proc = _recorder(tmp_path, lerobot_version="0.4.4")
        with proc:
            assert wait_until(lambda: proc.returncode is not None, 90), proc.output()[-3000:]
    out = proc.output()
    assert proc.returncode == 1, out[-3000:]
    assert "LeRobot 0.4.4 has no depth video" in out and "observation.images.top_depth" in out, out[-3000:]
    assert "Traceback" not in out
    assert not (tmp_path / "ds" / "meta" / "info.json").exists()


def test_resuming_with_a_depth_topic_in_another_unit_fails_clearly(tmp_path):
    args = ("--width", str(WIDTH), "--height", str(HEIGHT), "--depth-cameras")
    with Sources(*args, "wrist:16UC1,top:32FC1"):
        proc = _recorder(tmp_path, episode_time_s=1.0)
        with proc:
            assert wait_until(lambda: proc.returncode is not None, 120), proc.output()[-3000:]
    assert proc.returncode == 0, proc.output()[-3000:]
    with Sources(*args, "wrist:16UC1,top:16UC1"):  # the top camera now publishes millimetres
        proc = _recorder(tmp_path, episode_time_s=1.0, resume=True)
        with proc:
            assert wait_until(lambda: proc.returncode is not None, 120), proc.output()[-3000:]
    out = proc.output()
    assert proc.returncode == 1, out[-3000:]
    assert "depth camera observation.images.top_depth: the topic's depth is in mm" in out, out[-3000:]
    assert DatasetReader(tmp_path / "ds").num_episodes == 1
