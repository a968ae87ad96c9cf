"""Hugging Face Hub ids for checkpoints (and datasets), resolved through huggingface_hub's cache.

``resolve_pretrained("lerobot/act_so101")`` returns the snapshot folder of the repo in the cache
(``$HF_HUB_CACHE``, by default ``~/.cache/huggingface/hub``): downloaded on first use when online,
read from the cache when offline (``HF_HUB_OFFLINE=1``, or no network), exactly as
``huggingface_hub.snapshot_download`` does. Only JSON, safetensors and text files are fetched:
checkpoints are never pickles. An existing local path always wins over a Hub id.

ROS-free; huggingface_hub is imported only when a Hub id is used.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

# org/name as the Hub spells repo ids (letters, digits, - _ .; no leading dot or slash)
_REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
CHECKPOINT_PATTERNS = ("*.json", "*.safetensors", "*.md", "*.txt")


class HubError(ValueError):
    """A Hub id that cannot be resolved; the message says where it looked and what to do."""


def is_repo_id(value: str) -> bool:
    """``org/name`` that is not an existing path (a relative folder of the same shape wins)."""
    return bool(_REPO_ID.match(value)) and not Path(value).expanduser().exists()


def hub_cache_dir() -> str:
    """Where huggingface_hub keeps snapshots (its own HF_HUB_CACHE / HF_HOME rules)."""
    from huggingface_hub import constants

    return str(constants.HF_HUB_CACHE)


def resolve_pretrained(
    path_or_repo_id: str | os.PathLike,
    revision: str | None = None,
    repo_type: str = "model",
    allow_patterns: tuple[str, ...] | None = CHECKPOINT_PATTERNS,
) -> Path:
    """A local folder as is; a Hub id as its snapshot folder in the cache (downloading when online)."""
    text = os.fspath(path_or_repo_id)
    if not is_repo_id(text):
        return Path(text).expanduser()
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError
    except ImportError:
        raise HubError(
            f"{text!r} is not a local folder; as a Hugging Face Hub id it needs huggingface_hub "
            "(pip install huggingface_hub)"
        ) from None
    try:
        folder = snapshot_download(
            text, repo_type=repo_type, revision=revision, allow_patterns=list(allow_patterns or []) or None
        )
    except LocalEntryNotFoundError as exc:
        from huggingface_hub import constants

        how = "HF_HUB_OFFLINE is set" if constants.HF_HUB_OFFLINE else "the Hub could not be reached"
        flags = (" --repo-type " + repo_type if repo_type != "model" else "") + (
            f" --revision {revision}" if revision else ""
        )  # without the revision the cache holds main, which a read at a tag does not find
        raise HubError(
            f"{text!r} is not a local folder, and as a Hub {repo_type} id it is not in the Hugging Face "
            f"cache {hub_cache_dir()} at revision {revision or 'main'} ({how}); download it once with "
            f"`hf download {text}{flags}` on a "
            "machine with network and the same HF_HUB_CACHE"
        ) from exc
    except (HfHubHTTPError, OSError) as exc:
        raise HubError(f"Hub {repo_type} {text!r}: {exc}") from exc
    return Path(folder)


DATASET_REVISION = "v3.0"  # LeRobot tags each dataset repo with its codebase version and reads at that tag


def resolve_dataset(path_or_repo_id: str | os.PathLike, revision: str | None = DATASET_REVISION) -> Path:
    """A local dataset folder as is; a Hub dataset id as its cached snapshot at LeRobot's version tag."""
    return resolve_pretrained(path_or_repo_id, revision=revision, repo_type="dataset", allow_patterns=None)
