#!/usr/bin/env bash
# Side venv with the real LeRobot 0.4.4, used to check that LeRobot loads every dataset shape we write
# (scripts/test.sh builds it when missing) and to (re)make parity fixtures. The stack itself never
# needs it. A pip cache makes rebuilds fast. Usage:
#   bash scripts/make-lerobot-ref-venv.sh [VENV_DIR]   (default $LEROBOT_REF_VENV, else /work/lerobot-ref-venv)
# Exit status 0 = VENV_DIR/.ready exists. On failure the last line on stderr says why (e.g. the package
# index is unreachable) and VENV_DIR is left without .ready, so the LeRobot-compat tests fail with it.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV="${1:-${LEROBOT_REF_VENV:-/work/lerobot-ref-venv}}"
PY="${LEROBOT_REF_BASE_PYTHON:-python3.11}"  # the ROS 2 kilted wheels are CPython 3.11 only

mkdir -p "$(dirname "$VENV")"
exec 9>"$VENV.lock"
flock 9  # two test runs at once: the second waits, then finds .ready
fail() { echo "make-lerobot-ref-venv: $*" >&2; exit 1; }
pipi() { "$VENV/bin/pip" install -q --disable-pip-version-check "$@" || fail "pip install $* failed (is the package index reachable?)"; }
# the LeRobot plugins of this repository (lerobot_plugins/, docs/lerobot_plugins.md), editable, without
# dependencies (tests/test_lerobot_plugins.py puts this checkout's lerobot_core on their path)
install_plugins() {
    for plugin in lerobot_robot_ros lerobot_teleoperator_ros lerobot_camera_ros; do
        pipi --no-deps -e "$ROOT/lerobot_plugins/$plugin"
    done
}
# LeRobot's `async` extra (policy server and robot client), pinned as lerobot 0.4.4's metadata pins it
ASYNC_EXTRA=(grpcio==1.73.1 'protobuf>=6.31.1,<6.32.0' 'matplotlib>=3.10.3,<4.0.0')
if [ -f "$VENV/.ready" ]; then
    # venvs made before the ROS wheels were part of the recipe: add them (additive, nothing removed)
    if ! "$VENV/bin/python" -c "import rclpy" 2>/dev/null; then
        pipi -r "$ROOT/requirements-ros-wheels.txt"
    fi
    # plugins came later too (their distributions: importing them needs lerobot_core, which the tests put
    # on the path), editable from this checkout (a venv shared by several checkouts follows the last one)
    if ! "$VENV/bin/python" -c "import sys, rerun, importlib.metadata as m; sys.exit(not all(sys.argv[1] in \
            (m.distribution(p).read_text('direct_url.json') or '') for p in \
            ('lerobot_robot_ros', 'lerobot_teleoperator_ros', 'lerobot_camera_ros')))" "$ROOT/lerobot_plugins" 2>/dev/null; then
        pipi 'rerun-sdk>=0.24,<0.27'
        install_plugins
    fi
    if ! "$VENV/bin/python" -c "import grpc, google.protobuf, matplotlib" 2>/dev/null; then  # and async inference
        pipi "${ASYNC_EXTRA[@]}"
    fi
    echo "make-lerobot-ref-venv: $VENV is ready"
    exit 0
fi
command -v "$PY" >/dev/null || fail "$PY not found (LeRobot 0.4.4 and the ROS 2 wheels need CPython 3.11)"
rm -rf "$VENV"  # a half-built venv from an interrupted run
"$PY" -m venv "$VENV" || fail "cannot create a venv at $VENV"
pipi --upgrade pip
pipi torch==2.14.1 torchvision==0.29.1
pipi --no-deps lerobot==0.4.4
pipi 'datasets<5' 'huggingface-hub<0.36' draccus==0.10.0 'av<16' jsonlines einops \
    deepdiff termcolor safetensors 'opencv-python-headless<4.13' gymnasium pandas pyarrow accelerate \
    imageio 'diffusers<0.36' pyserial 'rerun-sdk>=0.24,<0.27' \
    "${ASYNC_EXTRA[@]}"  # rerun: lerobot-record imports it; ASYNC_EXTRA: lerobot.async_inference
# rclpy & co.: the project's pytest plugin (loaded by any pytest run in this venv) imports rclpy.
pipi -r "$ROOT/requirements-ros-wheels.txt"
install_plugins
"$VENV/bin/python" -c "import lerobot, torch, torchvision; print('lerobot', lerobot.__version__, 'torch', torch.__version__)" \
    || fail "LeRobot does not import in $VENV"
touch "$VENV/.ready"  # the LeRobot-compat tests look for this marker
