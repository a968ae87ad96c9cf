#!/usr/bin/env bash
# scripts/test.sh - set up from scratch if needed, then lint and run the whole test suite.
# Used by CI (.ci/run). Extra arguments go to pytest (e.g. scripts/test.sh -k recorder -x).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
./setup.sh
# shellcheck disable=SC1091
set +u; source env.sh; set -u
# tests get their own ROS_DOMAIN_ID per pytest process (lerobot_core.ros.testing); never leave loopback
export ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST
echo "== ruff"
ruff check .
ruff format --check .
echo "== pytest"
set +e
python -m pytest "$@"  # the lerobot_core pytest11 plugin loads itself (ROS_DOMAIN_ID per process)
code=$?
set -e
if [ "$code" = 5 ]; then echo "scripts/test.sh: pytest collected no tests" >&2; exit 1; fi
exit "$code"
