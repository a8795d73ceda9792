"""The launch settings tuned on a card, read from its committed table: ``tuned/<card>.json``.

``bench/tune_plans.py`` writes a card's table: for each shape class it tuned
(``cuda_plan.ShapeClass``), the settings chosen and what every candidate
measured.  Plans are never tuned while the kernel runs: every process on a card
reads the same table, so computes with the same plans (the bits of half outputs
follow the plan).  A card without a table takes the derived settings
(``cuda_plan.derived_settings``); so does a class its table lacks.

A table is checked when it is read: an unknown or missing key, a value of the
wrong type, warps that are not a power of two in 1..32, a tile that is not a
power of two or outgrows a row's register budget, or a path other than the
class's is a ValueError naming the file and the entry.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path

import torch

from ..launch import card_name
from .cuda_plan import GPU_MAX_WARPS, GPU_ROW_ELEMENTS, SETTINGS, Settings, ShapeClass, path_of

TABLES_DIR = Path(__file__).with_name("tuned")
# What a table holds, key by key, with each value's type.
TABLE_KEYS = {"card": str, "date": str, "torch": str, "triton": str, "classes": list}
CLASS_KEYS = {"row_bucket": int, "element_size": int, "masked": bool, "path": str, "settings": dict,
              "candidates": list}
# A candidate: its settings, its GB/s (the median of its rounds; null where it was not timed), and
# how its output compared with the derived plan's ("bitwise", "within bound", or why it was refused).
CANDIDATE_KEYS = {"settings": dict, "gbps": (float, type(None)), "rounds": list, "check": str}
ELEMENT_SIZES = (2, 4)

# The tables read in this process, by card name; bench/tune_plans.py puts its candidates here
# while it times them.
TABLES: dict[str, Mapping[ShapeClass, Settings]] = {}


def card_slug(card: str) -> str:
    """A table's file name for a card: its name in lower case, each run of other characters a dash."""
    return re.sub(r"[^a-z0-9]+", "-", card.lower()).strip("-")


def table_path(card: str) -> Path:
    return TABLES_DIR / f"{card_slug(card)}.json"


def card_plans(device: torch.device) -> Mapping[ShapeClass, Settings]:
    """The tuned settings of the card ``device`` is, by shape class: its table's, or none."""
    card = card_name(device)
    if card not in TABLES:
        path = table_path(card)
        TABLES[card] = read_table(path, card) if path.is_file() else {}
    return TABLES[card]


def read_table(path: Path, card: str) -> dict[ShapeClass, Settings]:
    """The settings chosen in the table at ``path``, which must be ``card``'s, by shape class."""
    try:
        document = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not JSON ({error})") from None
    check_keys(document, TABLE_KEYS, f"{path}")
    if document["card"] != card:
        raise ValueError(f"{path}: the table of {document['card']!r}, not of {card!r}")
    chosen: dict[ShapeClass, Settings] = {}
    for index, entry in enumerate(document["classes"]):
        where = f"{path}: classes[{index}]"
        check_keys(entry, CLASS_KEYS, where)
        shape = ShapeClass(entry["row_bucket"], entry["element_size"], entry["masked"])
        where += f" (rows of {shape.row_bucket}, {shape.element_size}-byte elements{', masked' if shape.masked else ''})"
        if not power_of_two(shape.row_bucket) or shape.element_size not in ELEMENT_SIZES:
            raise ValueError(f"{where}: row_bucket must be a power of two and element_size one of {ELEMENT_SIZES}")
        if shape in chosen:
            raise ValueError(f"{where}: the class appears twice")
        if entry["path"] != path_of(shape):
            raise ValueError(f"{where}: path {entry['path']!r}, but such rows take the {path_of(shape)!r} path")
        chosen[shape] = settings_of(entry["settings"], shape, where)
        for number, candidate in enumerate(entry["candidates"]):
            check_keys(candidate, CANDIDATE_KEYS, f"{where}, candidates[{number}]")
            settings_of(candidate["settings"], shape, f"{where}, candidates[{number}]")
            if not all(is_of(gbps, float) for gbps in candidate["rounds"]):
                raise ValueError(f"{where}, candidates[{number}]: rounds must be numbers (GB/s)")
    return chosen


def settings_of(value: object, shape: ShapeClass, where: str) -> Settings:
    """The settings a table gives a class, checked."""
    kind = SETTINGS[path_of(shape)]
    check_keys(value, {field.name: int for field in fields(kind)}, f"{where}, settings")
    for name, number in value.items():
        if name.endswith("warps") and not (power_of_two(number) and number <= GPU_MAX_WARPS):
            raise ValueError(f"{where}, settings: {name} must be a power of two in 1..{GPU_MAX_WARPS}; got {number}")
        if not name.endswith("warps") and not power_of_two(number):
            raise ValueError(f"{where}, settings: {name} must be a power of two; got {number}")
    settings = kind(**value)
    if settings.tile(shape.row_bucket) > GPU_ROW_ELEMENTS:  # the exact sums' limit too (triton_code.FIXED_POINT_ONE)
        raise ValueError(f"{where}, settings: a tile of {settings.tile(shape.row_bucket)} elements, "
                         f"more than {GPU_ROW_ELEMENTS}")
    return settings


def check_keys(value: object, schema: dict[str, type | tuple[type, ...]], where: str) -> None:
    """Raise ValueError, naming ``where``, unless ``value`` is an object with exactly the keys of ``schema``,
    each of its type (``is_of``)."""
    if not isinstance(value, dict):
        raise ValueError(f"{where}: expected an object, got {type(value).__name__}")
    if unknown := sorted(set(value) - set(schema)):
        raise ValueError(f"{where}: unknown key(s) {unknown}")
    if missing := sorted(set(schema) - set(value)):
        raise ValueError(f"{where}: missing key(s) {missing}")
    for key, kind in schema.items():
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if not any(is_of(value[key], k) for k in kinds):
            names = " or ".join("null" if k is type(None) else k.__name__ for k in kinds)
            raise ValueError(f"{where}: {key} must be {names}; got {value[key]!r}")


def is_of(item: object, kind: type) -> bool:
    """isinstance, except that a bool is no number and an int counts as a float."""
    if kind in (int, float) and isinstance(item, bool):
        return False
    return isinstance(item, (int, float) if kind is float else kind)


def power_of_two(number: int) -> bool:
    return number >= 1 and number & (number - 1) == 0
