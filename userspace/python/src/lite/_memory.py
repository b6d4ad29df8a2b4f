# SPDX-License-Identifier: GPL-2.0
"""Remote memory: LMRs and their asynchronous transfers."""

from __future__ import annotations

import ctypes
import enum
import errno
from typing import Any, Optional

from . import _abi
from ._buffers import Pinned, readable, writable
from ._syscall import call, check_int, error, u32, u64


class Priority(enum.IntEnum):
    """Priority of a data operation or RPC; ``NONE`` stands for the
    process's default (see :func:`lite.set_priority`)."""

    NONE = _abi.LITE_PRIORITY_NONE
    HIGH = _abi.LITE_PRIORITY_HIGH
    LOW = _abi.LITE_PRIORITY_LOW


class Permission(enum.IntFlag):
    """Permissions of an LMR handle."""

    READ = _abi.LITE_PERM_READ
    WRITE = _abi.LITE_PERM_WRITE
    SHARE = _abi.LITE_PERM_SHARE
    ADMIN = _abi.LITE_PERM_ADMIN
    ATOMIC = _abi.LITE_PERM_ATOMIC


def _priority(priority: Any) -> int:
    return u32("priority", int(priority) if isinstance(priority, Priority) else priority)


class AsyncOp:
    """An asynchronous operation: a transfer (:meth:`Lmr.read_async`,
    :meth:`Lmr.write_async`) or an RPC call (:func:`lite.call_async`).

    The buffers it uses stay referenced until it is reaped; an operation
    garbage-collected unreaped is waited for then."""

    __slots__ = ("id", "_keep", "_result")

    def __init__(self, op_id: int, keep: Any) -> None:
        self.id = op_id
        self._keep = keep
        self._result: Optional[int] = None

    def _reap(self, flags: int) -> int:
        if self._result is None:
            try:
                self._result = call("async_wait", self.id, flags)
            except (BlockingIOError, InterruptedError):
                # Not reaped: the operation and its buffers stay.
                raise
            except OSError as e:
                self._result = -(e.errno or errno.EIO)
            self._keep = None
        if self._result < 0:
            raise error(-self._result)
        return self._result

    def wait(self) -> int:
        """Waits for the operation; returns 0 for a transfer, the reply's
        length for a call. Raises the operation's error."""
        while True:
            try:
                return self._reap(0)
            except InterruptedError:
                continue

    def done(self) -> bool:
        """Whether the operation finished (raises its error if it failed)."""
        try:
            self._reap(_abi.LITE_ASYNC_NOWAIT)
        except BlockingIOError:
            return False
        return True

    def __del__(self) -> None:
        if self._result is None and self._keep is not None:
            try:
                self.wait()
            except OSError:
                pass


def fence() -> None:
    """Waits for every asynchronous operation of the process (of any
    thread); raises the first failed one's error."""
    call("fence")


