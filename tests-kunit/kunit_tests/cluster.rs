// SPDX-License-Identifier: GPL-2.0

//! Bodies of the `lite_cluster` KUnit suite: the kernel C API against a
//! joined cluster of at least two nodes.
//!
//! At boot the node has not joined, so `lite_kunit.c` skips these cases;
//! the cluster test runs the suite again through KUnit's debugfs `run`
//! file once every node has joined, on every node at the same time.

use crate::internal::node_id::NodeId;
use kernel::{bindings, prelude::*};

use super::Check;
use crate::api::kernel_api::*;
use crate::internal::async_io::{ASYNC_NOWAIT, MAX_ASYNC_OPS, MAX_ASYNC_SIZE};

/// Bytes of the LMRs these cases use.
const LMR_SIZE: usize = 256 << 10;

/// Operations kept in flight by the asynchronous case.
const IN_FLIGHT: usize = 16;

const PERM_READ: u64 = 0x1;
const PERM_WRITE: u64 = 0x2;
const PERM_SHARE: u64 = 0x4;

fn errno(e: u32) -> i64 {
    -i64::from(e)
}

/// Byte `i` of the pattern tagged `tag`.
fn pattern(tag: u8, i: usize) -> u8 {
    (i as u8).wrapping_mul(31).wrapping_add(tag)
}

fn filled(tag: u8, len: usize) -> Result<KVVec<u8>> {
    let mut data = KVVec::with_capacity(len, GFP_KERNEL)?;
    for i in 0..len {
        data.push(pattern(tag, i), GFP_KERNEL)?;
    }
    Ok(data)
}

/// The node after this one, wrapping around: where this node allocates.
fn next_node() -> u32 {
    let me = liteapi_get_node_id() as u32;
    let total = liteapi_get_total_node() as u32;
    // `total` is at least 1 once joined; 0 would make this node 1.
    me.checked_rem(total).unwrap_or(0) + 1
}

fn password() -> u64 {
    0x4b55_4e49_5400_0000 | liteapi_get_node_id() as u64
}

kunit_case!(lite_test_kernel_remote_memory, |c| {
    let pw = password();
    let lh = liteapi_alloc_remote_mem(next_node(), LMR_SIZE as u64, 0, pw);
    check!(c, lh > 0);
    if lh <= 0 {
        return;
    }
    let lh = lh as u64;
    let Ok(data) = filled(7, LMR_SIZE) else {
        check!(c, false);
        return;
    };
    // SAFETY: `data` holds `LMR_SIZE` readable bytes.
    let written =
        unsafe { liteapi_rdma_write_offset(lh, data.as_ptr().cast(), LMR_SIZE as u64, 0, 0, pw) };
    check!(c, written == 0);
    // Set a range across the middle, then copy the first 4 KiB over the end.
    check!(c, liteapi_remote_memset(lh, 1000, 5000, 0xa5) == 0);
    let tail = (LMR_SIZE - 4096) as u64;
    check!(c, liteapi_rdma_mr_memcpy(lh, 0, lh, tail, 4096) == 0);
    let Ok(mut back) = KVVec::from_elem(0u8, LMR_SIZE, GFP_KERNEL) else {
        check!(c, false);
        return;
    };
    // SAFETY: `back` holds `LMR_SIZE` writable bytes.
    let read = unsafe {
        liteapi_rdma_read_offset(lh, back.as_mut_ptr().cast(), LMR_SIZE as u64, 0, 0, pw)
    };
    check!(c, read == 0);
    // The copied head already holds part of the memset range.
    let before_copy = |i: usize| match i {
        1000..6000 => 0xa5,
        i => pattern(7, i),
    };
    let expected = |i: usize| match i {
        i if i >= LMR_SIZE - 4096 => before_copy(i - (LMR_SIZE - 4096)),
        i => before_copy(i),
    };
    check!(c, back.iter().enumerate().all(|(i, &b)| b == expected(i)));
    // The wrong password and a range past the end are refused.
    // SAFETY: `back` holds `LMR_SIZE` writable bytes.
    let wrong = unsafe { liteapi_rdma_read_offset(lh, back.as_mut_ptr().cast(), 8, 0, 0, pw ^ 1) };
    check!(c, i64::from(wrong) == errno(bindings::EACCES));
    check!(
        c,
        i64::from(liteapi_remote_memset(lh, tail, 4097, 0)) == errno(bindings::EINVAL)
    );
    // The calls without offset and password work at offset 0 whatever the
    // handle's password.
    let head = [0x5au8; 64];
    // SAFETY: `head` holds 64 readable bytes, `back` `LMR_SIZE` writable ones.
    unsafe {
        check!(c, liteapi_rdma_write(lh, head.as_ptr().cast(), 64, 0) == 0);
        check!(
            c,
            liteapi_rdma_read(lh, back.as_mut_ptr().cast(), 128, 0) == 0
        );
    }
    check!(c, back.iter().take(64).all(|&b| b == 0x5a));
    check!(
        c,
        back.iter()
            .enumerate()
            .take(128)
            .skip(64)
            .all(|(i, &b)| b == expected(i))
    );
    check!(c, liteapi_free(lh) == 0);
    check!(c, i64::from(liteapi_free(lh)) == errno(bindings::EBADF));
    // SAFETY: `head` holds 64 readable bytes.
    let gone = unsafe { liteapi_rdma_write(lh, head.as_ptr().cast(), 64, 0) };
    check!(c, i64::from(gone) == errno(bindings::EBADF));
    check!(
        c,
        liteapi_num_connected_nodes() == liteapi_get_total_node() - 1
    );
});

