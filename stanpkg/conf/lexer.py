"""Lexer: configuration text -> tokens, written as small state functions.

Like the Go lexer (nats-server/conf/lex.go) each state consumes some input, may emit
tokens and returns the next state; a stack remembers where to continue after a value
(top level, map or array). Unlike it, each state consumes whole runs with one regular
expression (speed), and it is stricter where the Go lexer silently accepts mistakes:

* a stray ``}``/``]``, a key without a value, trailing garbage, an unterminated string,
  map or array (reported at the opening token, not at the end of the file);
* ``]`` ends a number, so ``[1, 2]`` is two integers (the Go lexer reads ``"2"``);
* ``#``/``//`` start a comment wherever a token may start (Go reads ``a: #x`` as the
  string ``#x``); inside an unquoted word they are ordinary characters (as in Go);
* a quote inside an unquoted word is an error (Go silently splits the word);
* a value must start on the line of its key; only ``{``/``[`` may follow on a later
  line (Go reads ``foo`` + newline + ``bar: 1`` as ``foo = "bar:"``).
"""

from __future__ import annotations

import enum
import re
from collections import deque
from typing import Any, NoReturn, Protocol

from stanpkg.conf import scalars
from stanpkg.conf.errors import ConfError
from stanpkg.conf.nodes import Kind
from stanpkg.conf.source_text import SourceText


class T(enum.Enum):
    DOCUMENT_START = "document {"  # a document wrapped in braces; its '}' is a MAP_END
    KEY = "key"
    SCALAR = "scalar"
    VARIABLE = "variable"
    INCLUDE = "include"
    MAP_START = "{"
    MAP_END = "}"
    ARRAY_START = "["
    ARRAY_END = "]"
    EOF = "end of input"


# A token: (type, value, offset, kind, raw, quoted). ``value`` is the key, variable name
# or include path, or a SCALAR's typed value; ``kind``, ``raw`` (source text) and
# ``quoted`` describe SCALARs. Plain tuples: the lexer makes one per token, and speed
# matters for configurations with 100k channels.
Token = tuple[T, Any, int, Kind | None, str, bool]

# Enum attribute access is slow in Python 3.11; the hot paths use these aliases.
DOCUMENT_START, KEY, SCALAR, VARIABLE, INCLUDE = (
    T.DOCUMENT_START,
    T.KEY,
    T.SCALAR,
    T.VARIABLE,
    T.INCLUDE,
)
MAP_START, MAP_END, ARRAY_START, ARRAY_END, EOF = (
    T.MAP_START,
    T.MAP_END,
    T.ARRAY_START,
    T.ARRAY_END,
    T.EOF,
)
_STRING, _INT, _BOOL = Kind.STRING, Kind.INT, Kind.BOOL


class _State(Protocol):
    def __call__(self) -> _State: ...


# Whitespace, newlines and comments between tokens.
_TRIVIA = re.compile(r"(?:[ \t\r\n]+|#[^\n]*|//[^\n]*)*")
_SPACES = re.compile(r"[ \t]*")
# Keys, with the separator that follows (':', '=' or just white space).
_BARE_KEY = re.compile(r"([^ \t\r\n:={}\[\],;\"']+)([ \t]*)([:=]?)[ \t]*")
_BARE_VALUE = re.compile(r"[^ \t\r\n,;\]}]+")
_DQ_KEY = re.compile(r'"([^"\r\n]*)"[ \t]*([:=]?)[ \t]*')
_SQ_KEY = re.compile(r"'([^'\r\n]*)'[ \t]*([:=]?)[ \t]*")
_DQ_PATH = re.compile(r'"([^"\r\n]*)"')
_SQ_PATH = re.compile(r"'([^'\r\n]*)'")
_DQ_STRING = re.compile(r'"([^"\\]*(?:\\.[^"\\]*)*)"', re.DOTALL)
_SQ_STRING = re.compile(r"'([^']*)'")
# A ( block ) string ends with a ')' alone at the start of a line.
_BLOCK_END = re.compile(r"\n\)(?=\r?\n|\Z)")
_NUMBER_START = frozenset("-0123456789")
_END_OF_VALUE = frozenset("\r\n,;#}]")


