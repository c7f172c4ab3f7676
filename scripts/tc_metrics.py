"""Reads the metrics JSONL that `tc-run --metrics FILE` writes (schema "tc.metrics/1").

One JSON object a line:

    train: {"schema": "tc.metrics/1", "kind": "train", "step": int, "loss": float,
            "loss_smooth": float, "lr": float, "grad_norm": float|null, "tokens": int,
            "tokens_total": int, "tokens_per_s": float, "step_time_s": float,
            "elapsed_s": float, "mfu": float|null, "hfu": float|null[, "loss_scale": float,
            "skipped": bool]}   (loss null only on a skipped --fp16 step)
    val:   {"schema": "tc.metrics/1", "kind": "val", "step": int, "val_loss": float,
            "val_tokens": int}
    eval:  {"schema": "tc.metrics/1", "kind": "eval", "step": int|null, "function": str,
            <scalar output name>: float, ...}

A schema whose major version is not 1 is an error; fields (and kinds) that this reader does not
know are ignored, so that later versions 1.x can add them without breaking it. Shared by
scripts/plot_metrics.py and scripts/check_tensorboard.py.
"""
import json
import math

SCHEMA_NAME = "tc.metrics"
SCHEMA_MAJOR = 1

# Per kind: the fields every line of that kind has, with the JSON types allowed ("null" marks
# the fields that may be null). int is accepted where a float is expected (a writer may print
# 2 for 2.0); bool never counts as a number.
FIELDS = {
    "train": {
        "step": ("int",), "loss": ("float", "null"), "loss_smooth": ("float",), "lr": ("float",),
        "grad_norm": ("float", "null"), "tokens": ("int",), "tokens_total": ("int",),
        "tokens_per_s": ("float",), "step_time_s": ("float",), "elapsed_s": ("float",),
        "mfu": ("float", "null"), "hfu": ("float", "null"),
    },
    "val": {"step": ("int",), "val_loss": ("float",), "val_tokens": ("int",)},
    "eval": {"step": ("int", "null"), "function": ("str",)},
}

# The TensorBoard scalar of each (kind, field), as `tc-run --tensorboard DIR` writes them; a
# null field has no scalar at that step.
TENSORBOARD_TAGS = {
    ("train", "loss"): "train/loss",
    ("train", "loss_smooth"): "train/loss_smooth",
    ("train", "lr"): "train/lr",
    ("train", "grad_norm"): "train/grad_norm",
    ("train", "tokens_per_s"): "train/tokens_per_s",
    ("train", "mfu"): "train/mfu",
    ("val", "val_loss"): "val/loss",
}


class MetricsError(Exception):
    """Bad input: the message names the file and, where there is one, the line."""


def _has_type(value, kinds):
    for k in kinds:
        if k == "null" and value is None:
            return True
        if k == "str" and isinstance(value, str):
            return True
        if isinstance(value, bool):
            continue
        if k == "int" and isinstance(value, int):
            return True
        if k == "float" and isinstance(value, (int, float)):
            return True
    return False


def _schema_major(schema):
    """The major version of "tc.metrics/<major>[.<minor>]", or None when it is not one."""
    if not isinstance(schema, str) or not schema.startswith(SCHEMA_NAME + "/"):
        return None
    major = schema[len(SCHEMA_NAME) + 1:].split(".", 1)[0]
    return int(major) if major.isdigit() else None


def parse_line(text, where):
    """One line's object, checked against the schema; `where` ("FILE:N") prefixes errors.

    Returns None for a line of a kind this reader does not know (a later 1.x addition)."""
    try:
        obj = json.loads(text)
    except ValueError as e:
        raise MetricsError(f"{where}: not JSON ({e})") from None
    if not isinstance(obj, dict):
        raise MetricsError(f"{where}: not a JSON object")
    if "schema" not in obj:
        raise MetricsError(f"{where}: no \"schema\" field (expected \"{SCHEMA_NAME}/{SCHEMA_MAJOR}\")")
    major = _schema_major(obj["schema"])
    if major != SCHEMA_MAJOR:
        raise MetricsError(f"{where}: unknown schema {json.dumps(obj['schema'])} "
                           f"(this reader knows \"{SCHEMA_NAME}/{SCHEMA_MAJOR}\")")
    kind = obj.get("kind")
    if not isinstance(kind, str):
        raise MetricsError(f"{where}: no \"kind\" string")
    fields = FIELDS.get(kind)
    if fields is None:
        return None
    for name, kinds in fields.items():
        if name not in obj:
            raise MetricsError(f"{where}: {kind} line without \"{name}\"")
        if not _has_type(obj[name], kinds):
            raise MetricsError(f"{where}: \"{name}\" is {json.dumps(obj[name])}, "
                               f"expected {' or '.join(kinds)}")
    if kind == "eval":
        for name, value in obj.items():
            if name not in ("schema", "kind", "step", "function") and not _has_type(value, ("float",)):
                raise MetricsError(f"{where}: eval output \"{name}\" is {json.dumps(value)}, expected a number")
    return obj


def read_metrics(path):
    """The lines of a metrics file as (line number, object), in file order.

    Blank lines are skipped; MetricsError for a missing or unreadable file, a file without any
    line, a line that is not a JSON object of the schema, or an unknown schema version."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
    except FileNotFoundError:
        raise MetricsError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise MetricsError(f"{path}: cannot read: {e}") from None
    records = []
    for n, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        obj = parse_line(text, f"{path}:{n}")
        if obj is not None:
            records.append((n, obj))
    if not any(t.strip() for t in lines):
        raise MetricsError(f"{path}: empty (no metrics lines)")
    return records


def same_float32(a, b):
    """Whether a and b are the same float32 (NaN equals NaN)."""
    import numpy as np

    with np.errstate(over="ignore"):  # beyond float's range is inf, as the writer stores it
        fa, fb = np.float32(a), np.float32(b)
    if math.isnan(fa) or math.isnan(fb):
        return bool(math.isnan(fa) and math.isnan(fb))
    return bool(fa == fb)
