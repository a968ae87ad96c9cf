#!/usr/bin/env bash
# setup.sh - make this checkout a working lerobot_ros workspace.
#
# Creates ./.venv with a ROS 2 runtime + build toolchain (PyPI wheels, distro "kilted") or, when a
# system ROS 2 is already sourced (/opt/ros/<distro>), a venv on top of it; installs the ML / sim
# stack; rewrites the build-machine paths baked into the wheels' CMake files; colcon-builds the
# workspace into ./install. Idempotent: a re-run with nothing changed only checks stamps.
#
#   ./setup.sh            # set up (or bring up to date)
#   ./setup.sh --force    # reinstall the pinned packages and rebuild from scratch
#   ./setup.sh --plan     # say which ROS, venv, package list and build command it would use; change nothing
#   source env.sh         # afterwards: a shell in the set-up environment
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
VENV=${LEROBOT_ROS_VENV:-$ROOT/.venv}
FORCE=0
PLAN=0
for a in "$@"; do
  case "$a" in
    --force) FORCE=1 ;;
    --plan) PLAN=1 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option '$a' (try --help)" >&2; exit 2 ;;
  esac
done

die() { echo "setup.sh: ERROR: $*" >&2; exit 1; }
now() { date +%s.%N; }
T0=$(now)
elapsed() { awk -v a="$(now)" -v b="$1" 'BEGIN{printf "%.1f", a-b}'; }

# ---------------------------------------------------------------------------------------------
# Pinned package sets: requirements.txt (ML / sim / dev) and requirements-ros-wheels.txt (ROS 2).
REQ="$ROOT/requirements.txt"
REQ_ROS="$ROOT/requirements-ros-wheels.txt"
# On a system ROS: the same list with numpy < 2 and an opencv built for numpy 1.x (the distro's ABI).
REQ_SYS="$ROOT/requirements-system-ros.txt"
CV2_PIN=opencv-python-headless==4.14.0.94

# ---------------------------------------------------------------------------------------------
# Which ROS: a sourced system install wins over the wheels.
SYSTEM_ROS=""
ROS_ROOT=${LEROBOT_ROS_SYSTEM_ROOT:-/opt/ros}
if [ -n "${ROS_DISTRO:-}" ] && [ -d "$ROS_ROOT/${ROS_DISTRO}" ] \
   && case ":${AMENT_PREFIX_PATH:-}:" in *":$ROS_ROOT/${ROS_DISTRO}:"*) true ;; *) false ;; esac; then
  case "$ROS_DISTRO" in
    humble|jazzy|kilted|rolling) SYSTEM_ROS=$ROS_DISTRO ;;
    *) die "system ROS 2 '$ROS_DISTRO' ($ROS_ROOT/$ROS_DISTRO) is sourced but not supported (supported: humble, jazzy, kilted, rolling). Open a new shell without sourcing it to use the PyPI wheels instead." ;;
  esac
fi

if [ -n "$SYSTEM_ROS" ]; then
  PY=${PYTHON:-/usr/bin/python3}
else
  PY=${PYTHON:-python3.11}
fi
command -v "$PY" >/dev/null 2>&1 || die "'$PY' not found. The ROS 2 wheels are built for CPython 3.11: install python3.11 (or set PYTHON=/path/to/python3.11)."
PYVER=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) \
  || die "'$PY' does not run. Set PYTHON=/path/to/python3.11."
if [ -z "$SYSTEM_ROS" ] && [ "$PYVER" != "3.11" ]; then
  die "'$PY' is Python $PYVER; the PyPI ROS 2 wheels (kilted, cp311) need Python 3.11. Set PYTHON=/path/to/python3.11, or source a system ROS 2 (/opt/ros/<distro>/setup.bash) first."
fi
if [ -n "$SYSTEM_ROS" ]; then ROS_FROM="system $ROS_ROOT/$SYSTEM_ROS"; else ROS_FROM="PyPI wheels (kilted)"; fi
echo "setup.sh: python $PYVER ($PY), ROS from $ROS_FROM, venv $VENV"

