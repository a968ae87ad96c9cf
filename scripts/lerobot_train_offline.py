#!/usr/bin/env python
"""`lerobot-train` (LeRobot 0.4.4) offline on CPU, without editing LeRobot's files.

    $LEROBOT_REF_VENV/bin/python scripts/lerobot_train_offline.py --dataset.repo_id=local/sim \
        --dataset.root=outputs/sim_so101 --policy.type=act --policy.device=cpu \
        --policy.pretrained_backbone_weights=null --policy.push_to_hub=false ...

Every argument goes to LeRobot's own `lerobot-train` unchanged. Two things are swapped first:
- video decoding: LeRobot 0.4.4's "pyav" backend calls ``torchvision.io.VideoReader``, which
  torchvision 0.29 removed; its ``decode_video_frames`` is replaced by one that decodes with PyAV
  directly (same contract: frames nearest to the requested timestamps, within the tolerance,
  float32 in [0, 1], channel first);
- the hub: ``HF_HUB_OFFLINE=1`` (nothing is downloaded; pass
  ``--policy.pretrained_backbone_weights=null`` so ACT's ResNet starts from scratch).
Run it with the interpreter of a venv that has lerobot 0.4.4 (scripts/make-lerobot-ref-venv.sh).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


def decode_video_frames_pyav(video_path, timestamps, tolerance_s, backend=None):
    """The frames of ``video_path`` nearest to ``timestamps`` [s] (float32 0..1, N x C x H x W)."""
    import av
    import numpy as np
    import torch

    first, last = min(timestamps), max(timestamps)
    loaded, loaded_ts = [], []
    with av.open(str(video_path)) as container:
        stream = container.streams.video[0]
        base = float(stream.time_base)
        # seek lands on the key frame at or before `first` (a tolerance earlier, for pts rounding);
        # decode forward from there: with LeRobot's g=2 that is at most one frame before `first`
        container.seek(
            int(max(first - tolerance_s, 0.0) / base), stream=stream, backward=True, any_frame=False
        )
        for frame in container.decode(stream):
            ts = frame.pts * base
            if ts < first - tolerance_s:
                continue
            loaded.append(frame.to_ndarray(format="rgb24"))
            loaded_ts.append(ts)
            if ts >= last:
                break
    if not loaded:
        raise RuntimeError(f"{video_path}: no frame decoded between {first:.3f} s and {last:.3f} s")
    query = np.asarray(timestamps, dtype=np.float64)[:, None]
    dist = np.abs(query - np.asarray(loaded_ts)[None, :])
    nearest = dist.argmin(axis=1)
    worst = dist[np.arange(len(timestamps)), nearest].max()
    if worst >= tolerance_s:
        raise RuntimeError(
            f"{video_path}: a requested timestamp is {worst:.4f} s from the nearest frame (tolerance "
            f"{tolerance_s} s); requested {list(timestamps)}"
        )
    frames = torch.from_numpy(np.stack([loaded[i] for i in nearest])).permute(0, 3, 1, 2)
    return frames.to(torch.float32) / 255.0


def install() -> None:
    from lerobot.datasets import lerobot_dataset, video_utils

    video_utils.decode_video_frames = decode_video_frames_pyav
    lerobot_dataset.decode_video_frames = decode_video_frames_pyav  # imported there by name


def main() -> None:
    install()
    from lerobot.scripts.lerobot_train import main as train_main

    sys.argv[0] = str(Path(sys.argv[0]).with_name("lerobot-train"))
    train_main()


if __name__ == "__main__":
    main()
