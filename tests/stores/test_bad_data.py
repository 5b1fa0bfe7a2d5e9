"""Corrupted files: a precise error (file + offset) or the documented recovery outcome."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stanpkg.stores.file.format import (
    CorruptedRecordError,
    FileStoreError,
    FileVersionError,
    IndexMismatchError,
    InvalidRecordTypeError,
    InvalidSliceNameError,
    MessageDecryptionError,
    RecordDecodeError,
    RecordScan,
    ServerFileSizeError,
    UnexpectedEOFError,
    open_datastore,
)
from tests.stores.filestore_helpers import make_small_store

FILES = ("server.dat", "clients.dat", "ch/subs.dat", "ch/msgs.1.dat", "ch/msgs.1.idx")


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return make_small_store(tmp_path / "store")


def _offsets(path: Path, typed: bool) -> list[tuple[int, int]]:
    """(record offset, payload size) of every record."""
    data = path.read_bytes()
    return [(o, n) for o, _, _, n in RecordScan(data, str(path), typed=typed, crc=None)]


def _messages(root: Path) -> list[tuple[int, bytes]]:
    ds = open_datastore(root)
    return [(m.sequence, m.data) for m in ds.iter_messages("ch")]


@pytest.mark.parametrize("name", FILES)
def test_zero_length_file(store: Path, name: str) -> None:
    (store / name).write_bytes(b"")
    with pytest.raises(FileVersionError) as err:
        open_datastore(store)
    assert err.value.reason == "unable to verify file version: EOF"
    assert err.value.path == str(store / name) and err.value.offset == 0


@pytest.mark.parametrize("name", FILES)
def test_wrong_version_header(store: Path, name: str) -> None:
    data = (store / name).read_bytes()
    (store / name).write_bytes(b"\x02\x00\x00\x00" + data[4:])
    with pytest.raises(
        FileVersionError, match=r"unsupported file version: 2 \(supports \[1..1\]\)"
    ):
        open_datastore(store)
    (store / name).write_bytes(b"\x01\x00")
    with pytest.raises(FileVersionError, match="unable to verify file version: unexpected EOF"):
        open_datastore(store)


@pytest.mark.parametrize(("name", "typed"), [("clients.dat", True), ("ch/subs.dat", True)])
@pytest.mark.parametrize("cut", ["header", "payload"])
def test_truncated_record(store: Path, tmp_path: Path, name: str, typed: bool, cut: str) -> None:
    path = store / name
    offset, size = _offsets(path, typed)[-1]
    keep = offset + (5 if cut == "header" else 8 + size // 2)
    path.write_bytes(path.read_bytes()[:keep])
    with pytest.raises(UnexpectedEOFError) as err:
        open_datastore(store)
    assert (err.value.path, err.value.offset) == (str(path), offset)
    assert err.value.part == ("record header" if cut == "header" else "record payload")
    ds = open_datastore(store, truncate_bad_eof=True)
    assert path.stat().st_size == offset
    assert ds.cluster_id == "small"


def test_truncated_message_record(store: Path) -> None:
    dat = store / "ch" / "msgs.2.dat"
    offset, size = _offsets(dat, typed=False)[-1]
    dat.write_bytes(dat.read_bytes()[: offset + 8 + size - 1])
    with pytest.raises(UnexpectedEOFError) as err:
        open_datastore(store)
    assert (err.value.path, err.value.offset) == (str(dat), offset)
    assert err.value.log_lines(str(store))[-1] == (
        f"record payload expected to be {size} bytes, only read {size - 1}"
    )
    ds = open_datastore(store, truncate_bad_eof=True)
    assert ds.channel("ch").last_seq == 5
    assert (store / "ch" / "msgs.2.idx").stat().st_size == 4 + 2 * 32  # index rebuilt


@pytest.mark.parametrize(("name", "typed"), [("clients.dat", True), ("ch/subs.dat", True)])
def test_bit_flip_in_record(store: Path, name: str, typed: bool) -> None:
    path = store / name
    offset, _ = _offsets(path, typed)[1]
    data = bytearray(path.read_bytes())
    data[offset + 8 + 3] ^= 0x02  # inside a string/varint value: still decodable
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptedRecordError) as err:
        open_datastore(store)
    assert (err.value.path, err.value.offset) == (str(path), offset)
    assert err.value.reason.startswith("corrupted data, expected crc to be 0x")
    assert err.value.log_lines()[0].startswith(f'Corrupted record in file "{path}"')
    assert open_datastore(store, do_crc=False).cluster_id == "small"


def test_bit_flip_in_message_payload(store: Path) -> None:
    dat = store / "ch" / "msgs.1.dat"
    offset, _ = _offsets(dat, typed=False)[0]
    data = bytearray(dat.read_bytes())
    data[offset + 12] ^= 0x01
    dat.write_bytes(bytes(data))
    ds = open_datastore(store)  # the index and the last record are fine
    with pytest.raises(CorruptedRecordError) as err:
        list(ds.iter_messages("ch"))
    assert (err.value.path, err.value.offset) == (str(dat), offset)


def test_bit_flip_in_last_message_fails_recovery(store: Path) -> None:
    dat = store / "ch" / "msgs.2.dat"
    offset, _ = _offsets(dat, typed=False)[-1]
    data = bytearray(dat.read_bytes())
    data[offset + 10] ^= 0x01
    dat.write_bytes(bytes(data))
    # verification fails, the data file is scanned, and the CRC error is fatal
    with pytest.raises(CorruptedRecordError) as err:
        open_datastore(store)
    assert (err.value.path, err.value.offset) == (str(dat), offset)


def test_corrupt_index_is_rebuilt_from_data(store: Path) -> None:
    before = _messages(store)
    idx = store / "ch" / "msgs.1.idx"
    data = bytearray(idx.read_bytes())
    data[4 + 32 + 3] ^= 0xFF
    idx.write_bytes(bytes(data))
    ds = open_datastore(store)
    assert [(m.sequence, m.data) for m in ds.iter_messages("ch")] == before
    assert ds.log == [
        f'Error with index file "{idx}": corrupted data, expected crc to be '
        f"0x{struct.unpack_from('<I', data, 4 + 32 + 28)[0]:08x}, got "
        f"0x{zlib.crc32(bytes(data[36:64])):08x}. Truncating and recovering from data file"
    ]
    assert not ds.slices("ch")[0].index_usable
    assert idx.read_bytes() == bytes(data)  # read-only: index left as is
    repaired = open_datastore(store, repair=True)
    assert repaired.slices("ch")[0].index_usable and open_datastore(store).log == []


def test_missing_or_short_index(store: Path) -> None:
    before = _messages(store)
    (store / "ch" / "msgs.1.idx").unlink()
    idx2 = store / "ch" / "msgs.2.idx"
    idx2.write_bytes(idx2.read_bytes()[:-32])  # the index lost its last entry
    ds = open_datastore(store)
    # The whole record past the last index entry is indexed again (in memory: read-only).
    assert [(m.sequence, m.data) for m in ds.iter_messages("ch")] == before
    assert ds.channel("ch").last_seq == 6
    idx2.write_bytes(idx2.read_bytes()[:-5])  # partial index record: rebuilt
    assert _messages(store) == before


def test_index_pointing_past_eof(store: Path) -> None:
    idx = store / "ch" / "msgs.1.idx"
    data = bytearray(idx.read_bytes())
    seq, _, ts, size, _ = struct.unpack_from("<QQqII", data, 4 + 32)
    body = struct.pack("<QQqI", seq, 10_000, ts, size)
    data[36:68] = body + struct.pack("<I", zlib.crc32(body))
    idx.write_bytes(bytes(data))
    ds = open_datastore(store)
    with pytest.raises(IndexMismatchError) as err:
        list(ds.iter_messages("ch"))
    assert (err.value.path, err.value.offset) == (str(store / "ch" / "msgs.1.dat"), 10_000)
    assert "points past the end of the data file" in str(err.value)


def test_last_index_entry_past_eof_is_rebuilt(store: Path) -> None:
    before = _messages(store)
    idx = store / "ch" / "msgs.2.idx"
    data = bytearray(idx.read_bytes())
    seq, _, ts, size, _ = struct.unpack_from("<QQqII", data, len(data) - 32)
    body = struct.pack("<QQqI", seq, 99_999, ts, size)
    data[-32:] = body + struct.pack("<I", zlib.crc32(body))
    idx.write_bytes(bytes(data))
    ds = open_datastore(store)
    assert ds.log[0].startswith("Verification of last message for file")
    assert ds.log[0].endswith("failed: unable to read last record: EOF")
    assert [(m.sequence, m.data) for m in ds.iter_messages("ch")] == before


def test_zero_tails_are_ignored(store: Path) -> None:
    before = _messages(store)
    for name, zeros in [("clients.dat", 8), ("ch/subs.dat", 8), ("ch/msgs.2.dat", 8)]:
        with open(store / name, "ab") as f:
            f.write(bytes(zeros))
    with open(store / "ch" / "msgs.2.idx", "ab") as f:
        f.write(bytes(64))
    ds = open_datastore(store)
    assert [(m.sequence, m.data) for m in ds.iter_messages("ch")] == before
    assert list(ds.clients) == ["me"] and ds.log == []
    size = (store / "clients.dat").stat().st_size
    open_datastore(store, repair=True)
    assert (store / "clients.dat").stat().st_size == size - 8  # repair cuts the tail


def test_invalid_record_types(store: Path) -> None:
    for name, text in [("clients.dat", "invalid client record type: 7"), ("ch/subs.dat", None)]:
        path = store / name
        original = path.read_bytes()
        data = bytearray(original)
        offset, _ = _offsets(path, typed=True)[0]
        data[offset + 3] = 7 if text else 9
        path.write_bytes(bytes(data))
        with pytest.raises(InvalidRecordTypeError) as err:
            open_datastore(store)
        assert err.value.reason == (text or "unexpected record type: 9")
        assert (err.value.path, err.value.offset) == (str(path), offset)
        path.write_bytes(original)


def test_undecodable_payload_with_valid_crc(store: Path) -> None:
    path = store / "clients.dat"
    junk = b"\xff\xff\xff"
    header = struct.pack("<II", 1 << 24 | len(junk), zlib.crc32(junk))
    end = path.stat().st_size
    with open(path, "ab") as f:
        f.write(header + junk)
    with pytest.raises(RecordDecodeError) as err:
        open_datastore(store)
    assert (err.value.path, err.value.offset) == (str(path), end)


def test_server_file_size(store: Path) -> None:
    path = store / "server.dat"
    size = path.stat().st_size
    with open(path, "ab") as f:
        f.write(b"x")
    with pytest.raises(ServerFileSizeError, match=f"expected {size} bytes, got {size + 1} bytes"):
        open_datastore(store)


def test_invalid_slice_name(store: Path) -> None:
    (store / "ch" / "msgs.x.dat").write_bytes(b"\x01\x00\x00\x00")
    with pytest.raises(InvalidSliceNameError, match=r"message log has an invalid name: msgs.x.dat"):
        open_datastore(store)


def test_wrong_key_on_own_store(tmp_path: Path) -> None:
    root = make_small_store(tmp_path / "enc", key=b"right")
    assert _messages(root)[0][1] != b"payload number 1"
    good = open_datastore(root, encryption_key=b"right")
    assert next(good.iter_messages("ch")).data == b"payload number 1"
    bad = open_datastore(root, encryption_key=b"wrong")
    with pytest.raises(MessageDecryptionError) as err:
        bad.get_message("ch", 4)
    assert err.value.path == str(root / "ch" / "msgs.2.dat") and err.value.offset == 4
    assert "unable to decrypt message ch:4 (cipher: message authentication failed)" in str(
        err.value
    )


def test_missing_datastore(tmp_path: Path) -> None:
    with pytest.raises(FileStoreError, match="datastore directory not found"):
        open_datastore(tmp_path / "nope")


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    name=st.sampled_from(FILES[1:]),
    position=st.floats(min_value=0, max_value=0.9999),
    bit=st.integers(min_value=0, max_value=7),
)
def test_any_bit_flip_is_detected_or_harmless(
    tmp_path_factory: pytest.TempPathFactory, name: str, position: float, bit: int
) -> None:
    """Never an unexpected exception type, never silently different data."""
    root = tmp_path_factory.mktemp("flip") / "store"
    make_small_store(root)
    reference = open_datastore(root)
    expected = (reference.clients, reference.channel("ch").subscriptions, _messages(root))
    path = root / name
    data = bytearray(path.read_bytes())
    flipped = int(position * len(data))
    data[flipped] ^= 1 << bit
    path.write_bytes(bytes(data))
    try:
        ds = open_datastore(root)
        got = (ds.clients, ds.channel("ch").subscriptions, _messages(root))
    except FileStoreError as exc:
        assert exc.path is not None and str(root) in exc.path
        return
    if name in TYPED_FILES and flipped in _type_byte_offsets(bytes(data)):
        return  # the format's CRC covers the payload only, not the record type byte
    assert got == expected


TYPED_FILES = {"clients.dat", "ch/subs.dat"}


def _type_byte_offsets(data: bytes) -> set[int]:
    """Offsets of the record-type bytes of a typed file (filestore.md §2.2)."""
    offsets, offset = set(), 4  # after the file version header
    while offset + 8 <= len(data):
        offsets.add(offset + 3)
        offset += 8 + (int.from_bytes(data[offset : offset + 4], "little") & 0xFFFFFF)
    return offsets


def test_server_file_without_record(store: Path) -> None:
    (store / "server.dat").write_bytes(b"\x01\x00\x00\x00")
    ds = open_datastore(store)
    assert ds.server_info is None and ds.cluster_id is None
    assert ds.channel("ch").last_seq == 6  # channels still readable (v0.25 behaviour)
    assert ds.log == [
        "Server information was not recovered, however channels are present. "
        "Will initialize server and restart recovery!"
    ]
