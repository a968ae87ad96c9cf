#!/usr/bin/env bash
# setup.sh - make this checkout a working lerobot_ros workspace.
#
# Creates a venv with a ROS 2 runtime + build toolchain (PyPI wheels of the chosen distro) or, when a
# system ROS 2 is already sourced (/opt/ros/<distro>), a venv on top of it; installs the ML / sim
# stack; rewrites the build-machine paths baked into the wheels' CMake files; colcon-builds the
# workspace. Idempotent: a re-run with nothing changed only checks stamps.
# Two environments can live side by side in one checkout, each with its own venv and build folders:
#   kilted (default): Kilted wheels on Python 3.11  -> .venv,        build/, install/, log/
#   jazzy:            Jazzy wheels on Python 3.12   -> .venv-jazzy,  build-jazzy/, install-jazzy/, log-jazzy/
#
#   ./setup.sh [--distro kilted|jazzy]   # set up (or bring up to date); default $LEROBOT_ROS_DISTRO, else kilted
#   ./setup.sh --force    # reinstall the pinned packages and rebuild from scratch
#   ./setup.sh --plan     # say which ROS, venv, package list and build command it would use; change nothing
#   source env.sh [--distro jazzy]   # afterwards: a shell in the set-up environment
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
FORCE=0
PLAN=0
# shellcheck source=scripts/distro.sh
. "$ROOT/scripts/distro.sh"
DISTRO=$(lr_default_distro)
DISTRO_GIVEN=0
[ -n "${LEROBOT_ROS_DISTRO:-}" ] && DISTRO_GIVEN=1
while [ $# -gt 0 ]; do
  case "$1" in
    --force) FORCE=1 ;;
    --plan) PLAN=1 ;;
    --distro) [ $# -ge 2 ] || { echo "setup.sh: --distro needs a value: kilted or jazzy" >&2; exit 2; }; DISTRO=$2; DISTRO_GIVEN=1; shift ;;
    --distro=*) DISTRO=${1#--distro=}; DISTRO_GIVEN=1 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done

die() { echo "setup.sh: ERROR: $*" >&2; exit 1; }
DISTRO_ASKED=$DISTRO
now() { date +%s.%N; }
T0=$(now)
elapsed() { awk -v a="$(now)" -v b="$1" 'BEGIN{printf "%.1f", a-b}'; }

# ---------------------------------------------------------------------------------------------
# Pinned package sets: requirements.txt (ML / sim / dev) and requirements-ros-wheels.txt (ROS 2).
REQ="$ROOT/requirements.txt"
# On a system ROS: the same list with numpy < 2 and an opencv built for numpy 1.x (the distro's ABI).
REQ_SYS="$ROOT/requirements-system-ros.txt"
CV2_PIN=opencv-python-headless==4.14.0.94

# ---------------------------------------------------------------------------------------------
# Which ROS: a sourced system install wins over the wheels; it must be the distro asked for.
SYSTEM_ROS=""
ROS_ROOT=${LEROBOT_ROS_SYSTEM_ROOT:-/opt/ros}
if [ -n "${ROS_DISTRO:-}" ] && [ -d "$ROS_ROOT/${ROS_DISTRO}" ] \
   && case ":${AMENT_PREFIX_PATH:-}:" in *":$ROS_ROOT/${ROS_DISTRO}:"*) true ;; *) false ;; esac; then
  case "$ROS_DISTRO" in
    humble|jazzy|kilted|rolling) SYSTEM_ROS=$ROS_DISTRO ;;
    *) die "system ROS 2 '$ROS_DISTRO' ($ROS_ROOT/$ROS_DISTRO) is sourced but not supported (supported: humble, jazzy, kilted, rolling). Open a new shell without sourcing it to use the PyPI wheels instead." ;;
  esac
  if [ "$DISTRO_GIVEN" = 1 ] && [ "$DISTRO_ASKED" != "$SYSTEM_ROS" ]; then
    die "--distro $DISTRO_ASKED was asked for, but the sourced ROS 2 is '$SYSTEM_ROS' ($ROS_ROOT/$SYSTEM_ROS). Use --distro $SYSTEM_ROS, or open a new shell without sourcing it for the $DISTRO_ASKED wheels."
  fi
  DISTRO=$SYSTEM_ROS
