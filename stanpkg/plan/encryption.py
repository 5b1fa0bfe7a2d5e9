"""Encryption settings resolved once, in the plan: the cipher's concrete name and the
variable that may hold the key (the store only maps the name to its cipher code)."""

from __future__ import annotations

import platform

from stanpkg.plan.options import BY_PATH

__all__ = ["CIPHER_NAMES", "ENCRYPTION_KEY_ENV", "default_cipher_name", "resolve_cipher_name"]

# The options table is the one place the names and the variable are written.
CIPHER_NAMES = BY_PATH["encryption_cipher"].choices
ENCRYPTION_KEY_ENV = BY_PATH["encryption_key"].env

# The reference picks AES where Go has AES instructions (amd64, 386), ChaCha elsewhere.
_AES_MACHINES = frozenset({"x86_64", "amd64", "i386", "i486", "i586", "i686", "x86", "386"})


def default_cipher_name(machine: str | None = None) -> str:
    """Cipher used when none is configured: AES on amd64/386, ChaCha everywhere else."""
    arch = (machine if machine is not None else platform.machine()).lower()
    return "AES" if arch in _AES_MACHINES else "CHACHA"


def resolve_cipher_name(configured: str, machine: str | None = None) -> str:
    """The `encryption_cipher` option (case-insensitive) as a concrete name; empty = by
    CPU. Names outside :data:`CIPHER_NAMES` pass through for the schema to report."""
    return configured.upper() if configured else default_cipher_name(machine)
