"""A pickle reader for plain data only: what `pickle.dump` writes for dicts, lists, tuples, strings,
numbers, booleans and None, read from a stream, and nothing else.

Loading a pickle with the standard library runs whatever code the pickle names. This reader has no
way to do that: an opcode that names a Python object or builds one (GLOBAL, STACK_GLOBAL, REDUCE,
BUILD, INST, OBJ, NEWOBJ, EXT*, PERSID, out-of-band buffers) is refused with the byte it is at, and so
are the ones a memory snapshot never holds (bytes, sets, Python 2 strings). Everything it builds is a
plain Python container or scalar.

The stream is read in chunks (memory: one chunk, plus what is built); `limit` caps the bytes read. Two
hooks let a caller keep only what it needs of a big container: `on_items(lst, items)` is called when
items are appended to a list (return True to take them instead of the list), and `skip(vm)` is offered
the stream at each EMPTY_DICT opcode inside a list's items, to read many of them at once
(snapshot_fast.py); both see the memo, the table of objects later opcodes may refer to.
"""
from __future__ import annotations

import itertools
import re
import struct
from typing import Callable

CHUNK = 16 << 20
# Bytes left in the buffer below which it is refilled before the next opcode: every opcode of fixed
# size, and every short string (at most 255 bytes), fits; longer arguments ask for their bytes.
MARGIN = 1024

_REFUSED = {
    ord("c"): "GLOBAL (names a Python object)", 0x93: "STACK_GLOBAL (names a Python object)",
    ord("R"): "REDUCE (calls a Python object)", ord("b"): "BUILD (sets an object's state)",
    ord("i"): "INST (builds an object)", ord("o"): "OBJ (builds an object)",
    0x81: "NEWOBJ (builds an object)", 0x92: "NEWOBJ_EX (builds an object)",
    0x82: "EXT1 (names a registered Python object)", 0x83: "EXT2 (names a registered Python object)",
    0x84: "EXT4 (names a registered Python object)", ord("P"): "PERSID (refers to an outside object)",
    ord("Q"): "BINPERSID (refers to an outside object)", 0x97: "NEXT_BUFFER (an out-of-band buffer)",
    0x98: "READONLY_BUFFER (an out-of-band buffer)",
    ord("S"): "STRING (a Python 2 string)", ord("T"): "BINSTRING (a Python 2 string)",
    ord("U"): "SHORT_BINSTRING (a Python 2 string)", ord("B"): "BINBYTES (bytes)", ord("C"): "SHORT_BINBYTES (bytes)",
    0x8e: "BINBYTES8 (bytes)", 0x96: "BYTEARRAY8 (a bytearray)", 0x8f: "EMPTY_SET (a set)",
    0x90: "ADDITEMS (a set)", 0x91: "FROZENSET (a frozenset)",
}
# opcodes that build objects, as opposed to data this reader does not expect
BUILDS_OBJECTS = frozenset(k for k, v in _REFUSED.items() if "object" in v or "buffer" in v)

_U16 = struct.Struct("<H").unpack_from
_U32 = struct.Struct("<I").unpack_from
_I32 = struct.Struct("<i").unpack_from
_U64 = struct.Struct("<Q").unpack_from
_F64 = struct.Struct(">d").unpack_from
# memo indices beyond this many past the end mean a damaged or hostile pickle (pickle.dump numbers
# them in order), not a sparse memo to allocate
_MEMO_GAP = 1 << 20
# pickle.dump puts a list's or dict's items on the stack 1000 at a time (then APPENDS/SETITEMS), so a
# snapshot's stack holds about a thousand per open container; far more is a DUP flood
_MAX_STACK = 1 << 20
_DUPS = re.compile(rb"2*")
_MEMOIZES = re.compile(rb"\x94*")
_KEY_TYPES = (str, bool, type(None))
_HASH_MOD = (1 << 61) - 1   # CPython hashes an int modulo this prime
_KEY_NODES = 64             # items of a tuple key, counted through nested tuples


def _bad_key(key) -> str | None:
    """Why a dict key is refused before it is hashed, or None. A snapshot's keys are names; a plain-data
    pickle may also have small numbers and small tuples of them. Hashing a tuple nested 200k deep
    recurses in C (a crash), a tuple DAG visits 2^depth nodes, and integers that are multiples of 2^61-1
    all hash alike (quadratic inserts): the walk here is a loop with a budget of nodes."""
    todo, left = [key], _KEY_NODES
    while todo:
        k = todo.pop()
        left -= 1
        if left < 0:
            return f"a tuple of more than {_KEY_NODES} items, nested ones counted"
        if type(k) is tuple:
            todo.extend(k)
        elif type(k) is int:
            if not -_HASH_MOD < k < _HASH_MOD:
                return f"an integer of {k.bit_length()} bits"
        elif type(k) not in _KEY_TYPES:
            return f"a {type(k).__name__}"
    return None


