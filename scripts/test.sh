#!/usr/bin/env bash
# scripts/test.sh - set up from scratch if needed, then lint and run the whole test suite.
# Used by CI (.ci/run). scripts/test.sh [--distro kilted|jazzy] [pytest args...], e.g. scripts/test.sh -k recorder -x.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# --distro kilted|jazzy first: which environment to set up and use (default: a sourced system ROS 2's
# distro, else kilted; setup.sh --help)
# shellcheck source=distro.sh
. "$ROOT/scripts/distro.sh"
DISTRO=$(lr_default_distro)
case "${1:-}" in
  --distro) DISTRO=${2:?--distro needs a value: kilted or jazzy}; shift 2 ;;
  --distro=*) DISTRO=${1#--distro=}; shift ;;
esac
./setup.sh --distro "$DISTRO"
# shellcheck disable=SC1091
set +u; source env.sh --distro "$DISTRO"; set -u
# tests get their own ROS_DOMAIN_ID per pytest process (lerobot_core.ros.testing); never leave loopback
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
echo "== ruff"
ruff check .
ruff format --check .
# LeRobot-compat tests load every dataset shape we write with the real LeRobot 0.4.4, in a side venv.
# Built here when missing; if it cannot be built, those tests fail with the reason (never skip).
export LEROBOT_REF_VENV="${LEROBOT_REF_VENV:-/work/lerobot-ref-venv}"
echo "== LeRobot 0.4.4 side venv: $LEROBOT_REF_VENV (scripts/make-lerobot-ref-venv.sh builds it when missing)"
ref_log=$(mktemp)
if ! bash scripts/make-lerobot-ref-venv.sh "$LEROBOT_REF_VENV" >"$ref_log" 2>&1; then
    LEROBOT_REF_VENV_ERROR="scripts/make-lerobot-ref-venv.sh $LEROBOT_REF_VENV failed: $(tail -n 3 "$ref_log" | tr '\n' ' ')"
    export LEROBOT_REF_VENV_ERROR
    echo "$LEROBOT_REF_VENV_ERROR" >&2
fi
rm -f "$ref_log"
echo "== pytest"
set +e
python -m pytest "$@"  # the lerobot_core pytest11 plugin loads itself (ROS_DOMAIN_ID per process)
code=$?
set -e
if [ "$code" = 5 ]; then echo "scripts/test.sh: pytest collected no tests" >&2; exit 1; fi
exit "$code"