fi
lr_distro_layout "$ROOT" "$DISTRO" || exit 2
[ -n "$SYSTEM_ROS" ] || [ -n "$LR_WHEELS" ] \
  || die "ROS 2 $DISTRO has no PyPI wheels: source /opt/ros/$DISTRO/setup.bash first, or use --distro kilted or --distro jazzy."
VENV=${LEROBOT_ROS_VENV:-$LR_VENV}
BUILD_BASE=$LR_BUILD INSTALL_BASE=$LR_INSTALL LOG_BASE=$LR_LOG
if [ -n "${LEROBOT_ROS_ACTIVE_VENV:-}" ] && [ "$LEROBOT_ROS_ACTIVE_VENV" != "$VENV" ]; then
  die "this shell has sourced env.sh for $LEROBOT_ROS_ACTIVE_VENV; set up $DISTRO ($VENV) from a new shell (the two environments' PYTHONPATHs would mix)."
fi

if [ -n "$SYSTEM_ROS" ]; then
  PY=${PYTHON:-/usr/bin/python3}
else
  PY=${PYTHON:-$(lr_find_python "$LR_PYMINOR" || echo "python$LR_PYMINOR")}
fi
command -v "$PY" >/dev/null 2>&1 || die "'$PY' not found. The ROS 2 $DISTRO wheels are built for CPython $LR_PYMINOR: install python$LR_PYMINOR (or set PYTHON=/path/to/python$LR_PYMINOR)."
PYVER=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) \
  || die "'$PY' does not run. Set PYTHON=/path/to/python$LR_PYMINOR."
if [ -z "$SYSTEM_ROS" ] && [ "$PYVER" != "$LR_PYMINOR" ]; then
  die "'$PY' is Python $PYVER, but --distro $DISTRO uses the PyPI ROS 2 $DISTRO wheels on Python $LR_PYMINOR. Set PYTHON=/path/to/python$LR_PYMINOR, pick the distro of that Python (kilted: 3.11, jazzy: 3.12), or source a system ROS 2 (/opt/ros/<distro>/setup.bash) first."
fi
if [ -n "$SYSTEM_ROS" ]; then ROS_FROM="system $ROS_ROOT/$SYSTEM_ROS"; else ROS_FROM="PyPI wheels ($DISTRO)"; fi
echo "setup.sh: python $PYVER ($PY), ROS from $ROS_FROM, venv $VENV"

# An existing venv must hold this distro's rclpy (LEROBOT_ROS_VENV pointing at the other distro's venv).
rclpy_of_venv() {  # prints "<version>" of the rclpy the venv imports, or nothing
  [ -x "$VENV/bin/python" ] || return 0
  "$VENV/bin/python" - <<'PYEOF' 2>/dev/null || true
import importlib.metadata as m
for name in ("ros-rclpy", "ros-jazzy-rclpy"):
    try:
        print(m.version(name)); break
    except m.PackageNotFoundError:
        pass
PYEOF
}
check_rclpy() {
  local v; v=$(rclpy_of_venv)
  if [ -n "$v" ] && [ -n "$LR_RCLPY_MAJOR" ] && [ "${v%%.*}" != "$LR_RCLPY_MAJOR" ]; then
    die "the venv $VENV holds rclpy $v, which is not ROS 2 $DISTRO's (rclpy $LR_RCLPY_MAJOR.x). Point LEROBOT_ROS_VENV at the $DISTRO venv (default $LR_VENV), or use the --distro that venv was made for."
  fi
}
[ -n "$SYSTEM_ROS" ] || check_rclpy

# ---------------------------------------------------------------------------------------------
# 1. venv + packages, skipped when the pinned set and the venv are unchanged.
if [ -n "$SYSTEM_ROS" ]; then
  REQ_ARGS=(-r "$REQ_SYS")
  CV2_PIN=$(grep -oE '^opencv-python-headless==[^ ]+' "$REQ_SYS") || die "$REQ_SYS pins no opencv-python-headless"
else
  REQ_ARGS=(-r "$LR_WHEELS" -r "$REQ")