kunit_case!(lite_test_kernel_async, |c| {
    let pw = password();
    let piece = LMR_SIZE / IN_FLIGHT;
    let lh = liteapi_alloc_remote_mem(0, LMR_SIZE as u64, 0, pw);
    check!(c, lh > 0);
    if lh <= 0 {
        return;
    }
    let lh = lh as u64;
    let Ok(data) = filled(3, LMR_SIZE) else {
        check!(c, false);
        return;
    };
    // Every piece is written asynchronously, then the fence reaps them all.
    let mut ok = true;
    for i in 0..IN_FLIGHT {
        let at = i * piece;
        // SAFETY: `data[at..at + piece]` is readable; writes copy it at once.
        let op = unsafe {
            liteapi_rdma_asywrite_offset(
                lh,
                data[at..].as_ptr().cast(),
                piece as u64,
                0,
                at as u64,
                pw,
            )
        };
        ok &= op >= 0;
    }
    check!(c, ok);
    check!(c, liteapi_rdma_asyfence() == 0);
    // Read every piece back asynchronously into its own part of `back`.
    let Ok(mut back) = KVVec::from_elem(0u8, LMR_SIZE, GFP_KERNEL) else {
        check!(c, false);
        return;
    };
    let mut ops = [0u64; IN_FLIGHT];
    let base = back.as_mut_ptr();
    for (i, op) in ops.iter_mut().enumerate() {
        // SAFETY: Each operation gets a disjoint `piece` of `back`, which
        // is not touched until every operation has been reaped below.
        let id = unsafe {
            liteapi_rdma_asyread_offset(
                lh,
                base.add(i * piece).cast(),
                piece as u64,
                0,
                (i * piece) as u64,
                pw,
            )
        };
        check!(c, id >= 0);
        *op = id as u64;
    }
    // The last one is polled until done, the others waited for.
    let last = ops[IN_FLIGHT - 1];
    let mut polled = liteapi_rdma_asywait(last, ASYNC_NOWAIT);
    while polled == -(bindings::EAGAIN as i32) {
        crate::sys::sched::cond_resched();
        polled = liteapi_rdma_asywait(last, ASYNC_NOWAIT);
    }
    check!(c, polled == 0);
    check!(
        c,
        ops[..IN_FLIGHT - 1]
            .iter()
            .all(|&op| liteapi_rdma_asywait(op, 0) == 0)
    );
    check!(c, back[..] == data[..]);
    // A reaped id is gone; bad sizes, pointers and flags are refused.
    check!(
        c,
        i64::from(liteapi_rdma_asywait(last, 0)) == errno(bindings::EINVAL)
    );
    check!(
        c,
        i64::from(liteapi_rdma_asywait(last, 0x80)) == errno(bindings::EINVAL)
    );
    // SAFETY: A null buffer is refused before it is used.
    let null = unsafe { liteapi_rdma_asyread_offset(lh, core::ptr::null_mut(), 8, 0, 0, pw) };
    check!(c, null == errno(bindings::EFAULT));
    // SAFETY: The size is refused before the buffer is used.
    let huge = unsafe {
        liteapi_rdma_asywrite_offset(lh, data.as_ptr().cast(), MAX_ASYNC_SIZE + 1, 0, 0, pw)
    };
    check!(c, huge == errno(bindings::EINVAL));
    // More than the limit of unreaped operations: EAGAIN, never a hang.
    let mut accepted = 0;
    let mut refused = 0;
    for _ in 0..=MAX_ASYNC_OPS {
        // SAFETY: `data` holds at least 8 readable bytes.
        match unsafe { liteapi_rdma_asywrite_offset(lh, data.as_ptr().cast(), 8, 0, 0, pw) } {
            op if op >= 0 => accepted += 1,
            e if e == errno(bindings::EAGAIN) => refused += 1,
            _ => {}
        }
    }
    check!(c, accepted == MAX_ASYNC_OPS && refused == 1);
    check!(c, liteapi_rdma_asyfence() == 0);
    check!(c, liteapi_free(lh) == 0);
});

