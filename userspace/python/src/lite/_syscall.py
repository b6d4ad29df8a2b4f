# SPDX-License-Identifier: GPL-2.0
"""Raw LITE system calls through libc's ``syscall()``, and argument
checks shared by the package."""

from __future__ import annotations

import ctypes
import errno
import os
from typing import Any

from . import _abi

_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall
_syscall.restype = ctypes.c_long

U32_MAX = (1 << 32) - 1
U64_MAX = (1 << 64) - 1


def error(code: int) -> OSError:
    """The ``OSError`` for errno ``code``; Python picks the subclass
    (``FileNotFoundError`` for ``ENOENT``, ``PermissionError`` for
    ``EPERM`` and ``EACCES``, ``ConnectionRefusedError``,
    ``TimeoutError``, ...)."""
    return OSError(code, os.strerror(code))


def call(name: str, *args: int) -> int:
    """Calls ``lite_<name>`` with register-sized arguments (addresses as
    ints) and returns its non-negative result; raises ``OSError`` with the
    kernel's errno on failure."""
    ret = _syscall(ctypes.c_long(_abi.NR[name]), *[ctypes.c_ulong(a) for a in args])
    if ret == -1:
        raise error(ctypes.get_errno())
    return int(ret)


def check_int(what: str, value: Any, maximum: int) -> int:
    """``value`` as an int in ``0..=maximum``: ``TypeError`` for a
    non-integer, ``OSError(EINVAL)`` outside the range (what the kernel
    answers for values it cannot take)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what} must be an int, not {type(value).__name__}")
    if value < 0 or value > maximum:
        raise OSError(errno.EINVAL, f"{what} {value} is out of range 0..{maximum}")
    return value


def u32(what: str, value: Any) -> int:
    return check_int(what, value, U32_MAX)


def u64(what: str, value: Any) -> int:
    return check_int(what, value, U64_MAX)
