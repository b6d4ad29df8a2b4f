# SPDX-License-Identifier: GPL-2.0
"""LITE's system call ABI: numbers, constants and structures of
``include/uapi/linux/lite.h`` (x86_64). ``tests/test_abi.py`` checks every
value here against that header."""

import ctypes

#: System call numbers (``__NR_lite_*``).
NR = {
    "join": 548,
    "get_node_id": 549,
    "get_total_node": 550,
    "alloc_remote": 551,
    "rdma_write": 552,
    "rdma_read": 553,
    "free": 554,
    "dist_barrier": 555,
    "remote_memset": 556,
    "memcpy": 557,
    "memmove": 558,
    "wrap_alloc": 559,
    "add_ask_mr_table": 560,
    "ask_lmr": 561,
    "umap_lmr": 562,
    "register_lmr": 563,
    "deregister_lmr": 564,
    "rdma_write_async": 565,
    "rdma_read_async": 566,
    "async_wait": 567,
    "fence": 568,
    "get_stats": 569,
    "register_application": 570,
    "unregister_application": 571,
    "query_port": 572,
    "send_reply_imm": 573,
    "send": 574,
    "receive_message": 575,
    "reply_message": 576,
    "reply_and_receive_message": 577,
    "send_reply_multicast": 578,
    "fetch_add": 579,
    "compare_swp": 580,
    "create_lock": 581,
    "ask_lock": 582,
    "lock": 583,
    "unlock": 584,
    "set_priority": 585,
    "leave": 586,
    "send_reply_imm_async": 587,
    "dsm_open": 588,
}

LITE_MAX_LOCKS = 4096
LITE_MAX_PORTS = 64
LITE_MAX_MESSAGE_SIZE = 256 << 10
LITE_MAX_PORT_NAME = 32
LITE_RPC_TIMEOUT_MS = 60000
LITE_MAX_ASYNC_CALLS = 32
LITE_SEND_NONBLOCK = 0x80000000
LITE_LEAVE_FORCE = 0x1
LITE_RECV_NONBLOCK = 0x1
LITE_DSM_CREATE = 0x1
LITE_PERM_READ = 0x1
LITE_PERM_WRITE = 0x2
LITE_PERM_SHARE = 0x4
LITE_PERM_ADMIN = 0x8
LITE_PERM_ATOMIC = 0x10
LITE_ASYNC_NOWAIT = 0x1
LITE_MAX_ASYNC_OPS = 64
LITE_MAX_ASYNC_SIZE = 16 << 20
LITE_MAX_REGISTER_SIZE = 64 << 20
LITE_NODE_SPREAD = 0
LITE_ALLOC_ATOMIC = 0x1
LITE_PRIORITY_NONE = 0
LITE_PRIORITY_HIGH = 1
LITE_PRIORITY_LOW = 2
LITE_CHUNK_SIZE = 4 << 20
LITE_MAX_LMR_SIZE = 1 << 40
LITE_MAX_NODES = 64
LITE_MAX_IP_LEN = 16
LITE_CM_DEFAULT_PORT = 18500


def port_priority(port: int, priority: int) -> int:
    """``LITE_PORT_PRIORITY(port, priority)``."""
    return port | (priority << 16)


class LiteLock(ctypes.Structure):
    """``struct lite_lock``."""

    _fields_ = [("home", ctypes.c_uint32), ("number", ctypes.c_uint32)]


class LiteReceive(ctypes.Structure):
    """``struct lite_receive``."""

    _fields_ = [
        ("buf", ctypes.c_uint64),
        ("max_size", ctypes.c_uint64),
        ("descriptor", ctypes.c_uint64),
        ("port", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
    ]


#: Fields of ``struct lite_stats``, in order (all ``__u64``).
STATS_FIELDS = (
    "lmrs",
    "registrations",
    "mappings",
    "published_names",
    "held_chunks",
    "handles",
    "processes",
    "async_in_flight",
    "connections",
    "rpc_ports",
    "locks",
    "lock_acquires",
    "lock_waits",
    "atomics",
    "qos_throttled",
)


class LiteStats(ctypes.Structure):
    """``struct lite_stats``."""

    _fields_ = [(name, ctypes.c_uint64) for name in STATS_FIELDS]
