# env.sh - source me:  source env.sh
# Puts this shell in the lerobot_ros environment: the venv, the built workspace, DDS on loopback.
# Safe to source more than once. Run ./setup.sh first.
_lr_root=$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")" && pwd)
_lr_venv=${LEROBOT_ROS_VENV:-$_lr_root/.venv}
if [ ! -x "$_lr_venv/bin/python" ]; then
  echo "env.sh: no venv at $_lr_venv - run $_lr_root/setup.sh first" >&2
  unset _lr_root _lr_venv
  return 1 2>/dev/null || exit 1
fi
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
if [ "${1:-}" != "--no-workspace" ]; then
  if [ -f "$_lr_root/install/setup.bash" ]; then
    # shellcheck disable=SC1091
    . "$_lr_root/install/setup.bash"
    # the stack's commands (lerobot-launch, lerobot-bag-import, ...) by name; setup.sh links them here
    case ":$PATH:" in *":$_lr_root/install/bin:"*) ;; *) export PATH="$_lr_root/install/bin:$PATH" ;; esac
  else
    echo "env.sh: workspace not built yet ($_lr_root/install/setup.bash missing) - run ./setup.sh" >&2
  fi
fi
unset _lr_root _lr_venv