class Lmr:
    """A LITE memory region (LMR): memory on any node of the cluster,
    reached by its handle.

    Create one with :meth:`alloc`, :meth:`wrap`, :meth:`register` or map
    another node's by name with :meth:`ask`. Use it as a context manager
    to release it (free, deregister or unmap) at the end."""

    def __init__(self, handle: int, size: Optional[int], password: int, kind: str,
                 keep: Any = None) -> None:
        self.handle = handle
        #: Size in bytes, or ``None`` for a mapping (:meth:`ask`).
        self.size = size
        self.password = password
        self._kind = kind
        self._keep = keep

    def __repr__(self) -> str:
        return f"Lmr(handle={self.handle}, size={self.size}, kind={self._kind!r})"

    # -- creation -------------------------------------------------------

    @classmethod
    def alloc(cls, node: int, size: int, *, atomic: bool = False, password: int = 0) -> "Lmr":
        """Allocates ``size`` bytes on ``node`` (this node included;
        ``lite.NODE_SPREAD`` spreads the chunks over the other nodes). An
        ``atomic`` LMR is 8 bytes and allows :meth:`fetch_add` and
        :meth:`compare_swap`."""
        flags = _abi.LITE_ALLOC_ATOMIC if atomic else 0
        handle = call("alloc_remote", u32("node", node), u64("size", size), flags,
                      u64("password", password))
        return cls(handle, size, password, "allocated")

    @classmethod
    def wrap(cls, data: Any, name: int, *, password: int = 0) -> "Lmr":
        """Creates an LMR on this node holding a copy of ``data`` and
        publishes it under the 64-bit ``name`` (READ, WRITE and SHARE)."""
        pinned = readable(data)
        handle = call("wrap_alloc", pinned.address, pinned.length, u64("name", name),
                      u64("password", password))
        return cls(handle, pinned.length, password, "allocated")

    @classmethod
    def register(cls, buffer: Any, *,
                 permission: int = Permission.READ | Permission.WRITE | Permission.SHARE,
                 password: int = 0) -> "Lmr":
        """Makes this process's writable ``buffer`` an LMR other nodes can
        map once published (:meth:`publish` needs SHARE); the buffer is
        pinned (and kept referenced) until the LMR is released."""
        pinned = writable(buffer)
        handle = call("register_lmr", pinned.address, pinned.length,
                      u64("permission", int(permission)), u64("password", password))
        return cls(handle, pinned.length, password, "registered", pinned)

    @classmethod
    def ask(cls, node: int, name: int, *,
            permission: int = Permission.READ | Permission.WRITE,
            password: int = 0) -> "Lmr":
        """Maps the LMR ``node`` published under ``name``; ``password`` must
        be the one it was published with."""
        handle = call("ask_lmr", u32("node", node), u64("name", name),
                      u64("permission", int(permission)), u64("password", password))
        return cls(handle, None, password, "mapping")

    # -- release --------------------------------------------------------

    def close(self) -> None:
        """Releases the handle: frees an allocated LMR, deregisters a
        registered one, unmaps a mapping. Closing twice does nothing."""
        if self._kind == "closed":
            return
        kind, self._kind = self._kind, "closed"
        if kind == "mapping":
            call("umap_lmr", self.handle)
        elif kind == "registered":
            call("deregister_lmr", self.handle)
        else:
            call("free", self.handle)
        self._keep = None

    free = close

    def __enter__(self) -> "Lmr":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- sharing --------------------------------------------------------

    def publish(self, name: int, permission: int = Permission.READ | Permission.WRITE) -> None:
        """Publishes the LMR under ``name`` on this node, granting at most
        ``permission`` to those who :meth:`ask` for it."""
        call("add_ask_mr_table", u64("name", name), self.handle,
             u64("permission", int(permission)), u64("password", self.password))

    # -- data -----------------------------------------------------------

    def write(self, data: Any, offset: int = 0, *, priority: Any = Priority.NONE) -> None:
        """Writes the bytes of ``data`` (any buffer) at ``offset``."""
        pinned = readable(data)
        call("rdma_write", self.handle, pinned.address, pinned.length, u64("offset", offset),
             _priority(priority), self.password)

    def readinto(self, buffer: Any, offset: int = 0, *, priority: Any = Priority.NONE) -> int:
        """Reads ``len(buffer)`` bytes at ``offset`` into the writable
        ``buffer``; returns that length."""
        pinned = writable(buffer)
        call("rdma_read", self.handle, pinned.address, pinned.length, u64("offset", offset),
             _priority(priority), self.password)
        return pinned.length

    def read(self, size: Optional[int] = None, offset: int = 0, *,
             priority: Any = Priority.NONE) -> bytes:
        """Reads ``size`` bytes at ``offset`` (by default up to the end)."""
        if size is None:
            if self.size is None:
                raise TypeError("a mapping's size is unknown: give size")
            size = self.size - u64("offset", offset)
        out = bytearray(u64("size", size))
        self.readinto(out, offset, priority=priority)
        return bytes(out)

    def memset(self, offset: int, size: int, byte: int = 0) -> None:
        """Sets ``size`` bytes at ``offset`` to ``byte`` (on the nodes
        holding them)."""
        call("remote_memset", self.handle, u64("offset", offset), u64("size", size),
             check_int("byte", byte, 255))

    def copy_to(self, dst: "Lmr", size: int, *, src_offset: int = 0, dst_offset: int = 0) -> None:
        """Copies ``size`` bytes to ``dst`` (``lite_memcpy``; unspecified
        for overlapping ranges of one LMR)."""
        call("memcpy", self.handle, u64("src_offset", src_offset), dst.handle,
             u64("dst_offset", dst_offset), u64("size", size))

    def move_to(self, dst: "Lmr", size: int, *, src_offset: int = 0, dst_offset: int = 0) -> None:
        """Like :meth:`copy_to`, correct for overlapping ranges
        (``lite_memmove``)."""
        call("memmove", self.handle, u64("src_offset", src_offset), dst.handle,
             u64("dst_offset", dst_offset), u64("size", size))

    def write_async(self, data: Any, offset: int = 0, *,
                    priority: Any = Priority.NONE) -> AsyncOp:
        """Starts a write of ``data`` at ``offset`` (taken before this
        returns)."""
        pinned = readable(data)
        op = call("rdma_write_async", self.handle, pinned.address, pinned.length,
                  u64("offset", offset), _priority(priority), self.password)
        return AsyncOp(op, None)

    def read_async(self, buffer: Any, offset: int = 0, *,
                   priority: Any = Priority.NONE) -> AsyncOp:
        """Starts a read of ``len(buffer)`` bytes at ``offset``; they are
        in ``buffer`` once the operation is waited for."""
        pinned: Pinned = writable(buffer)
        op = call("rdma_read_async", self.handle, pinned.address, pinned.length,
                  u64("offset", offset), _priority(priority), self.password)
        return AsyncOp(op, pinned)

    # -- atomics --------------------------------------------------------

    def fetch_add(self, value: int, *, priority: Any = Priority.NONE) -> int:
        """Atomically adds ``value`` (modulo 2**64) to the 8-byte LMR;
        returns the value before."""
        old = ctypes.c_uint64(0)
        call("fetch_add", self.handle, ctypes.addressof(old), u64("value", value),
             _priority(priority))
        return old.value

    def compare_swap(self, expected: int, new: int, *, priority: Any = Priority.NONE) -> int:
        """Atomically replaces the value with ``new`` if it is
        ``expected``; returns the value before (the swap happened if it
        equals ``expected``)."""
        old = ctypes.c_uint64(0)
        call("compare_swp", self.handle, ctypes.addressof(old), u64("expected", expected),
             u64("new", new), _priority(priority))
        return old.value

