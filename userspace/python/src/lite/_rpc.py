# SPDX-License-Identifier: GPL-2.0
"""RPC and messaging: ports, calls (blocking and asynchronous), one-way
messages."""

from __future__ import annotations

import ctypes
import errno
from typing import Any, Callable, Optional

from . import _abi
from ._buffers import readable, writable
from ._memory import AsyncOp, Priority
from ._syscall import call as _call
from ._syscall import check_int, u32, u64


def _target(port: int, priority: Any) -> int:
    port = check_int("port", port, 0xFFFF)
    return _abi.port_priority(port, check_int("priority", int(priority), 0x7FFF))


class Message:
    """A message taken from a :class:`Port`."""

    __slots__ = ("data", "descriptor")

    def __init__(self, data: bytes, descriptor: int) -> None:
        #: The message's bytes.
        self.data = data
        #: Reply descriptor, 0 for a one-way message.
        self.descriptor = descriptor

    @property
    def is_call(self) -> bool:
        """Whether a caller waits for a reply."""
        return self.descriptor != 0

    def reply(self, data: Any = b"") -> None:
        """Answers the call (once)."""
        if not self.is_call:
            raise OSError(errno.ENOENT, "a one-way message has no caller to answer")
        pinned = readable(data)
        _call("reply_message", pinned.address, pinned.length, self.descriptor)
        self.descriptor = 0

    def __repr__(self) -> str:
        return f"Message({len(self.data)} bytes, descriptor={self.descriptor:#x})"


class Port:
    """An RPC port of this process on this node; a context manager that
    closes it. Any thread of any process on the node may receive from it;
    each message goes to one receiver."""

    def __init__(self, port: int, max_size: int = 4096, name: str = "") -> None:
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, not {type(name).__name__}")
        encoded = name.encode()
        self.port = u32("port", port)
        self.max_size = u64("max_size", max_size)
        pinned = readable(encoded)
        _call("register_application", self.port, self.max_size, pinned.address, pinned.length)
        self._open = True

    def close(self) -> None:
        """Unregisters the port: blocked receivers get ``ESHUTDOWN``,
        queued callers ``ECONNREFUSED``."""
        if self._open:
            self._open = False
            _call("unregister_application", self.port)

    def __enter__(self) -> "Port":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def receive(self, *, block: bool = True) -> Optional[Message]:
        """The next message; ``None`` if ``block`` is false and none is
        queued."""
        buffer = bytearray(self.max_size)
        pinned = writable(buffer)
        descriptor = ctypes.c_uint64(0)
        flags = 0 if block else _abi.LITE_RECV_NONBLOCK
        try:
            length = _call("receive_message", self.port, pinned.address, pinned.length,
                           ctypes.addressof(descriptor), flags)
        except BlockingIOError:
            return None
        return Message(bytes(buffer[:length]), descriptor.value)

    def serve(self, handler: Callable[[bytes], Any], *, count: Optional[int] = None) -> int:
        """Receives messages and answers each call with ``handler(data)``
        (bytes-like, or ``None`` for an empty reply), until ``count``
        messages were handled or the port is closed. Returns how many were
        handled."""
        handled = 0
        while count is None or handled < count:
            try:
                message = self.receive()
            except OSError as e:
                if e.errno in (errno.ESHUTDOWN, errno.ENOENT):
                    break
                raise
            if message is None:
                continue
            answer = handler(message.data)
            if message.is_call:
                message.reply(b"" if answer is None else answer)
            handled += 1
        return handled


def query_port(node: int, port: int) -> int:
    """Connects to ``port`` on ``node``; returns its largest message size."""
    return _call("query_port", u32("node", node), u32("port", port))


def call(node: int, port: int, data: Any, *, max_reply: int = 4096,
         priority: Any = Priority.NONE) -> bytes:
    """Calls ``port`` on ``node`` with ``data`` and returns the reply."""
    message = readable(data)
    reply = bytearray(u64("max_reply", max_reply))
    pinned = writable(reply)
    length = _call("send_reply_imm", u32("node", node), _target(port, priority),
                   message.address, message.length, pinned.address, pinned.length)
    return bytes(reply[:length])


class AsyncCall(AsyncOp):
    """A call posted by :func:`call_async`."""

    __slots__ = ("_reply",)

    def __init__(self, op_id: int, reply: bytearray, keep: Any) -> None:
        super().__init__(op_id, keep)
        self._reply = reply

    def result(self) -> bytes:
        """Waits for the reply and returns it."""
        length = self.wait()
        return bytes(self._reply[:length])


def call_async(node: int, port: int, data: Any, *, max_reply: int = 4096,
               priority: Any = Priority.NONE) -> AsyncCall:
    """Posts the call :func:`call` would make and returns at once; the
    reply comes with :meth:`AsyncCall.result`. Up to
    ``LITE_MAX_ASYNC_CALLS`` calls of the process may be in flight."""
    message = readable(data)
    reply = bytearray(u64("max_reply", max_reply))
    pinned = writable(reply)
    op = _call("send_reply_imm_async", u32("node", node), _target(port, priority),
               message.address, message.length, pinned.address, pinned.length)
    return AsyncCall(op, reply, pinned)


def send(node: int, port: int, data: Any, *, priority: Any = Priority.NONE,
         block: bool = True) -> None:
    """Sends ``data`` one-way; waits while the server's ring is full, or
    raises ``BlockingIOError`` (``EAGAIN``) if ``block`` is false."""
    message = readable(data)
    target = _target(port, priority) | (0 if block else _abi.LITE_SEND_NONBLOCK)
    _call("send", u32("node", node), target, message.address, message.length)
