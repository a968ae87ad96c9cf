"""A static report of one episode for headless machines: PNG plots and a contact sheet (ROS-free).

Drawn with OpenCV (already a dependency; no matplotlib needed):

* ``<feature>.png`` for ``observation.state`` and ``action``: one panel per joint, value against
  time; where both exist each panel shows the state (blue) and the action (orange) together in
  ``state_action.png`` instead.
* ``flags.png``: every other per-frame numeric column (``next.reward``, ``next.done``,
  ``complementary_info.*``), one panel each.
* ``contact_sheet_<camera>.png``: frames spread evenly over the episode, labelled with frame index
  and time.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .dataset import DatasetReader

DEFAULT_COLUMNS = ("timestamp", "frame_index", "episode_index", "index", "task_index")
STATE, ACTION = "observation.state", "action"
BLUE, ORANGE, GREY, BLACK = (180, 119, 31), (14, 127, 255), (200, 200, 200), (40, 40, 40)  # BGR
PANEL_W, PANEL_H, MARGIN = 420, 200, 46


def flag_columns(reader: DatasetReader) -> list[str]:
    """Per-frame numeric columns besides the defaults, state, action and cameras: flags and rewards
    (``next.done``, ``next.reward``, ``complementary_info.*``), extra state vectors."""
    out = []
    for key, spec in reader.features.items():
        if key in DEFAULT_COLUMNS or key in (STATE, ACTION) or key.startswith("observation.images."):
            continue
        if spec["dtype"] not in ("video", "image", "string"):
            out.append(key)
    return sorted(out)


def _names(reader: DatasetReader, key: str, width: int) -> list[str]:
    names = reader.features[key].get("names")
    if isinstance(names, dict):
        names = next(iter(names.values()))
    return list(names) if names and len(names) == width else [f"{key}[{i}]" for i in range(width)]


def _panel(t: np.ndarray, series: list[tuple[np.ndarray, tuple[int, int, int]]], title: str) -> np.ndarray:
    import cv2

    img = np.full((PANEL_H, PANEL_W, 3), 255, np.uint8)
    x0, x1, y0, y1 = MARGIN, PANEL_W - 10, 24, PANEL_H - 28
    cv2.rectangle(img, (x0, y0), (x1, y1), GREY, 1)
    values = np.concatenate([s for s, _ in series]) if series else np.zeros(1)
    finite = values[np.isfinite(values)]
    lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if hi - lo < 1e-9:
        lo, hi = lo - 0.5, hi + 0.5
    t0, t1 = float(t[0]), float(t[-1]) if len(t) > 1 else float(t[0]) + 1.0
    span_t = max(t1 - t0, 1e-9)

    def px(tt, v):
        x = x0 + (np.asarray(tt) - t0) / span_t * (x1 - x0)
        y = y1 - (np.asarray(v) - lo) / (hi - lo) * (y1 - y0)
        return np.stack([x, y], axis=-1).round().astype(np.int32)

    for values_, colour in series:
        ok = np.isfinite(values_)
        if ok.sum() >= 2:
            cv2.polylines(img, [px(t[ok], values_[ok])], False, colour, 2, cv2.LINE_AA)
        elif ok.sum() == 1:
            cv2.circle(img, tuple(px(t[ok], values_[ok])[0]), 3, colour, -1)
    font = cv2.FONT_HERSHEY_SIMPLEX
    cv2.putText(img, title, (x0, 16), font, 0.45, BLACK, 1, cv2.LINE_AA)
    cv2.putText(img, f"{hi:.3g}", (2, y0 + 10), font, 0.35, BLACK, 1, cv2.LINE_AA)
    cv2.putText(img, f"{lo:.3g}", (2, y1), font, 0.35, BLACK, 1, cv2.LINE_AA)
    cv2.putText(img, f"{t0:.1f} s", (x0, PANEL_H - 10), font, 0.35, BLACK, 1, cv2.LINE_AA)
    cv2.putText(img, f"{t1:.1f} s", (x1 - 40, PANEL_H - 10), font, 0.35, BLACK, 1, cv2.LINE_AA)
    return img


def _grid(panels: list[np.ndarray], columns: int = 2) -> np.ndarray:
    rows = -(-len(panels) // columns)
    blank = np.full_like(panels[0], 255)
    padded = panels + [blank] * (rows * columns - len(panels))
    return np.vstack([np.hstack(padded[r * columns : (r + 1) * columns]) for r in range(rows)])


def _legend(img: np.ndarray, entries: list[tuple[str, tuple[int, int, int]]]) -> np.ndarray:
    import cv2

    bar = np.full((26, img.shape[1], 3), 255, np.uint8)
    x = 10
    for text, colour in entries:
        cv2.line(bar, (x, 13), (x + 24, 13), colour, 3)
        cv2.putText(bar, text, (x + 30, 18), cv2.FONT_HERSHEY_SIMPLEX, 0.45, BLACK, 1, cv2.LINE_AA)
        x += 40 + 9 * len(text)
    return np.vstack([bar, img])


def contact_sheet(
    frames: np.ndarray, frame_indices: np.ndarray, times: np.ndarray, columns: int = 4
) -> np.ndarray:
    """Frames (k, H, W, 3 RGB) tiled ``columns`` wide, each labelled; returns a BGR image."""
    import cv2

    tiles = []
    for frame, i, t in zip(frames, frame_indices, times, strict=True):
        tile = cv2.cvtColor(np.ascontiguousarray(frame), cv2.COLOR_RGB2BGR)
        if tile.shape[1] < 160:  # small cameras: enlarge so the label fits
            scale = 160 / tile.shape[1]
            tile = cv2.resize(tile, None, fx=scale, fy=scale, interpolation=cv2.INTER_NEAREST)
        label = np.full((20, tile.shape[1], 3), 255, np.uint8)
        cv2.putText(
            label, f"frame {i}  {t:.2f} s", (4, 14), cv2.FONT_HERSHEY_SIMPLEX, 0.4, BLACK, 1, cv2.LINE_AA
        )
        tiles.append(
            cv2.copyMakeBorder(np.vstack([label, tile]), 2, 2, 2, 2, cv2.BORDER_CONSTANT, value=GREY)
        )
    return _grid(tiles, columns)


def write_report(
    reader: DatasetReader, episode_index: int, out_dir: str | Path, sheet_frames: int = 12
) -> list[Path]:
    """Write the episode's PNGs into ``out_dir``; returns their paths."""
    import cv2

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cols = reader.episode(episode_index)
    t = np.asarray(cols["timestamp"], dtype=np.float64)
    written: list[Path] = []

    def save(name: str, img: np.ndarray) -> None:
        path = out_dir / name
        if not cv2.imwrite(str(path), img):
            raise OSError(f"cannot write {path}")
        written.append(path)

    vectors = [k for k in (STATE, ACTION) if k in cols]
    if len(vectors) == 2 and cols[STATE].shape[1] == cols[ACTION].shape[1]:
        names = _names(reader, STATE, cols[STATE].shape[1])
        panels = [
            _panel(t, [(cols[STATE][:, j], BLUE), (cols[ACTION][:, j], ORANGE)], names[j])
            for j in range(len(names))
        ]
        save("state_action.png", _legend(_grid(panels), [(STATE, BLUE), (ACTION, ORANGE)]))
    else:
        for key in vectors:
            names = _names(reader, key, cols[key].shape[1])
            panels = [_panel(t, [(cols[key][:, j], BLUE)], names[j]) for j in range(len(names))]
            save(f"{key}.png", _legend(_grid(panels), [(key, BLUE)]))
    flags = [k for k in flag_columns(reader) if k in cols]
    if flags:
        panels = []
        for key in flags:
            values = np.asarray(cols[key], dtype=np.float64).reshape(len(t), -1)
            panels += [
                _panel(t, [(values[:, j], BLUE)], key if values.shape[1] == 1 else f"{key}[{j}]")
                for j in range(values.shape[1])
            ]
        save("flags.png", _grid(panels))
    for key in reader.camera_keys:
        frames = reader.video_frames(key, episode_index)
        pick = np.unique(np.linspace(0, len(frames) - 1, min(sheet_frames, len(frames))).round().astype(int))
        sheet = contact_sheet(frames[pick], np.asarray(cols["frame_index"])[pick], t[pick])
        save(f"contact_sheet_{key.removeprefix('observation.images.')}.png", sheet)
    return written
