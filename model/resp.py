"""RESP2 as Valkey speaks it: request splitting, reply encoding and reply parsing.

The request side mirrors Valkey's ``networking.c`` parser (``parseMultibulkBuffer`` /
``parseInlineBuffer``): the first byte of each command decides multibulk (``*``) or inline;
numbers are parsed with ``string2ll`` rules (no ``+``, no leading zeros, no ``-0``); the two
bytes after a bulk payload are skipped without being checked; ``*0`` and ``*-1`` are skipped
silently; a protocol error ends the connection, so nothing after it is parsed.

Everything here works on ``bytes``; offsets are byte offsets into the query buffer, ranges
are half open ``[start, end)``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "Command",
    "ProtocolError",
    "ReplyError",
    "Simple",
    "split_commands",
    "string2ll",
    "encode_command",
    "bulk",
    "integer",
    "error",
    "array",
    "NULL_BULK",
    "OK",
    "parse_reply",
    "parse_replies",
]

LLONG_MAX = (1 << 63) - 1
LLONG_MIN = -(1 << 63)
INT_MAX = (1 << 31) - 1
PROTO_INLINE_MAX_SIZE = 1024 * 64
PROTO_MAX_BULK_LEN = 512 * 1024 * 1024


def string2ll(s: bytes) -> int | None:
    """Valkey ``string2ll``: strict base-10 signed 64-bit parse; None if invalid."""
    if not s or len(s) > 20:
        return None
    if s == b"0":
        return 0
    neg = s[:1] == b"-"
    digits = s[1:] if neg else s
    if not digits or not (0x31 <= digits[0] <= 0x39):
        return None
    if any(not (0x30 <= c <= 0x39) for c in digits):
        return None
    v = int(digits)
    v = -v if neg else v
    if v < LLONG_MIN or v > LLONG_MAX:
        return None
    return v


@dataclass(frozen=True)
class Command:
    """One complete command: its arguments and the byte range it came from."""

    argv: tuple[bytes, ...]
    start: int
    end: int


@dataclass(frozen=True)
class ProtocolError:
    """A protocol error at ``start``; ``message`` is the text after ``-ERR ``."""

    message: str
    start: int


# --- Request splitting -------------------------------------------------------------------


def _find(buf: bytes, ch: bytes, pos: int) -> int:
    """C ``strchr`` on an sds: stops at the first NUL byte."""
    i = buf.find(ch, pos)
    nul = buf.find(b"\0", pos)
    if nul != -1 and (i == -1 or nul < i):
        return -1
    return i


def _unterminated(buf: bytes, pos: int, what: str) -> tuple[ProtocolError | None, int]:
    """No line end after ``pos`` yet: Valkey's "too big" error once more than
    PROTO_INLINE_MAX_SIZE bytes wait, else incomplete (``processInlineBuffer`` and
    ``processMultibulkBuffer`` alike)."""
    if len(buf) - pos > PROTO_INLINE_MAX_SIZE:
        return ProtocolError(f"Protocol error: too big {what}", pos), len(buf)
    return None, pos


def _parse_multibulk(buf: bytes, pos: int) -> tuple[Command | ProtocolError | None, int]:
    """Returns (item, next_pos); item None with next_pos == pos means incomplete,
    item None with next_pos > pos means an empty command that was skipped."""
    n = len(buf)
    nl = _find(buf, b"\r", pos)
    if nl == -1:
        return _unterminated(buf, pos, "mbulk count string")
    if nl - pos > n - pos - 2:  # the '\n' is not in the buffer yet
        return None, pos
    ll = string2ll(buf[pos + 1 : nl])
    if ll is None or ll > INT_MAX:
        return ProtocolError("Protocol error: invalid multibulk length", pos), n
    p = nl + 2
    if ll <= 0:
        return None, p
    argv: list[bytes] = []
    while len(argv) < ll:
        if p >= n:
            return None, pos
        nl = _find(buf, b"\r", p)
        if nl == -1:
            if n - p > PROTO_INLINE_MAX_SIZE:
                return ProtocolError("Protocol error: too big bulk count string", pos), n
            return None, pos
        if nl - p > n - p - 2:
            return None, pos
        if buf[p] != 0x24:  # '$'
            got = chr(buf[p]) if buf[p] not in (0x0D, 0x0A) else " "
            return ProtocolError(f"Protocol error: expected '$', got '{got}'", pos), n
        bl = string2ll(buf[p + 1 : nl])
        if bl is None or bl < 0 or bl > PROTO_MAX_BULK_LEN:
            return ProtocolError("Protocol error: invalid bulk length", pos), n
        p = nl + 2
        if n - p < bl + 2:
            return None, pos
        argv.append(buf[p : p + bl])
        p += bl + 2
    return Command(tuple(argv), pos, p), p


def _hex(c: int) -> int | None:
    ch = chr(c).lower()
    return int(ch, 16) if ch in "0123456789abcdef" else None


def sdssplitargs(line: bytes) -> list[bytes] | None:
    """Valkey ``sdssplitargs``: split an inline request; None on unbalanced quotes."""
    out: list[bytes] = []
    i, n = 0, len(line)
    space = b" \n\r\t\v\f"

    def at(k: int) -> int:
        return line[k] if k < n else 0

    while True:
        while at(i) and at(i) in space:
            i += 1
        if not at(i):
            return out
        cur = bytearray()
        q = 0  # the open quote (0x22 or 0x27), 0 outside quotes: sdssplitargs' inq / insq
        while True:
            c = at(i)
            if q and c == 0:
                return None  # unterminated quotes
            if q == 0x22 and c == 0x5C and at(i + 1) == ord("x") and (
                _hex(at(i + 2)) is not None and _hex(at(i + 3)) is not None
            ):
                cur.append(_hex(at(i + 2)) * 16 + _hex(at(i + 3)))  # type: ignore[operator]
                i += 3
            elif q == 0x22 and c == 0x5C and at(i + 1):
                i += 1
                e = at(i)
                cur.append({ord("n"): 10, ord("r"): 13, ord("t"): 9, ord("b"): 8,
                            ord("a"): 7}.get(e, e))
            elif q == 0x27 and c == 0x5C and at(i + 1) == 0x27:
                i += 1
                cur.append(0x27)
            elif q and c == q:
                # the closing quote must be followed by a space or the end
                if at(i + 1) and at(i + 1) not in space:
                    return None
                i += 1
                break
            elif not q and (c == 0 or c in space):
                break
            elif not q and c in (0x22, 0x27):
                q = c
            else:
                cur.append(c)
            i += 1
        out.append(bytes(cur))


def _parse_inline(buf: bytes, pos: int) -> tuple[Command | ProtocolError | None, int]:
    n = len(buf)
    nl = _find(buf, b"\n", pos)
    if nl == -1:
        return _unterminated(buf, pos, "inline request")
    end = nl
    if end != pos and buf[end - 1] == 0x0D:
        end -= 1
    args = sdssplitargs(buf[pos:end])
    if args is None:
        return ProtocolError("Protocol error: unbalanced quotes in request", pos), n
    if not args:
        return None, nl + 1
    return Command(tuple(args), pos, nl + 1), nl + 1


def split_commands(buf: bytes, start: int = 0) -> tuple[list[Command | ProtocolError], int]:
    """Split a query buffer into complete commands.

    Returns ``(items, consumed)``: every complete command in order, possibly ending with one
    ProtocolError (after which parsing stops and ``consumed == len(buf)``), and the number of
    bytes consumed. An incomplete trailing command is left unconsumed.
    """
    items: list[Command | ProtocolError] = []
    pos = start
    n = len(buf)
    while pos < n:
        if buf[pos] == 0x2A:  # '*'
            item, nxt = _parse_multibulk(buf, pos)
        else:
            item, nxt = _parse_inline(buf, pos)
        if item is None and nxt == pos:
            break
        if item is not None:
            items.append(item)
            if isinstance(item, ProtocolError):
                return items, n
        pos = nxt
    return items, pos


def encode_command(*args: bytes | str | int) -> bytes:
    """Encode one request as a RESP2 multibulk."""
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(parts)


# --- Reply encoding ----------------------------------------------------------------------

NULL_BULK = b"$-1\r\n"
OK = b"+OK\r\n"


def bulk(b: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(b), b)


def integer(v: int) -> bytes:
    return b":%d\r\n" % v


def error(msg: str | bytes) -> bytes:
    """An error reply; ``msg`` without the leading ``-`` (e.g. ``"ERR syntax error"``).

    Like Valkey's ``addReplyError*``, CR and LF inside the message become spaces."""
    b = msg.encode("latin-1") if isinstance(msg, str) else msg
    return b"-" + b.replace(b"\r", b" ").replace(b"\n", b" ") + b"\r\n"


