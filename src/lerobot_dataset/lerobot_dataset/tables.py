"""Reading and writing the parquet/json metadata files of a v3.0 dataset (pyarrow only, no pandas)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from .errors import DatasetError
from .format import EPISODES_DIR, INFO_PATH, STATS_PATH, TASKS_PATH, check_version

PARQUET_OPTIONS = {"compression": "snappy", "use_dictionary": True}


def read_json(path: Path) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as exc:
        raise DatasetError(f"{path}: cannot read JSON ({exc})") from exc


def load_info(root: Path) -> dict:
    path = root / INFO_PATH
    if not path.exists():
        raise DatasetError(f"{root}: not a LeRobot dataset ({INFO_PATH} is missing)")
    info = read_json(path)
    if not isinstance(info, dict):
        raise DatasetError(f"{path}: expected a JSON object, got {type(info).__name__}")
    check_version(info, str(path))
    missing = [k for k in ("fps", "features") if k not in info]
    if missing:
        raise DatasetError(
            f"{path}: no {' or '.join(repr(k) for k in missing)}: not a complete LeRobot info.json"
        )
    return info


def load_stats(root: Path) -> dict | None:
    path = root / STATS_PATH
    return read_json(path) if path.exists() else None


def load_tasks(root: Path) -> list[str]:
    """Task strings ordered by task_index. Accepts the index stored as `task` or `__index_level_0__`."""
    path = root / TASKS_PATH
    if not path.exists():
        return []
    table = pq.read_table(path)
    names = table.column_names
    text_col = next((c for c in ("task", "__index_level_0__") if c in names), None)
    if text_col is None or "task_index" not in names:
        raise DatasetError(f"{path}: expected columns 'task_index' and 'task', found {names}")
    pairs = sorted(
        zip(table.column("task_index").to_pylist(), table.column(text_col).to_pylist(), strict=True)
    )
    tasks = [t for _, t in pairs]
    if [i for i, _ in pairs] != list(range(len(pairs))):
        raise DatasetError(f"{path}: task_index values are not 0..{len(pairs) - 1}")
    return tasks


def tasks_table(tasks: list[str]) -> pa.Table:
    """tasks.parquet with the task string as the pandas index named `task` (what LeRobot reads)."""
    pandas_meta = {
        "index_columns": ["task"],
        "column_indexes": [
            {
                "name": None,
                "field_name": None,
                "pandas_type": "unicode",
                "numpy_type": "object",
                "metadata": {"encoding": "UTF-8"},
            }
        ],
        "columns": [
            {
                "name": "task_index",
                "field_name": "task_index",
                "pandas_type": "int64",
                "numpy_type": "int64",
                "metadata": None,
            },
            {
                "name": "task",
                "field_name": "task",
                "pandas_type": "unicode",
                "numpy_type": "object",
                "metadata": None,
            },
        ],
        "attributes": {},
        "creator": {"library": "pyarrow", "version": pa.__version__},
        "pandas_version": "2.2.3",
    }
    schema = pa.schema(
        [pa.field("task_index", pa.int64()), pa.field("task", pa.string())],
        metadata={b"pandas": json.dumps(pandas_meta).encode()},
    )
    return pa.table({"task_index": list(range(len(tasks))), "task": list(tasks)}, schema=schema)


def episode_files(root: Path) -> list[Path]:
    return sorted((root / EPISODES_DIR).glob("chunk-*/file-*.parquet"))


def load_episodes(root: Path, with_stats: bool = False) -> list[dict]:
    rows: list[dict] = []
    for path in episode_files(root):
        try:
            pf = pq.ParquetFile(path)
            cols = [c for c in pf.schema_arrow.names if with_stats or not c.startswith("stats/")]
            rows.extend(pf.read(columns=cols).to_pylist())
        except (OSError, pa.ArrowException) as exc:
            raise DatasetError(f"{path}: cannot read episodes metadata ({exc})") from exc
    rows.sort(key=lambda r: r["episode_index"])
    return rows


def write_parquet(table: pa.Table, path: Path) -> None:
    pq.write_table(table, path, **PARQUET_OPTIONS)


def append_parquet(existing: Path | None, new: pa.Table, out: Path, merge_row_groups: bool = False) -> None:
    """Write `existing` followed by `new` into `out`.

    Row groups of `existing` are kept (one per episode in data files) unless `merge_row_groups`,
    which rewrites everything as one row group (small metadata files: less per-group overhead).
    """
    schema = new.schema
    if existing is not None:
        pf = pq.ParquetFile(existing)
        schema = pf.schema_arrow
        new = new.select(schema.names).cast(schema)
    if existing is not None and merge_row_groups:
        write_parquet(pa.concat_tables([pf.read(), new]), out)
        return
    with pq.ParquetWriter(out, schema, **PARQUET_OPTIONS) as writer:
        if existing is not None:
            for i in range(pf.num_row_groups):
                writer.write_table(pf.read_row_group(i))
        writer.write_table(new)
