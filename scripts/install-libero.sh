#!/usr/bin/env bash
# scripts/install-libero.sh [--distro kilted|jazzy] [--assets DIR]: LIBERO for lerobot-sim-eval --env libero.
#
# 1. Into the distro's venv (made by ./setup.sh first), with --no-deps: hf-libero (LeRobot's LIBERO), robosuite
#    1.4.0 and bddl, and only the packages their env code imports (requirements-libero.txt). hf-libero's full
#    requirements (robomimic, transformers, wandb, opencv-python, ...) serve LIBERO's training scripts, not its
#    envs; opencv-python would also replace the stack's headless OpenCV.
# 2. LIBERO's assets (scenes and object meshes, about 200 MB), which hf-libero would download on first use:
#    --assets DIR links a folder that holds them (articulated_objects/, scenes/, ...); without it they are
#    downloaded now from the Hugging Face Hub (dataset lerobot/libero-assets) into ~/.cache/libero/assets,
#    where hf-libero looks. Nothing is downloaded when the stack runs.
# 3. LIBERO's path file (~/.libero/config.yaml, or $LIBERO_CONFIG_PATH), which its first import would ask for.
#
# Re-running it is safe. docs/sim.md (LIBERO) says what was checked on which machine.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/distro.sh
source "$ROOT/scripts/distro.sh"
die() { echo "install-libero.sh: error: $*" >&2; exit 1; }

lr_take_distro_arg "$@"
shift "$LR_SHIFT"
ASSETS=""
while [ $# -gt 0 ]; do
  case "$1" in
    --assets) ASSETS=${2:?--assets needs a folder}; shift 2 ;;
    --assets=*) ASSETS=${1#--assets=}; shift ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
lr_distro_layout "$ROOT" "$DISTRO" || exit 2
VENV=${LEROBOT_ROS_VENV:-$LR_VENV}
[ -x "$VENV/bin/python" ] || die "no venv at $VENV: run ./setup.sh --distro $DISTRO first"

CACHE="$HOME/.cache/libero/assets"
# the folders lerobot_sim.envs.libero.find_assets looks for (its ASSET_FOLDERS), read from the source
FOLDERS=$("$VENV/bin/python" -c "import sys; sys.path[:0] = sys.argv[1:]; from lerobot_sim.envs.libero import ASSET_FOLDERS; print(*ASSET_FOLDERS)" \
  "$ROOT/src/lerobot_sim" "$ROOT/src/lerobot_core") || die "could not read ASSET_FOLDERS from src/lerobot_sim (above)"
if [ -n "$ASSETS" ]; then  # checked before anything is installed
  for f in $FOLDERS; do [ -d "$ASSETS/$f" ] || die "--assets $ASSETS: it has no $f/ folder (not LIBERO's assets)"; done
fi

echo "install-libero.sh: packages into $VENV (--no-deps, requirements-libero.txt) ..."
lr_pip_tmp
trap lr_pip_tmp_done EXIT
# shellcheck disable=SC2046
TMPDIR="$PIP_TMP" "$VENV/bin/python" -m pip install --disable-pip-version-check --no-deps \
  $(grep -vE '^[[:space:]]*(#|$)' "$ROOT/requirements-libero.txt" | sed 's/[[:space:]]*#.*//') \
  || die "pip could not install requirements-libero.txt into $VENV (above)"
lr_pip_tmp_done

if [ -n "$ASSETS" ]; then
  mkdir -p "$(dirname "$CACHE")"
  ln -sfn "$(cd "$ASSETS" && pwd)" "$CACHE"
  echo "install-libero.sh: assets: $CACHE -> $ASSETS"
elif [ -d "$CACHE/scenes" ]; then
  echo "install-libero.sh: assets already in $CACHE"
else
  echo "install-libero.sh: downloading LIBERO's assets (lerobot/libero-assets, about 200 MB) into $CACHE ..."
  "$VENV/bin/python" - "$CACHE" <<'PYEOF' || die "the assets could not be downloaded (above); get them on a machine with access to huggingface.co and pass --assets DIR"
import sys
from huggingface_hub import snapshot_download

snapshot_download(repo_id="lerobot/libero-assets", repo_type="dataset", local_dir=sys.argv[1])
PYEOF
fi

"$VENV/bin/python" -c "from lerobot_sim.envs.libero import ensure_libero_config as c; print('install-libero.sh: LIBERO paths in', c())" \
  2>/dev/null || echo "install-libero.sh: note: source env.sh once (lerobot_sim on the path) to write LIBERO's path file"
echo "install-libero.sh: done. Try: lerobot-sim-eval --env libero --tasks libero_spatial:0 --episodes 1 --policy random"
