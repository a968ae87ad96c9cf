# env.sh - source me:  source env.sh [--distro kilted|jazzy] [--no-workspace]
# Puts this shell in the lerobot_ros environment of one ROS 2 distro (default $LEROBOT_ROS_DISTRO, else a
# sourced system ROS 2's, else kilted): its venv, its built workspace, DDS on loopback. Safe to source more than once; one distro per
# shell. Run ./setup.sh [--distro ...] first.
_lr_root=$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")" && pwd)
# shellcheck source=scripts/distro.sh
. "$_lr_root/scripts/distro.sh"
_lr_distro=$(lr_default_distro)
_lr_workspace=1
_lr_next=""
for _lr_a in "$@"; do  # a loop, not shift: sourced without arguments, "$@" is the caller's
  if [ "$_lr_next" = distro ]; then _lr_distro=$_lr_a; _lr_next=""; continue; fi
  case "$_lr_a" in
    --distro) _lr_next=distro ;;
    --distro=*) _lr_distro=${_lr_a#--distro=} ;;
    --no-workspace) _lr_workspace=0 ;;
    *) ;;  # the caller's own arguments (sourced without any)
  esac
done
unset _lr_next _lr_a
_lr_fail() {
  echo "env.sh: $*" >&2
  unset _lr_root _lr_distro _lr_workspace _lr_venv _lr_install
  unset -f lr_distro_layout lr_find_python lr_default_distro _lr_fail
}
if ! lr_distro_layout "$_lr_root" "$_lr_distro"; then
  _lr_fail "no environment for distro '$_lr_distro'"
  return 2 2>/dev/null || exit 2
fi
_lr_venv=${LEROBOT_ROS_VENV:-$LR_VENV}
_lr_install=$LR_INSTALL
unset LR_DISTRO LR_VENV LR_BUILD LR_INSTALL LR_LOG LR_WHEELS LR_PYMINOR LR_RCLPY_MAJOR
if [ ! -x "$_lr_venv/bin/python" ]; then
  _lr_fail "no venv at $_lr_venv - run $_lr_root/setup.sh --distro $_lr_distro first"
  return 1 2>/dev/null || exit 1
fi
if [ -n "${LEROBOT_ROS_ACTIVE_VENV:-}" ] && [ "$LEROBOT_ROS_ACTIVE_VENV" != "$_lr_venv" ]; then
  _lr_fail "this shell is already in $LEROBOT_ROS_ACTIVE_VENV; open a new shell for $_lr_venv (one distro per shell)"
  return 1 2>/dev/null || exit 1
fi
export LEROBOT_ROS_ACTIVE_VENV="$_lr_venv" LEROBOT_ROS_DISTRO="$_lr_distro"
# activate the venv without its prompt games (the venv may sit on a system ROS's site-packages)
export VIRTUAL_ENV="$_lr_venv"
case ":$PATH:" in *":$_lr_venv/bin:"*) ;; *) export PATH="$_lr_venv/bin:$PATH" ;; esac
# the PyPI ROS wheels install their ament index and CMake configs into the venv prefix
if [ -d "$_lr_venv/share/ament_index" ]; then
  case ":${AMENT_PREFIX_PATH:-}:" in *":$_lr_venv:"*) ;; *) export AMENT_PREFIX_PATH="$_lr_venv${AMENT_PREFIX_PATH:+:$AMENT_PREFIX_PATH}" ;; esac
  case ":${CMAKE_PREFIX_PATH:-}:" in *":$_lr_venv:"*) ;; *) export CMAKE_PREFIX_PATH="$_lr_venv${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}" ;; esac
fi
# DDS never leaves loopback; an explicit domain (override by exporting ROS_DOMAIN_ID first)
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
export ROS_DOMAIN_ID=${ROS_DOMAIN_ID:-42}
export RMW_IMPLEMENTATION=${RMW_IMPLEMENTATION:-rmw_fastrtps_cpp}
export MUJOCO_GL=${MUJOCO_GL:-egl}
export PYOPENGL_PLATFORM=${PYOPENGL_PLATFORM:-egl}
# a plain `colcon build` at the repo root finds the metapackage and everything under src/
export COLCON_DEFAULTS_FILE=${COLCON_DEFAULTS_FILE:-$_lr_root/colcon_defaults.yaml}
export LEROBOT_ROS_ROOT="$_lr_root"
# where this distro's workspace is installed (install/ for kilted, install-<distro>/ for the others)
export LEROBOT_ROS_INSTALL="$_lr_install"
if [ "$_lr_workspace" = 1 ]; then
  if [ -f "$_lr_install/setup.bash" ]; then
    # shellcheck disable=SC1091
    . "$_lr_install/setup.bash"
    # the stack's commands (lerobot-launch, lerobot-bag-import, ...) by name; setup.sh links them here
    case ":$PATH:" in *":$_lr_install/bin:"*) ;; *) export PATH="$_lr_install/bin:$PATH" ;; esac
  else
    echo "env.sh: workspace not built yet ($_lr_install/setup.bash missing) - run ./setup.sh --distro $_lr_distro" >&2
  fi
fi
unset _lr_root _lr_distro _lr_workspace _lr_venv _lr_install
unset -f lr_distro_layout lr_find_python lr_default_distro _lr_fail
