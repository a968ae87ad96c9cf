#!/usr/bin/env bash
# scripts/demo.sh - set up from scratch if needed, then run the main job on the built-in default.
# Extra arguments are profile arguments (name:=value).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
./setup.sh
# shellcheck disable=SC1091
set +u; source env.sh; set -u
exec lerobot-launch skeleton expect_count:=500 timeout_s:=60 "$@"
