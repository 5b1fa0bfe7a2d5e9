"""Read parsed configuration trees into the normalised configuration.

The normalised configuration is a nested dict keyed by canonical option names (the shape
``schemas/stan.schema.json`` describes), in the compiler's :class:`Context`. Next to it we
keep, for every value, where it was set, so later stages can point at the file position of
a bad value.

Which file holds what follows the reference: with ``-sc`` the streaming options come from
that file and the NATS options from ``-c`` (or from the same file when there is no ``-c``);
a top-level ``streaming`` map, when present, holds the streaming options, otherwise the top
level itself does.
"""

from __future__ import annotations

import difflib
from datetime import datetime
from itertools import pairwise

from stanpkg.conf import Kind as NodeKind
from stanpkg.conf import MapEntry, Node, Position, render_with_positions
from stanpkg.plan.context import Context, Path
from stanpkg.plan.diagnostics import Diagnostic, error, warning
from stanpkg.plan.nats_keys import NATS_ADDRESS_KEYS, NATS_KEY_INDEX, NATS_PASSTHROUGH_KEYS
from stanpkg.plan.options import (
    CHANNELS_KEYS,
    SECTION_KEYS,
    Option,
    key_index,
    per_channel_key_index,
)

# Section maps that, at the top level of a file without a streaming block, mean different
# things to the NATS server and to the streaming server.
AMBIGUOUS_TOP_LEVEL = ("cluster", "tls")


def plain(node: Node) -> object:
    """A node's value as plain Python data (what the JSON Schema checks)."""
    if node.kind is NodeKind.MAP:
        return {e.key: plain(e.node) for e in node.entries}
    if node.kind is NodeKind.ARRAY:
        assert isinstance(node.value, tuple)
        return [plain(n) for n in node.value]
    return node.value


def describe(node: Node) -> str:
    """How a node reads in an error message: 'the string "3"', 'the number 10', ..."""
    match node.kind:
        case NodeKind.STRING:
            return f'the string "{node.value}"'
        case NodeKind.INT | NodeKind.FLOAT:
            return f"the number {node.raw or node.value}"
        case NodeKind.BOOL:
            return f"the boolean {node.raw or node.value}"
        case NodeKind.DATETIME:
            value = node.value
            text = value.isoformat() if isinstance(value, datetime) else str(value)
            return f"the date {text}"
        case NodeKind.ARRAY:
            return "an array"
        case _:
            return "a map"


def _suggest(key: str, candidates: list[str]) -> str:
    close = difflib.get_close_matches(key.lower(), candidates, n=1, cutoff=0.75)
    return f' (did you mean "{close[0]}"?)' if close else ""


def _unknown(key: str, pos: Position, where: str, candidates: list[str]) -> Diagnostic:
    return warning(
        f'unknown option "{key}" in {where}{_suggest(key, candidates)}; ignored',
        pos,
        code="unknown-key",
    )


class _MapReader:
    """Reads one map's entries against one section of the options table."""

    def __init__(self, out: Context, prefix: Path, index: dict[str, Option]) -> None:
        self.out = out
        self.prefix = prefix
        self.index = index
        self.seen: dict[str, Position] = {}

    def take(self, entry: MapEntry, opt: Option) -> None:
        earlier = self.seen.get(opt.path)
        if earlier is not None:
            self.out.diagnostics.append(
                warning(
                    f'"{entry.key}" sets {opt.name}, already set at {earlier}; the last one wins',
                    entry.key_pos,
                    code="duplicate",
                )
            )
        self.seen[opt.path] = entry.key_pos
        self.out.set_at((*self.prefix, opt.name), plain(entry.node), entry.node.pos)


def warn_repeated(node: Node, out: Context, what: str = "option") -> None:
    """Warn at every definition of a key that a later one in the same map replaced
    (the parser kept them as ``duplicates``), naming the definition it replaced."""
    chains: dict[str, list[MapEntry]] = {}
    for entry in node.duplicates:
        chains.setdefault(entry.key, []).append(entry)
    for key, earlier in chains.items():
        final = node.get(key)
        if final is None:
            continue
        chain = [*earlier, final]
        for shadowed, repeated in pairwise(chain):
            if shadowed.used_as_variable or repeated.used_as_variable:
                continue  # a variable redefined on purpose, e.g. in an include
            if repeated.key_pos in out.reported_repeats:
                continue
            out.reported_repeats.add(repeated.key_pos)
            out.diagnostics.append(
                warning(
                    f'{what} "{key}" is set again (first at {shadowed.key_pos}); the last one wins',
                    repeated.key_pos,
                    code="duplicate",
                )
            )


