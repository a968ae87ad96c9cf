#!/usr/bin/env bash
# scripts/demo.sh - set up from scratch if needed, then run the main job on the built-in default:
# the simulated SO-101 (MuJoCo, cube on a table, two cameras) driven by the scripted expert,
# recorded over ROS 2 by the recorder node into a LeRobotDataset v3, then checked and described.
#
#   scripts/demo.sh [--distro kilted|jazzy] [name:=value ...]   profile arguments of record_sim_so101, e.g. num_episodes:=5
# The dataset goes to outputs/sim_so101 (a second run appends episodes: resume).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
# --distro kilted|jazzy first: which environment to set up and use (default: a sourced system ROS 2's
# distro, else kilted; setup.sh --help)
# shellcheck source=distro.sh
. "$ROOT/scripts/distro.sh"
lr_take_distro_arg "$@"
shift "$LR_SHIFT"
lr_setup_and_enter "$DISTRO"
DATASET=${DATASET:-$ROOT/outputs/sim_so101}
RESUME=false
[ -f "$DATASET/meta/info.json" ] && RESUME=true
mkdir -p "$(dirname "$DATASET")"
lerobot-launch record_sim_so101 dataset_root:="$DATASET" resume:=$RESUME num_episodes:=2 episode_time_s:=8.0 "$@"
echo
lerobot-dataset-info "$DATASET" --check
