#!/usr/bin/env bash
# scripts/test.sh - set up from scratch if needed, then lint and run the whole test suite.
# Used by CI (.ci/run). scripts/test.sh [--distro kilted|jazzy] [pytest args...], e.g. scripts/test.sh -k recorder -x.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# One run at a time per user: each run re-points the shared LeRobot side venvs (below) to its own checkout,
# so two at once would test each other's code. The lock is held by a flock process around this script, not
# by what the script starts (-o), so a daemon that a test leaves running cannot keep it.
command -v flock >/dev/null || { echo "scripts/test.sh: flock not found: install util-linux" >&2; exit 1; }
RUN_LOCK="${XDG_CACHE_HOME:-$HOME/.cache}/lerobot_ros/test.sh.lock"
if [ "${LR_TEST_SH_LOCK:-}" != "$RUN_LOCK" ]; then
    mkdir -p "$(dirname "$RUN_LOCK")"
    if ! flock -n "$RUN_LOCK" true; then
        holder=$(cat "$RUN_LOCK" 2>/dev/null || true)
        echo "scripts/test.sh: another scripts/test.sh holds $RUN_LOCK${holder:+ ($holder)}; waiting" >&2
    fi
    LR_TEST_SH_LOCK="$RUN_LOCK" exec flock -o "$RUN_LOCK" bash "$ROOT/scripts/test.sh" "$@"
fi
echo "pid $$, $ROOT, since $(date '+%F %T')" >"$RUN_LOCK"
# --distro kilted|jazzy first: which environment to set up and use (default: a sourced system ROS 2's
# distro, else kilted; setup.sh --help)
# shellcheck source=distro.sh
. "$ROOT/scripts/distro.sh"
lr_take_distro_arg "$@"
shift "$LR_SHIFT"
lr_setup_and_enter "$DISTRO"
# tests get their own ROS_DOMAIN_ID per pytest process (lerobot_core.ros.testing); never leave loopback
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
echo "== ruff"
ruff check .
ruff format --check .
# LeRobot-compat tests check us against the real LeRobot 0.4.4 and 0.6.1, each in a side venv (where:
# the test plugin's ref_venv, ${XDG_CACHE_HOME:-~/.cache}/lerobot_ros/lerobot-<version> unless
# LEROBOT_REF_VENV / LEROBOT_REF_VENV_06 say). Built here when missing; if one cannot be built, its tests
# fail with the reason (never skip).
ref_venv() { python -c "from lerobot_core.ros.testing.pytest_plugin import ref_venv; print(ref_venv('$1'))"; }
LEROBOT_REF_VENV=$(ref_venv 0.4.4)
LEROBOT_REF_VENV_06=$(ref_venv 0.6.1)
export LEROBOT_REF_VENV LEROBOT_REF_VENV_06
for version in 0.4.4 0.6.1; do
    if [ "$version" = 0.4.4 ]; then var=LEROBOT_REF_VENV; else var=LEROBOT_REF_VENV_06; fi
    echo "== LeRobot $version side venv: ${!var} (scripts/make-lerobot-ref-venv.sh builds it when missing)"
    ref_log=$(mktemp)
    if ! bash scripts/make-lerobot-ref-venv.sh --version "$version" "${!var}" >"$ref_log" 2>&1; then
        printf -v "${var}_ERROR" '%s' "scripts/make-lerobot-ref-venv.sh --version $version ${!var} failed: $(tail -n 3 "$ref_log" | tr '\n' ' ')"
        export "${var}_ERROR"
        err_var="${var}_ERROR"
        echo "${!err_var}" >&2
    fi
    rm -f "$ref_log"
done
echo "== pytest"
set +e
python -m pytest "$@"  # the lerobot_core pytest11 plugin loads itself (ROS_DOMAIN_ID per process)
code=$?
set -e
if [ "$code" = 5 ]; then echo "scripts/test.sh: pytest collected no tests" >&2; exit 1; fi
exit "$code"
