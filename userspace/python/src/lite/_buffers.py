# SPDX-License-Identifier: GPL-2.0
"""Addresses of Python buffers for the kernel, without copies: any object
with the buffer protocol (``bytes``, ``bytearray``, ``memoryview``,
``array.array``, numpy arrays, ``mmap``) that is C-contiguous."""

from __future__ import annotations

import ctypes
from typing import Any


class Pinned:
    """A buffer's address and length; keeps the buffer (and its export)
    alive while the object lives."""

    __slots__ = ("address", "length", "_keep")

    def __init__(self, address: int, length: int, keep: Any) -> None:
        self.address = address
        self.length = length
        self._keep = keep


def _view(obj: Any) -> memoryview:
    try:
        view = memoryview(obj)
    except TypeError:
        raise TypeError(f"a bytes-like object is required, not {type(obj).__name__}") from None
    if not view.c_contiguous:
        raise TypeError("the buffer must be C-contiguous")
    return view


def writable(obj: Any) -> Pinned:
    """The address of a writable buffer (``TypeError`` for a read-only or
    non-contiguous one)."""
    view = _view(obj)
    if view.readonly:
        raise TypeError(f"a writable buffer is required, not a read-only {type(obj).__name__}")
    length = view.nbytes
    if length == 0:
        return Pinned(0, 0, view)
    array = (ctypes.c_char * length).from_buffer(view)
    return Pinned(ctypes.addressof(array), length, (view, array))


def readable(obj: Any) -> Pinned:
    """The address of a readable buffer. ``bytes`` and writable buffers
    are used in place; other read-only buffers are copied once."""
    if isinstance(obj, bytes):
        pointer = ctypes.c_char_p(obj)
        address = ctypes.cast(pointer, ctypes.c_void_p).value or 0
        return Pinned(address, len(obj), (obj, pointer))
    view = _view(obj)
    if view.readonly:
        return readable(view.tobytes())
    return writable(view)
