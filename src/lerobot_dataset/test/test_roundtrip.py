"""CodecRoundTrip: a served frame made to look like the dataset's decoded video, frame by frame."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from lerobot_dataset import DatasetError, DatasetReader, DatasetWriter
from lerobot_dataset.roundtrip import CodecRoundTrip, psnr

KEY = "observation.images.front"
H, W = 96, 128


def scene(i: int) -> np.ndarray:
    """A textured background and a bright block that moves 3 px per frame (like a cube in a camera)."""
    rng = np.random.default_rng(0)
    img = (rng.integers(40, 90, (H, W, 3)) + np.linspace(0, 60, W)[None, :, None]).astype(np.uint8)
    x = (10 + 3 * i) % (W - 20)
    img[30:50, x : x + 16] = (220, 60, 40)
    return img


def test_psnr():
    a = scene(0)
    assert psnr(a, a) == float("inf")
    b = a.copy()
    b[0, 0, 0] ^= 0xFF
    assert 40 < psnr(a, b) < 80
    with pytest.raises(ValueError, match="shapes differ"):
        psnr(a, a[:10])


def test_round_trip_matches_the_recorded_and_decoded_video(tmp_path):
    frames = [scene(i) for i in range(12)]
    w = DatasetWriter.create(
        tmp_path / "ds", fps=30, features={KEY: {"dtype": "video", "shape": (H, W, 3), "names": None}}
    )
    for f in frames:
        w.add_frame({KEY: f}, task="t")
    w.save_episode()
    w.finalize()
    decoded = DatasetReader(tmp_path / "ds").video_frames(KEY, 0)
    assert decoded.shape == (12, H, W, 3)

    rt = CodecRoundTrip(fps=30)
    assert rt.describe() == "libsvtav1 yuv420p g=2 crf=30 preset=10"
    served = [rt(f) for f in frames]
    lossy = [
        psnr(f, d) for f, d in zip(frames, decoded, strict=True)
    ]  # what training sees against the raw frame
    like = [
        psnr(s, d) for s, d in zip(served, decoded, strict=True)
    ]  # the round trip against what training sees
    # the codec loses something (not bit-exact), and the round trip reproduces most of that loss
    assert all(20 < v < 60 for v in lossy), lossy
    assert min(like) > max(lossy) + 2, (like, lossy)
    # keyframes are encoded alone, so an even frame does not depend on the frame before it
    rt.reset()
    assert np.array_equal(rt(frames[4]), served[4])


def test_reset_starts_a_new_keyframe_and_bad_input_is_refused():
    rt = CodecRoundTrip()
    a, b = scene(0), scene(1)
    rt(a)
    after_a = rt(b)  # predicted from a
    rt.reset()
    alone = rt(b)  # a keyframe
    assert not np.array_equal(after_a, alone)
    with pytest.raises(ValueError, match="HxWx3 uint8"):
        rt(a.astype(np.float32))
    with pytest.raises(DatasetError, match="video codec 'nope'"):
        CodecRoundTrip(vcodec="nope")


def test_the_codec_never_makes_the_calling_thread_real_time():
    """Run as root, SVT-AV1 puts the thread that opens it on SCHED_FIFO 99 (and every thread it starts
    later). The round trip runs the codec on its own thread without CAP_SYS_NICE: the caller, and threads
    it starts afterwards, stay on normal scheduling."""
    import os
    import threading

    assert os.sched_getscheduler(0) == os.SCHED_OTHER
    CodecRoundTrip()(scene(0))
    assert os.sched_getscheduler(0) == os.SCHED_OTHER
    later: list[int] = []
    t = threading.Thread(target=lambda: later.append(os.sched_getscheduler(0)))
    t.start()
    t.join()
    assert later == [os.SCHED_OTHER]


def test_a_stuck_codec_raises_within_its_timeout_and_the_next_frame_gets_a_new_thread(monkeypatch):
    """A codec that never returns (a wedged encoder) costs one frame and a clear error, not the caller."""
    release = threading.Event()
    rt = CodecRoundTrip(fps=30, timeout_s=0.3)
    real = rt._encode_decode
    monkeypatch.setattr(rt, "_encode_decode", lambda frames: release.wait(30) and real(frames))
    try:
        t0 = time.monotonic()
        with pytest.raises(DatasetError, match=r"codec round trip \(libsvtav1 .*no picture after 0.3 s"):
            rt(scene(0))
        assert time.monotonic() - t0 < 5
        stuck = [t for t in threading.enumerate() if t.name == "codec-roundtrip"]
        monkeypatch.setattr(rt, "_encode_decode", real)
        rt.timeout_s = 60.0  # a real encode now (opening SVT-AV1 on a busy machine takes a while)
        out = rt(scene(1))  # queued behind nothing: a fresh codec thread
        assert out.shape == (H, W, 3) and psnr(out, scene(1)) > 20
        assert len([t for t in threading.enumerate() if t.name == "codec-roundtrip"]) == len(stuck) + 1
    finally:
        release.set()
