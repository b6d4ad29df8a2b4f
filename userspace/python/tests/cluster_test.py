# SPDX-License-Identifier: GPL-2.0
"""The Python package across a joined cluster: ``python3 cluster_test.py
ME NODES`` on every node at once. Each check prints ``ok WHAT`` or
``fail WHAT: WHY``; the last line is ``ok all N checks ran``. Nodes meet in
``lite.barrier(NODES)``, so every node must run it."""

import array
import errno
import sys
import threading
import time

import lite

PASSWORD = 0x5059
PORT = 22
UNUSED_PORT = 23
LOCK_ROUNDS = 20
ASYNC_CALLS = 8

checks = 0
failures = 0


def report(ok, what, why=""):
    global checks, failures
    checks += 1
    # "fail WHAT: WHY": WHAT holds no ": ".
    if ok:
        print(f"ok {what}", flush=True)
    else:
        failures += 1
        print(f"fail {what}: {why}", flush=True)


def check(what, fn):
    """Runs fn; it passes unless it raises (an AssertionError's text, or
    any other exception, is the reason)."""
    try:
        fn()
        report(True, what)
    except Exception as e:  # noqa: BLE001 - every failure is reported
        report(False, what, f"{type(e).__name__}: {e}")


def raises(what, exception, fn, err=None):
    try:
        fn()
    except exception as e:
        if err is not None and getattr(e, "errno", None) != err:
            report(False, what, f"errno {getattr(e, 'errno', None)}, expected {err}")
        else:
            report(True, what)
        return
    except Exception as e:  # noqa: BLE001
        report(False, what, f"raised {type(e).__name__}: {e}")
        return
    report(False, what, "nothing was raised")


def name_of(node, kind):
    return 0x7079000000000000 | (kind << 16) | node


def meet(why):
    check(f"barrier({NODES}) {why}", lambda: lite.barrier(NODES))


def cluster():
    def ids():
        assert lite.node_id() == ME, lite.node_id()
        assert lite.total_nodes() == NODES, lite.total_nodes()

    check("node_id() and total_nodes()", ids)

    def counters():
        s = lite.stats()
        assert s.connections >= NODES - 1, s
        assert set(s.as_dict()) >= {"lmrs", "rpc_ports", "locks"}

    check("stats() returns the node's counters", counters)
    check("join() of a member raises OSError(EISCONN)",
          lambda: expect_errno(lambda: lite.join("10.0.0.1"), errno.EISCONN))


def expect_errno(fn, err):
    try:
        fn()
    except OSError as e:
        assert e.errno == err, f"errno {e.errno}, expected {err}"
        return
    raise AssertionError("no OSError")


