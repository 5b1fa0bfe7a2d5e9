"""`stanpkg limits | head`: a reader that leaves early is not an error worth a traceback."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

RUN_CLI = "import sys; from stanpkg.cli import main; sys.exit(main())"


@pytest.mark.parametrize("command", [["limits"], ["plan"], ["validate", "--explain"]])
def test_reader_gone_before_output_exits_quietly(command: list[str]) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # every write of the child now fails with EPIPE
    try:
        done = subprocess.run(
            [sys.executable, "-c", RUN_CLI, *command],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    assert done.stderr == ""
    assert done.returncode == 141