def _skip(rx: re.Pattern[str], text: str, pos: int) -> int:
    """End of the match of ``rx`` (which matches the empty string) at ``pos``."""
    m = rx.match(text, pos)
    assert m is not None
    return m.end()


def describe(text: str, offset: int) -> str:
    if offset >= len(text):
        return "end of file"
    c = text[offset]
    if c in "\r\n":
        return "a newline"
    return repr(c)


class Lexer:
    """Produces tokens on demand via :meth:`next`; raises ConfError on bad input."""

    def __init__(self, src: SourceText, *, value_only: bool = False) -> None:
        self.src = src
        self.text = src.text
        self.pos = 0
        self._queue: deque[Token] = deque()
        self._stack: list[_State] = []
        self._open: list[int] = []  # offsets of the '{' / '[' not yet closed
        self._key = ""
        self._key_at = 0
        self._state: _State = self._start_value if value_only else self._start

    def next(self) -> Token:
        queue = self._queue
        while not queue:
            self._state = self._state()
        return queue.popleft()

    # -- helpers -----------------------------------------------------------------------

    def _emit(self, type: T, value: object, offset: int) -> None:
        self._queue.append((type, value, offset, None, "", False))

    def _error(self, offset: int, message: str) -> NoReturn:
        raise ConfError(self.src.pos(offset), message)

    def _skip_trivia(self) -> int:
        m = _TRIVIA.match(self.text, self.pos)
        assert m is not None
        return m.end()

    def _at_comment(self, pos: int) -> bool:
        return self.text.startswith("#", pos) or self.text.startswith("//", pos)

    def _unterminated(self) -> NoReturn:
        at = self._open[-1]
        if self.text[at] == "{":
            self._error(at, "unterminated map: this '{' is never closed")
        self._error(at, "unterminated array: this '[' is never closed")

    # -- top level ---------------------------------------------------------------------

    def _start(self) -> _State:
        pos = self._skip_trivia()
        if self.text.startswith("{", pos):
            # A document wrapped in braces (JSON style): one map, then nothing.
            self._open.append(pos)
            self._emit(DOCUMENT_START, None, pos)
            self.pos = pos + 1
            self._stack.append(self._document_end)
            return self._map_key_start
        return self._top

    def _top(self) -> _State:
        pos = self.pos = self._skip_trivia()
        if pos >= len(self.text):
            self._emit(EOF, None, pos)
            return self._eof
        c = self.text[pos]
        if c in "}]":
            self._error(pos, f"unexpected '{c}': no {'map' if c == '}' else 'array'} is open")
        self._stack.append(self._top_value_end)
        return self._key_start()

    def _top_value_end(self) -> _State:
        text = self.text
        pos = _skip(_SPACES, text, self.pos)
        self.pos = pos
        if pos >= len(text) or self._at_comment(pos):
            return self._top
        c = text[pos]
        if c in "\r\n,;":
            self.pos = pos + 1
            return self._top
        if c == "}":
            self._error(pos, "unexpected '}': no map is open")
        self._error(
            pos,
            f"unexpected {describe(text, pos)} after a value: entries are separated by a "
            "newline, ',' or ';'",
        )

    def _document_end(self) -> _State:
        pos = self._skip_trivia()
        if pos < len(self.text):
            self._error(
                pos,
                f"unexpected {describe(self.text, pos)} after the '}}' that closes the document",
            )
        self._emit(EOF, None, pos)
        return self._eof

    def _eof(self) -> _State:
        self._emit(EOF, None, len(self.text))
        return self._eof

    # -- keys --------------------------------------------------------------------------

    def _key_start(self) -> _State:
        text, pos = self.text, self.pos
        c = text[pos]
        if c == '"' or c == "'":
            m = (_DQ_KEY if c == '"' else _SQ_KEY).match(text, pos)
            if m is None:
                self._error(pos, "unterminated quoted key (keys end on the line they start)")
        else:
            m = _BARE_KEY.match(text, pos)
            if m is None:
                self._error(pos, f"expected a key, got {describe(text, pos)}")
            if m.group(3) == "" and m.group(2) and m.group(1).lower() == "include":
                # ``include <path>``: the keyword needs white space after it and no key
                # separator (``include: 1`` is an ordinary key).
                self._key_at = pos
                self.pos = m.end()
                return self._include
        key = m.group(1)
        self._key, self._key_at = key, pos
        self._queue.append((KEY, key, pos, None, "", False))
        # The separator (':', '=' or white space) is part of the match.
        pos = self.pos = m.end()
        if pos < len(text) and text[pos] not in _END_OF_VALUE and not text.startswith("//", pos):
            return self._value()
        ahead = self._skip_trivia()
        if ahead < len(text) and text[ahead] in "{[":
            self.pos = ahead  # Allman style: the map/array opens on a later line
            return self._value()
        hint = ""
        if self._at_comment(pos):
            hint = f" ('{text[pos]}' starts a comment: quote the value if it is a string)"
        self._error(self._key_at, f"key '{self._key}' has no value{hint}")

    def _include(self) -> _State:
        text, pos = self.text, self.pos
        c = text[pos] if pos < len(text) else ""
        if c == '"' or c == "'":
            m = (_DQ_PATH if c == '"' else _SQ_PATH).match(text, pos)
            if m is None:
                self._error(pos, "unterminated include path")
            path = m.group(1)
        elif (
            c and c not in "\r\n{}[](,;\\" and c not in _NUMBER_START and not self._at_comment(pos)
        ):
            m = _BARE_VALUE.match(text, pos)
            assert m is not None
            path = m.group()
            self._check_no_quote(path, pos)
        else:
            self._error(
                pos, f"include needs a file path, got {describe(text, pos)} (quote the path)"
            )
        if not path:
            self._error(pos, "empty include path")
        self._emit(INCLUDE, path, self._key_at)
        self.pos = m.end()
        return self._stack.pop()

    # -- values ------------------------------------------------------------------------

    def _start_value(self) -> _State:
        pos = self.pos = self._skip_trivia()
        if pos >= len(self.text):
            self._error(pos, "expected a value, got end of input")
        self._stack.append(self._value_only_end)
        return self._value

    def _value_only_end(self) -> _State:
        pos = self._skip_trivia()
        if pos < len(self.text):
            self._error(pos, f"unexpected {describe(self.text, pos)} after the value")
        self._emit(EOF, None, pos)
        return self._eof

    def _value(self) -> _State:
        text, pos = self.text, self.pos
        c = text[pos]
        if c == "{":
            self._open.append(pos)
            self._emit(MAP_START, None, pos)
            self.pos = pos + 1
            return self._map_key_start
        if c == "[":
            self._open.append(pos)
            self._emit(ARRAY_START, None, pos)
            self.pos = pos + 1
            return self._array_value
        if c == '"':
            m = _DQ_STRING.match(text, pos)
            if m is None:
                self._error(pos, "unterminated string: this '\"' is never closed")
            body = m.group(1)
            value = self._unescape(body, pos + 1) if "\\" in body else body
            self._queue.append((SCALAR, value, pos, _STRING, m.group(), True))
            self.pos = m.end()
            return self._stack.pop()
        if c == "'":
            m = _SQ_STRING.match(text, pos)
            if m is None:
                self._error(pos, 'unterminated string: this "\'" is never closed')
            self._queue.append((SCALAR, m.group(1), pos, _STRING, m.group(), True))
            self.pos = m.end()
            return self._stack.pop()
        if c == "(":
            end = _BLOCK_END.search(text, pos + 1)
            if end is None:
                self._error(pos, "unterminated block: no ')' alone on a line closes this '('")
            raw = text[pos : end.end()]
            self._queue.append((SCALAR, text[pos + 1 : end.start() + 1], pos, _STRING, raw, True))
            self.pos = end.end()
            return self._stack.pop()
        if c in ",;}]" or c in "\r\n":
            self._error(pos, f"expected a value, got {describe(text, pos)}")
        if c == ".":
            self._error(pos, "a value cannot start with '.' (quote it if it is a string)")
        m = _BARE_VALUE.match(text, pos)
        assert m is not None
        word = m.group()
        self.pos = m.end()
        self._check_no_quote(word, pos)
        if c in _NUMBER_START:
            if len(word) < 19 and word.isdigit() and word.isascii():  # fast path
                self._queue.append((SCALAR, int(word), pos, _INT, word, False))
                return self._stack.pop()
            try:
                kind, value = scalars.number(word)
            except scalars.ScalarError as e:
                self._error(pos + e.offset, e.message)
            self._queue.append((SCALAR, value, pos, kind, word, False))
        elif "\\" in word:
            # Like Go, unquoted words process escapes, and are then always strings.
            self._queue.append((SCALAR, self._unescape(word, pos), pos, _STRING, word, False))
        elif c == "$" and not word.startswith("$2a$"):  # "$2a$..." is a bcrypt hash
            if len(word) == 1:
                self._error(pos, "'$' must be followed by a variable name")
            self._queue.append((VARIABLE, word[1:], pos, None, word, False))
        else:
            b = scalars.BOOLS.get(word.lower())
            if b is None:
                self._queue.append((SCALAR, word, pos, _STRING, word, False))
            else:
                self._queue.append((SCALAR, b, pos, _BOOL, word, False))
        return self._stack.pop()

    def _check_no_quote(self, word: str, offset: int) -> None:
        for q in "\"'":
            i = word.find(q)
            if i >= 0:
                self._error(offset + i, "quote inside an unquoted value: quote the whole value")

    def _unescape(self, body: str, offset: int) -> str:
        try:
            return scalars.unescape(body)
        except scalars.ScalarError as e:
            self._error(offset + e.offset, e.message)

    # -- maps --------------------------------------------------------------------------

    def _map_key_start(self) -> _State:
        pos = self.pos = self._skip_trivia()
        if pos >= len(self.text):
            self._unterminated()
        c = self.text[pos]
        if c == "}":
            self._open.pop()
            self._emit(MAP_END, None, pos)
            self.pos = pos + 1
            return self._stack.pop()
        if c == "]":
            self._error(pos, "unexpected ']' inside a map")
        self._stack.append(self._map_value_end)
        return self._key_start()

    def _map_value_end(self) -> _State:
        text = self.text
        pos = self.pos = _skip(_SPACES, text, self.pos)
        if pos >= len(text):
            self._unterminated()
        c = text[pos]
        # Calling the next state directly (instead of returning it) saves a trip through
        # next(); the chain stays short because _value never calls into a container.
        if c in "\r\n,;":
            self.pos = pos + 1
            return self._map_key_start()
        if c == "}" or self._at_comment(pos):
            return self._map_key_start()
        self._error(
            pos,
            f"unexpected {describe(text, pos)} after a value: map entries are separated by "
            "a newline, ',' or ';' and the map ends with '}'",
        )

    # -- arrays ------------------------------------------------------------------------

    def _array_value(self) -> _State:
        pos = self.pos = self._skip_trivia()
        if pos >= len(self.text):
            self._unterminated()
        c = self.text[pos]
        if c == "]":
            self._open.pop()
            self._emit(ARRAY_END, None, pos)
            self.pos = pos + 1
            return self._stack.pop()
        if c == "}":
            self._error(pos, "unexpected '}' inside an array")
        self._stack.append(self._array_value_end)
        return self._value

    def _array_value_end(self) -> _State:
        text = self.text
        pos = self.pos = _skip(_SPACES, text, self.pos)
        if pos >= len(text):
            self._unterminated()
        c = text[pos]
        if c in "\r\n,":
            self.pos = pos + 1
            return self._array_value
        if c == "]" or self._at_comment(pos):
            return self._array_value
        self._error(
            pos,
            f"unexpected {describe(text, pos)} after an array element: elements are "
            "separated by ',' or a newline and the array ends with ']'",
        )