# ---------------------------------------------------------------------------------------------
# 1. venv + packages, skipped when the pinned set and the venv are unchanged.
if [ -n "$SYSTEM_ROS" ]; then
  REQ_ARGS=(-r "$REQ_SYS")
  CV2_PIN=$(grep -oE '^opencv-python-headless==[^ ]+' "$REQ_SYS") || die "$REQ_SYS pins no opencv-python-headless"
else
  REQ_ARGS=(-r "$REQ_ROS" -r "$REQ")
fi
# colcon from the venv's python: ament_python writes that python into the node scripts' shebangs, so
# the nodes find the venv's torch (a system /usr/bin/colcon would write /usr/bin/python3).
BUILD_CMD=("$VENV/bin/python" -m colcon build --symlink-install --event-handlers console_direct- console_cohesion-)
if [ "$PLAN" = 1 ]; then
  echo "setup.sh: plan: venv $VENV${SYSTEM_ROS:+ (--system-site-packages: rclpy and numpy of the distro)}"
  echo "setup.sh: plan: pip install ${REQ_ARGS[*]}, then $CV2_PIN"
  echo "setup.sh: plan: ${BUILD_CMD[*]}"
  exit 0
fi
PIN_HASH=$( { echo "$PYVER $SYSTEM_ROS"; cat "$REQ"; [ -n "$SYSTEM_ROS" ] || cat "$REQ_ROS"; [ -z "$SYSTEM_ROS" ] || cat "$REQ_SYS"; } | sha256sum | cut -c1-16)
STAMP="$VENV/.lerobot_ros_pins"
if [ "$FORCE" = 1 ] || [ ! -x "$VENV/bin/python" ] || [ "$(cat "$STAMP" 2>/dev/null)" != "$PIN_HASH" ]; then
  T=$(now)
  if [ ! -x "$VENV/bin/python" ]; then
    if [ -n "$SYSTEM_ROS" ]; then "$PY" -m venv --system-site-packages "$VENV" || die "could not create venv at $VENV";
    else "$PY" -m venv "$VENV" || die "could not create venv at $VENV (is the python venv module installed?)"; fi
  fi
  rm -f "$STAMP"
  PIPLOG="$VENV/pip-install.log"
  pip_install() {
    if ! "$VENV/bin/python" -m pip install --disable-pip-version-check "$@" >>"$PIPLOG" 2>&1; then
      echo "----- last lines of $PIPLOG -----" >&2; tail -25 "$PIPLOG" >&2
      if grep -qiE 'Could not fetch URL|Failed to establish a new connection|Temporary failure in name resolution|No matching distribution found|ProxyError|Network is unreachable' "$PIPLOG"; then
        die "pip could not get packages from the package index. Check the network / proxy (PIP_INDEX_URL, HTTPS_PROXY) and re-run ./setup.sh; nothing else was changed."
      fi
      die "pip install failed (full log: $PIPLOG). Fix the cause and re-run ./setup.sh."
    fi
  }
  : >"$PIPLOG"
  echo "setup.sh: installing the pinned packages of ${REQ_ARGS[*]//-r /} (log: $PIPLOG) ..."
  pip_install "${REQ_ARGS[@]}"
  # gym-pusht pulls opencv-python, whose cv2/ overwrites the headless build: put headless back.
  pip_install --no-deps --force-reinstall "$CV2_PIN"
  echo "setup.sh: packages installed in $(elapsed "$T") s"

  if [ -z "$SYSTEM_ROS" ]; then
    # The wheels' exported CMake files carry the wheel build machine's Python paths.
    "$VENV/bin/python" - <<'PYEOF' || die "CMake path rewrite failed (see above)"