def memory():
    with lite.Lmr.alloc(NEXT, 8192, password=PASSWORD) as lmr:
        data = bytes(range(256)) * 32

        def whole():
            lmr.write(data)
            assert lmr.read() == data

        check("Lmr.write of bytes, Lmr.read of the whole LMR", whole)

        def into_buffers():
            out = bytearray(100)
            assert lmr.readinto(out, 50) == 100
            assert out == data[50:150]
            words = array.array("I", [0] * 16)
            lmr.readinto(words, 0)
            assert words.tobytes() == data[:64]
            view = memoryview(bytearray(300))
            lmr.readinto(view[100:200], 1000)
            assert view[100:200].tobytes() == data[1000:1100]

        check("Lmr.readinto a bytearray, an array.array and a memoryview slice", into_buffers)

        def from_buffers():
            lmr.write(array.array("Q", [7, 8, 9]), 16)
            assert lmr.read(24, 16) == array.array("Q", [7, 8, 9]).tobytes()
            lmr.write(memoryview(b"abcdef")[2:], 0)
            assert lmr.read(4) == b"cdef"

        check("Lmr.write from an array.array and a read-only memoryview slice", from_buffers)

        def memset():
            lmr.memset(0, 4096, 0xAB)
            assert lmr.read(4096) == b"\xab" * 4096

        check("Lmr.memset", memset)

        def async_io():
            lmr.write(data)
            out = bytearray(512)
            op = lmr.read_async(out, 256)
            assert op.wait() == 0
            assert out == data[256:768]
            op = lmr.write_async(b"\x11" * 64, 0)
            deadline = time.monotonic() + 30
            while not op.done():
                assert time.monotonic() < deadline, "write_async still running"
                time.sleep(0.001)
            assert lmr.read(64) == b"\x11" * 64
            buffers = [bytearray(32) for _ in range(8)]
            ops = [lmr.read_async(b, 32 * i) for i, b in enumerate(buffers)]
            lite.fence()
            del ops
            assert b"".join(buffers) == lmr.read(256)

        check("read_async/write_async with wait, done and fence", async_io)

        with lite.Lmr.alloc(ME, 4096, password=PASSWORD) as other:

            def copies():
                lmr.write(b"0123456789")
                lmr.copy_to(other, 10, dst_offset=100)
                assert other.read(10, 100) == b"0123456789"
                other.move_to(other, 10, src_offset=100, dst_offset=105)
                assert other.read(15, 100) == b"01234" + b"0123456789"

            check("Lmr.copy_to another node's LMR and move_to an overlapping range", copies)

        raises("Lmr.read past the end raises OSError(EINVAL)", OSError,
               lambda: lmr.read(16, 8190), errno.EINVAL)
        raises("Lmr.readinto a bytes object raises TypeError", TypeError,
               lambda: lmr.readinto(b"immutable"))
        raises("Lmr.write of a str raises TypeError", TypeError, lambda: lmr.write("text"))
        raises("Lmr.memset with byte 256 raises OSError(EINVAL)", OSError,
               lambda: lmr.memset(0, 1, 256), errno.EINVAL)
    raises("Lmr.read after close raises OSError(EBADF)", OSError, lambda: lmr.read(1),
           errno.EBADF)
    raises("Lmr.alloc of -1 bytes raises OSError(EINVAL)", OSError,
           lambda: lite.Lmr.alloc(NEXT, -1), errno.EINVAL)
    raises("Lmr.alloc on node 2**40 raises OSError(EINVAL)", OSError,
           lambda: lite.Lmr.alloc(1 << 40, 64), errno.EINVAL)

    with lite.Lmr.alloc(NEXT, 8, atomic=True) as counter:

        def atomics():
            assert counter.fetch_add(5) == 0
            assert counter.compare_swap(5, 9) == 5
            assert counter.compare_swap(5, 1) == 9
            assert counter.fetch_add(1, priority=lite.Priority.HIGH) == 9

        check("fetch_add and compare_swap on an atomic LMR", atomics)


def sharing():
    wrapped = lite.Lmr.wrap(b"wrapped by %d" % ME, name_of(ME, 1), password=PASSWORD)
    local = bytearray(64)
    registered = lite.Lmr.register(
        local, permission=lite.Permission.READ | lite.Permission.WRITE | lite.Permission.SHARE,
        password=PASSWORD)
    registered.publish(name_of(ME, 2), lite.Permission.READ | lite.Permission.WRITE)
    meet("after publishing")

    def ask():
        with lite.Lmr.ask(NEXT, name_of(NEXT, 1), permission=lite.Permission.READ,
                          password=PASSWORD) as mapping:
            wanted = b"wrapped by %d" % NEXT
            expect_equal(mapping.read(len(wanted)), wanted)

    check("Lmr.ask maps the next node's Lmr.wrap by name", ask)

    def write_registered():
        with lite.Lmr.ask(NEXT, name_of(NEXT, 2), password=PASSWORD) as mapping:
            mapping.write(b"written by %d" % ME, 0)

    check("writing into the next node's registered bytearray", write_registered)
    raises("Lmr.ask with the wrong password raises PermissionError", PermissionError,
           lambda: lite.Lmr.ask(NEXT, name_of(NEXT, 1), password=PASSWORD + 1))
    raises("Lmr.ask of an unknown name raises FileNotFoundError", FileNotFoundError,
           lambda: lite.Lmr.ask(NEXT, name_of(NEXT, 9), password=PASSWORD))
    meet("after writing into registered memory")
    written = b"written by %d" % PREV
    check("this node's registered bytearray holds what the previous node wrote",
          lambda: expect_equal(bytes(local[:len(written)]), written))
    meet("after reading registered memory")
    registered.close()
    wrapped.close()


def expect_equal(found, wanted):
    assert found == wanted, f"{found!r} != {wanted!r}"


