"""Depth cameras as LeRobot 0.6 stores them: the quantiser, the writer's depth video, the contract's
depth cameras and the bag import of 16UC1 / 32FC1 topics (the live recording over DDS is in
test_recorder_depth.py, LeRobot 0.6.1 loading what we write in test_lerobot_compat.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import av
import numpy as np
import pytest
from rosbags.rosbag2 import StoragePlugin, Writer

from lerobot_core.contract import Contract, ContractError
from lerobot_dataset import DatasetError, DatasetReader, DatasetWriter
from lerobot_dataset.depth import QMAX, DepthQuantizer
from lerobot_recorder import bag_io
from lerobot_recorder.bag_import_cli import main as bag_import_main

H, W = 48, 64  # x265 fails now and then (AVERROR_PATCHWELCOME on mux) below a 64-pixel CTU: 32x24 did 3 in 40
NS = 1_000_000_000
JOINTS = ["a", "b"]


# ------------------------------------------------------------------------------------ quantiser
@pytest.mark.parametrize("use_log", [True, False])
@pytest.mark.parametrize("unit", ["mm", "m"])
def test_round_trip_is_within_half_a_code_over_the_whole_range(unit, use_log):
    q = DepthQuantizer(unit, use_log=use_log)
    if unit == "mm":
        depth = np.arange(10, 10_001, dtype=np.uint16).reshape(1, -1)
    else:
        depth = np.linspace(0.01, 10.0, 200_001, dtype=np.float32).reshape(1, -1)
    back = q.dequantize(q.quantize(depth))
    err = np.abs(back - depth.astype(np.float64))
    bound = q.max_error(depth)
    assert np.all(err <= bound), float((err - bound).max())
    # the bound is tight (not a bound that passes anything): the worst pixel uses > 95 % of it
    assert (err / bound).max() > 0.95
    if use_log:  # log codes are finer near the camera: 0.58 mm at 1 cm, 2.2 mm at 10 m
        mm = bound[0] * (1000.0 if unit == "m" else 1.0)
        assert mm[0] == pytest.approx(0.583, abs=0.002) and mm[-1] == pytest.approx(2.243, abs=0.002)


def test_codes_follow_lerobot_06_formula():
    """Codes from the formula LeRobot 0.6.1 documents, computed independently in float64: equal except
    where the float64 value sits within 0.01 of a rounding boundary (float32 arithmetic decides there)."""
    q = DepthQuantizer("mm")
    depth = np.arange(0, 12_000, dtype=np.uint16).reshape(1, -1)
    lo, hi = math.log(10 + 3500), math.log(10_000 + 3500)
    exact = (np.log(depth.astype(np.float64) + 3500) - lo) / (hi - lo) * QMAX
    expected = np.clip(np.rint(exact), 0, QMAX)
    codes = q.quantize(depth)
    near_tie = np.abs(exact - np.floor(exact) - 0.5) < 0.01
    assert codes.dtype == np.uint16
    np.testing.assert_array_equal(codes[~near_tie], expected[~near_tie])
    assert np.all(np.abs(codes[near_tie].astype(int) - expected[near_tie]) <= 1)


@pytest.mark.parametrize("unit", ["mm", "m"])
def test_range_ends_and_out_of_range(unit):
    q = DepthQuantizer(unit)
    k = 1000.0 if unit == "mm" else 1.0
    dtype = np.uint16 if unit == "mm" else np.float32
    depth = np.array([[0.01 * k, 10.0 * k, 0.005 * k, 25.0 * k]]).astype(dtype)
    codes = q.quantize(depth)
    np.testing.assert_array_equal(codes, [[0, QMAX, 0, QMAX]])
    back = q.dequantize(codes)
    np.testing.assert_allclose(back, [[0.01 * k, 10.0 * k, 0.01 * k, 10.0 * k]], rtol=1e-12)


def test_invalid_pixels_are_code_zero_as_in_lerobot_06():
    """0 and NaN (REP 118's "no reading"), and -Inf, become code 0 (LeRobot 0.6 decodes it as
    depth_min); +Inf ("too far") becomes the top code."""
    q = DepthQuantizer("m")
    codes = q.quantize(np.array([[0.0, np.nan, -np.inf, np.inf, -1.0, 1.0]], np.float32))
    np.testing.assert_array_equal(codes[0, :5], [0, 0, 0, QMAX, 0])
    assert 0 < codes[0, 5] < QMAX
    assert q.dequantize(np.array([0]))[0] == pytest.approx(0.01)
    mm = DepthQuantizer("mm")
    assert mm.quantize(np.array([[0, 1]], np.uint16)).tolist() == [[0, 0]]
    assert mm.dequantize(np.array([0]))[0] == pytest.approx(10.0)


def test_quantiser_parameters_are_checked():
    with pytest.raises(DatasetError, match="depth_unit"):
        DepthQuantizer("cm")
    with pytest.raises(DatasetError, match="depth_min < depth_max"):
        DepthQuantizer("mm", depth_min=2.0, depth_max=1.0)
    with pytest.raises(DatasetError, match="shift"):
        DepthQuantizer("mm", depth_min=0.0, shift=-1.0)


# ------------------------------------------------------------------------------------ the writer
def _depth_frames(n: int, unit: str, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        mm = rng.uniform(10, 10_000, (H, W))
        mm[:2, :2] = 0  # invalid pixels
        out.append(mm.astype(np.uint16) if unit == "mm" else (mm / 1000).astype(np.float32))
    return out


def _features(unit: str) -> dict:
    # the depth camera first: a resume must still take the RGB camera's codec for RGB
    return {
        "observation.state": {"dtype": "float32", "shape": (2,), "names": JOINTS},
        "observation.images.depth": {
            "dtype": "video",
            "shape": (H, W, 1),
            "names": None,
            "info": {"is_depth_map": True, "depth_unit": unit},
        },
        "observation.images.front": {"dtype": "video", "shape": (H, W, 3), "names": None},
    }


def _record(writer: DatasetWriter, depths: list[np.ndarray]) -> None:
    for d in depths:
        writer.add_frame(
            {
                "observation.state": np.zeros(2, np.float32),
                "observation.images.front": np.full((H, W, 3), 90, np.uint8),
                "observation.images.depth": d,
            },
            task="reach",
        )
    writer.save_episode()


@pytest.mark.parametrize("unit", ["mm", "m"])
def test_writer_stores_lerobot_06_depth_video(tmp_path, unit):
    root = tmp_path / "ds"
    q = DepthQuantizer(unit)
    eps = [_depth_frames(7, unit, seed=1), _depth_frames(5, unit, seed=2), _depth_frames(3, unit, seed=3)]
    with DatasetWriter.create(root, 15, _features(unit), vcodec="libx264") as w:
        _record(w, eps[0])
        _record(w, eps[1])  # concatenated onto the same mp4
    with DatasetWriter.resume(root) as w:  # a new mp4, with the dataset's (RGB and depth) settings
        _record(w, eps[2])
    info = json.loads((root / "meta/info.json").read_text())
    feat = info["features"]["observation.images.depth"]
    assert feat["shape"] == [H, W, 1]
    vinfo = feat["info"]
    assert vinfo["is_depth_map"] is True and vinfo["video.is_depth_map"] is True
    assert vinfo["depth_unit"] == unit
    assert (vinfo["video.codec"], vinfo["video.pix_fmt"], vinfo["video.channels"]) == ("hevc", "gray12le", 1)
    assert vinfo["video.extra_options"] == {"x265-params": "lossless=1"}
    assert (vinfo["video.g"], vinfo["video.crf"]) == (2, 30)
    assert (vinfo["video.depth_min"], vinfo["video.depth_max"], vinfo["video.shift"]) == (0.01, 10.0, 3.5)
    assert vinfo["video.use_log"] is True
    # RGB cameras keep their codec (a resume must not take the depth video's) and get 0.6's flag
    rgb = info["features"]["observation.images.front"]["info"]
    assert rgb["is_depth_map"] is False and rgb["video.codec"] == "h264"
    # lossless: the file holds exactly the quantiser's codes
    codes = []
    for mp4 in sorted((root / "videos/observation.images.depth").glob("chunk-*/file-*.mp4")):
        with av.open(str(mp4)) as c:
            assert c.streams.video[0].codec_context.name == "hevc"
            codes += [f.to_ndarray(format="gray12le") for f in c.decode(video=0)]
    with av.open(str(root / "videos/observation.images.front/chunk-000/file-001.mp4")) as c:
        assert c.streams.video[0].codec_context.name == "h264"
    expected = [q.quantize(d) for d in eps[0] + eps[1] + eps[2]]
    assert len(codes) == 15
    for got, want in zip(codes, expected, strict=True):
        np.testing.assert_array_equal(got, want)
    from lerobot_dataset.check import check_dataset

    assert check_dataset(root) == []  # lerobot-dataset-info --check: every depth video decodes in full
    # our reader decodes depth in the recorded unit, within the quantisation error
    r = DatasetReader(root)
    frames = r.video_frames("observation.images.depth", 1)
    assert frames.shape == (5, H, W, 1) and frames.dtype == np.float32
    for got, want in zip(frames[..., 0], eps[1], strict=True):
        valid = want > 0
        err = np.abs(got[valid] - want[valid].astype(np.float64))
        assert np.all(err <= q.max_error(want[valid]) + 1e-4 * q.max_error(want[valid]))
    # stats: the depth in its unit, shape (1, 1, 1), not divided by 255
    stats = json.loads((root / "meta/stats.json").read_text())["observation.images.depth"]
    k = 1000.0 if unit == "mm" else 1.0
    assert np.asarray(stats["mean"]).shape == (1, 1, 1)
    assert stats["min"] == [[[pytest.approx(0.01 * k)]]]  # the invalid pixels: depth_min, as 0.6 reads them
    assert 4.0 * k < stats["mean"][0][0][0] < 6.0 * k
    assert stats["max"][0][0][0] == pytest.approx(10.0 * k, rel=0.01)


def test_writer_checks_depth_frames(tmp_path):
    with DatasetWriter.create(tmp_path / "ds", 15, _features("mm"), vcodec="libx264") as w:
        frame = {
            "observation.state": np.zeros(2, np.float32),
            "observation.images.front": np.zeros((H, W, 3), np.uint8),
            "observation.images.depth": np.zeros((H, W), np.float32),
        }
        with pytest.raises(DatasetError, match=r"depth camera 'observation.images.depth'.*uint16.*in mm"):
            w.add_frame(frame, task="t")


def test_depth_feature_needs_one_channel_and_a_unit(tmp_path):
    feats = _features("mm")
    feats["observation.images.depth"]["shape"] = (H, W, 3)
    with pytest.raises(
        DatasetError,
        match=r"depth maps \(info.is_depth_map true\) \(height, width, 1\); got \(48, 64, 3\) for a depth map",
    ):
        DatasetWriter.create(tmp_path / "a", 15, feats)
    feats = _features("mm")
    feats["observation.images.depth"]["shape"] = (15, W, 1)
    with pytest.raises(
        DatasetError, match=f"'observation.images.depth': images are {W}x15; .* at least 16x16"
    ):
        DatasetWriter.create(tmp_path / "c", 15, feats)
    feats = _features("mm")
    del feats["observation.images.depth"]["info"]["depth_unit"]
    with pytest.raises(DatasetError, match="observation.images.depth.*depth_unit"):
        DatasetWriter.create(tmp_path / "b", 15, feats)


def test_lerobot_044_target_refuses_depth(tmp_path):
    with pytest.raises(
        DatasetError, match=r"depth camera\(s\) \['observation.images.depth'\]: LeRobot 0.4.4"
    ):
        DatasetWriter.create(tmp_path / "ds", 15, _features("mm"), lerobot_version="0.4.4")
    assert not (tmp_path / "ds").exists()
    with DatasetWriter.create(tmp_path / "ds", 15, _features("mm"), vcodec="libx264") as w:
        _record(w, _depth_frames(2, "mm"))
    with pytest.raises(DatasetError, match="LeRobot 0.4.4 has no depth video"):
        DatasetWriter.resume(tmp_path / "ds", lerobot_version="0.4.4")
    with pytest.raises(DatasetError, match="lerobot_version '0.5'"):
        DatasetWriter.create(tmp_path / "other", 15, _features("mm"), lerobot_version="0.5")
    # without a depth camera, 0.4.4 is a fine target
    rgb_only = {k: v for k, v in _features("mm").items() if k != "observation.images.depth"}
    DatasetWriter.create(tmp_path / "rgb", 15, rgb_only, lerobot_version="0.4.4").finalize()


# ------------------------------------------------------------------------------------ contract
def _contract(**cam) -> Contract:
    return Contract.from_dict(
        {
            "fps": 15,
            "task": "t",
            "features": {
                "observation.state": {"topic": "/joint_states", "joints": JOINTS},
                "observation.images.depth": {"topic": "/cam/depth/image_raw", **cam},
            },
        }
    )


def test_contract_detects_depth_from_the_first_image():
    c = _contract()
    msg = bag_io.image(0, np.full((H, W), 500, np.uint16), "16UC1")
    resolved = c.resolve(
        {"/cam/depth/image_raw": msg, "/joint_states": bag_io.joint_state(0, JOINTS, [0, 0])}
    )
    feat = resolved.features()["observation.images.depth"]
    assert feat["shape"] == (H, W, 1) and feat["info"] == {"is_depth_map": True, "depth_unit": "mm"}
    frame, _ = resolved.make_frame({"/cam/depth/image_raw": msg, "/joint_states": np.zeros(2)})
    assert frame["observation.images.depth"].dtype == np.uint16
    # the camera keeps its first image's encoding: a 32FC1 image later is an error naming the topic
    later = bag_io.image(0, np.ones((H, W), np.float32), "32FC1")
    with pytest.raises(ValueError, match=r"topic /cam/depth/image_raw: encoding '32FC1' does not match"):
        resolved.make_frame({"/cam/depth/image_raw": later, "/joint_states": np.zeros(2)})


@pytest.mark.parametrize(
    ("cam", "encoding", "message"),
    [
        (
            {"depth": True},
            "bgr8",
            r"topic /cam/depth/image_raw: encoding 'bgr8' cannot be recorded as depth \(supported depth "
            r"encodings: 16UC1, mono16, 32FC1\)",
        ),
        ({}, "16SC1", r"topic /cam/depth/image_raw: encoding '16SC1' cannot be recorded \(supported: RGB"),
        ({"depth": False}, "16UC1", r"topic /cam/depth/image_raw: encoding '16UC1' is a depth encoding"),
        # mono16 (16-bit grey, e.g. infrared) is depth only when the contract says so
        ({}, "mono16", r"encoding 'mono16' cannot be recorded .*; set 'depth: true' to record it as depth"),
    ],
)
def test_unsupported_depth_encoding_names_topic_and_encoding(cam, encoding, message):
    arr = np.zeros((H, W, 3), np.uint8) if encoding == "bgr8" else np.zeros((H, W), np.int16)
    if encoding in ("16UC1", "mono16"):
        arr = np.zeros((H, W), np.uint16)
    msg = bag_io.image(0, arr, encoding)
    with pytest.raises(ValueError, match=message):
        _contract(**cam).resolve({"/cam/depth/image_raw": msg})


def test_contract_file_depth_keys_are_checked():
    with pytest.raises(ContractError, match=r"features.observation.images.depth.encoding.*'rgb8'"):
        _contract(depth=True, encoding="rgb8")
    with pytest.raises(ContractError, match=r"features.observation.images.depth.depth.*CompressedImage"):
        _contract(depth=True, type="sensor_msgs/msg/CompressedImage")
    with pytest.raises(
        ContractError, match=r"features.observation.images.depth.depth: expected true or false"
    ):
        _contract(depth="yes")
    mono16 = bag_io.image(0, np.full((H, W), 700, np.uint16), "mono16")
    feat = _contract(depth=True).resolve({"/cam/depth/image_raw": mono16}).features()
    assert feat["observation.images.depth"]["info"] == {"is_depth_map": True, "depth_unit": "mm"}
    # an encoding that is a depth encoding makes a depth camera; with a size no message is needed
    c = _contract(encoding="32FC1", height=H, width=W)
    feat = c.resolve({"/joint_states": bag_io.joint_state(0, JOINTS, [0, 0])}).features()
    assert feat["observation.images.depth"]["info"]["depth_unit"] == "m"


# ------------------------------------------------------------------------------------ bag import
def _depth_bag(path: Path, encoding: str, frames: int = 20) -> list[np.ndarray]:
    """A bag of joint states (100 Hz) and a depth camera (15 Hz, `encoding`); returns the images."""
    t0 = 1_700_000_000 * NS
    events, images = [], []
    for i in range(frames * 100 // 15 + 10):
        t = t0 + i * 10_000_000
        events.append((t + 1_000_000, "/joint_states", bag_io.joint_state(t, JOINTS, [i, -i])))
    for i in range(frames):
        t = t0 + i * NS // 15
        yy, xx = np.mgrid[0:H, 0:W]
        mm = 250.0 + 40.0 * xx + 11.0 * yy + 3.0 * i
        if encoding == "32FC1":
            arr = (mm / 1000).astype(np.float32)
            arr[0, 0] = np.nan
        else:
            arr = mm.astype(np.uint16)
            arr[0, 0] = 0
        images.append(arr)
        events.append((t + 5_000_000, "/cam/depth/image_raw", bag_io.image(t, arr, encoding)))
    conns = {}
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        for log_time, topic, msg in sorted(events, key=lambda e: e[0]):
            if topic not in conns:
                conns[topic] = writer.add_connection(topic, msg.__msgtype__, typestore=bag_io.typestore())
            writer.write(conns[topic], log_time, bag_io.serialize(msg))
    return images


@pytest.mark.parametrize("encoding", ["16UC1", "32FC1"])
def test_bag_import_records_depth_topic_as_lerobot_06_depth_video(tmp_path, encoding, capsys):
    images = _depth_bag(tmp_path / "bag", encoding)
    out = tmp_path / "ds"
    args = [str(tmp_path / "bag"), "-o", str(out), "--fps", "15", "--state", "/joint_states"]
    args += ["--image", "depth=/cam/depth/image_raw", "--task", "t", "--no-progress"]
    assert bag_import_main(args) == 0, capsys.readouterr().err
    unit = "m" if encoding == "32FC1" else "mm"
    info = json.loads((out / "meta/info.json").read_text())["features"]["observation.images.depth"]
    assert info["shape"] == [H, W, 1]
    assert info["info"]["depth_unit"] == unit and info["info"]["video.pix_fmt"] == "gray12le"
    r = DatasetReader(out)
    frames = r.video_frames("observation.images.depth", 0)[..., 0]
    assert 15 <= len(frames) <= 20
    q = DepthQuantizer(unit)
    # each frame is one of the bag's images (nearest in time), within the quantisation error
    for got in frames:
        errs = []
        for img in images:
            ref = img.astype(np.float64)
            valid = np.isfinite(ref) & (ref > 0)
            errs.append(np.max(np.abs(got[valid] - ref[valid]) / q.max_error(ref[valid])))
        assert min(errs) <= 1.0 + 1e-4
        assert got[0, 0] == pytest.approx(0.01 * (1000 if unit == "mm" else 1))  # invalid -> depth_min
    # the 0.4.4 target: a clear error from the CLI, and nothing written
    err_out = tmp_path / "ds044"
    rc = bag_import_main([args[0], "-o", str(err_out), *args[3:], "--lerobot-version", "0.4.4"])
    err = capsys.readouterr().err
    assert rc == 2 and "LeRobot 0.4.4 has no depth video" in err and "Traceback" not in err
    assert not err_out.exists()


def test_bag_import_unsupported_encoding_names_topic(tmp_path, capsys):
    t0 = 1_700_000_000 * NS
    with Writer(tmp_path / "bag", version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        js = writer.add_connection(
            "/joint_states", "sensor_msgs/msg/JointState", typestore=bag_io.typestore()
        )
        cam = writer.add_connection(
            "/cam/depth/image_raw", "sensor_msgs/msg/Image", typestore=bag_io.typestore()
        )
        for i in range(30):
            t = t0 + i * NS // 15
            writer.write(js, t, bag_io.serialize(bag_io.joint_state(t, JOINTS, [0, 0])))
            img = bag_io.image(t, np.zeros((H, W), np.int16), "16SC1")
            writer.write(cam, t + 1, bag_io.serialize(img))
    rc = bag_import_main(
        [str(tmp_path / "bag"), "-o", str(tmp_path / "ds"), "--fps", "15", "--state", "/joint_states"]
        + ["--image", "depth=/cam/depth/image_raw", "--task", "t", "--no-progress"]
    )
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "/cam/depth/image_raw" in err and "'16SC1'" in err and "Traceback" not in err


def test_short_depth_episodes_get_sane_decode_timestamps(tmp_path):
    """One- and two-frame episodes: FFmpeg's libx265 wrapper leaves their DTS uninitialised (19 of
    20 one-frame sequences measured); the writer repairs it, so every episode saves and each file's
    DTS is at or before its PTS and increasing."""
    root = tmp_path / "ds"
    with DatasetWriter.create(
        root, 15, _features("mm"), vcodec="libx264", video_files_size_in_mb=1e-9
    ) as w:  # one mp4 per episode: each file is one encoder's output
        for ep in range(8):
            _record(w, _depth_frames(1 + ep % 2, "mm", seed=ep))
    files = sorted((root / "videos/observation.images.depth").glob("chunk-*/file-*.mp4"))
    assert len(files) == 8
    for mp4 in files:
        with av.open(str(mp4)) as c:
            stream = c.streams.video[0]
            per_frame = round(1 / (15 * stream.time_base))
            packets = [(p.pts, p.dts) for p in c.demux(stream) if p.size]
        dts = [d for _, d in packets]
        # a DTS up to the encoder's reorder delay (a few frames) before its PTS is valid: libx265 gives
        # 0 or 2 frames here depending on its lookahead; the uninitialised ones were far outside that
        assert all(d is not None and p - 4 * per_frame <= d <= p for p, d in packets), packets
        assert dts == sorted(set(dts)), packets


@pytest.mark.parametrize("unit", ["mm", "m"])
def test_keep_frames_copies_depth_codes_unchanged(tmp_path, unit):
    """Cutting frames out (keep_frames) re-encodes a depth camera to the very codes it had."""
    from lerobot_dataset.edit import keep_frames

    depths = _depth_frames(6, unit, seed=5)
    with DatasetWriter.create(tmp_path / "src", 15, _features(unit), vcodec="libx264") as w:
        _record(w, depths)
    keep_frames(tmp_path / "src", tmp_path / "dst", lambda cols: np.arange(len(cols["frame_index"])) >= 2)
    info = json.loads((tmp_path / "dst/meta/info.json").read_text())["features"]["observation.images.depth"]
    assert info["info"]["is_depth_map"] is True and info["info"]["depth_unit"] == unit
    mp4 = tmp_path / "dst/videos/observation.images.depth/chunk-000/file-000.mp4"
    with av.open(str(mp4)) as c:
        codes = [f.to_ndarray(format="gray12le") for f in c.decode(video=0)]
    q = DepthQuantizer(unit)
    assert len(codes) == 4
    for got, d in zip(codes, depths[2:], strict=True):
        np.testing.assert_array_equal(got, q.quantize(d))


@pytest.mark.parametrize("unit", ["mm", "m"])
def test_bag_export_writes_depth_back_as_depth_images(tmp_path, unit):
    from rosbags.rosbag2 import Reader

    from lerobot_recorder.bag_export import export_episode

    depths = _depth_frames(4, unit, seed=9)
    with DatasetWriter.create(tmp_path / "ds", 15, _features(unit), vcodec="libx264") as w:
        _record(w, depths)
    export_episode(tmp_path / "ds", 0, tmp_path / "bag", start_ns=0)
    images = []
    with Reader(tmp_path / "bag") as reader:
        for conn, _, raw in reader.messages():
            if conn.topic == "/cameras/depth/image_raw":
                images.append(bag_io.deserialize(raw, conn.msgtype))
    assert [m.encoding for m in images] == ["16UC1" if unit == "mm" else "32FC1"] * 4
    q = DepthQuantizer(unit)
    from lerobot_core.image_conversion import image_msg_to_depth

    for msg, d in zip(images, depths, strict=True):
        got = image_msg_to_depth(msg).astype(np.float64)
        valid = d > 0
        slack = 0.5 if unit == "mm" else 1e-6  # whole millimetres in 16UC1
        assert np.all(np.abs(got[valid] - d[valid]) <= q.max_error(d[valid]) + slack)


def test_report_shows_depth_through_a_colour_map(tmp_path):
    from PIL import Image

    from lerobot_recorder.dataset_report import write_report

    with DatasetWriter.create(tmp_path / "ds", 15, _features("mm"), vcodec="libx264") as w:
        _record(w, [np.full((H, W), 500 + 1000 * i, np.uint16) for i in range(6)])
    write_report(DatasetReader(tmp_path / "ds"), 0, tmp_path / "report")
    sheet = np.asarray(Image.open(tmp_path / "report" / "contact_sheet_depth.png").convert("RGB"))
    colours = {tuple(c) for c in sheet.reshape(-1, 3)[::7]}
    assert len(colours) > 6  # six depths, six colours (plus labels and background)


def test_parallel_bag_import_gives_the_serial_depth_video(tmp_path):
    from lerobot_recorder.bag_import import import_bags

    _depth_bag(tmp_path / "a", "16UC1", frames=12)
    _depth_bag(tmp_path / "b", "16UC1", frames=9)
    contract = Contract.from_flags(
        15, state="/joint_states", images={"depth": "/cam/depth/image_raw"}, task="t"
    )
    bags = [tmp_path / "a", tmp_path / "b"]
    import_bags(bags, contract, tmp_path / "serial", progress=False)
    import_bags(bags, contract, tmp_path / "parallel", progress=False, jobs=2)
    a, b = DatasetReader(tmp_path / "serial"), DatasetReader(tmp_path / "parallel")
    assert a.features["observation.images.depth"] == b.features["observation.images.depth"]
    for e in range(2):
        np.testing.assert_array_equal(
            a.video_frames("observation.images.depth", e), b.video_frames("observation.images.depth", e)
        )
    sa = json.loads((tmp_path / "serial/meta/stats.json").read_text())["observation.images.depth"]
    sb = json.loads((tmp_path / "parallel/meta/stats.json").read_text())["observation.images.depth"]
    assert sa == sb


def test_a_faster_depth_preset_gives_the_same_depth(tmp_path):
    """libx265 is lossless here: its ultrafast preset writes the same codes (and says so in info)."""
    depths = _depth_frames(5, "mm", seed=11)
    for name, preset in (("default", None), ("fast", "ultrafast")):
        with DatasetWriter.create(
            tmp_path / name, 15, _features("mm"), vcodec="libx264", depth_preset=preset
        ) as w:
            _record(w, depths)
    a, b = DatasetReader(tmp_path / "default"), DatasetReader(tmp_path / "fast")
    np.testing.assert_array_equal(
        a.video_frames("observation.images.depth", 0), b.video_frames("observation.images.depth", 0)
    )
    assert a.features["observation.images.depth"]["info"]["video.preset"] is None
    assert b.features["observation.images.depth"]["info"]["video.preset"] == "ultrafast"
    with pytest.raises(DatasetError, match="depth_preset 'turbo' is not a libx265 preset"):
        DatasetWriter.create(tmp_path / "bad", 15, _features("mm"), depth_preset="turbo")
    assert not (tmp_path / "bad").exists()


def test_resuming_a_depth_camera_with_another_unit_is_an_error(tmp_path, capsys):
    _depth_bag(tmp_path / "mm", "16UC1", frames=6)
    _depth_bag(tmp_path / "m", "32FC1", frames=6)
    base = ["--fps", "15", "--state", "/joint_states", "--image", "depth=/cam/depth/image_raw", "--task", "t"]
    out = str(tmp_path / "ds")
    assert bag_import_main([str(tmp_path / "mm"), "-o", out, *base, "--no-progress"]) == 0
    rc = bag_import_main([str(tmp_path / "m"), "-o", out, *base, "--no-progress", "--resume"])
    err = capsys.readouterr().err
    assert (
        rc == 2
        and "observation.images.depth: video(48, 64, 1) depth in mm vs video(48, 64, 1) depth in m" in err
    )
    assert DatasetReader(tmp_path / "ds").num_episodes == 1
