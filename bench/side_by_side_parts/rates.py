"""What stan-bench prints: the aggregate published and received msgs/sec lines."""

from __future__ import annotations

import re

RATE = r"^\s*(?:NATS Streaming )?{label}: ([\d,]+) msgs/sec"


def parse_rates(out: str) -> dict[str, float]:
    """stan-bench's published ("pub") and received ("sub", all subscribers together)
    msgs/sec; a side it did not run is absent."""
    rates = {}
    for label, key in (("Pub stats", "pub"), ("Sub stats", "sub")):
        found = re.search(RATE.format(label=re.escape(label)), out, re.M)
        if found:
            rates[key] = float(found.group(1).replace(",", ""))
    return rates
