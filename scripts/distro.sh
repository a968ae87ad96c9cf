# scripts/distro.sh - sourced (not run) by setup.sh, env.sh and the scripts: where each ROS 2 distro's
# environment lives in this checkout, and which Python it runs on. Two environments can exist side by
# side; each has its own venv and its own colcon build / install / log folders.
#
#   distro   ROS from                                   Python   venv          build / install / log
#   kilted   PyPI wheels (requirements-ros-wheels.txt)   3.11     .venv         build/ install/ log/
#   jazzy    PyPI wheels (requirements-ros-wheels-jazzy.txt) 3.12 .venv-jazzy  build-jazzy/ install-jazzy/ log-jazzy/
#   humble, rolling: a sourced /opt/ros/<distro> only (no wheels): .venv-<distro>, build-<distro>/, ...

# lr_distro_layout ROOT DISTRO: sets LR_DISTRO LR_VENV LR_BUILD LR_INSTALL LR_LOG LR_WHEELS LR_PYMINOR
# LR_RCLPY_MAJOR (the major version of that distro's rclpy); prints an error and returns 2 for an unknown one.
lr_distro_layout() {
  local root=$1 distro=$2 suffix
  case "$distro" in
    kilted) suffix="" LR_WHEELS="$root/requirements-ros-wheels.txt" LR_PYMINOR=3.11 LR_RCLPY_MAJOR=9 ;;
    jazzy) suffix="-jazzy" LR_WHEELS="$root/requirements-ros-wheels-jazzy.txt" LR_PYMINOR=3.12 LR_RCLPY_MAJOR=7 ;;
    humble) suffix="-humble" LR_WHEELS="" LR_PYMINOR=3.10 LR_RCLPY_MAJOR=3 ;;
    rolling) suffix="-rolling" LR_WHEELS="" LR_PYMINOR=3.12 LR_RCLPY_MAJOR="" ;;
    *) echo "unknown ROS 2 distro '$distro' (choose kilted or jazzy; humble and rolling from a sourced /opt/ros)" >&2
       return 2 ;;
  esac
  LR_DISTRO=$distro
  LR_VENV="$root/.venv$suffix"
  LR_BUILD="$root/build$suffix"
  LR_INSTALL="$root/install$suffix"
  LR_LOG="$root/log$suffix"
}

# lr_find_python MINOR: prints a working python MINOR interpreter: pythonMINOR on PATH if it runs (a pyenv
# shim for a version pyenv does not select does not), else pyenv's own copy; returns 1 if there is none.
lr_find_python() {
  local minor=$1 cand
  for cand in "$(command -v "python$minor" 2>/dev/null)" \
              "$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$minor".*/bin/python"$minor" 2>/dev/null | sort -V | tail -n 1)"; do
    if [ -n "$cand" ] && "$cand" -c "" >/dev/null 2>&1; then echo "$cand"; return 0; fi
  done
  return 1
}

# lr_default_distro: the distro used when none is given: $LEROBOT_ROS_DISTRO, else a sourced system ROS 2
# (ROS_DISTRO with its /opt/ros/<distro> on AMENT_PREFIX_PATH), else kilted.
lr_default_distro() {
  local sys_root=${LEROBOT_ROS_SYSTEM_ROOT:-/opt/ros}
  if [ -n "${LEROBOT_ROS_DISTRO:-}" ]; then
    echo "$LEROBOT_ROS_DISTRO"
  elif [ -n "${ROS_DISTRO:-}" ] && case ":${AMENT_PREFIX_PATH:-}:" in *":$sys_root/$ROS_DISTRO:"*) true ;; *) false ;; esac; then
    echo "$ROS_DISTRO"
  else
    echo kilted
  fi
}

# lr_take_distro_arg ARGS...: a leading `--distro X` or `--distro=X` sets DISTRO (else lr_default_distro);
# LR_SHIFT is how many arguments it took (the caller shifts them). For scripts/demo.sh and test.sh.
lr_take_distro_arg() {
  DISTRO=$(lr_default_distro)
  LR_SHIFT=0
  case "${1:-}" in
    --distro) DISTRO=${2:?--distro needs a value: kilted or jazzy}; LR_SHIFT=2 ;;
    --distro=*) DISTRO=${1#--distro=}; LR_SHIFT=1 ;;
  esac
}

# lr_setup_and_enter DISTRO: set that environment up (./setup.sh: from scratch if needed, under a second
# when nothing changed), then enter it in this shell (env.sh). Needs ROOT, the checkout.
lr_setup_and_enter() {
  "$ROOT/setup.sh" --distro "$1"
  # shellcheck disable=SC1091
  set +u; source "$ROOT/env.sh" --distro "$1"; set -u
}

# lr_pip_tmp: a private TMPDIR for one pip run (PIP_TMP), removed again by lr_pip_tmp_done. pip unpacks every
# wheel it downloads under TMPDIR (3.5 GB for torch's CUDA build) and leaves them there when it is
# interrupted or the disk fills up.
lr_pip_tmp() { PIP_TMP=$(mktemp -d "${TMPDIR:-/tmp}/lerobot-ros-pip.XXXXXX"); }
lr_pip_tmp_done() { [ -z "${PIP_TMP:-}" ] || rm -rf "$PIP_TMP"; PIP_TMP=""; }

# lr_venv_donors ROOT: the venvs on this disk that scripts/venv_link.py may hard-link torch from (this
# checkout's venvs and the LeRobot side venvs); it uses those on the same Python with the pinned version.
lr_venv_donors() {
  local cache=${XDG_CACHE_HOME:-$HOME/.cache}/lerobot_ros v
  for v in "$1"/.venv "$1"/.venv-* "${LEROBOT_ROS_VENV:-}" "${LEROBOT_REF_VENV:-}" "${LEROBOT_REF_VENV_06:-}" \
           "$cache"/lerobot-*; do
    [ -n "$v" ] && [ -x "$v/bin/python" ] && echo "$v"
  done
  return 0
}
