"""`lerobot-policy-predict`: run a LeRobot checkpoint on observations from an .npz file, offline.

    lerobot-policy-predict --policy DIR --observations IN.npz --output OUT.npz

IN.npz keys are LeRobot feature names with a leading batch dimension (images float32 Bx3xHxW in
[0, 1], state float32 BxD). OUT.npz holds `action_chunk`, float32 (B, chunk_size, action_dim),
unnormalized (what LeRobot's postprocessor returns).

Policies with an observation history (diffusion, `n_obs_steps` > 1) take either one observation
per feature, (B, ...), which is repeated to fill the history exactly as LeRobot's policy does on the
first step of an episode, or the whole history, (B, n_obs_steps, ...), oldest first. `--seed` seeds
torch before the call (diffusion samples noise; LeRobot draws it from torch's global generator
in the same order, so the same seed gives the same chunk).
"""

from __future__ import annotations

import argparse
import sys
import time
import zipfile
from pathlib import Path

import numpy as np

from lerobot_core import cli
from lerobot_runtime import (
    DeviceError,
    NonFiniteActionError,
    ObservationError,
    PolicyLoadError,
    load_policy,
)
from lerobot_runtime.policy import check_device


def _read_observations(path: Path) -> dict[str, np.ndarray]:
    if not path.is_file():
        raise ObservationError(f"--observations {str(path)!r}: no such file")
    try:
        with np.load(path, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise ObservationError(f"--observations {str(path)!r} is not a readable .npz: {exc}") from exc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="lerobot-policy-predict", description=__doc__.split("\n\n")[0], formatter_class=cli.HelpFormatter
    )
    parser.add_argument(
        "--policy",
        required=True,
        help="checkpoint directory as LeRobot saves it, or a Hub id org/name (cached)",
    )
    parser.add_argument("--observations", required=True, type=Path, help="input .npz of observations")
    parser.add_argument("--output", required=True, type=Path, help="output .npz (key action_chunk)")
    parser.add_argument("--device", default="cpu", help="torch device for inference (cpu, cuda, cuda:1, mps)")
    parser.add_argument(
        "--backend",
        default="auto",
        choices=("auto", "native", "lerobot"),
        help="native: this package's ACT/Diffusion; lerobot: LeRobot's own classes; auto: native when it has the type",
    )
    parser.add_argument("--seed", type=int, default=None, help="torch.manual_seed before inference")
    args = parser.parse_args(argv)
    try:
        check_device(args.device)
    except DeviceError as exc:
        print(f"lerobot-policy-predict: error: --device {args.device}: {exc}", file=sys.stderr)
        return 2
    try:
        obs = _read_observations(args.observations)
        policy = load_policy(args.policy, device=args.device, backend=args.backend)
        images = policy.config.image_features
        for key, arr in obs.items():
            if key in images and arr.dtype.kind == "f" and arr.size and (arr.min() < 0.0 or arr.max() > 1.0):
                raise ObservationError(
                    f"--observations {str(args.observations)!r}: image {key!r} must be float in [0, 1], "
                    f"got range [{arr.min():.3g}, {arr.max():.3g}]"
                )
        if args.seed is not None:
            import torch

            torch.manual_seed(args.seed)
        t0 = time.perf_counter()
        chunk = policy.predict_action_chunk(obs)
        dt = time.perf_counter() - t0
    except (PolicyLoadError, ObservationError) as exc:
        print(f"lerobot-policy-predict: error: {exc}", file=sys.stderr)
        return 2
    except NonFiniteActionError as exc:  # no output file: a chunk of NaN is not an answer
        print(f"lerobot-policy-predict: error: {exc}", file=sys.stderr)
        return 1
    args.output.parent.mkdir(parents=True, exist_ok=True)
    np.savez(args.output, action_chunk=chunk.astype(np.float32))
    print(
        f"{policy.config.type}: action_chunk {tuple(chunk.shape)} -> {args.output} ({dt * 1000:.1f} ms)",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