def _section_by_key() -> dict[str, str]:
    return {k.lower(): section for section, keys in SECTION_KEYS.items() for k in keys}


def _expect_map(out: Context, entry: MapEntry, path: Path, expected: str) -> bool:
    """Whether ``entry`` is a map; if not, ``path`` is invalid and a type error says
    ``expected`` (what the value must be) and what it is."""
    if entry.node.kind is NodeKind.MAP:
        return True
    out.invalid.add(path)
    out.diagnostics.append(
        error(f"{expected}, got {describe(entry.node)}", entry.node.pos, code="type")
    )
    return False


def collect_streaming(node: Node, out: Context, *, nats_keys_here: bool) -> None:
    """Streaming options of one map (a ``streaming`` block or a file's top level)."""
    top = _MapReader(out, (), key_index(""))
    sections = _section_by_key()
    candidates = sorted(set(top.index) | set(sections))
    if nats_keys_here:
        candidates += sorted(NATS_PASSTHROUGH_KEYS | set(key_index("nats_server")))
    warn_repeated(node, out)
    for entry in node.entries:
        key = entry.key.lower()
        if key in top.index:
            top.take(entry, top.index[key])
        elif key in sections and not (nats_keys_here and key in AMBIGUOUS_TOP_LEVEL):
            section = sections[key]
            expected = f'"{entry.key}" must be a map of {section} options'
            if _expect_map(out, entry, (section,), expected):
                out.config.setdefault(section, {})
                out.place((section,), entry.key_pos)
                _collect_section(entry.node, out, section)
        elif nats_keys_here and key in AMBIGUOUS_TOP_LEVEL:
            out.diagnostics.append(
                error(
                    f'"{entry.key}" at the top level of a file without a "streaming" block is read '
                    "by both the NATS server and the streaming server; put the streaming options "
                    'in a "streaming { ... }" block',
                    entry.key_pos,
                    code="ambiguous",
                )
            )
        elif nats_keys_here and _is_nats_key(key):
            continue  # handled by collect_nats
        elif entry.used_as_variable:
            continue
        else:
            out.diagnostics.append(
                _unknown(entry.key, entry.key_pos, "the streaming options", candidates)
            )


def _collect_section(node: Node, out: Context, section: str) -> None:
    reader = _MapReader(out, (section,), key_index(section))
    candidates = sorted(reader.index)
    if section == "store_limits":
        candidates += list(CHANNELS_KEYS)
    warn_repeated(node, out)
    for entry in node.entries:
        key = entry.key.lower()
        if key in reader.index:
            reader.take(entry, reader.index[key])
        elif section == "store_limits" and key in CHANNELS_KEYS:
            expected = f'"{entry.key}" must be a map of per-channel limits'
            if _expect_map(out, entry, ("store_limits", "channels"), expected):
                _collect_channels(entry.node, out)
        elif not entry.used_as_variable:
            out.diagnostics.append(_unknown(entry.key, entry.key_pos, section, candidates))


def _collect_channels(node: Node, out: Context) -> None:
    index = per_channel_key_index()
    warn_repeated(node, out, "channel")
    for entry in node.entries:
        name = entry.key
        path: Path = ("store_limits", "channels", name)
        if entry.used_as_variable:
            continue
        if not _expect_map(out, entry, path, f'limits of channel "{name}" must be a map'):
            continue
        if path in out.positions:
            out.diagnostics.append(
                warning(
                    f'channel "{name}" is configured again (first at {out.positions[path]}); '
                    "the last one wins",
                    entry.key_pos,
                    code="duplicate",
                )
            )
        out.set_at(path, {}, entry.key_pos)
        reader = _MapReader(out, path, index)
        warn_repeated(entry.node, out)
        for limit in entry.node.entries:
            key = limit.key.lower()
            if key in index:
                reader.take(limit, index[key])
            elif not limit.used_as_variable:
                out.diagnostics.append(
                    _unknown(
                        limit.key, limit.key_pos, f'the limits of channel "{name}"', sorted(index)
                    )
                )


def _is_nats_key(key: str) -> bool:
    return (
        key in NATS_PASSTHROUGH_KEYS or key in NATS_ADDRESS_KEYS or key in key_index("nats_server")
    )