def array(items: list[bytes]) -> bytes:
    """An array of already-encoded replies."""
    return b"*%d\r\n" % len(items) + b"".join(items)


# --- Reply parsing -----------------------------------------------------------------------


class ReplyError(str):
    """An error reply (text without the leading ``-``)."""


class Simple(str):
    """A simple-string reply (text without the leading ``+``)."""


Reply = "bytes | int | None | ReplyError | Simple | list"


def parse_reply(buf: bytes, pos: int = 0) -> tuple[object, int]:
    """Parse one RESP2 reply at ``pos``; returns ``(value, next_pos)``.

    Bulk strings are ``bytes``, the null bulk/array is ``None``, integers ``int``, errors
    ``ReplyError``, simple strings ``Simple``, arrays ``list``. Raises ValueError if malformed
    or incomplete."""
    nl = buf.find(b"\r\n", pos)
    if nl == -1:
        raise ValueError(f"incomplete reply at {pos}")
    t, line = buf[pos : pos + 1], buf[pos + 1 : nl]
    nxt = nl + 2
    if t == b"+":
        return Simple(line.decode("latin-1")), nxt
    if t == b"-":
        return ReplyError(line.decode("latin-1")), nxt
    if t == b":":
        return int(line), nxt
    if t == b"$":
        ln = int(line)
        if ln < 0:
            return None, nxt
        if buf[nxt + ln : nxt + ln + 2] != b"\r\n":
            raise ValueError(f"bad bulk at {pos}")
        return buf[nxt : nxt + ln], nxt + ln + 2
    if t == b"*":
        ln = int(line)
        if ln < 0:
            return None, nxt
        out = []
        for _ in range(ln):
            v, nxt = parse_reply(buf, nxt)
            out.append(v)
        return out, nxt
    raise ValueError(f"bad reply type {t!r} at {pos}")


def parse_replies(buf: bytes) -> list[object]:
    """Parse a concatenation of complete replies."""
    out, pos = [], 0
    while pos < len(buf):
        v, pos = parse_reply(buf, pos)
        out.append(v)
    return out
