# SPDX-License-Identifier: GPL-2.0
"""Distributed locks, barriers and the process's default priority."""

from __future__ import annotations

import ctypes
import errno
from typing import Any

from . import _abi
from ._memory import Priority
from ._syscall import call, u32


class Lock:
    """A distributed FIFO lock kept by node ``home``; a context manager
    that holds it. The holder is the calling thread."""

    def __init__(self, home: int, number: int) -> None:
        self._lock = _abi.LiteLock(u32("home", home), u32("number", number))
        #: Whether the last acquire found the previous holder's node dead.
        self.owner_died = False

    @property
    def home(self) -> int:
        return int(self._lock.home)

    @property
    def number(self) -> int:
        return int(self._lock.number)

    @classmethod
    def create(cls, home: int) -> "Lock":
        """Creates a lock kept by ``home``."""
        lock = _abi.LiteLock()
        call("create_lock", u32("home", home), ctypes.addressof(lock))
        return cls(lock.home, lock.number)

    @classmethod
    def ask(cls, home: int, number: int) -> "Lock":
        """An existing lock (``FileNotFoundError`` if there is none)."""
        lock = _abi.LiteLock()
        call("ask_lock", u32("home", home), u32("number", number), ctypes.addressof(lock))
        return cls(lock.home, lock.number)

    def acquire(self) -> None:
        """Takes the lock, waiting in FIFO order. If its previous holder's
        node died holding it, it is taken all the same and
        :attr:`owner_died` is set."""
        try:
            call("lock", ctypes.addressof(self._lock))
            self.owner_died = False
        except OSError as e:
            if e.errno != errno.EOWNERDEAD:
                raise
            self.owner_died = True

    def release(self) -> None:
        call("unlock", ctypes.addressof(self._lock))

    def __enter__(self) -> "Lock":
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"Lock(home={self.home}, number={self.number})"


def barrier(nodes: int) -> None:
    """Waits until ``nodes`` nodes (this one included) entered the
    barrier. Raises ``OSError`` with ``EHOSTDOWN`` if a member departed
    during the round (every node waiting in it fails, and the next call
    is the next round everywhere), with ``ETIMEDOUT`` if the cluster had
    fewer than ``nodes`` members for 60 s of the wait."""
    call("dist_barrier", u32("nodes", nodes))


def set_priority(priority: Any) -> Priority:
    """Sets the process's default priority; returns the previous one."""
    return Priority(call("set_priority", u32("priority", int(priority))))