fi
# colcon from the venv's python: ament_python writes that python into the node scripts' shebangs, so
# the nodes find the venv's torch (a system /usr/bin/colcon would write /usr/bin/python3).
BUILD_CMD=("$VENV/bin/python" -m colcon --log-base "$LOG_BASE" build --build-base "$BUILD_BASE" --install-base "$INSTALL_BASE"
  --symlink-install --event-handlers console_direct- console_cohesion-)
if [ "$PLAN" = 1 ]; then
  echo "setup.sh: plan: distro $DISTRO, build $BUILD_BASE, install $INSTALL_BASE"
  echo "setup.sh: plan: venv $VENV${SYSTEM_ROS:+ (--system-site-packages: rclpy and numpy of the distro)}"
  echo "setup.sh: plan: pip install ${REQ_ARGS[*]}, then $CV2_PIN, then requirements-metaworld.txt (metaworld --no-deps)"
  echo "setup.sh: plan: ${BUILD_CMD[*]}"
  exit 0
fi
PIN_HASH=$( { echo "$PYVER $SYSTEM_ROS"; cat "$REQ"; [ -n "$SYSTEM_ROS" ] || cat "$LR_WHEELS"; [ -z "$SYSTEM_ROS" ] || cat "$REQ_SYS"; } | sha256sum | cut -c1-16)
STAMP="$VENV/.lerobot_ros_pins"
PIPLOG="$VENV/pip-install.log"
pip_install() {
  lr_pip_tmp
  trap lr_pip_tmp_done EXIT
  if ! TMPDIR="$PIP_TMP" "$VENV/bin/python" -m pip install --disable-pip-version-check "$@" >>"$PIPLOG" 2>&1; then
    lr_pip_tmp_done
    echo "----- last lines of $PIPLOG -----" >&2; tail -25 "$PIPLOG" >&2
    if grep -qiE 'Could not fetch URL|Failed to establish a new connection|Temporary failure in name resolution|No matching distribution found|ProxyError|Network is unreachable' "$PIPLOG"; then
      die "pip could not get packages from the package index. Check the network / proxy (PIP_INDEX_URL, HTTPS_PROXY) and re-run ./setup.sh; nothing else was changed."
    fi
    grep -q 'No space left on device' "$PIPLOG" && df -h "$VENV" "${TMPDIR:-/tmp}" >&2
    die "pip install failed (full log: $PIPLOG). Fix the cause and re-run ./setup.sh."
  fi
  lr_pip_tmp_done
}
# pip check, less the conflicts accepted on purpose: metaworld's metadata pins mujoco==3.3.0, and it runs
# with the stack's mujoco 3.8.1 (installed --no-deps, step 1b; docs/sim.md). LIBERO, when
# scripts/install-libero.sh put it here with --no-deps, lacks the requirements of its training scripts
# (robomimic, transformers, opencv-python, ...; docs/sim.md 4b). Anything else fails setup.
pip_check() {
  local out
  out=$("$VENV/bin/python" -m pip check 2>&1) && return 0
  out=$(printf '%s\n' "$out" | grep -vE '^metaworld [^ ]+ has requirement mujoco==|^(hf-libero|robosuite|bddl) [^ ]+ (requires|has requirement) ' || true)
  [ -z "$out" ] && return 0
  printf '%s\n' "$out" >&2
  die "the venv has broken requirements (above)"
}
if [ "$FORCE" = 1 ] || [ ! -x "$VENV/bin/python" ] || [ "$(cat "$STAMP" 2>/dev/null)" != "$PIN_HASH" ]; then
  T=$(now)
  if [ ! -x "$VENV/bin/python" ]; then
    if [ -n "$SYSTEM_ROS" ]; then "$PY" -m venv --system-site-packages "$VENV" || die "could not create venv at $VENV";
    else "$PY" -m venv "$VENV" || die "could not create venv at $VENV (is the python venv module installed?)"; fi
  fi
  rm -f "$STAMP"
  : >"$PIPLOG"
  # torch's CUDA build (Python 3.12: 4.7 GB) as hard links from a venv on this disk that holds the pinned version
  # (LeRobot 0.6.1's side venv holds Jazzy's), so that pip neither downloads nor unpacks it again
  # shellcheck disable=SC2046
  { "$VENV/bin/python" "$ROOT/scripts/venv_link.py" "${REQ_ARGS[@]}" $(lr_venv_donors "$ROOT") 2>&1 \
      || echo "setup.sh: scripts/venv_link.py failed (above); pip installs torch itself"; } | tee -a "$PIPLOG"
  echo "setup.sh: installing the pinned packages of ${REQ_ARGS[*]//-r /} (log: $PIPLOG) ..."
  pip_install "${REQ_ARGS[@]}"
  # gym-pusht pulls opencv-python, whose cv2/ overwrites the headless build: put headless back.
  pip_install --no-deps --force-reinstall "$CV2_PIN"
  echo "setup.sh: packages installed in $(elapsed "$T") s"

  if [ -z "$SYSTEM_ROS" ]; then
    # The wheels' exported CMake files carry the wheel build machine's Python paths.
    "$VENV/bin/python" - <<'PYEOF' || die "CMake path rewrite failed (see above)"
