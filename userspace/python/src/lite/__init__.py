# SPDX-License-Identifier: GPL-2.0
"""LITE for Python: remote memory, RPC and synchronization across a LITE
cluster, through the kernel's LITE system calls.

>>> import lite
>>> me = lite.join("10.0.0.1")                # or lite.node_id() if joined
>>> with lite.Lmr.alloc(node=2, size=4096) as lmr:
...     lmr.write(b"hello")
...     lmr.read(5)
b'hello'

Errors are ``OSError`` with the kernel's errno (Python picks subclasses
such as ``FileNotFoundError`` or ``ConnectionRefusedError``); integers out
of a call's range raise ``OSError(EINVAL)``, wrong types ``TypeError``.
Buffers are anything with the buffer protocol; they are passed to the
kernel in place (a read-only buffer other than ``bytes`` is copied once).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, fields
from typing import Dict

from . import _abi
from ._dsm import Region
from ._memory import AsyncOp, Lmr, Permission, Priority, fence
from ._rpc import AsyncCall, Message, Port, call, call_async, query_port, send
from ._sync import Lock, barrier, set_priority
from ._buffers import readable
from ._syscall import call as _call
from ._syscall import u32

__all__ = [
    "AsyncCall",
    "AsyncOp",
    "Lmr",
    "Lock",
    "Message",
    "Permission",
    "Port",
    "Priority",
    "Region",
    "Stats",
    "barrier",
    "call",
    "call_async",
    "fence",
    "join",
    "leave",
    "node_id",
    "query_port",
    "send",
    "set_priority",
    "stats",
    "total_nodes",
    "CM_DEFAULT_PORT",
    "MAX_ASYNC_CALLS",
    "MAX_MESSAGE_SIZE",
    "MAX_PORTS",
    "NODE_SPREAD",
]

CM_DEFAULT_PORT = _abi.LITE_CM_DEFAULT_PORT
MAX_ASYNC_CALLS = _abi.LITE_MAX_ASYNC_CALLS
MAX_MESSAGE_SIZE = _abi.LITE_MAX_MESSAGE_SIZE
MAX_PORTS = _abi.LITE_MAX_PORTS
NODE_SPREAD = _abi.LITE_NODE_SPREAD


def join(cm_ip: str, cm_port: int = CM_DEFAULT_PORT, ib_port: int = 1) -> int:
    """Joins the cluster whose manager listens on ``cm_ip:cm_port`` and
    returns this node's id (needs ``CAP_NET_ADMIN`` and the cluster secret
    in the caller's keyrings; see ``lite_join`` in the uapi header)."""
    if not isinstance(cm_ip, str):
        raise TypeError(f"cm_ip must be a str, not {type(cm_ip).__name__}")
    address = cm_ip.encode() + b"\0"
    pinned = readable(address)
    return _call("join", pinned.address, u32("cm_port", cm_port), u32("ib_port", ib_port))


def leave(force: bool = False) -> None:
    """Leaves the cluster (``force`` even if chunks held for others
    cannot move)."""
    _call("leave", _abi.LITE_LEAVE_FORCE if force else 0)


def node_id() -> int:
    """This node's id (``OSError(ENOTCONN)`` before joining)."""
    return _call("get_node_id")


def total_nodes() -> int:
    """Nodes connected, this one included."""
    return _call("get_total_node")


@dataclass(frozen=True)
class Stats:
    """This node's counters (``struct lite_stats``)."""

    lmrs: int
    registrations: int
    mappings: int
    published_names: int
    held_chunks: int
    handles: int
    processes: int
    async_in_flight: int
    connections: int
    rpc_ports: int
    locks: int
    lock_acquires: int
    lock_waits: int
    atomics: int
    qos_throttled: int

    def as_dict(self) -> Dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def stats() -> Stats:
    """This node's counters."""
    raw = _abi.LiteStats()
    _call("get_stats", ctypes.addressof(raw), ctypes.sizeof(raw))
    return Stats(**{name: int(getattr(raw, name)) for name in _abi.STATS_FIELDS})
