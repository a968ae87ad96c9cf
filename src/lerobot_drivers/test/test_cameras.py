"""Camera sources, the capture thread and the camera node."""

import threading
import time

import numpy as np
import pytest

from lerobot_drivers.cameras import (
    CameraError,
    CaptureThread,
    FrameSource,
    SyntheticSource,
    VideoFileSource,
    frame_index_of,
    make_source,
    make_test_pattern,
    pinhole_k,
)


def test_pattern_is_deterministic_and_moves():
    a = make_test_pattern(7, 160, 120)
    assert a.shape == (120, 160, 3) and a.dtype == np.uint8
    assert np.array_equal(a, make_test_pattern(7, 160, 120))
    assert not np.array_equal(a, make_test_pattern(8, 160, 120))
    assert frame_index_of(a) == 7
    src = SyntheticSource(64, 48, 30)
    assert [frame_index_of(src.read()) for _ in range(3)] == [0, 1, 2]


def test_video_file_source_reads_and_loops(tmp_path):
    import cv2

    path = str(tmp_path / "clip.avi")
    writer = cv2.VideoWriter(path, cv2.VideoWriter_fourcc(*"MJPG"), 10.0, (64, 48))
    for i in range(3):
        writer.write(np.full((48, 64, 3), 80 * i, dtype=np.uint8))
    writer.release()
    src = VideoFileSource(path, loop=True)
    src.open()
    assert (src.width, src.height, src.fps) == (64, 48, 10.0)
    means = [int(src.read().mean()) for _ in range(4)]
    assert abs(means[0] - 0) <= 3 and abs(means[1] - 80) <= 3 and abs(means[2] - 160) <= 3
    assert abs(means[3] - 0) <= 3  # looped
    src.close()
    once = VideoFileSource(path, loop=False)
    once.open()
    assert [once.read() is None for _ in range(4)] == [False, False, False, True]


def test_bad_sources_raise_clear_errors(tmp_path):
    with pytest.raises(CameraError, match="cannot open video file"):
        VideoFileSource(str(tmp_path / "none.mp4")).open()
    with pytest.raises(CameraError, match="needs video_path"):
        make_source("video")
    with pytest.raises(CameraError, match="unknown camera source"):
        make_source("kinect")
    with pytest.raises(CameraError, match="cannot open camera"):
        make_source("opencv", device="/dev/video_does_not_exist").open()


class HangingSource(FrameSource):
    """Delivers two frames, then blocks inside read() like a wedged USB camera."""

    name = "hanging"
    fps = 50.0
    width, height = 8, 8

    def __init__(self):
        self.n = 0
        self.release = threading.Event()

    def read(self):
        self.n += 1
        if self.n > 2:
            self.release.wait(30)
            return None
        return np.zeros((8, 8, 3), np.uint8)


def test_capture_thread_survives_a_hanging_camera():
    frames = []
    src = HangingSource()
    cap = CaptureThread(src, frames.append)
    cap.start()
    time.sleep(0.3)
    assert len(frames) == 2
    assert cap.seconds_since_last_frame() > 0.15
    t0 = time.monotonic()
    assert cap.stop(timeout=0.2) is False  # stuck in read(): reported, not waited on forever
    assert time.monotonic() - t0 < 1.0
    src.release.set()
    assert frames[1].stamp >= frames[0].stamp and frames[1].index == 1


def test_pinhole_k():
    k = pinhole_k(640, 480, 90.0)
    assert k[0] == pytest.approx(320.0) and k[2] == 320.0 and k[5] == 240.0


@pytest.mark.ros
def test_camera_node_publishes_rgb8_info_and_compressed(ros_node):
    from sensor_msgs.msg import CameraInfo, CompressedImage, Image

    from lerobot_core.image_conversion import compressed_msg_to_rgb, image_msg_to_rgb
    from lerobot_core.ros.testing import MessageCollector, RosProcess

    imgs = MessageCollector(ros_node, Image, "/cameras/wrist/image_raw")
    infos = MessageCollector(ros_node, CameraInfo, "/cameras/wrist/camera_info")
    comps = MessageCollector(ros_node, CompressedImage, "/cameras/wrist/image_raw/compressed")
    params = {
        "camera_name": "wrist",
        "source": "synthetic",
        "width": 160,
        "height": 120,
        "fps": 30.0,
        "publish_compressed": True,
        "autostart": True,
    }
    with RosProcess("lerobot_drivers", "camera", parameters=params):
        got = imgs.wait(10, timeout=60)
        info = infos.wait(1, timeout=20)[0]
        comp = comps.wait(1, timeout=20)[0]
    assert got[0].encoding == "rgb8" and (got[0].width, got[0].height) == (160, 120)
    rgb = image_msg_to_rgb(got[-1])
    idx = frame_index_of(rgb)
    assert np.array_equal(rgb, make_test_pattern(idx, 160, 120))  # bit-exact frame, recoverable index
    assert [frame_index_of(image_msg_to_rgb(m)) for m in got[1:]] == sorted(
        frame_index_of(image_msg_to_rgb(m)) for m in got[1:]
    )
    stamps = [m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for m in got]
    assert all(b > a for a, b in zip(stamps, stamps[1:], strict=False))
    assert got[0].header.frame_id == "wrist_optical_frame"
    assert info.width == 160 and info.k[2] == 80.0
    assert (
        np.abs(compressed_msg_to_rgb(comp).astype(int) - make_test_pattern(0, 160, 120).astype(int)).mean()
        < 255
    )


@pytest.mark.ros
def test_camera_that_stops_is_reported(ros_node, tmp_path):
    import cv2
    from diagnostic_msgs.msg import DiagnosticArray

    from lerobot_core.ros.testing import MessageCollector, RosProcess, wait_until

    path = str(tmp_path / "short.avi")
    writer = cv2.VideoWriter(path, cv2.VideoWriter_fourcc(*"MJPG"), 10.0, (32, 24))
    for _ in range(5):
        writer.write(np.zeros((24, 32, 3), np.uint8))
    writer.release()
    diag = MessageCollector(ros_node, DiagnosticArray, "/diagnostics")
    params = {
        "camera_name": "side",
        "source": "video",
        "video_path": path,
        "loop": False,
        "fps": 10.0,
        "width": 0,
        "height": 0,
        "stall_timeout_s": 0.5,
        "autostart": True,
    }
    with RosProcess("lerobot_drivers", "camera", parameters=params) as proc:
        assert proc.wait_for_output("no frame for", 60), proc.output()

        def stalled():
            return any(
                "camera side" in s.name and "no frame" in s.message for a in diag.messages for s in a.status
            )

        assert wait_until(stalled, 20)
        assert proc.returncode is None  # still alive and responsive
