#!/usr/bin/env bash
# Side venvs with a real LeRobot (0.4.4 on Python 3.11, 0.6.1 on Python 3.12), used to check that LeRobot
# loads every dataset shape we write, to run LeRobot's own tools through our plugins, and to (re)make parity
# fixtures (scripts/test.sh builds both when missing). The stack itself never needs them. A pip cache makes
# rebuilds fast. Usage:
#   bash scripts/make-lerobot-ref-venv.sh [--version 0.4.4|0.6.1] [VENV_DIR]
# Default version 0.4.4. Default VENV_DIR: 0.4.4 -> $LEROBOT_REF_VENV, else ~/.cache/lerobot_ros/lerobot-0.4.4;
# 0.6.1 -> $LEROBOT_REF_VENV_06, else ~/.cache/lerobot_ros/lerobot-0.6.1.
# Both get this checkout's lerobot_core and lerobot_plugins/* (editable, without dependencies) and the ROS 2
# wheels of their Python (Kilted for 3.11, Jazzy for 3.12).
# Exit status 0 = VENV_DIR/.ready exists. On failure the last line on stderr says why (e.g. the package
# index is unreachable) and VENV_DIR is left without .ready, so the LeRobot-compat tests fail with it.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=distro.sh
. "$ROOT/scripts/distro.sh"
fail() { echo "make-lerobot-ref-venv: $*" >&2; exit 1; }
VERSION=0.4.4
if [ "${1:-}" = "--version" ]; then
    [ $# -ge 2 ] || fail "--version needs a value (0.4.4 or 0.6.1)"
    VERSION=$2
    shift 2
fi
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/lerobot_ros"
case "$VERSION" in
    0.4.4) VENV="${1:-${LEROBOT_REF_VENV:-$CACHE/lerobot-0.4.4}}" ;;
    0.6.1) VENV="${1:-${LEROBOT_REF_VENV_06:-$CACHE/lerobot-0.6.1}}" ;;
    *) fail "--version $VERSION is not supported (0.4.4 or 0.6.1)" ;;
esac

# the base interpreter: LeRobot 0.4.4 + the Kilted wheels want CPython 3.11, LeRobot 0.6.1 needs >= 3.12
find_python() {  # $1 = minor version, e.g. 3.12
    local cand
    if [ -n "${LEROBOT_REF_BASE_PYTHON:-}" ]; then echo "$LEROBOT_REF_BASE_PYTHON"; return 0; fi
    if python"$1" -c "" 2>/dev/null; then echo "python$1"; return 0; fi  # a pyenv shim that does not run fails here
    if command -v pyenv >/dev/null; then
        for cand in "$(pyenv root)"/versions/"$1".*/bin/python"$1"; do
            if [ -x "$cand" ] && "$cand" -c "" 2>/dev/null; then echo "$cand"; return 0; fi
        done
    fi
    return 1
}

mkdir -p "$(dirname "$VENV")"
exec 9>"$VENV.lock"
flock 9  # two test runs at once: the second waits, then finds .ready
pipi() {  # pip install, with its unpacked downloads in a folder of its own that goes afterwards
    lr_pip_tmp
    trap lr_pip_tmp_done EXIT
    if ! TMPDIR="$PIP_TMP" "$VENV/bin/pip" install -q --disable-pip-version-check "$@"; then
        lr_pip_tmp_done
        fail "pip install $* failed (is the package index reachable? is the disk full? df -h: $(df -h "$VENV" | tail -n 1))"
    fi
    lr_pip_tmp_done
}
# this checkout's lerobot_core and LeRobot plugins (lerobot_plugins/, docs/lerobot_plugins.md), editable,
# without dependencies (the plugins import lerobot_core)
install_ours() {
    pipi --no-deps -e "$ROOT/src/lerobot_core"
    for plugin in lerobot_robot_ros lerobot_teleoperator_ros lerobot_camera_ros; do
        pipi --no-deps -e "$ROOT/lerobot_plugins/$plugin"
    done
}
ours_installed() {  # all of ours installed editable from this checkout (a venv shared by checkouts follows the last)
    "$VENV/bin/python" -c "import sys, importlib.metadata as m; sys.exit(not all(sys.argv[1] in \
        (m.distribution(p).read_text('direct_url.json') or '') for p in \
        ('lerobot_core', 'lerobot_robot_ros', 'lerobot_teleoperator_ros', 'lerobot_camera_ros')))" "$ROOT" 2>/dev/null
}

if [ "$VERSION" = 0.4.4 ]; then
    PY_MINOR=3.11
    TORCH=(torch==2.14.1 torchvision==0.29.1)  # PyPI's torchvision needs its own CUDA torch (not 2.13.0+cpu)
    ROS_WHEELS="$ROOT/requirements-ros-wheels.txt"
    # LeRobot's `async` extra (policy server and robot client), pinned as lerobot 0.4.4's metadata pins it
    ASYNC_EXTRA=(grpcio==1.73.1 'protobuf>=6.31.1,<6.32.0' 'matplotlib>=3.10.3,<4.0.0')
    RERUN='rerun-sdk>=0.24,<0.27'