/// Registers `len` bytes at `at` of `memory`, has the next node write
/// into them by RDMA (a memcpy from an LMR it holds is executed there), and
/// checks that the bytes arrived in `memory` and that deregistration
/// revokes a mapping.
fn check_registered(c: &Check, memory: &mut [u8], at: usize, len: usize, name: u64) {
    let pw = password();
    let Ok(data) = filled(11, len) else {
        check!(c, false);
        return;
    };
    let source = liteapi_alloc_remote_mem(next_node(), len as u64, 0, pw);
    check!(c, source > 0);
    if source <= 0 {
        return;
    }
    let source = source as u64;
    // SAFETY: `data` holds `len` readable bytes.
    let written =
        unsafe { liteapi_rdma_write_offset(source, data.as_ptr().cast(), len as u64, 0, 0, pw) };
    check!(c, written == 0);
    let region = &mut memory[at..at + len];
    let perm = PERM_READ | PERM_WRITE | PERM_SHARE;
    // SAFETY: `region` stays allocated (it borrows `memory`) until the
    // deregistration below, whose success is checked.
    let lh = unsafe {
        liteapi_register_lmr_with_virt_addr(region.as_mut_ptr().cast(), len as u64, perm, pw)
    };
    check!(c, lh > 0);
    if lh > 0 {
        let lh = lh as u64;
        check!(c, liteapi_rdma_mr_memcpy(source, 0, lh, 0, len as u64) == 0);
        check!(c, liteapi_add_askmr_table(name, lh, perm, pw) == 0);
        let me = liteapi_get_node_id() as u32;
        let mapped = liteapi_ask_mr(me, name, PERM_READ, pw);
        check!(c, mapped > 0);
        check!(c, liteapi_deregister_mr(lh) == 0);
        if mapped > 0 {
            // The mapping was revoked with the registration.
            let mut probe = [0u8; 8];
            // SAFETY: `probe` holds 8 writable bytes.
            let after = unsafe {
                liteapi_rdma_read_offset(mapped as u64, probe.as_mut_ptr().cast(), 8, 0, 0, pw)
            };
            check!(c, i64::from(after) == errno(bindings::EKEYREVOKED));
            check!(c, liteapi_umap_lmr(mapped as u64) == 0);
        }
        check!(c, memory[at..at + len] == data[..]);
    }
    check!(c, liteapi_free(source) == 0);
}