import pathlib, sys, sysconfig
old = "/opt/python/cp311-cp311"
paths = sysconfig.get_paths()
repl = [(old + "/include/python3.11", paths["include"]), (old + "/lib/python3.11/site-packages", paths["purelib"])]
changed = 0
files = list((pathlib.Path(sys.prefix) / "share").glob("*/cmake/*.cmake"))
for f in files:
    text = f.read_text()
    if old in text:
        for a, b in repl:
            text = text.replace(a, b)
        f.write_text(text)
        changed += 1
left = [str(f) for f in files if old in f.read_text()]
print(f"setup.sh: cmake path rewrite: {changed} file(s) changed" + (f", still referencing {old}: {left}" if left else ""))
sys.exit(1 if left else 0)
PYEOF
  fi
  "$VENV/bin/python" -m pip check >/dev/null 2>&1 || { "$VENV/bin/python" -m pip check >&2 || true; die "the venv has broken requirements (above)"; }
  echo "$PIN_HASH" >"$STAMP"
else
  echo "setup.sh: packages up to date (stamp $PIN_HASH)"
fi

# ---------------------------------------------------------------------------------------------
# 2. colcon build, skipped when no build input changed since the last successful build.
# One build at a time in this checkout (concurrent shells / test runs would clobber build/).
exec 9>"$VENV/.colcon-build.lock"
flock 9
# shellcheck disable=SC1091
set +u; source "$ROOT/env.sh" --no-workspace; set -u
BUILD_INPUTS=$(cd "$ROOT" && { ls package.xml CMakeLists.txt colcon.meta colcon_defaults.yaml 2>/dev/null;
  find src -type f \( -name package.xml -o -name setup.py -o -name setup.cfg -o -name CMakeLists.txt \
    -o -path '*/msg/*' -o -path '*/srv/*' -o -path '*/action/*' -o -path '*/resource/*' \
    -o -path '*/launch/*' -o -path '*/config/*' -o -path '*/profiles/*' -o -path '*/urdf/*' -o -path '*/rviz/*' \
    -o -path '*/mjcf/*' \) -not -path '*/__pycache__/*' | LC_ALL=C sort; })
BUILD_HASH=$( { echo "$PIN_HASH"; cd "$ROOT" && echo "$BUILD_INPUTS" | xargs sha256sum; } | sha256sum | cut -c1-16)
BSTAMP="$ROOT/install/.lerobot_ros_build"
if [ "$FORCE" = 1 ] || [ ! -f "$ROOT/install/setup.bash" ] || [ "$(cat "$BSTAMP" 2>/dev/null)" != "$BUILD_HASH" ]; then
  T=$(now)
  [ "$FORCE" = 1 ] && rm -rf "$ROOT/build" "$ROOT/install" "$ROOT/log"
  echo "setup.sh: colcon build ..."
  BLOG="$ROOT/log/setup-colcon-build.log"; mkdir -p "$ROOT/log"
  if ! (cd "$ROOT" && "${BUILD_CMD[@]}" >"$BLOG" 2>&1); then
    echo "----- last lines of $BLOG -----" >&2; tail -40 "$BLOG" >&2
    die "colcon build failed (full log: $BLOG; per package: $ROOT/log/latest_build/<package>/). Fix the error and re-run ./setup.sh."
  fi
  echo "$BUILD_HASH" >"$BSTAMP"
  echo "setup.sh: colcon build of $(cd "$ROOT" && colcon list 2>/dev/null | wc -l) packages in $(elapsed "$T") s"
else
  echo "setup.sh: workspace build up to date (stamp $BUILD_HASH)"
fi
# The stack's user-facing commands (lerobot-*) on PATH by name: env.sh puts install/bin first.
mkdir -p "$ROOT/install/bin"
find "$ROOT/install/bin" -maxdepth 1 -type l -delete
for exe in "$ROOT"/install/*/lib/*/lerobot-*; do
  [ -x "$exe" ] && ln -sf "$exe" "$ROOT/install/bin/$(basename "$exe")"
done
echo "setup.sh: done in $(elapsed "$T0") s. Next: source env.sh"