else
    PY_MINOR=3.12
    # the newest that 0.6.1 accepts (2.7-2.11), pinned: the Jazzy venv pins the same, and scripts/venv_link.py
    # hard-links the 4.7 GB of it from one venv into the other
    TORCH=(torch==2.11.0)
    ROS_WHEELS="$ROOT/requirements-ros-wheels-jazzy.txt"
    # 0.6.1's `async` extra = its grpcio-dep and matplotlib-dep extras, as its metadata pins them
    ASYNC_EXTRA=('grpcio>=1.73.1,<2' 'protobuf>=6.31.1,<8' 'matplotlib>=3.10.3,<4' 'contourpy>=1.3,<2')
    RERUN='rerun-sdk>=0.24,<0.34'  # 0.6.1's `viz` extra
fi
# lerobot-train of 0.6.1 needs accelerate (its training extra, without wandb); 0.4.4 installs it below
ACCELERATE='accelerate>=1.14.0,<2'
# the policy node served from this venv (deploy_remote_gpu python:=, LeRobot's types) decodes with rosbags
SERVE_DEPS=(rosbags==0.11.9)


if [ -f "$VENV/.ready" ]; then
    # venvs made before the ROS wheels / our packages / async were part of the recipe: add them (additive)
    if ! "$VENV/bin/python" -c "import rclpy" 2>/dev/null; then
        pipi -r "$ROS_WHEELS"
    fi
    if ! ours_installed || ! "$VENV/bin/python" -c "import rerun" 2>/dev/null; then
        pipi "$RERUN"
        install_ours
    fi
    if ! "$VENV/bin/python" -c "import grpc, google.protobuf, matplotlib" 2>/dev/null; then
        pipi "${ASYNC_EXTRA[@]}"
    fi
    if [ "$VERSION" = 0.6.1 ] && ! "$VENV/bin/python" -c "import accelerate" 2>/dev/null; then
        pipi "$ACCELERATE"
    fi
    if ! "$VENV/bin/python" -c "import rosbags" 2>/dev/null; then
        pipi "${SERVE_DEPS[@]}"
    fi
    echo "make-lerobot-ref-venv: $VENV (LeRobot $VERSION) is ready"
    exit 0
fi
PY=$(find_python "$PY_MINOR") || fail "no working python$PY_MINOR found (LeRobot $VERSION needs CPython $PY_MINOR: \
put it on PATH, install it with pyenv, or set LEROBOT_REF_BASE_PYTHON)"
rm -rf "$VENV"  # a half-built venv from an interrupted run
"$PY" -m venv "$VENV" || fail "cannot create a venv at $VENV with $PY"
pipi --upgrade pip
# the pinned torch from a venv on this disk that holds it, as hard links (else pip downloads it)
# shellcheck disable=SC2046
"$VENV/bin/python" "$ROOT/scripts/venv_link.py" --pin "${TORCH[0]}" $(lr_venv_donors "$ROOT") \
    || echo "make-lerobot-ref-venv: scripts/venv_link.py failed (above); pip installs torch itself"
if [ "$VERSION" = 0.4.4 ]; then
    pipi "${TORCH[@]}"
    pipi --no-deps lerobot==0.4.4
    pipi 'datasets<5' 'huggingface-hub<0.36' draccus==0.10.0 'av<16' jsonlines einops \
        deepdiff termcolor safetensors 'opencv-python-headless<4.13' gymnasium pandas pyarrow accelerate \
        imageio 'diffusers<0.36' pyserial "$RERUN" \
        "${ASYNC_EXTRA[@]}"  # rerun: lerobot-record imports it; ASYNC_EXTRA: lerobot.async_inference
else
    # the rest as 0.6.1's metadata asks, from the index; pyserial and deepdiff: its
    # hardware extra without pynput (lerobot-record / -teleoperate import them)
    pipi 'lerobot[dataset,diffusion,async]==0.6.1' "${TORCH[@]}" "$RERUN" 'pyserial>=3.5,<4' 'deepdiff>=7.0.1,<9' \
        "$ACCELERATE" "${ASYNC_EXTRA[@]}"
fi
# rclpy & co.: the project's pytest plugin (loaded by any pytest run in this venv) imports rclpy.
pipi -r "$ROS_WHEELS" "${SERVE_DEPS[@]}"
install_ours
"$VENV/bin/python" -c "import lerobot, torch, torchvision, rclpy, rosbags, lerobot_core, lerobot_robot_ros; \
print('lerobot', lerobot.__version__, 'torch', torch.__version__)" || fail "LeRobot or our packages do not import in $VENV"
touch "$VENV/.ready"  # the LeRobot-compat tests look for this marker
echo "make-lerobot-ref-venv: $VENV (LeRobot $VERSION) is ready"