class Refused(Exception):
    """An opcode this reader does not run or does not expect, at byte `offset`."""

    def __init__(self, offset: int, what: str):
        self.offset, self.what = offset, what
        super().__init__(f"byte {offset}: {what}")


class Malformed(Exception):
    """Not a well-formed pickle of plain data (truncated, damaged or not a pickle)."""

    def __init__(self, offset: int, what: str):
        self.offset, self.what = offset, what
        super().__init__(f"byte {offset}: {what}")


class TooBig(Exception):
    """More than `limit` bytes; `claim` is set when an argument's length alone claimed more than is left."""

    def __init__(self, offset: int = 0, claim: int | None = None):
        self.offset, self.claim = offset, claim


class _HookFailed(Exception):
    """A caller's hook raised: its own error, not the pickle's (re-raised as it was)."""


class PlainUnpickler:
    """`PlainUnpickler(read, limit).load()`: the object, or Refused / Malformed / TooBig."""

    def __init__(self, read: Callable[[int], bytes], limit: int,
                 on_items: Callable[[list, list], bool] | None = None,
                 skip: Callable[["PlainUnpickler"], None] | None = None):
        self._read, self.limit = read, limit
        self.on_items, self.skip = on_items, skip
        self.buf = b""
        self.pos = 0
        self.base = 0          # stream offset of buf[0]
        self.eof = False
        self.stack: list = []
        self.marks: list[int] = []
        self.memo: list = []
        self.frame_end: int | None = None   # stream offset where the current FRAME ends
        self.rewrites = 0      # memo slots written over (PUT to a slot in use): what a hook cached may be stale

    def release(self) -> None:
        """Let go of the memo, the stack and the buffer once the object is loaded."""
        self.memo, self.stack, self.marks, self.buf = [], [], [], b""

    # -- the stream ---------------------------------------------------------------------------------
    @property
    def offset(self) -> int:
        return self.base + self.pos

    def refill(self, need: int = MARGIN) -> None:
        """Keep the unread bytes and read on until `need` of them are there (or the stream ends)."""
        rest = self.buf[self.pos:]
        parts = [rest]
        have = len(rest)
        self.base += self.pos
        while not self.eof and have < max(need, CHUNK):
            piece = self._read(max(CHUNK, need - have))
            if not piece:
                self.eof = True
                break
            parts.append(piece)
            have += len(piece)
            if self.base + have > self.limit:
                raise TooBig(self.base + have)
        # what a hostile stream could pile up from few bytes (DUP, MEMOIZE: 8 bytes each per byte read)
        if len(self.stack) > _MAX_STACK or self._memo_past(self.base + have):
            raise Malformed(self.offset, "more on the stack or in the memo than a snapshot holds")
        self.buf = b"".join(parts) if len(parts) > 1 else rest
        self.pos = 0

    def _memo_past(self, read: int) -> bool:
        """More memo slots than `read` bytes of stream can have made: pickle.dump memoizes each object
        once, after at least one byte of the object, so a slot costs two bytes (a gap of _MEMO_GAP
        allowed)."""
        return len(self.memo) > read // 2 + _MEMO_GAP

    def _take(self, n: int) -> bytes:
        if self.pos + n > len(self.buf):
            # a length read from the file is refused before anything is read for it: a decompressed
            # stream has no end to stop at, and would be gathered whole up to the claim
            if self.offset + n > self.limit:
                raise TooBig(self.offset, n)
            self.refill(n)
            if n > len(self.buf):
                raise Malformed(self.offset, "the pickle ends in the middle of an opcode (truncated)")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def _line(self) -> bytes:
        """A text argument up to its newline (protocol 0 opcodes)."""
        while True:
            end = self.buf.find(b"\n", self.pos)
            if end >= 0:
                out = self.buf[self.pos:end]
                self.pos = end + 1
                return out
            if self.eof or len(self.buf) - self.pos > 1 << 20:
                raise Malformed(self.offset, "a text argument without its end of line")
            self.refill(len(self.buf) - self.pos + CHUNK)

    # -- the memo and marks ---------------------------------------------------------------------------
    def _put(self, idx: int) -> None:
        memo = self.memo
        if idx < len(memo):
            memo[idx] = self.stack[-1]
            self.rewrites += 1
        elif idx - len(memo) < _MEMO_GAP:
            memo.extend([None] * (idx - len(memo)))
            memo.append(self.stack[-1])
        else:
            raise Malformed(self.offset, f"memo index {idx} far out of order")

    def _get(self, idx: int):
        if idx >= len(self.memo):
            raise Malformed(self.offset, f"memo index {idx} refers to nothing")
        return self.memo[idx]

    def _pop_mark(self) -> list:
        if not self.marks:
            raise Malformed(self.offset, "an opcode needs a MARK that is not there")
        k = self.marks.pop()
        items = self.stack[k:]
        del self.stack[k:]
        return items

    def _extend(self, items: list) -> None:
        lst = self.stack[-1] if self.stack else None
        if type(lst) is not list:
            raise Malformed(self.offset, "items appended to something that is not a list")
        if self.on_items is None or not items or not self._hook(self.on_items, lst, items):
            lst.extend(items)

    def _setitems(self, items: list) -> None:
        d = self.stack[-1] if self.stack else None
        if type(d) is not dict or len(items) % 2:
            raise Malformed(self.offset, "dict items set on something that is not a dict")
        for i in range(0, len(items), 2):
            key = items[i]
            if type(key) is not str and (why := _bad_key(key)):
                raise Malformed(self.offset, f"a dict key that a snapshot never has ({why})")
            d[key] = items[i + 1]

    @staticmethod
    def _hook(fn, *args):
        try:
            return fn(*args)
        except (Refused, Malformed, TooBig):
            raise
        except Exception as e:
            raise _HookFailed() from e

    # -- the loop -----------------------------------------------------------------------------------
    def load(self):
        try:
            return self._run()
        except (Refused, Malformed, TooBig):
            raise
        except _HookFailed as e:
            raise e.__cause__ from None
        except IndexError:
            raise Malformed(self.offset, "an opcode needs more on the stack than is there") from None
        except (ValueError, OverflowError, UnicodeDecodeError, struct.error) as e:
            raise Malformed(self.offset, f"a damaged argument ({type(e).__name__})") from None

    def _run(self):
        stack, marks = self.stack, self.marks
        push = stack.append
        memo = self.memo
        skip = self.skip
        # the position lives in a local between opcodes; self.pos is set before anything that reads
        # the stream or says where it is (methods, hooks) and read back after (an error's byte is
        # then the last opcode that set it: near the damage, not always at it)
        buf, pos, limit = self.buf, self.pos, -1
        while True:
            if pos > limit:
                self.pos = pos
                if not self.eof:
                    self.refill()
                buf, pos = self.buf, self.pos
                limit = len(buf) - (1 if self.eof else MARGIN)
                if pos >= len(buf):
                    raise Malformed(self.offset, "the pickle ends before its STOP opcode (truncated)")
            op = buf[pos]
            pos += 1
            # the most frequent opcodes of a snapshot first
            if op == 0x6a:      # j LONG_BINGET
                idx = _U32(buf, pos)[0]
                pos += 4
                if idx >= len(memo):
                    self.pos = pos
                    self._get(idx)
                push(memo[idx])
            elif op == 0x68:    # h BINGET
                idx = buf[pos]
                pos += 1
                if idx >= len(memo):
                    self.pos = pos
                    self._get(idx)
                push(memo[idx])
            elif op == 0x94:    # MEMOIZE
                if not stack:
                    raise Malformed(self.base + pos - 1, "MEMOIZE with nothing on the stack")
                memo.append(stack[-1])
                if pos < len(buf) and buf[pos] == 0x94:
                    # a run memoizes the same object again and again (pickle.dump never writes one):
                    # taken at once, within the memo's bound
                    n = _MEMOIZES.match(buf, pos).end() - pos
                    memo.extend(itertools.repeat(stack[-1], n))
                    pos += n
                    if self._memo_past(self.base + pos):
                        raise Malformed(self.base + pos, "more on the stack or in the memo than a snapshot holds")
            elif op == 0x8a:    # LONG1
                n = buf[pos]
                push(int.from_bytes(buf[pos + 1:pos + 1 + n], "little", signed=True))
                pos += 1 + n
            elif op == 0x28:    # ( MARK
                marks.append(len(stack))
            elif op == 0x8c:    # SHORT_BINUNICODE
                n = buf[pos]
                self.pos = pos
                push(str(buf[pos + 1:pos + 1 + n], "utf-8", "surrogatepass"))
                pos += 1 + n
            elif op == 0x4b:    # K BININT1
                push(buf[pos])
                pos += 1
            elif op == 0x7d:    # } EMPTY_DICT
                # inside a list's items: the caller may read a run of dicts at once (from this opcode)
                if skip is not None and marks and marks[-1] > 0 and type(stack[marks[-1] - 1]) is list:
                    self.pos = pos - 1
                    if self._hook(skip, self):
                        buf, pos = self.buf, self.pos
                        limit = len(buf) - (1 if self.eof else MARGIN)
                        continue
                push({})
            elif op == 0x75:    # u SETITEMS
                self.pos = pos
                self._setitems(self._pop_mark())
            elif op == 0x4a:    # J BININT
                push(_I32(buf, pos)[0])
                pos += 4
            elif op == 0x5d:    # ] EMPTY_LIST
                push([])
            elif op == 0x65:    # e APPENDS
                self.pos = pos
                self._extend(self._pop_mark())
            elif op == 0x61:    # a APPEND
                self.pos = pos
                self._extend([stack.pop()])
            elif op == 0x4d:    # M BININT2
                push(_U16(buf, pos)[0])
                pos += 2
            elif op == 0x95:    # FRAME: transparent here; its end is where the next one starts
                self.frame_end = self.base + pos + 8 + _U64(buf, pos)[0]
                pos += 8
            else:
                self.pos = pos
                done = self._rare(op, pos - 1)
                if done is not None:
                    return done[0]
                buf, pos = self.buf, self.pos     # (an argument read may have refilled the buffer)
                limit = len(buf) - (1 if self.eof else MARGIN)

    def _rare(self, op: int, at: int):
        """The opcodes a snapshot seldom or never holds. Returns (object,) at STOP, else None."""
        stack = self.stack
        push = stack.append
        if op in _REFUSED:
            raise Refused(self.base + at, _REFUSED[op])
        if op == 0x2e:      # . STOP
            if len(stack) != 1 or self.marks:
                raise Malformed(self.base + at, "STOP with an unfinished structure")
            return (stack.pop(),)
        if op == 0x80:      # PROTO
            proto = self._take(1)[0]
            if proto > 5:
                raise Malformed(self.base + at, f"pickle protocol {proto} is unknown")
        elif op == 0x4e:    # N NONE
            push(None)
        elif op == 0x88:    # NEWTRUE
            push(True)
        elif op == 0x89:    # NEWFALSE
            push(False)
        elif op == 0x29:    # ) EMPTY_TUPLE
            push(())
        elif op in (0x85, 0x86, 0x87):   # TUPLE1..3
            n = op - 0x84
            if len(stack) - (self.marks[-1] if self.marks else 0) < n:
                raise Malformed(self.base + at, "a tuple needs more items than are there")
            items = tuple(stack[-n:])
            del stack[-n:]
            push(items)
        elif op == 0x74:    # t TUPLE
            push(tuple(self._pop_mark()))
        elif op == 0x6c:    # l LIST
            push(self._pop_mark())
        elif op == 0x64:    # d DICT
            items = self._pop_mark()
            push({})
            self._setitems(items)
        elif op == 0x73:    # s SETITEM
            value = stack.pop()
            key = stack.pop()
            self._setitems([key, value])
        elif op == 0x47:    # G BINFLOAT
            push(_F64(self._take(8))[0])
        elif op == 0x8b:    # LONG4
            n = _I32(self._take(4))[0]
            if n < 0:
                raise Malformed(self.base + at, "LONG4 with a negative length")
            push(int.from_bytes(self._take(n), "little", signed=True))
        elif op == 0x58:    # X BINUNICODE
            push(str(self._take(_U32(self._take(4))[0]), "utf-8", "surrogatepass"))
        elif op == 0x8d:    # BINUNICODE8
            push(str(self._take(_U64(self._take(8))[0]), "utf-8", "surrogatepass"))
        elif op == 0x71:    # q BINPUT
            self._put(self._take(1)[0])
        elif op == 0x72:    # r LONG_BINPUT
            self._put(_U32(self._take(4))[0])
        elif op == 0x70:    # p PUT
            self._put(int(self._line()))
        elif op == 0x67:    # g GET
            push(self._get(int(self._line())))
        elif op == 0x49:    # I INT (protocol 0; 00 and 01 are False and True)
            text = self._line()
            push(False if text == b"00" else True if text == b"01" else int(text))
        elif op == 0x4c:    # L LONG (protocol 0)
            push(int(self._line().rstrip(b"L")))
        elif op == 0x46:    # F FLOAT (protocol 0)
            push(float(self._line()))
        elif op == 0x56:    # V UNICODE (protocol 0)
            push(self._line().decode("raw-unicode-escape"))
        elif op == 0x30:    # 0 POP (a MARK when nothing is above it)
            if self.marks and len(stack) == self.marks[-1]:
                self.marks.pop()
            else:
                stack.pop()
        elif op == 0x31:    # 1 POP_MARK
            self._pop_mark()
        elif op == 0x32:    # 2 DUP: pickle.dump never writes it; a run of them is taken at once (not
            # one opcode at a time: a file of nothing else would take minutes), within the stack's bound
            n = _DUPS.match(self.buf, self.pos).end() - self.pos + 1
            if len(stack) + n > _MAX_STACK:
                raise Malformed(self.base + at, "more on the stack or in the memo than a snapshot holds")
            stack.extend(itertools.repeat(stack[-1], n))
            self.pos += n - 1
        else:
            raise Malformed(self.base + at, f"byte 0x{op:02x} is not a pickle opcode")
        return None
