"""Encoder settings: LeRobot 0.4.4's by default, hardware encoders detected by opening them, and
default-settings video of sudden scene changes decoding to the right frames."""

from __future__ import annotations

import numpy as np
import pytest

from lerobot_dataset import DatasetError, DatasetReader, DatasetWriter
from lerobot_dataset.encoders import (
    HW_ENCODERS,
    LEROBOT_VIDEO_SETTINGS,
    codec_options,
    detect_hw_encoders,
    probe_encoder,
    resolve_encoder,
)

FEATURES = {"observation.images.front": {"dtype": "video", "shape": (96, 128, 3), "names": None}}


def test_defaults_are_lerobot_044_effective_settings(tmp_path):
    w = DatasetWriter.create(tmp_path / "ds", fps=15, features=FEATURES)
    try:
        assert w.encoder_settings == "libsvtav1 yuv420p crf=30 g=2 preset=10"
    finally:
        w.finalize()
    assert LEROBOT_VIDEO_SETTINGS == {
        "vcodec": "libsvtav1",
        "pix_fmt": "yuv420p",
        "g": 2,
        "crf": 30,
        "preset": 10,
    }
    assert codec_options("libsvtav1", 2, 30, 12)["preset"] == "12"  # faster/slower presets stay options


@pytest.mark.parametrize(
    "vcodec, expect",
    [
        ("h264_nvenc", {"g": "2", "rc": "constqp", "qp": "30"}),
        ("av1_qsv", {"g": "2", "global_quality": "30"}),
        ("h264_vaapi", {"g": "2", "qp": "30"}),
        ("libx264", {"g": "2", "crf": "30"}),
    ],
)
def test_quality_option_per_encoder_family(vcodec, expect):
    assert codec_options(vcodec, 2, 30, None) == expect


def test_hardware_detection_opens_each_encoder_and_says_why_not():
    found = detect_hw_encoders()
    assert list(found) == list(HW_ENCODERS)
    for name, why in found.items():
        # This machine has no GPU: every hardware encoder is either absent from the build or fails to open.
        assert why is None or why.startswith(("not in this PyAV/FFmpeg build", "does not open here")), (
            name,
            why,
        )
    assert probe_encoder("libx264") is None  # the same probe accepts an encoder that does open


def test_auto_takes_the_first_usable_candidate_else_libsvtav1():
    unusable = [n for n, why in detect_hw_encoders().items() if why is not None]
    # a software encoder behind unusable hardware ones in the candidate list: auto skips to it
    assert resolve_encoder("auto", candidates=(*unusable, "libx264", "libx265")) == "libx264"
    assert resolve_encoder("auto", candidates=tuple(unusable)) == "libsvtav1"


def test_explicit_unusable_hardware_encoder_is_a_clear_error(tmp_path):
    unusable = [n for n, why in detect_hw_encoders().items() if why is not None and "does not open" in why]
    if not unusable:
        pytest.skip("every hardware encoder in this build opens here (a GPU machine)")
    with pytest.raises(
        DatasetError, match=f"video codec '{unusable[0]}': hardware encoder does not open here"
    ):
        DatasetWriter.create(tmp_path / "ds", fps=15, features=FEATURES, vcodec=unusable[0])


def _sudden_change_frame(i: int, h: int = 96, w: int = 128) -> np.ndarray:
    """A new random scene every frame, with frame i's number as 8 black/white stripes on top."""
    rng = np.random.default_rng(i)
    img = np.empty((h, w, 3), np.uint8)
    img[:] = rng.integers(0, 256, 3, dtype=np.uint8)
    img[24:] = np.clip(img[24:].astype(int) + rng.integers(-60, 61, (h - 24, w, 3)), 0, 255)
    for b in range(8):
        img[:24, b * 16 : (b + 1) * 16] = 255 if (i >> b) & 1 else 0
    return img


def test_default_settings_decode_sudden_changes_to_the_right_frames(tmp_path):
    n = 40
    w = DatasetWriter.create(tmp_path / "ds", fps=15, features=FEATURES)
    for i in range(n):
        w.add_frame({"observation.images.front": _sudden_change_frame(i)}, task="t")
    w.save_episode()
    w.finalize()
    frames = DatasetReader(tmp_path / "ds").video_frames("observation.images.front", 0)
    assert len(frames) == n
    for i, got in enumerate(frames):
        bits = [int(got[4:20, b * 16 + 4 : b * 16 + 12].mean() > 128) for b in range(8)]
        assert sum(bit << b for b, bit in enumerate(bits)) == i, f"frame {i} decodes as another frame"
        src = _sudden_change_frame(i).astype(float)
        mse = float(np.mean((src[:24] - got[:24].astype(float)) ** 2))
        assert 10 * np.log10(255**2 / max(mse, 1e-9)) > 20, f"frame {i}: stripes PSNR too low"