import pathlib, re, sys, sysconfig
# e.g. /opt/python/cp312-cp312/include/python3.12 and /opt/python/cp312-cp312/lib/python3.12/site-packages
build_root = re.compile(r"/opt/python/cp3\d+-cp3\d+(/include/python3\.\d+|/lib/python3\.\d+/site-packages)")
paths = sysconfig.get_paths()
real = {"include": paths["include"], "lib": paths["purelib"]}
changed = 0
files = list((pathlib.Path(sys.prefix) / "share").glob("*/cmake/*.cmake"))
for f in files:
    text = f.read_text()
    new = build_root.sub(lambda m: real["include" if m.group(1).startswith("/include") else "lib"], text)
    if new != text:
        f.write_text(new)
        changed += 1
left = [str(f) for f in files if "/opt/python/cp3" in f.read_text()]
print(f"setup.sh: cmake path rewrite: {changed} file(s) changed" + (f", still referencing /opt/python: {left}" if left else ""))
sys.exit(1 if left else 0)
PYEOF
  fi
  pip_check
  [ -n "$SYSTEM_ROS" ] || check_rclpy
  echo "$PIN_HASH" >"$STAMP"
else
  echo "setup.sh: packages up to date (stamp $PIN_HASH)"
fi
# 1b. Meta-World beside the pinned set (requirements-metaworld.txt says why --no-deps). Outside the stamp on
# purpose: a venv set up before it gets it on its next run without reinstalling the rest.
MW_REQ="$ROOT/requirements-metaworld.txt"
MW_PIN=$(grep -oE '^metaworld==[^ ]+' "$MW_REQ") || die "$MW_REQ pins no metaworld"
if ! "$VENV/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(m.version("metaworld") != sys.argv[1])' \
    "${MW_PIN#metaworld==}" 2>/dev/null; then
  T=$(now)
  echo "setup.sh: installing $MW_PIN (--no-deps) and its other requirements where missing (log: $PIPLOG) ..."
  pip_install --no-deps "$MW_PIN"
  # shellcheck disable=SC2046
  pip_install $(grep -vE '^[[:space:]]*(#|$)|^metaworld==' "$MW_REQ")
  pip_check
  echo "setup.sh: $MW_PIN installed in $(elapsed "$T") s"
fi

# ---------------------------------------------------------------------------------------------
# 2. colcon build, skipped when no build input changed since the last successful build.
# One build at a time in this checkout (concurrent shells / test runs would clobber build/).
exec 9>"$VENV/.colcon-build.lock"
flock 9
# shellcheck disable=SC1091
set +u; LEROBOT_ROS_VENV="$VENV" LEROBOT_ROS_DISTRO="$DISTRO" source "$ROOT/env.sh" --no-workspace; set -u
BUILD_INPUTS=$(cd "$ROOT" && { ls package.xml CMakeLists.txt colcon.meta colcon_defaults.yaml 2>/dev/null;
  find src -type f \( -name package.xml -o -name setup.py -o -name ament_setup.py -o -name setup.cfg -o -name CMakeLists.txt \
    -o -path '*/msg/*' -o -path '*/srv/*' -o -path '*/action/*' -o -path '*/resource/*' \
    -o -path '*/launch/*' -o -path '*/config/*' -o -path '*/profiles/*' -o -path '*/urdf/*' -o -path '*/rviz/*' \
    -o -path '*/mjcf/*' -o -path '*/bin/*' \) -not -path '*/__pycache__/*' | LC_ALL=C sort; })
BUILD_HASH=$( { echo "$PIN_HASH"; cd "$ROOT" && echo "$BUILD_INPUTS" | xargs sha256sum; } | sha256sum | cut -c1-16)
BSTAMP="$INSTALL_BASE/.lerobot_ros_build"
# what a package installs besides its modules: its packaging files (with the setup() every setup.py
# shares, src/lerobot_core/ament_setup.py) and its bin/ commands
packaging_hash() {
  (cd "$1" && { ls bin 2>/dev/null || true; cat setup.py setup.cfg package.xml "$ROOT/src/lerobot_core/ament_setup.py" 2>/dev/null || true; } | sha256sum | cut -c1-16)
}
declare -A PACKAGING  # package name -> packaging_hash, for every package of src/
MISSING=0  # a package of src/ not installed (its install folder removed by hand, say)
for pkg in "$ROOT"/src/*/; do
  [ -f "$pkg/package.xml" ] || continue
  name=$(basename "$pkg")
  PACKAGING[$name]=$(packaging_hash "$pkg")
  [ -d "$INSTALL_BASE/$name" ] || MISSING=1
done
if [ "$FORCE" = 1 ] || [ "$MISSING" = 1 ] || [ ! -f "$INSTALL_BASE/setup.bash" ] || [ "$(cat "$BSTAMP" 2>/dev/null)" != "$BUILD_HASH" ]; then
  T=$(now)
  [ "$FORCE" = 1 ] && rm -rf "$BUILD_BASE" "$INSTALL_BASE" "$LOG_BASE"
  echo "setup.sh: colcon build ..."
  # A package whose packaging changed (setup.py, setup.cfg, package.xml, its bin/ commands) is built
  # anew: colcon leaves what it installed before (a command or module moved to another package stays
  # behind as a stale console script or a dangling link, which setuptools then fails on)
  for name in "${!PACKAGING[@]}"; do
    was="$INSTALL_BASE/$name/.lerobot_ros_packaging"
    if [ -f "$was" ] && [ "$(cat "$was")" != "${PACKAGING[$name]}" ]; then
      rm -rf "${BUILD_BASE:?}/$name" "${INSTALL_BASE:?}/$name"
    fi
  done
  find "$BUILD_BASE" "$INSTALL_BASE" -xtype l -delete 2>/dev/null || true
  BLOG="$LOG_BASE/setup-colcon-build.log"; mkdir -p "$LOG_BASE"
  if ! (cd "$ROOT" && "${BUILD_CMD[@]}" >"$BLOG" 2>&1); then
    echo "----- last lines of $BLOG -----" >&2; tail -40 "$BLOG" >&2
    die "colcon build failed (full log: $BLOG; per package: $LOG_BASE/latest_build/<package>/). Fix the error and re-run ./setup.sh."
  fi
  echo "$BUILD_HASH" >"$BSTAMP"
  for name in "${!PACKAGING[@]}"; do
    if [ -d "$INSTALL_BASE/$name" ]; then echo "${PACKAGING[$name]}" >"$INSTALL_BASE/$name/.lerobot_ros_packaging"; fi
  done
  echo "setup.sh: colcon build of $(cd "$ROOT" && colcon list 2>/dev/null | wc -l) packages in $(elapsed "$T") s"
else
  echo "setup.sh: workspace build up to date (stamp $BUILD_HASH)"
fi
# The stack's user-facing commands (lerobot-*) on PATH by name: env.sh puts install/bin first.
mkdir -p "$INSTALL_BASE/bin"
find "$INSTALL_BASE/bin" -maxdepth 1 -type l -delete
for exe in "$INSTALL_BASE"/*/lib/*/lerobot-*; do
  [ -x "$exe" ] && ln -sf "$exe" "$INSTALL_BASE/bin/$(basename "$exe")"
done
if [ "$DISTRO" = kilted ]; then NEXT="source env.sh"; else NEXT="source env.sh --distro $DISTRO"; fi
echo "setup.sh: $DISTRO done in $(elapsed "$T0") s. Next: $NEXT"
