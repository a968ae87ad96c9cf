"""Dataset edits that keep a dataset resumable: a copy with per-frame features added at a constant value.

Use: demonstrations recorded without the HIL extras (``complementary_info.is_intervention``, ...) get
them with the value a demonstration recorded through the HIL contract has (the human drove every
frame), so HIL episodes can then be resumed into the copy (DatasetWriter.resume / the recorder's
``resume``), which requires equal features. The added columns, their per-episode statistics in
meta/episodes and their aggregate in meta/stats.json are those the writer would have written, so
episodes appended later have the same metadata schema (LeRobot reads every meta/episodes file with
one schema).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from . import format as fmt
from .errors import DatasetError
from .stats import aggregate_stats, flatten_episode_stats, numeric_stats, stats_from_json, stats_to_json
from .storage import JOURNAL, WORK_DIR, write_json_file
from .tables import episode_files, load_info, load_stats, write_parquet

_NUMPY = {
    "bool": np.bool_,
    "int64": np.int64,
    "int32": np.int32,
    "float32": np.float32,
    "float64": np.float64,
}


def add_constant_features(
    src: str | os.PathLike, dst: str | os.PathLike, features: Mapping[str, tuple[Mapping, object]]
) -> dict:
    """Copy dataset `src` to the new folder `dst` with each of `features` (name -> (LeRobot feature spec,
    value)) added to every frame at `value`. Scalar features only (shape (1,)). Returns dst's info."""
    src, dst = Path(src), Path(dst)
    info = load_info(src)
    if (src / WORK_DIR / JOURNAL).exists():
        raise DatasetError(f"{src}: an episode save was interrupted mid-commit; complete it first")
    if dst.exists():
        raise DatasetError(f"{dst} exists; give a new folder for the copy")
    specs = fmt.normalize_features({k: spec for k, (spec, _) in features.items()})
    for key, spec in specs.items():
        if key in info["features"]:
            raise DatasetError(f"{src}: already has feature {key!r}")
        if spec["shape"] != (1,) or spec["dtype"] not in _NUMPY:
            raise DatasetError(f"feature {key!r}: only scalar numeric features (shape (1,)), got {spec}")
    values = {k: np.asarray(v, dtype=_NUMPY[specs[k]["dtype"]]) for k, (_, v) in features.items()}

    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(WORK_DIR))
    try:
        old = fmt.features_from_info(info)
        user = {k: v for k, v in old.items() if k not in fmt.DEFAULT_FEATURES}
        new = fmt.all_features({**user, **specs})
        schema = fmt.data_schema(new)
        for path in sorted((dst / fmt.DATA_DIR).glob("chunk-*/file-*.parquet")):
            table = pq.read_table(path)
            n = table.num_rows
            cols = {name: table.column(name) for name in table.column_names}
            cols.update(
                {k: pa.array(np.full(n, v), type=fmt.arrow_type(specs[k])) for k, v in values.items()}
            )
            arrays = [cols[f.name].cast(f.type) for f in schema]
            write_parquet(pa.Table.from_arrays(arrays, schema=schema), path)

        episode_stats = []
        for path in episode_files(dst):
            table = pq.read_table(path)
            rows = []
            for length in table.column("length").to_pylist():
                ep = {k: numeric_stats(np.full(int(length), v)) for k, v in values.items()}
                episode_stats.append(ep)
                rows.append(flatten_episode_stats(ep))
            added = pa.Table.from_pylist(rows)
            for name in added.column_names:
                table = table.append_column(name, added.column(name))
            write_parquet(table, path)

        stats = stats_from_json(load_stats(dst) or {})
        if episode_stats:
            stats.update(aggregate_stats(episode_stats))
        write_json_file(dst / fmt.STATS_PATH, stats_to_json(stats))
        info = dict(info)
        info["features"] = {
            k: info["features"].get(k)
            or {"dtype": v["dtype"], "shape": list(v["shape"]), "names": v["names"]}
            for k, v in new.items()
        }
        write_json_file(dst / fmt.INFO_PATH, info)
    except BaseException:
        shutil.rmtree(dst, ignore_errors=True)
        raise
    return info
