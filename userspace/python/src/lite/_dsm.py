"""LITE-DSM: memory shared by processes on every node, mapped with ``mmap``.

Every access sees the last write of its page on any node; accesses ordered
by a :class:`lite.Lock` or :func:`lite.barrier` see each other's writes. An
access to a page lost with a node raises ``SIGBUS``.
"""

from __future__ import annotations

import mmap
import os

from . import _abi
from ._syscall import call, u32, u64

#: ``lite_dsm_open`` flag: create the region on this node.
DSM_CREATE = _abi.LITE_DSM_CREATE


class Region:
    """An open region: a descriptor to map, closed by :meth:`close`."""

    def __init__(self, fd: int, size: int) -> None:
        self.fd = fd
        self.size = -(-size // mmap.PAGESIZE) * mmap.PAGESIZE

    @classmethod
    def create(cls, name: int, size: int, password: int) -> "Region":
        """Creates region ``name`` of ``size`` bytes on this node (or opens
        it if it exists with that size)."""
        node = call("get_node_id")
        return cls._open(node, name, size, DSM_CREATE, password)

    @classmethod
    def open(cls, node: int, name: int, size: int, password: int) -> "Region":
        """Opens region ``name`` of node ``node``, of ``size`` bytes."""
        return cls._open(node, name, size, 0, password)

    @classmethod
    def _open(cls, node: int, name: int, size: int, flags: int, password: int) -> "Region":
        fd = call("dsm_open", u32("node", node), u64("name", name), u64("size", size),
                  u32("flags", flags), u64("password", password))
        return cls(fd, size)

    def map(self) -> mmap.mmap:
        """The whole region, mapped shared."""
        return mmap.mmap(self.fd, self.size, flags=mmap.MAP_SHARED,
                         prot=mmap.PROT_READ | mmap.PROT_WRITE)

    def close(self) -> None:
        """Closes the descriptor; mappings stay until they are closed."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> "Region":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
