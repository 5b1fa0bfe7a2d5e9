"""The per-message modules, compiled with mypyc when stanpkg is built where a C compiler
and the Python headers exist (setup.py reads this list; ``STANPKG_COMPILE`` overrides the
choice, docs/install.md). There the interpreter's own overhead is
most of the cost: compiled, the server spends about a third less CPU per message
(bench/README.md). They stay plain Python as well, used wherever no compiled build is
installed; the two behave the same, and the tests run against both."""

from __future__ import annotations

import importlib.machinery
import importlib.util
from collections.abc import Callable
from typing import TypeVar

__all__ = ["MODULES", "compiled_modules", "is_compiled", "mypyc_attr", "source_paths"]

MODULES = (
    "stanpkg.proto.encoders",
    "stanpkg.transport.parser",
    "stanpkg.transport.connection",
    "stanpkg.server.wire",
    "stanpkg.server.delivery",
    "stanpkg.server.subscriptions",
    "stanpkg.server.publish",
    "stanpkg.stores.file.messages",
    "stanpkg.stores.memory",
    "stanpkg.stores.limit_policy",  # called per dropped message by the two above
    "stanpkg.stores.file.subscriptions",
    # A cluster's serving node, per message: its duplicate window, its channels' write
    # batches and stream positions, and their atomic batches for JetStream.
    "stanpkg.stores.jetstream.record_codec",
    "stanpkg.stores.jetstream.replicated_messages",
    "stanpkg.stores.jetstream.stream_writer",
    "stanpkg.stores.jetstream.stream_positions",
    "stanpkg.stores.jetstream.replicated_subs",
)


def source_paths() -> list[str]:
    """The modules' source files, relative to the project's root."""
    return [name.replace(".", "/") + ".py" for name in MODULES]


def is_compiled(name: str) -> bool:
    """Whether the installed module ``name`` is compiled (an extension module)."""
    spec = importlib.util.find_spec(name)
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    return spec is not None and (spec.origin or "").endswith(suffixes)


def compiled_modules() -> list[str]:
    """Those of :data:`MODULES` that the installed stanpkg has compiled."""
    return [name for name in MODULES if is_compiled(name)]


try:
    from mypy_extensions import mypyc_attr
except ImportError:  # not installed (plain Python): the attributes are for the compiler only
    _T = TypeVar("_T")

    def _unchanged(cls: _T) -> _T:
        return cls

    def mypyc_attr(*_attrs: str, **_kwattrs: object) -> Callable[[_T], _T]:
        return _unchanged