kunit_case!(lite_test_kernel_registration, |c| {
    let me = liteapi_get_node_id() as u64;
    // Directly mapped memory, starting inside a page and ending inside another.
    if let Ok(mut small) = KVec::from_elem(0u8, 3 * 4096, GFP_KERNEL) {
        check_registered(&c, &mut small, 100, 2 * 4096, 0x6b72_0000 | me);
    } else {
        check!(c, false);
    }
    // vmalloc memory.
    if let Ok(mut large) = KVVec::from_elem(0u8, 1 << 20, GFP_KERNEL) {
        check_registered(&c, &mut large, 0, 1 << 20, 0x6b72_0100 | me);
    } else {
        check!(c, false);
    }
    // Bad input.
    let mut buf = [0u8; 64];
    let ptr = buf.as_mut_ptr().cast();
    // SAFETY: Each call is refused before it touches memory.
    unsafe {
        check!(
            c,
            liteapi_register_lmr_with_virt_addr(core::ptr::null_mut(), 8, PERM_READ, 0)
                == errno(bindings::EFAULT)
        );
        check!(
            c,
            liteapi_register_lmr_with_virt_addr(ptr, 0, PERM_READ, 0) == errno(bindings::EINVAL)
        );
        check!(
            c,
            liteapi_register_lmr_with_virt_addr(ptr, 8, 1 << 40, 0) == errno(bindings::EINVAL)
        );
        check!(
            c,
            liteapi_register_lmr_with_virt_addr(0x1000 as *mut _, 8, PERM_READ, 0)
                == errno(bindings::EINVAL)
        );
    }
});

kunit_case!(lite_test_kernel_sync, |c| {
    let pw = password();
    let me = liteapi_get_node_id() as u32;
    let eperm = -(bindings::EPERM as i32);
    let edeadlk = -(bindings::EDEADLK as i32);
    let enoent = -(bindings::ENOENT as i32);
    // Atomics on an 8-byte LMR on the next node and on this one (which a
    // peer posts for this node).
    for node in [next_node(), me] {
        let lh = liteapi_alloc_remote_mem(node, 8, 1, pw);
        check!(c, lh > 0);
        if lh <= 0 {
            return;
        }
        let lh = lh as u64;
        let mut old = u64::MAX;
        for i in 0..10u64 {
            // SAFETY: `old` is a valid `u64`.
            let added = unsafe { liteapi_rdma_fetch_and_add(lh, &mut old, 3, 0) };
            check!(c, added == 0);
            check!(c, old == 3 * i);
        }
        // SAFETY: `old` is a valid `u64`.
        unsafe {
            check!(
                c,
                liteapi_rdma_compare_and_swp(lh, &mut old, 999, 5, 1) == 0
            );
            check!(c, old == 30);
            check!(c, liteapi_rdma_compare_and_swp(lh, &mut old, 30, 5, 2) == 0);
            check!(c, old == 30);
            check!(c, liteapi_rdma_fetch_and_add(lh, &mut old, 0, 0) == 0);
            check!(c, old == 5);
            check!(c, liteapi_rdma_fetch_and_add(lh, &mut old, 0, 7) < 0);
        }
        check!(c, liteapi_free(lh) == 0);
    }
    // Locks kept here and on the next node: the holder may not take them
    // twice, and only the holder may release them.
    for home in [me, next_node()] {
        let mut lock = LiteLock::from(crate::internal::locks::lockers::LockId {
            home: NodeId::new(0),
            number: 0,
        });
        // SAFETY: `lock` is a valid `struct lite_lock` for every call.
        unsafe {
            check!(c, liteapi_create_lock(home, &mut lock) >= 0);
            check!(c, liteapi_lock(&lock) == 0);
            check!(c, liteapi_lock(&lock) == edeadlk);
            check!(c, liteapi_unlock(&lock) == 0);
            check!(c, liteapi_unlock(&lock) == eperm);
            check!(c, liteapi_ask_lock(home, 4095, &mut lock) == enoent);
        }
    }
});

