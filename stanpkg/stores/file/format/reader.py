"""Reading stored messages out of slices (lookup semantics of spec/filestore.md §9).

A ``SliceReader`` holds only configuration (CRC polynomial, do_crc, key hash), so it and
the ``SliceInfo`` objects it reads can be pickled and shipped to worker processes (Spark
executors) that read slices independently.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from typing import NamedTuple

from google.protobuf.message import DecodeError

from stanpkg.proto import protocol_pb2 as pb
from stanpkg.stores.crypto import EncryptionError, PayloadCipher, channel_key
from stanpkg.stores.file.format.errors import (
    BadRecordHandler,
    CorruptedRecordError,
    FileStoreError,
    IndexFileError,
    IndexMismatchError,
    MessageDecryptionError,
    RecordDecodeError,
    UnexpectedEOFError,
)
from stanpkg.stores.file.format.framing import (
    IEEE_POLY,
    RECORD_HEADER,
    RECORD_HEADER_SIZE,
    CrcFunc,
    FileImage,
    RecordScan,
    crc32_func,
    map_file,
)
from stanpkg.stores.file.format.index import INDEX_RECORD, INDEX_RECORD_SIZE, index_position
from stanpkg.stores.file.format.slices import SliceInfo

__all__ = ["SliceReader", "StoredMessage", "indexed_payload"]


class StoredMessage(NamedTuple):
    """One decoded message (``data`` decrypted when the reader has a key)."""

    sequence: int
    subject: str
    reply: str
    data: bytes
    timestamp: int  # Unix nanoseconds, as stored
    redelivered: bool
    crc32: int  # MsgProto.CRC32 field (never set by the server)
    slice: int  # slice number N of msgs.N.dat
    offset: int  # record header offset in msgs.N.dat


class SliceReader:
    """Decodes messages of slices; ``key_hash`` = SHA-256 of the encryption key, if any."""

    def __init__(
        self, *, crc_poly: int = IEEE_POLY, do_crc: bool = True, key_hash: bytes | None = None
    ) -> None:
        self.crc_poly = crc_poly
        self.do_crc = do_crc
        self.key_hash = key_hash
        self._crc = crc32_func(crc_poly)
        self._ciphers: dict[str, PayloadCipher] = {}

    def __reduce__(self) -> tuple[object, tuple[int, bool, bytes | None]]:
        # Pickle the configuration only (CRC tables and ciphers are rebuilt lazily).
        return (_make_reader, (self.crc_poly, self.do_crc, self.key_hash))

    def _cipher(self, channel: str) -> PayloadCipher | None:
        if self.key_hash is None:
            return None
        cipher = self._ciphers.get(channel)
        if cipher is None:
            cipher = PayloadCipher(channel_key(self.key_hash, channel))
            self._ciphers[channel] = cipher
        return cipher

    def read_message(self, sl: SliceInfo, seq: int) -> StoredMessage | None:
        """The message ``seq`` of this slice, or None if outside its live range."""
        return next(self.iter_messages(sl, seq, seq), None)

    def iter_messages(
        self,
        sl: SliceInfo,
        from_seq: int | None = None,
        to_seq: int | None = None,
        *,
        on_bad_record: BadRecordHandler | None = None,
    ) -> Iterator[StoredMessage]:
        """Live messages of the slice within ``[from_seq, to_seq]`` in sequence order.

        With ``on_bad_record``, a damaged record (CRC, size or sequence mismatch, invalid
        payload, cut short) is reported to it and skipped; a payload that does not decrypt
        still raises (a wrong key is a configuration error, not damage).
        """
        lo = sl.first_live_seq if from_seq is None else max(from_seq, sl.first_live_seq)
        hi = sl.last_seq if to_seq is None else min(to_seq, sl.last_seq)
        if sl.count == 0 or lo > hi:
            return iter(())
        if sl.index_usable:
            return self._iter_indexed(sl, lo, hi, on_bad_record)
        return self._iter_scanned(sl, lo, hi, on_bad_record)

    def _index_range(self, sl: SliceInfo, lo: int, hi: int) -> bytes:
        """Index records of sequences lo..hi (one read; binary search if seqs have gaps)."""
        with open(sl.idx_path, "rb") as f:
            if sl.contiguous:
                first = lo - sl.first_seq
                n = hi - lo + 1
            else:
                idx = f.read()
                seqs = [s for s, *_ in INDEX_RECORD.iter_unpack(idx[4 : 4 + sl.count * 32])]
                first = bisect_left(seqs, lo)
                n = bisect_left(seqs, hi + 1) - first
            f.seek(index_position(first))
            records = f.read(n * INDEX_RECORD_SIZE)
        if len(records) < n * INDEX_RECORD_SIZE:
            raise IndexFileError(
                "index file shorter than the slice it describes",
                path=sl.idx_path,
                offset=index_position(first) + len(records),
            )
        return records

    def _iter_indexed(
        self, sl: SliceInfo, lo: int, hi: int, on_bad_record: BadRecordHandler | None
    ) -> Iterator[StoredMessage]:
        # Index records were CRC-checked at recovery; here every entry is cross-checked
        # against its data record (size, payload CRC, sequence) which catches any mismatch.
        records = self._index_range(sl, lo, hi)
        check = self._crc if self.do_crc else None
        cipher = self._cipher(sl.channel)
        msg = pb.MsgProto()  # reused: fields are copied out before the next parse
        parse = msg.ParseFromString
        with map_file(sl.dat_path) as dat:
            dat_len = len(dat)
            for seq, off, _, size, _ in INDEX_RECORD.iter_unpack(records):
                try:
                    start = off + RECORD_HEADER_SIZE
                    end = start + size
                    if end > dat_len:
                        raise IndexMismatchError(
                            f"index entry of sequence {seq} points past the end of the data "
                            f"file (record of {size} bytes at offset {off}, file is {dat_len} "
                            "bytes)",
                            path=sl.dat_path,
                            offset=off,
                        )
                    payload = indexed_payload(dat, off, off, seq, size, check, sl.dat_path)
                    try:
                        parse(payload)
                    except DecodeError as exc:
                        raise RecordDecodeError(
                            f"invalid message record: {exc}", path=sl.dat_path, offset=off
                        ) from None
                    if msg.sequence != seq:
                        raise IndexMismatchError(
                            f"record holds sequence {msg.sequence}, index says {seq}",
                            path=sl.dat_path,
                            offset=off,
                        )
                except FileStoreError as exc:
                    if on_bad_record is None:
                        raise
                    on_bad_record(exc)
                    continue
                yield self._message(msg, sl, off, cipher)

    def _iter_scanned(
        self, sl: SliceInfo, lo: int, hi: int, on_bad_record: BadRecordHandler | None
    ) -> Iterator[StoredMessage]:
        check = self._crc if self.do_crc else None
        cipher = self._cipher(sl.channel)
        from_bytes = pb.MsgProto.FromString
        with map_file(sl.dat_path) as dat:
            scan = RecordScan(dat, sl.dat_path, typed=False, crc=check, on_corrupted=on_bad_record)
            try:
                for off, _, start, size in scan:
                    try:
                        msg = from_bytes(dat[start : start + size])
                    except DecodeError as exc:
                        error = RecordDecodeError(
                            f"invalid message record: {exc}", path=sl.dat_path, offset=off
                        )
                        if on_bad_record is None:
                            raise error from None
                        on_bad_record(error)
                        continue
                    if msg.sequence < lo:
                        continue
                    if msg.sequence > hi:
                        break
                    yield self._message(msg, sl, off, cipher)
            except UnexpectedEOFError as exc:
                if on_bad_record is None:
                    raise
                on_bad_record(exc)

    @staticmethod
    def _message(
        msg: pb.MsgProto, sl: SliceInfo, off: int, cipher: PayloadCipher | None
    ) -> StoredMessage:
        data = msg.data
        if cipher is not None and data:
            data = _decrypt(cipher, data, sl, msg.sequence, off)
        return StoredMessage(
            msg.sequence,
            msg.subject,
            msg.reply,
            data,
            msg.timestamp,
            msg.redelivered,
            msg.CRC32,
            sl.number,
            off,
        )


def _decrypt(cipher: PayloadCipher, data: bytes, sl: SliceInfo, seq: int, off: int) -> bytes:
    try:
        return cipher.decrypt(data)
    except EncryptionError as exc:
        raise MessageDecryptionError(
            f"unable to decrypt message {sl.channel}:{seq} ({exc}); wrong encryption key?",
            path=sl.dat_path,
            offset=off,
        ) from None


def indexed_payload(
    buf: FileImage, pos: int, offset: int, seq: int, size: int, crc: CrcFunc | None, path: str
) -> bytes:
    """The payload of the record at ``buf[pos:]`` (offset ``offset`` of the data file
    ``path``) that the index entry of ``seq`` says is ``size`` bytes: the record header
    must say so too, and the CRC match (unless ``crc`` is None)."""
    rec_size, rec_crc = RECORD_HEADER.unpack_from(buf, pos)
    if rec_size != size:
        raise IndexMismatchError(
            f"record size in data file is {rec_size}, index of sequence {seq} says {size}",
            path=path,
            offset=offset,
        )
    start = pos + RECORD_HEADER_SIZE
    payload = buf[start : start + size]
    if crc is not None and (actual := crc(payload)) != rec_crc:
        raise CorruptedRecordError(
            path=path,
            offset=offset,
            header=bytes(buf[pos:start]),
            payload=payload,
            typed=False,
            expected_crc=rec_crc,
            actual_crc=actual,
        )
    return payload


def _make_reader(crc_poly: int, do_crc: bool, key_hash: bytes | None) -> SliceReader:
    return SliceReader(crc_poly=crc_poly, do_crc=do_crc, key_hash=key_hash)
