"""Configurations the review tests share: one with problems in the file itself, in an
include and from a flag, and a valid one."""

from __future__ import annotations

from pathlib import Path

# Problems: an unknown key (warning) and a negative channel limit in stan.conf, a
# negative global limit in the included limits.conf.
MAIN = """\
store: file
dir: "{dir}"
store_limits: {
  include "limits.conf"
  channels: { "orders.>": { max_msgs: -3 } }
}
max_msg: 3
"""
INCLUDED = "max_bytes: -5\n"

VALID = """\
store: file
dir: "{dir}"
store_limits: {
  max_msgs: 1000
  channels: { "orders.>": { max_age: "1h" } }
}
"""


def write_problems(root: Path) -> Path:
    (root / "data").mkdir(exist_ok=True)
    (root / "limits.conf").write_text(INCLUDED)
    main = root / "stan.conf"
    main.write_text(MAIN.replace("{dir}", str(root / "data")))
    return main


def write_valid(root: Path, name: str = "good.conf") -> Path:
    (root / "data").mkdir(exist_ok=True)
    path = root / name
    path.write_text(VALID.replace("{dir}", str(root / "data")))
    return path