def locks():
    if ME == 1:
        lock = lite.Lock.create(1)
        number = lite.Lmr.wrap(lock.number.to_bytes(8, "little"), name_of(0, 3),
                               password=PASSWORD)
        counter = lite.Lmr.wrap(bytes(8), name_of(0, 4), password=PASSWORD)
    meet("after node 1 created the lock")

    def rounds():
        with lite.Lmr.ask(1, name_of(0, 3), password=PASSWORD) as number_lmr, \
                lite.Lmr.ask(1, name_of(0, 4), password=PASSWORD) as counter_lmr:
            lock = lite.Lock.ask(1, int.from_bytes(number_lmr.read(8), "little"))
            for _ in range(LOCK_ROUNDS):
                with lock:
                    value = int.from_bytes(counter_lmr.read(8), "little")
                    counter_lmr.write((value + 1).to_bytes(8, "little"))

    check(f"{LOCK_ROUNDS} read-modify-writes under `with lock:`", rounds)
    raises("Lock.ask of number 4103 raises FileNotFoundError", FileNotFoundError,
           lambda: lite.Lock.ask(NEXT, 4103))
    meet("after the lock rounds")

    def total():
        with lite.Lmr.ask(1, name_of(0, 4), password=PASSWORD) as counter_lmr:
            expect_equal(int.from_bytes(counter_lmr.read(8), "little"), LOCK_ROUNDS * NODES)

    check("the counter under the lock counts every round of every node", total)
    meet("after reading the counter")
    if ME == 1:
        number.close()
        counter.close()


def rpc():
    port = lite.Port(PORT, 4096, "py-test")
    calls_from_prev = 2 + ASYNC_CALLS + 1
    served = {}

    def serve():
        try:
            served["count"] = port.serve(lambda data: data.upper(), count=calls_from_prev)
        except Exception as e:  # noqa: BLE001
            served["error"] = e

    server = threading.Thread(target=serve)
    server.start()
    meet("after opening the RPC port")

    check("query_port of the next node's port", lambda: expect_equal(lite.query_port(NEXT, PORT), 4096))
    check("call gets the reply",
          lambda: expect_equal(lite.call(NEXT, PORT, b"hello from %d" % ME), b"HELLO FROM %d" % ME))
    check("call at high priority",
          lambda: expect_equal(lite.call(NEXT, PORT, b"high", priority=lite.Priority.HIGH), b"HIGH"))

    def many():
        pending = [lite.call_async(NEXT, PORT, b"async %d" % i) for i in range(ASYNC_CALLS)]
        for i, call in reversed(list(enumerate(pending))):
            expect_equal(call.result(), b"ASYNC %d" % i)

    check(f"{ASYNC_CALLS} call_async in flight, each result its own reply", many)
    check("send (one way)", lambda: lite.send(NEXT, PORT, b"one way"))
    raises("call to an unregistered port raises ConnectionRefusedError", ConnectionRefusedError,
           lambda: lite.call(NEXT, UNUSED_PORT, b"x"))
    raises("call with a str message raises TypeError", TypeError,
           lambda: lite.call(NEXT, PORT, "text"))
    raises("Port on port 64 raises OSError(EINVAL)", OSError, lambda: lite.Port(64), errno.EINVAL)
    raises("Port on a registered port raises OSError(EADDRINUSE)", OSError,
           lambda: lite.Port(PORT), errno.EADDRINUSE)

    server.join(timeout=60)
    check("the server answered every call from the previous node",
          lambda: expect_equal((served.get("error"), served.get("count")),
                               (None, calls_from_prev)))
    meet("after the RPCs")
    check("a non-blocking receive on the drained port returns None",
          lambda: expect_equal(port.receive(block=False), None))
    port.close()

    def priorities():
        old = lite.set_priority(lite.Priority.LOW)
        assert lite.set_priority(old) == lite.Priority.LOW

    check("set_priority returns the previous default", priorities)


def main():
    global ME, NODES, NEXT, PREV
    if len(sys.argv) != 3:
        print(f"usage: {sys.argv[0]} ME NODES", file=sys.stderr)
        return 2
    ME, NODES = int(sys.argv[1]), int(sys.argv[2])
    NEXT = ME % NODES + 1
    PREV = NODES if ME == 1 else ME - 1
    cluster()
    meet("at the start")
    for section in (memory, sharing, locks, rpc):
        # A section that breaks is a failure of its own; the next one runs
        # (its barriers may then find the nodes out of step, which the
        # harness's time limit ends).
        try:
            section()
        except Exception as e:  # noqa: BLE001
            report(False, f"the {section.__name__} checks ran to the end", f"{type(e).__name__}: {e}")
    print(f"ok all {checks + 1} checks ran", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
