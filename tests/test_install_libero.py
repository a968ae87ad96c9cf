"""scripts/install-libero.sh checks an --assets folder against what lerobot_sim's LIBERO env looks for."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from lerobot_sim.envs.libero import ASSET_FOLDERS

ROOT = Path(__file__).resolve().parents[1]


def test_an_assets_folder_without_libero_s_folders_is_refused_before_anything_is_installed(tmp_path):
    for present in ([], list(ASSET_FOLDERS[:-1])):  # none of them, or all but the last
        assets = tmp_path / f"assets{len(present)}"
        assets.mkdir()
        for name in present:
            (assets / name).mkdir()
        missing = next(f for f in ASSET_FOLDERS if f not in present)
        r = subprocess.run(
            ["bash", str(ROOT / "scripts" / "install-libero.sh"), "--assets", str(assets)],
            capture_output=True,
            text=True,
            env=dict(os.environ, LEROBOT_ROS_VENV=sys.prefix),
            timeout=60,
        )
        assert r.returncode != 0
        assert f"--assets {assets}: it has no {missing}/ folder (not LIBERO's assets)" in r.stderr, r.stderr
        assert "packages into" not in r.stdout  # refused before pip ran
