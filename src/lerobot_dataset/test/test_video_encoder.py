"""The encoder's RGB -> I420 fast path against libswscale's own rgb24 -> yuv420p conversion."""

from __future__ import annotations

import threading

import av
import numpy as np
import pytest

from lerobot_dataset.video import rgb_to_yuv420p


def _smooth_scene(h: int, w: int) -> np.ndarray:
    yy, xx = np.mgrid[0:h, 0:w]
    img = np.stack([xx * 255 // w, yy * 255 // h, (xx + yy) * 255 // (w + h)], axis=2)
    img[h // 4 + 1 : h // 2 + 1, w // 3 + 1 : w // 2 + 1] = (200, 30, 90)  # sharp edges off the 2x2 grid
    return img.astype(np.uint8)


def _swscale(img: np.ndarray) -> np.ndarray:
    return av.VideoFrame.from_ndarray(img, format="rgb24").reformat(format="yuv420p").to_ndarray()


@pytest.mark.parametrize("shape", [(480, 640), (240, 320), (96, 128)])
def test_planes_match_swscale(shape):
    img = _smooth_scene(*shape)
    ours, ref = rgb_to_yuv420p(img).astype(int), _swscale(img).astype(int)
    h = shape[0]
    assert ours.shape == ref.shape == (h * 3 // 2, shape[1])
    assert np.abs(ours[:h] - ref[:h]).max() <= 1  # luma: same matrix, rounding only
    chroma = np.abs(ours[h:] - ref[h:])
    assert chroma.mean() < 0.5 and chroma.max() <= 12  # chroma: filters differ only at sharp edges


@pytest.mark.parametrize(
    "shape", [(480, 640), (720, 1280), (1080, 1920), (484, 644), (486, 1000), (8, 6), (100, 40000)]
)
def test_banded_conversion_equals_whole_frame_calls(shape):
    """Converting in bands of rows (to keep OpenCV off its thread pool) gives the whole-frame bytes."""
    import cv2

    from lerobot_dataset.video import _BT601_UV

    h, w = shape
    img = np.random.default_rng(h * w).integers(0, 256, (h, w, 3), dtype=np.uint8)
    ref = cv2.cvtColor(img, cv2.COLOR_RGB2YUV_I420)
    uv = cv2.transform(cv2.resize(img, (w // 2, h // 2), interpolation=cv2.INTER_AREA), _BT601_UV)
    ref.reshape(-1)[h * w : h * w * 5 // 4] = uv[..., 0].reshape(-1)
    ref.reshape(-1)[h * w * 5 // 4 :] = uv[..., 1].reshape(-1)
    out = np.full_like(ref, 7)
    assert rgb_to_yuv420p(img, out=out) is out
    assert np.array_equal(out, ref)
    assert np.array_equal(rgb_to_yuv420p(img), ref)


def test_known_colours_limited_range():
    img = np.zeros((4, 4, 3), np.uint8)
    img[:2] = (255, 255, 255)
    img[2:, :2] = (255, 0, 0)
    img[2:, 2:] = (0, 0, 255)
    out = rgb_to_yuv420p(img).astype(int)
    y, u, v = out[:4], out[4:5].reshape(2, 2), out[5:6].reshape(2, 2)
    assert y[0, 0] in (234, 235) and 15 <= y[3, 3] <= 42  # white 235; blue ~41
    assert abs(y[2, 0] - 81) <= 1  # red
    assert abs(u[0, 0] - 128) <= 1 and abs(v[0, 0] - 128) <= 1  # white: neutral chroma
    assert abs(v[1, 0] - 240) <= 1 and abs(u[1, 1] - 240) <= 1  # red max Cr, blue max Cb


def test_round_trip_through_decoder_is_close():
    img = _smooth_scene(240, 320)
    back = av.VideoFrame.from_ndarray(rgb_to_yuv420p(img), format="yuv420p").reformat(format="rgb24")
    assert np.abs(back.to_ndarray().astype(int) - img).mean() < 3.0


def test_encoder_thread_runs_nicer_and_encodes(tmp_path):
    import os

    from lerobot_dataset.encoders import codec_options
    from lerobot_dataset.mp4 import count_frames
    from lerobot_dataset.video import CameraEncoder

    base = os.getpriority(os.PRIO_PROCESS, 0)
    enc = CameraEncoder(
        "observation.images.front",
        tmp_path / "front.mp4",
        fps=30,
        height=96,
        width=128,
        vcodec="libsvtav1",
        pix_fmt="yuv420p",
        options=codec_options("libsvtav1", 2, 30, None),
        queue_size=4,
        nice=5,
    )
    before = set(os.listdir("/proc/self/task"))
    img = _smooth_scene(96, 128)
    for _ in range(6):
        enc.put(img, block=True)
    assert enc.native_id is not None and enc.native_id != threading.get_native_id()
    assert os.getpriority(os.PRIO_PROCESS, enc.native_id) == min(base + 5, 19)
    assert os.getpriority(os.PRIO_PROCESS, 0) == base  # the caller's thread is untouched
    # SVT-AV1's workers (started by the encoder thread) inherit the nice value and, even where this
    # process may use real-time scheduling (root here), do not get SCHED_FIFO 99
    workers = [int(t) for t in set(os.listdir("/proc/self/task")) - before]
    assert len(workers) > 2
    for tid in workers:
        try:
            assert os.sched_getscheduler(tid) == os.SCHED_OTHER, f"codec thread {tid} is real-time"
            assert os.getpriority(os.PRIO_PROCESS, tid) == min(base + 5, 19)
        except ProcessLookupError:
            pass  # a short-lived thread already gone
    enc.finish()
    assert count_frames(tmp_path / "front.mp4") == 6


def test_forbid_realtime_priority_is_per_thread():
    import os

    from lerobot_dataset.encoders import forbid_realtime_priority

    result = {}

    def restricted():
        result["dropped"] = forbid_realtime_priority()
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
            result["fifo"] = True
        except PermissionError:
            result["fifo"] = False

    t = threading.Thread(target=restricted)
    t.start()
    t.join()
    assert result["dropped"] is True
    assert result["fifo"] is False  # the capability is gone for this thread, root or not


@pytest.mark.parametrize("shape", [(480, 640), (482, 646), (96, 128), (30, 40), "view"])
def test_image_stats_histogram_is_exactly_the_stride_grid(shape):
    from lerobot_dataset.stats import ImageStatsAccumulator

    view = shape == "view"  # frames that are a window of a wider image (not C-contiguous)
    shape = (480, 640) if view else shape
    rng = np.random.default_rng(sum(shape) + view)
    acc = ImageStatsAccumulator(*shape)
    frames = [
        rng.integers(0, 256, (shape[0], shape[1] + 8 * view, 3), dtype=np.uint8)[:, 4 * view :][:, : shape[1]]
        for _ in range(3)
    ]
    for f in frames:
        acc.update(f)
    s = acc.stride
    want = np.zeros((3, 256), np.int64)
    for f in frames:
        for c in range(3):
            want[c] += np.bincount(f[::s, ::s, c].ravel(), minlength=256)
    assert np.array_equal(acc.hist, want) and acc.frames == 3


def test_thread_options_limit_svtav1_through_lp():
    from lerobot_dataset.encoders import thread_options

    opts = {"g": "2", "crf": "30", "preset": "10"}
    assert thread_options("libsvtav1", None, opts) == opts
    assert thread_options("libsvtav1", 1, opts) == {**opts, "svtav1-params": "lp=1"}
    assert thread_options("libsvtav1", 2, {**opts, "svtav1-params": "tune=0:lp=4"})["svtav1-params"] == (
        "tune=0:lp=2"
    )
    assert thread_options("libx264", 1, opts) == opts  # thread_count is enough there


def test_one_encoder_thread_uses_about_one_core_and_the_same_bitstream(tmp_path):
    """encoder_threads=1 on libsvtav1: one core (thread_count alone let it use every core), same bytes."""
    import os
    import time

    from lerobot_dataset.encoders import codec_options
    from lerobot_dataset.video import CameraEncoder

    rng = np.random.default_rng(0)
    base = rng.integers(0, 256, (240, 320, 3), dtype=np.uint8)  # noise, 320x240: enough to spread

    def encode(path, threads):
        enc = CameraEncoder(
            "front",
            path,
            30,
            240,
            320,
            "libsvtav1",
            "yuv420p",
            codec_options("libsvtav1", 2, 30, None),
            64,
            threads,
        )
        c0, t0 = os.times(), time.monotonic()
        for i in range(30):
            enc.put(np.roll(base, 4 * i, axis=1), block=True)
        enc.finish()
        c1 = os.times()
        return (c1.user + c1.system - c0.user - c0.system) / (time.monotonic() - t0)

    cores = encode(tmp_path / "one.mp4", 1)
    encode(tmp_path / "all.mp4", None)
    assert cores < 1.3, f"one encoder thread used {cores:.2f} cores"
    assert (tmp_path / "one.mp4").read_bytes() == (tmp_path / "all.mp4").read_bytes()


@pytest.mark.parametrize("crf", [30, 99])
def test_trying_the_encoder_settings_names_the_refused_one_and_starts_no_realtime_thread(crf):
    """check_encoder_settings opens SVT-AV1 (which starts its workers at once) on a thread without
    CAP_SYS_NICE, as the encoder thread does: no SCHED_FIFO thread is left in the process."""
    import os

    from lerobot_dataset.encoders import EncoderSettingError, check_encoder_settings, codec_options

    def realtime_threads() -> set[int]:
        out = set()
        for tid in os.listdir("/proc/self/task"):
            try:
                if os.sched_getscheduler(int(tid)) != os.SCHED_OTHER:
                    out.add(int(tid))
            except ProcessLookupError:
                pass
        return out

    # only the probe's own threads count: an earlier test in this process (an in-process sim, an
    # encoder started from the main thread) may have left real-time threads of its own
    before = realtime_threads()
    options = codec_options("libsvtav1", 2, crf, None)
    if crf == 30:
        check_encoder_settings("libsvtav1", "yuv420p", options, 30, 64, 48)
    else:
        with pytest.raises(EncoderSettingError, match=r"libsvtav1 refuses crf 99 .*it takes 0-63") as e:
            check_encoder_settings("libsvtav1", "yuv420p", options, 30, 64, 48)
        assert e.value.setting == "crf" and e.value.value == "99"
    assert not realtime_threads() - before, "the probe left real-time threads"
