"""Train/serve skew: a policy trains on frames decoded from the dataset's video and is served raw frames.

    python benchmarks/train_serve_skew.py --checkpoint CKPT [--episodes 20] [--seed 1000]
        [--max-steps 150] [--image-size 96 128] [--every 5] [--output skew.json]

On the same sim states (the SO-101 cube sim in this process, episodes served raw frames):
1. the PSNR between each served (raw) frame and the same frame recorded and decoded as training sees it
   (the recorder's DatasetWriter with its default settings, read back by DatasetReader);
2. the difference that makes to the policy's action chunk: every `--every` steps, the chunk predicted
   from the raw history and from the recorded-and-decoded one, beside the spread of the policy's own
   first actions over the run (the scale);
3. the success served raw and served through the codec round trip (lerobot_dataset.roundtrip, the
   policy node's `image_codec_roundtrip`), on the same seeds;
4. how close the round trip comes to the recorded video (PSNR round trip vs recorded-and-decoded).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


class ObservationLog:
    """A policy whose observations are kept per episode (images copied)."""

    def __init__(self, policy):
        self.policy = policy
        self.episodes: list[list[dict]] = []

    def reset(self, seed):
        self.episodes.append([])
        self.policy.reset(seed)

    def select_action(self, observation):
        self.episodes[-1].append({k: np.array(v, copy=True) for k, v in observation.items()})
        return self.policy.select_action(observation)


def decoded_like_training(
    episodes: list[list[dict]], keys: list[str], fps: int
) -> list[dict[str, np.ndarray]]:
    """Each episode's frames written by the recorder's DatasetWriter (default settings) and decoded back."""
    from lerobot_dataset import DatasetReader, DatasetWriter

    with tempfile.TemporaryDirectory() as tmp:
        h, w = episodes[0][0][keys[0]].shape[:2]
        features = {k: {"dtype": "video", "shape": (h, w, 3), "names": None} for k in keys}
        writer = DatasetWriter.create(Path(tmp) / "ds", fps=fps, features=features)
        settings = writer.encoder_settings
        for ep in episodes:
            for obs in ep:
                writer.add_frame({k: obs[k] for k in keys}, task="skew")
            writer.save_episode()
        writer.finalize()
        reader = DatasetReader(Path(tmp) / "ds")
        out = [{k: reader.video_frames(k, e) for k in keys} for e in range(len(episodes))]
    print(f"recorded with: {settings}")
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True, help="an image checkpoint (pretrained_model/)")
    p.add_argument("--episodes", type=int, default=20)
    p.add_argument("--seed", type=int, default=1000)
    p.add_argument("--max-steps", type=int, default=150)
    p.add_argument("--image-size", nargs=2, type=int, default=[96, 128], metavar=("H", "W"))
    p.add_argument("--cameras", nargs="*", default=["front", "wrist"])
    p.add_argument("--every", type=int, default=5, help="compare chunks every N steps")
    p.add_argument("--output", default="", help="JSON file for the figures")
    args = p.parse_args()
    os.environ.setdefault("MUJOCO_GL", "egl")
    import torch

    from lerobot_dataset.roundtrip import CodecRoundTrip, psnr
    from lerobot_sim.command import so101_safety
    from lerobot_sim.evaluation import (
        CheckpointPolicy,
        CodecRoundTripPolicy,
        EvalSettings,
        LocalEnvTransport,
        run_episodes,
    )
    from lerobot_sim.registration import SO101_CUBE_ID
    from lerobot_sim.session import SimSession, make_env

    fps = 30
    h, w = args.image_size
    kwargs = {
        "cameras": list(args.cameras),
        "obs_type": "pixels_agent_pos",
        "image_width": w,
        "image_height": h,
        "fps": fps,
    }

    def local():
        return LocalEnvTransport(SimSession(make_env(SO101_CUBE_ID, kwargs)), safety=so101_safety(fps))

    settings = EvalSettings(args.episodes, seed=args.seed, max_steps=args.max_steps)
    quiet = lambda m: None  # noqa: E731
    print(
        f"checkpoint {args.checkpoint}; seeds {args.seed}..{args.seed + args.episodes - 1}; "
        f"cameras {args.cameras} at {h}x{w}; load average {os.getloadavg()[0]:.2f}",
        flush=True,
    )

    # 1. served raw, observations kept (the checkpoint is loaded once; each use gets its own action path)
    from lerobot_runtime import load_policy

    weights = load_policy(args.checkpoint)
    log = ObservationLog(CheckpointPolicy(args.checkpoint, fps=fps, policy=weights))
    raw_eps, raw_s, _ = run_episodes(local, log, settings, log=quiet)
    keys = [k for k in log.episodes[0][0] if k.startswith("observation.images.")]
    print(
        f"served raw:        {sum(e.success for e in raw_eps)}/{len(raw_eps)} success ({raw_s:.0f} s)",
        flush=True,
    )

    # 2. served through the codec round trip, same seeds
    rt_eps, rt_s, _ = run_episodes(
        local,
        CodecRoundTripPolicy(CheckpointPolicy(args.checkpoint, fps=fps, policy=weights), fps),
        settings,
        log=quiet,
    )
    print(
        f"served round trip: {sum(e.success for e in rt_eps)}/{len(rt_eps)} success ({rt_s:.0f} s)",
        flush=True,
    )

    # 3. the frames as training sees them, and the round trip of the same frames
    t0 = time.perf_counter()
    decoded = decoded_like_training(log.episodes, keys, fps)
    psnr_raw: dict[str, list[float]] = {k: [] for k in keys}
    psnr_rt: dict[str, list[float]] = {k: [] for k in keys}
    for ep, dec in zip(log.episodes, decoded, strict=True):
        for k in keys:
            stream = CodecRoundTrip(fps=fps)
            for i, obs in enumerate(ep):
                psnr_raw[k].append(psnr(obs[k], dec[k][i]))
                psnr_rt[k].append(psnr(stream(obs[k]), dec[k][i]))
    print(f"round trip with: {CodecRoundTrip(fps=fps).describe()}")
    print(f"(recording, decoding and round trips: {time.perf_counter() - t0:.0f} s)", flush=True)

    # 4. the chunk on raw vs recorded-and-decoded history, at the same states
    ckpt = CheckpointPolicy(args.checkpoint, fps=fps, policy=weights)
    runtime, convert = ckpt.path.policy, ckpt._batch
    n_obs = max(1, int(getattr(runtime.config, "n_obs_steps", 1) or 1))

    def chunk(frames: list[dict]) -> np.ndarray:
        steps = [convert(f) for f in frames]
        batch = {k: np.stack([s[k] for s in steps], axis=1) for k in steps[0]}
        torch.manual_seed(0)  # a sampling policy (diffusion) draws the same noise for both
        runtime.reset()
        return np.asarray(runtime.predict_action_chunk(batch))[0]

    diffs, first_diffs, firsts = [], [], []
    for ep, dec in zip(log.episodes, decoded, strict=True):
        for t in range(0, len(ep), args.every):
            idx = [max(0, t - n_obs + 1 + j) for j in range(n_obs)]
            raw_frames = [ep[i] for i in idx]
            dec_frames = [{**ep[i], **{k: dec[k][i] for k in keys}} for i in idx]
            a, b = chunk(raw_frames), chunk(dec_frames)
            diffs.append(np.abs(a - b).mean())
            first_diffs.append(np.abs(a[0] - b[0]).max())
            firsts.append(a[0])
    spread = float(np.std(np.stack(firsts), axis=0).mean())

    figures = {
        "checkpoint": args.checkpoint,
        "seeds": [args.seed, args.seed + args.episodes - 1],
        "load_average_1min": os.getloadavg()[0],
        "psnr_raw_vs_recorded_db": {
            k: {"mean": float(np.mean(v)), "min": float(np.min(v))} for k, v in psnr_raw.items()
        },
        "psnr_roundtrip_vs_recorded_db": {
            k: {"mean": float(np.mean(v)), "min": float(np.min(v))} for k, v in psnr_rt.items()
        },
        "chunk_abs_diff_mean": float(np.mean(diffs)),
        "first_action_abs_diff_max_mean": float(np.mean(first_diffs)),
        "first_action_abs_diff_max_max": float(np.max(first_diffs)),
        "first_action_spread_std": spread,
        "chunks_compared": len(diffs),
        "success_served_raw": [bool(e.success) for e in raw_eps],
        "success_served_roundtrip": [bool(e.success) for e in rt_eps],
    }
    print()
    for k in keys:
        r, q = figures["psnr_raw_vs_recorded_db"][k], figures["psnr_roundtrip_vs_recorded_db"][k]
        print(
            f"{k}: PSNR served raw vs recorded {r['mean']:.1f} dB (min {r['min']:.1f}); "
            f"round trip vs recorded {q['mean']:.1f} dB (min {q['min']:.1f})"
        )
    print(
        f"chunk |raw - recorded|: mean {figures['chunk_abs_diff_mean']:.4f}; first action, largest joint: "
        f"mean {figures['first_action_abs_diff_max_mean']:.4f}, max {figures['first_action_abs_diff_max_max']:.4f} "
        f"(the policy's first actions spread by {spread:.4f} std; {len(diffs)} chunks)"
    )
    n = len(raw_eps)
    print(
        f"success: served raw {100 * sum(figures['success_served_raw']) / n:.0f} %, "
        f"served round trip {100 * sum(figures['success_served_roundtrip']) / n:.0f} %"
    )
    if args.output:
        Path(args.output).write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
