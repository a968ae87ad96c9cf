#!/usr/bin/env bash
# Throwaway venv with the real LeRobot 0.4.4, used only to (re)make parity fixtures and to check that
# LeRobot loads our datasets. The stack itself never needs it. Usage:
#   bash scripts/make-lerobot-ref-venv.sh [VENV_DIR]      (default /work/lerobot-ref-venv)
set -euo pipefail
VENV="${1:-/work/lerobot-ref-venv}"
python3.11 -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip
"$VENV/bin/pip" install -q torch==2.14.1 torchvision==0.29.1
"$VENV/bin/pip" install -q --no-deps lerobot==0.4.4
"$VENV/bin/pip" install -q 'datasets<5' 'huggingface-hub<0.36' draccus==0.10.0 'av<16' jsonlines einops \
    deepdiff termcolor safetensors 'opencv-python-headless<4.13' gymnasium pandas pyarrow accelerate \
    imageio 'diffusers<0.36' pyserial 'rerun-sdk>=0.24,<0.27'  # rerun: lerobot-record imports it
# the LeRobot plugins of this repository (lerobot_plugins/, docs/lerobot_plugins.md) and the shared core
# they import; tests/test_lerobot_plugins.py runs LeRobot's commands with them
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
for plugin in lerobot_robot_ros lerobot_teleoperator_ros lerobot_camera_ros; do
    "$VENV/bin/pip" install -q --no-deps -e "$REPO/lerobot_plugins/$plugin"
done
"$VENV/bin/python" -c "import lerobot, torch, torchvision; print('lerobot', lerobot.__version__, 'torch', torch.__version__)"
touch "$VENV/.ready"  # tests that compare against LeRobot look for this marker
