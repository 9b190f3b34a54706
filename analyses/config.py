"""The analysis config file (TOML) a nightly job keeps beside its kernels:

    expect = ["tma", "tensor-core"]          # same as --expect, repeatable there

    [thresholds.producer-bound]              # override a hypothesis' header defaults
    min_consumer_wait_share = 0.25

Every key is checked against the catalogue, so a typo fails loudly instead of silently
keeping the default.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wsperf.analyses.hypotheses import catalogue, check_expectations
from wsperf.collectors.errors import InputError


@dataclass(frozen=True)
class AnalysisConfig:
    expect: tuple[str, ...] = ()
    thresholds: dict[str, dict[str, Any]] = field(default_factory=dict)


def load_config(path: Path | None, extra_expect: tuple[str, ...] = ()) -> AnalysisConfig:
    """The config at `path` (None: defaults), with `extra_expect` from the command line."""
    doc: dict[str, Any] = {}
    if path is not None:
        try:
            doc = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise InputError(f"{path}: no such config file") from None
        except (OSError, UnicodeDecodeError) as e:
            raise InputError(f"{path}: cannot read config file ({e})") from None
        except tomllib.TOMLDecodeError as e:
            raise InputError(f"{path}: not valid TOML ({e})") from None
    unknown = set(doc) - {"expect", "thresholds"}
    if unknown:
        raise InputError(f"{path}: unknown config keys {', '.join(sorted(unknown))}; known: expect, thresholds")
    expect = doc.get("expect", [])
    if not isinstance(expect, list) or not all(isinstance(e, str) for e in expect):
        raise InputError(f"{path}: expect must be a list of strings")
    known = {h.id: h for h in catalogue()}
    thresholds: dict[str, dict[str, Any]] = {}
    for hid, values in (doc.get("thresholds") or {}).items():
        if hid not in known:
            raise InputError(f"{path}: no hypothesis {hid!r}; known: {', '.join(sorted(known))}")
        if not isinstance(values, dict):
            raise InputError(f"{path}: thresholds.{hid} must be a table of name = value")
        bad = set(values) - set(known[hid].thresholds)
        if bad:
            raise InputError(f"{path}: thresholds.{hid} has no {', '.join(sorted(bad))}; "
                             f"known: {', '.join(sorted(known[hid].thresholds))}")
        thresholds[hid] = dict(values)
    return AnalysisConfig(tuple(check_expectations([*expect, *extra_expect])), thresholds)
