# SPDX-License-Identifier: GPL-2.0
"""Host checks of the package: its ABI against the uapi header, argument
checks that fail before any system call, and buffers passed in place.
Run from the repository root: python3 -m unittest discover -s
userspace/python/tests (with userspace/python/src on PYTHONPATH)."""

import array
import ctypes
import errno
import pathlib
import re
import unittest

import lite
from lite import _abi, _buffers

HEADER = pathlib.Path(__file__).resolve().parents[3] / "lite-api-c/include/uapi/linux/lite.h"


def header_defines():
    """``#define NAME VALUE`` lines of the header, values evaluated."""
    values = {}
    for line in HEADER.read_text().splitlines():
        match = re.match(r"#define\s+(\w+)\s+(.+?)\s*(/\*.*)?$", line)
        if not match or "(" in match.group(1):
            continue
        text = re.sub(r"(?<=[0-9a-fA-F])(ull|u|ULL|U)\b", "", match.group(2))
        try:
            values[match.group(1)] = eval(text, {})  # noqa: S307 - the project's own header
        except Exception:  # noqa: BLE001 - not a number
            pass
    return values


class Abi(unittest.TestCase):
    def test_every_system_call_number_matches_the_header(self):
        defines = header_defines()
        numbers = {k[len("__NR_lite_"):]: v for k, v in defines.items() if k.startswith("__NR_lite_")}
        self.assertEqual(_abi.NR, numbers)

    def test_every_constant_matches_the_header(self):
        defines = header_defines()
        constants = {k: v for k, v in vars(_abi).items() if k.startswith("LITE_")}
        header = {k: v for k, v in defines.items() if k.startswith("LITE_") and k != "LITE_PORT_PRIORITY"}
        self.assertEqual(constants, header)

    def test_structures_have_the_header_s_layout(self):
        text = HEADER.read_text()
        for struct, cls in (("lite_lock", _abi.LiteLock), ("lite_receive", _abi.LiteReceive),
                            ("lite_stats", _abi.LiteStats)):
            body = re.search(r"struct %s \{(.*?)\};" % struct, text, re.S).group(1)
            fields = re.findall(r"__u(\d+)\s+(\w+);", body)
            self.assertEqual([name for _, name in fields], [f[0] for f in cls._fields_], struct)
            self.assertEqual(sum(int(bits) // 8 for bits, _ in fields), ctypes.sizeof(cls), struct)
        self.assertEqual(list(_abi.STATS_FIELDS), [f.name for f in lite.Stats.__dataclass_fields__.values()])


class Arguments(unittest.TestCase):
    """Bad arguments fail in Python, before the kernel is asked."""

    def assert_einval(self, fn):
        with self.assertRaises(OSError) as caught:
            fn()
        self.assertEqual(caught.exception.errno, errno.EINVAL)

    def test_out_of_range_integers_are_einval(self):
        self.assert_einval(lambda: lite.Lmr.alloc(1, -1))
        self.assert_einval(lambda: lite.Lmr.alloc(1 << 32, 8))
        self.assert_einval(lambda: lite.Lmr.alloc(1, 8, password=1 << 64))
        self.assert_einval(lambda: lite.call(1, 1 << 16, b"x"))
        self.assert_einval(lambda: lite.Lmr(1, 8, 0, "allocated").memset(0, 1, 256))
        self.assert_einval(lambda: lite.barrier(-1))

    def test_wrong_types_are_type_errors(self):
        lmr = lite.Lmr(1, 8, 0, "allocated")
        with self.assertRaises(TypeError):
            lmr.write("text")
        with self.assertRaises(TypeError):
            lmr.readinto(b"read-only")
        with self.assertRaises(TypeError):
            lite.Lmr.alloc("1", 8)
        with self.assertRaises(TypeError):
            lite.Lmr.alloc(1, True)
        with self.assertRaises(TypeError):
            lmr.write(memoryview(bytearray(8))[::2])

    def test_errors_are_os_errors_with_the_errno(self):
        # Without LITE in the host kernel, a valid call gets ENOSYS; with
        # it, not joined, ENOTCONN: either way an OSError with the errno.
        with self.assertRaises(OSError) as caught:
            lite.node_id()
        self.assertIn(caught.exception.errno, (errno.ENOSYS, errno.ENOTCONN))


class Buffers(unittest.TestCase):
    """Buffers reach the kernel in place, without copies."""

    def test_writable_buffers_are_used_in_place(self):
        data = bytearray(64)
        pinned = _buffers.writable(data)
        ctypes.memmove(pinned.address, b"in place", 8)
        self.assertEqual(bytes(data[:8]), b"in place")
        words = array.array("Q", [0, 0])
        pinned = _buffers.writable(words)
        ctypes.memmove(pinned.address, (7).to_bytes(8, "little"), 8)
        self.assertEqual(words[0], 7)
        view = memoryview(bytearray(32))[8:16]
        pinned = _buffers.writable(view)
        ctypes.memmove(pinned.address, b"12345678", 8)
        self.assertEqual(view.tobytes(), b"12345678")

    def test_bytes_are_read_in_place(self):
        data = b"not copied"
        pinned = _buffers.readable(data)
        self.assertEqual(ctypes.string_at(pinned.address, len(data)), data)
        self.assertEqual(pinned.length, len(data))

    def test_empty_buffers_have_length_zero(self):
        self.assertEqual(_buffers.writable(bytearray()).length, 0)
        self.assertEqual(_buffers.readable(b"").length, 0)


if __name__ == "__main__":
    unittest.main()