def collect_nats(node: Node, out: Context, *, streaming_here: bool) -> None:
    """NATS server options: the top level of the NATS configuration file."""
    reader = _MapReader(out, ("nats_server",), key_index("nats_server"))
    streaming_keys = set(key_index("")) | set(_section_by_key())
    warn_repeated(node, out)
    for entry in node.entries:
        key = entry.key.lower()
        if key == "streaming" or entry.used_as_variable:
            continue
        if key in reader.index:
            reader.take(entry, reader.index[key])
        elif key in NATS_ADDRESS_KEYS:
            _collect_address(entry, out, NATS_ADDRESS_KEYS[key])
        elif key in NATS_PASSTHROUGH_KEYS and not (streaming_here and key in streaming_keys):
            if _nats_type_ok(entry, out):
                out.passthrough.append(entry)
        elif not streaming_here:
            candidates = sorted(NATS_PASSTHROUGH_KEYS | set(reader.index) | {"streaming"})
            out.diagnostics.append(
                _unknown(entry.key, entry.key_pos, "the NATS server options", candidates)
            )


def _nats_type_ok(entry: MapEntry, out: Context) -> bool:
    """A passed-through key's value is of a type nats-server takes for it (it would stop
    on the others, naming only a line of the file it was given)."""
    spec = NATS_KEY_INDEX[entry.key.lower()]
    if spec.accepts(entry.node):
        return True
    out.invalid.add(("nats_server", entry.key.lower()))
    out.diagnostics.append(
        error(
            f'"{entry.key}" must be {spec.expected()}, got {describe(entry.node)} '
            f"(nats-server: {spec.reference_text(entry.key, entry.node)})",
            entry.node.pos,
            code="type",
        )
    )
    return False


def _collect_address(entry: MapEntry, out: Context, port_option: str) -> None:
    """``listen``/``http``/``https``: a port number or "host:port"."""
    node = entry.node
    value = node.value
    if node.kind is NodeKind.INT:
        out.set_at(("nats_server", port_option), value, node.pos)
        return
    if node.kind is NodeKind.STRING and isinstance(value, str):
        host, sep, port = value.rpartition(":")
        if sep and port.isdigit():
            out.set_at(("nats_server", port_option), int(port), node.pos)
            if host:
                host_option = "host" if port_option == "port" else "http_host"
                out.set_at(("nats_server", host_option), host, node.pos)
            return
    out.diagnostics.append(
        error(
            f'"{entry.key}" must be a port number or "host:port", got {describe(node)}',
            node.pos,
            code="type",
        )
    )


def nats_tls_files(entries: list[MapEntry]) -> tuple[str, str]:
    """``cert_file`` and ``key_file`` of the NATS configuration's ``tls {}`` block
    (passed through to nats-server): HTTPS monitoring falls back to the server
    certificate, as nats-server does."""
    found = [e for e in entries if e.key.lower() == "tls" and e.node.kind is NodeKind.MAP]
    if not found:
        return "", ""
    block = found[-1].node
    files = []
    for key in ("cert_file", "key_file"):
        entry = block.get(key, casefold=True)
        value = entry.node.value if entry is not None else ""
        files.append(value if isinstance(value, str) else "")
    return files[0], files[1]


def with_nats_cluster_name(entries: list[MapEntry], name: str) -> list[MapEntry]:
    """The passed-through NATS entries with ``name`` in their ``cluster {}`` block when it
    has none: JetStream (a clustered streaming node's state) needs the NATS cluster named,
    the same on every node."""
    named = []
    for entry in entries:
        node = entry.node
        unnamed = node.kind is NodeKind.MAP and node.get("name", casefold=True) is None
        if entry.key.lower() == "cluster" and unnamed:
            value = Node(NodeKind.STRING, name, node.pos, quoted=True)
            node = Node(NodeKind.MAP, (MapEntry("name", node.pos, value), *node.entries), node.pos)
            entry = MapEntry(entry.key, entry.key_pos, node)
        named.append(entry)
    return named


def render_passthrough(entries: list[MapEntry], pos: Position) -> tuple[str, tuple[Position, ...]]:
    """The NATS-server-only entries as config text, with the position of each line."""
    if not entries:
        return "", ()
    return render_with_positions(Node(NodeKind.MAP, tuple(entries), pos))
