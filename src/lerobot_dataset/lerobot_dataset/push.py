"""`lerobot-ros-dataset-push`: upload a recorded dataset to the Hugging Face Hub, as LeRobot does.

    lerobot-ros-dataset-push DATASET REPO_ID [--private] [--branch B] [--tags t1 t2] [--no-videos]

What LeRobot's ``push_to_hub`` does with a dataset repo, through huggingface_hub: create the
*dataset* repo (exist_ok), upload the folder (never ``images/``, nor this writer's own work folder),
write a dataset card (``README.md``: tags ``LeRobot`` + yours, task category robotics, the parquet
files as the default config, meta/info.json shown), then tag the revision with the codebase version
(``v3.0``), moving the tag if it exists: LeRobot loads a Hub dataset at that tag. Log in first
(``hf auth login``) or set HF_TOKEN. ``--dry-run`` prints the plan and uploads nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

from lerobot_core import cli

from . import CODEBASE_VERSION, DatasetError, DatasetReader
from .check import check_dataset
from .storage import WORK_DIR

PROG = "lerobot-ros-dataset-push"
REPO_TYPE = "dataset"


@dataclass(frozen=True)
class PushPlan:
    root: Path
    repo_id: str
    repo_type: str
    branch: str | None
    private: bool
    files: tuple[str, ...]  # paths relative to root, what upload_folder sends
    ignore_patterns: tuple[str, ...]
    tag: str  # the codebase version LeRobot resolves a Hub dataset at
    card: str  # README.md text

    def describe(self) -> str:
        return (
            f"{self.repo_type} repo {self.repo_id} ({'private' if self.private else 'public'}), revision "
            f"{self.branch or 'main'}: {len(self.files)} files from {self.root} + README.md, tag {self.tag}"
        )


def dataset_card(info: dict, repo_id: str, tags: tuple[str, ...] = (), license: str = "apache-2.0") -> str:
    header = {
        "license": license,
        "task_categories": ["robotics"],
        "tags": ["LeRobot", *[t for t in tags if t != "LeRobot"]],
        "configs": [{"config_name": "default", "data_files": "data/*/*.parquet"}],
    }
    body = (
        f"# {repo_id}\n\n"
        f"A LeRobotDataset {info.get('codebase_version', CODEBASE_VERSION)} recorded from ROS 2 topics with "
        "lerobot_ros; load it with `lerobot.datasets.lerobot_dataset.LeRobotDataset"
        f'("{repo_id}")`.\n\n'
        f"- robot type: {info.get('robot_type')}\n- episodes: {info.get('total_episodes')}, frames: "
        f"{info.get('total_frames')}, fps: {info.get('fps')}\n\n"
        "## meta/info.json\n\n```json\n" + json.dumps(info, indent=4) + "\n```\n"
    )
    return "---\n" + yaml.safe_dump(header, sort_keys=False) + "---\n\n" + body


def plan_push(
    root: str | Path,
    repo_id: str,
    branch: str | None = None,
    private: bool = False,
    tags: tuple[str, ...] = (),
    push_videos: bool = True,
    license: str = "apache-2.0",
) -> PushPlan:
    """What a push would send; DatasetError when the folder is not a complete, finalized dataset, or
    fails `lerobot-dataset-info --check` (what is pushed is what others train on)."""
    root = Path(root)
    reader = DatasetReader(root)  # refuses an interrupted save or an unfinalized dataset
    problems = check_dataset(root)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise DatasetError(
            f"fails the dataset check, so it is not pushed: {problems[0]}{more}; "
            f"`lerobot-dataset-info {root} --check` lists every problem, `--repair` repairs what it can"
        )
    if reader.info.get("codebase_version") != CODEBASE_VERSION:
        raise DatasetError(
            f"{root}: codebase_version {reader.info.get('codebase_version')!r}, not {CODEBASE_VERSION}"
        )
    ignore = ["images/", WORK_DIR + "/", "README.md"] + ([] if push_videos else ["videos/"])
    files = tuple(
        sorted(
            str(p.relative_to(root))
            for p in root.rglob("*")
            if p.is_file() and not any(str(p.relative_to(root)).startswith(i.rstrip("/")) for i in ignore)
        )
    )
    return PushPlan(
        root=root,
        repo_id=repo_id,
        repo_type=REPO_TYPE,
        branch=branch,
        private=private,
        files=files,
        ignore_patterns=tuple(i + "*" if i.endswith("/") else i for i in ignore),
        tag=CODEBASE_VERSION,
        card=dataset_card(reader.info, repo_id, tags, license),
    )


def push(plan: PushPlan, token: str | None = None) -> str:
    """Run the plan with huggingface_hub; returns the dataset's URL."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import RevisionNotFoundError

    api = HfApi(token=token)
    url = api.create_repo(plan.repo_id, repo_type=plan.repo_type, private=plan.private, exist_ok=True)
    if plan.branch:
        api.create_branch(plan.repo_id, branch=plan.branch, repo_type=plan.repo_type, exist_ok=True)
    api.upload_folder(
        repo_id=plan.repo_id,
        repo_type=plan.repo_type,
        folder_path=str(plan.root),
        revision=plan.branch,
        allow_patterns=list(plan.files),
        commit_message=f"Upload {plan.root.name} with lerobot_ros",
    )
    api.upload_file(
        path_or_fileobj=plan.card.encode("utf-8"),
        path_in_repo="README.md",
        repo_id=plan.repo_id,
        repo_type=plan.repo_type,
        revision=plan.branch,
        commit_message="Dataset card",
    )
    try:
        api.delete_tag(plan.repo_id, tag=plan.tag, repo_type=plan.repo_type)
    except RevisionNotFoundError:
        pass  # first push: no tag to move
    api.create_tag(plan.repo_id, tag=plan.tag, revision=plan.branch, repo_type=plan.repo_type)
    return str(url)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog=PROG, description=__doc__.split("\n\n")[0], formatter_class=cli.HelpFormatter
    )
    ap.add_argument("dataset", type=Path, help="finalized LeRobotDataset v3 folder")
    ap.add_argument("repo_id", help="Hub dataset id, <user or org>/<name>")
    ap.add_argument("--branch", default=None, help="push to this branch (created if missing)")
    ap.add_argument("--private", action="store_true", help="create the repo private")
    ap.add_argument("--tags", nargs="*", default=[], help="card tags besides LeRobot")
    ap.add_argument("--license", default="apache-2.0", help="card license id")
    ap.add_argument("--no-videos", action="store_true", help="leave videos/ out")
    ap.add_argument("--dry-run", action="store_true", help="print the files and the plan, upload nothing")
    args = ap.parse_args(argv)
    from lerobot_core.hub import is_repo_id

    if not is_repo_id(args.repo_id):
        print(f"{PROG}: error: REPO_ID {args.repo_id!r}: expected <user or org>/<name>", file=sys.stderr)
        return 2
    try:
        plan = plan_push(
            args.dataset,
            args.repo_id,
            args.branch,
            args.private,
            tuple(args.tags),
            not args.no_videos,
            args.license,
        )
    except (DatasetError, FileNotFoundError) as exc:
        print(f"{PROG}: error: DATASET {str(args.dataset)!r}: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # damage no check foresaw: one line, never a traceback
        print(
            f"{PROG}: error: DATASET {str(args.dataset)!r} cannot be read ({type(exc).__name__}: {exc}); "
            f"`lerobot-dataset-info {args.dataset} --check` lists what is damaged",
            file=sys.stderr,
        )
        return 2
    if args.dry_run:
        print("\n".join(plan.files))
        print(f"{PROG}: would push {plan.describe()}", file=sys.stderr)
        return 0
    try:
        url = push(plan)
    except ImportError:
        print(f"{PROG}: error: pushing needs huggingface_hub (pip install huggingface_hub)", file=sys.stderr)
        return 2
    except Exception as exc:  # huggingface_hub's HTTP, auth and offline errors: say which and where
        print(
            f"{PROG}: error: pushing to {REPO_TYPE} {args.repo_id}: {type(exc).__name__}: {exc}",
            file=sys.stderr,
        )
        return 1
    print(f"{PROG}: pushed {plan.describe()}: {url}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