/// Port of the asynchronous RPC case, on every node (ports are per node).
const ASYNC_RPC_PORT: u32 = 57;

/// Calls the asynchronous RPC case keeps in flight.
const ASYNC_CALLS: usize = 8;

/// `lite_recv` flag: fail with `EAGAIN` rather than wait.
const RECV_NONBLOCK: u32 = 0x1;

kunit_case!(lite_test_kernel_rpc_async, |c| {
    let name = b"kunit-rpc-async";
    // SAFETY: `name` is readable for its length during the call.
    let registered = unsafe {
        liteapi_register_application(ASYNC_RPC_PORT, 256, name.as_ptr().cast(), name.len() as u64)
    };
    check!(c, registered == 0);
    if registered != 0 {
        return;
    }
    let me = liteapi_get_node_id() as u32;
    // Calls to this node's own port, all posted before any is served.
    let mut replies = [[0u8; 64]; ASYNC_CALLS];
    let mut ops = [0i64; ASYNC_CALLS];
    for (i, (reply, op)) in replies.iter_mut().zip(ops.iter_mut()).enumerate() {
        let request = [i as u8 + 1; 16];
        // SAFETY: `request` is readable during the call; `reply` is
        // writable and untouched until the operation is reaped below
        // (every posted operation is).
        *op = unsafe {
            liteapi_send_reply_imm_async(
                me,
                ASYNC_RPC_PORT,
                request.as_ptr().cast(),
                request.len() as u64,
                reply.as_mut_ptr().cast(),
                reply.len() as u64,
            )
        };
    }
    check!(c, ops.iter().all(|&op| op > 0));
    // Serve them: each reply is its request's first byte, 32 times. Every
    // request but the last is answered together with receiving the next,
    // which is queued already.
    let posted = ops.iter().filter(|&&op| op > 0).count();
    let mut served = 0;
    let mut request = [0u8; 256];
    let mut descriptor = 0u64;
    // SAFETY: `request` and `descriptor` are writable for the call.
    let mut len = unsafe {
        liteapi_receive_message(
            ASYNC_RPC_PORT,
            request.as_mut_ptr().cast(),
            request.len() as u64,
            &mut descriptor,
            RECV_NONBLOCK,
        )
    };
    while len == 16 && served < posted {
        let answer = [request[0]; 32];
        served += 1;
        len = if served == posted {
            // SAFETY: `answer` is readable for the call.
            unsafe {
                liteapi_reply_message(answer.as_ptr().cast(), answer.len() as u64, descriptor)
                    .into()
            }
        } else {
            // SAFETY: `answer` is readable, `request` and `descriptor`
            // writable, for the call.
            unsafe {
                liteapi_reply_and_receive_message(
                    answer.as_ptr().cast(),
                    answer.len() as u64,
                    descriptor,
                    ASYNC_RPC_PORT,
                    request.as_mut_ptr().cast(),
                    request.len() as u64,
                    &mut descriptor,
                )
            }
        };
    }
    check!(c, served == posted && len == 0);
    // Reaped last first, each returns its own reply's length and bytes.
    let mut ok = true;
    for (i, (reply, &op)) in replies.iter().zip(ops.iter()).enumerate().rev() {
        if op > 0 {
            ok &= liteapi_rdma_asywait(op as u64, 0) == 32;
            ok &= reply[..32].iter().all(|&b| b == i as u8 + 1)
                && reply[32..].iter().all(|&b| b == 0);
        }
    }
    check!(c, ok);
    // A port nobody registered refuses the call when it is posted.
    let mut reply = [0u8; 8];
    // SAFETY: the message and reply are valid buffers; a refused call is
    // never reaped.
    let refused = unsafe {
        liteapi_send_reply_imm_async(
            me,
            ASYNC_RPC_PORT + 1,
            b"x".as_ptr().cast(),
            1,
            reply.as_mut_ptr().cast(),
            reply.len() as u64,
        )
    };
    check!(c, refused == errno(bindings::ECONNREFUSED));
    check!(c, liteapi_unregister_application(ASYNC_RPC_PORT) == 0);
});
