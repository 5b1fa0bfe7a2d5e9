"""Write the files derived from the options table: the JSON Schema and the reference docs.

Run ``python -m stanpkg.plan.generate`` from the repository root after changing the table;
``tests/plan/test_generated.py`` fails while they are out of date.
"""

from __future__ import annotations

import sys
from pathlib import Path

from stanpkg.plan.docs import configuration_markdown
from stanpkg.plan.schema import schema_text

GENERATED: dict[str, object] = {
    "schemas/stan.schema.json": schema_text,
    "docs/configuration.md": configuration_markdown,
}


def generated_files() -> dict[str, str]:
    return {path: make() for path, make in GENERATED.items()}  # type: ignore[operator]


def main(root: str = ".") -> int:
    for rel, text in generated_files().items():
        target = Path(root, rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
