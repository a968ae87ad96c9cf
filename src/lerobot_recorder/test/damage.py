"""Damaged copies of a finalized dataset, one way each, for the user tools' error tests."""

import glob
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

CASES = (
    "missing_mp4",
    "truncated_mp4",
    "missing_tasks",
    "info_without_features",
    "missing_rows",
    "episode_gap",
    "zero_byte_parquet",
    "bad_info_json",
    "missing_episodes_meta",
)


def damaged_copy(src: Path, dst: Path, case: str) -> Path:
    shutil.copytree(src, dst)
    mp4s = sorted(glob.glob(str(dst / "videos" / "*" / "*" / "*.mp4")))
    data = sorted(glob.glob(str(dst / "data" / "*" / "*.parquet")))
    if case == "missing_mp4":
        Path(mp4s[0]).unlink()
    elif case == "truncated_mp4":
        raw = Path(mp4s[0]).read_bytes()
        Path(mp4s[0]).write_bytes(raw[: len(raw) // 3])
    elif case == "missing_tasks":
        (dst / "meta" / "tasks.parquet").unlink()
    elif case == "info_without_features":
        info = json.loads((dst / "meta" / "info.json").read_text())
        del info["features"]
        (dst / "meta" / "info.json").write_text(json.dumps(info))
    elif case == "missing_rows":
        table = pq.read_table(data[0])
        pq.write_table(table.slice(0, table.num_rows // 2), data[0])
    elif case == "episode_gap":
        path = sorted(glob.glob(str(dst / "meta" / "episodes" / "*" / "*.parquet")))[0]
        table = pq.read_table(path)
        index = table.column("episode_index").to_pylist()
        gapped = pa.array(
            [i if i == 0 else i + 1 for i in index], type=table.schema.field("episode_index").type
        )
        pq.write_table(
            table.set_column(table.column_names.index("episode_index"), "episode_index", gapped), path
        )
    elif case == "zero_byte_parquet":
        Path(data[0]).write_bytes(b"")
    elif case == "bad_info_json":
        (dst / "meta" / "info.json").write_text("{")
    elif case == "missing_episodes_meta":
        shutil.rmtree(dst / "meta" / "episodes")
    else:
        raise ValueError(case)
    return dst
