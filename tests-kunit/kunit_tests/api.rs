// SPDX-License-Identifier: GPL-2.0

//! The `lite_api` suite: the kernel C API before the node joins, and the
//! remote key tables it uses.

use super::Check;
use crate::internal::core::wire::Frame;
use crate::internal::keys::part_frame;
use crate::internal::keys::wire::{KeysMessage, FIRST_PART, LAST_PART};
use crate::internal::node_id::NodeId;
use crate::verbs::RemoteKeys;
use kernel::bindings;
use kernel::error::code::EIO;

kunit_case!(lite_test_api_before_join, |c| {
    use crate::api::kernel_api::*;
    let enotconn = -(bindings::ENOTCONN as i32);
    check!(c, liteapi_get_node_id() == enotconn);
    check!(c, liteapi_get_total_node() == enotconn);
    check!(
        c,
        liteapi_alloc_remote_mem(1, 4096, 0, 0) == i64::from(enotconn)
    );
    check!(c, liteapi_free(1) == enotconn);
    check!(c, liteapi_dist_barrier(2) == enotconn);
    check!(c, liteapi_num_connected_nodes() == enotconn);
    check!(c, kernel_messages_before_join() == Ok(()));
    let mut buf = [0u8; 8];
    let mut descriptor = 0u64;
    // SAFETY: `buf` is a valid 8-byte buffer and `descriptor` a valid `u64`
    // for every call.
    unsafe {
        check!(
            c,
            liteapi_rdma_write(1, buf.as_ptr().cast(), 8, 0) == enotconn
        );
        check!(
            c,
            liteapi_rdma_read(1, buf.as_mut_ptr().cast(), 8, 0) == enotconn
        );
        let reply = buf.as_ptr().cast();
        let next = buf.as_mut_ptr().cast();
        check!(
            c,
            liteapi_reply_and_receive_message(reply, 8, 1, 0, next, 8, &mut descriptor)
                == i64::from(enotconn)
        );
        check!(
            c,
            liteapi_reply_and_receive_message(reply, 8, 1, 0, next, 8, core::ptr::null_mut())
                == -i64::from(bindings::EFAULT)
        );
        check!(
            c,
            liteapi_rdma_write_offset(1, buf.as_ptr().cast(), 8, 0, 0, 0) == enotconn
        );
        check!(
            c,
            liteapi_rdma_read_offset(1, buf.as_mut_ptr().cast(), 8, 0, 0, 0) == enotconn
        );
    }
    // SAFETY: The strings are NUL-terminated; null is allowed.
    unsafe {
        check!(
            c,
            liteapi_establish_conn(core::ptr::null(), 18500, 1) == -(bindings::EINVAL as i32)
        );
        check!(
            c,
            liteapi_establish_conn(c"not-an-ip".as_ptr(), 18500, 1) == -(bindings::EINVAL as i32)
        );
        check!(
            c,
            liteapi_establish_conn(c"10.0.0.1".as_ptr(), 0, 1) == -(bindings::EINVAL as i32)
        );
        check!(
            c,
            liteapi_establish_conn(c"10.0.0.1".as_ptr(), 70000, 1) == -(bindings::EINVAL as i32)
        );
        // No RDMA device exists while KUnit runs at boot.
        check!(
            c,
            liteapi_establish_conn(c"10.0.0.1".as_ptr(), 18500, 1) == -(bindings::ENODEV as i32)
        );
    }
    check!(c, liteapi_get_node_id() == enotconn);
});

kunit_case!(lite_test_memory_api_before_join, |c| {
    use crate::api::kernel_api::*;
    let enotconn = -(bindings::ENOTCONN as i32);
    check!(c, liteapi_remote_memset(1, 0, 8, 0) == enotconn);
    check!(c, liteapi_rdma_mr_memcpy(1, 0, 2, 0, 8) == enotconn);
    check!(c, liteapi_rdma_mr_memmov(1, 0, 2, 0, 8) == enotconn);
    check!(c, liteapi_add_askmr_table(1, 1, 1, 0) == enotconn);
    check!(c, liteapi_ask_mr(1, 1, 1, 0) == i64::from(enotconn));
    check!(c, liteapi_umap_lmr(1) == enotconn);
    check!(c, liteapi_deregister_mr(1) == enotconn);
    let data = [0u8; 8];
    // SAFETY: `data` holds 8 readable bytes.
    let wrapped = unsafe { liteapi_wrapup_alloc_for_remote_access(data.as_ptr().cast(), 8, 1, 0) };
    check!(c, wrapped == i64::from(enotconn));
});

kunit_case!(lite_test_sync_api_before_join, |c| {
    use crate::api::kernel_api::*;
    let enotconn = -(bindings::ENOTCONN as i32);
    let mut old = 0u64;
    let mut lock = LiteLock::from(crate::internal::locks::lockers::LockId {
        home: NodeId::new(1),
        number: 0,
    });
    // SAFETY: `old` and `lock` are valid for the calls.
    unsafe {
        check!(c, liteapi_rdma_fetch_and_add(1, &mut old, 1, 0) == enotconn);
        check!(
            c,
            liteapi_rdma_compare_and_swp(1, &mut old, 0, 1, 0) == enotconn
        );
        check!(c, liteapi_create_lock(1, &mut lock) == enotconn);
        check!(c, liteapi_ask_lock(1, 0, &mut lock) == enotconn);
        check!(c, liteapi_lock(&lock) == enotconn);
        check!(c, liteapi_unlock(&lock) == enotconn);
        check!(
            c,
            liteapi_rdma_fetch_and_add(1, core::ptr::null_mut(), 1, 0) < 0
        );
        check!(c, liteapi_lock(core::ptr::null()) < 0);
    }
    check!(c, liteapi_set_priority(1) == enotconn);
});

kunit_case!(lite_test_remote_key_tables, |c| {
    let Ok(keys) = RemoteKeys::new() else {
        check!(c, false);
        return;
    };
    // Before the peer's first table, accesses wait; a gone connection ends
    // the wait.
    check!(c, keys.wait_ready(|| true) == Err(EIO));
    // A table in two parts is in force once its last part arrived.
    check!(
        c,
        keys.receive(&[(0x300, 0x301), (0x100, 0x101)], true, false)
            .is_ok()
    );
    check!(c, keys.wait_ready(|| true) == Err(EIO));
    check!(c, keys.post_translated((8, 0x100), |r| r) == (8, 0x100));
    check!(c, keys.receive(&[(0x200, 0x201)], false, true).is_ok());
    check!(c, keys.wait_ready(|| true).is_ok());
    check!(c, keys.post_translated((8, 0x100), |r| r) == (8, 0x101));
    check!(c, keys.post_translated((9, 0x200), |r| r) == (9, 0x201));
    check!(c, keys.post_translated((0, 0x300), |r| r) == (0, 0x301));
    // Keys never replaced go out as given.
    check!(c, keys.post_translated((0, 0x150), |r| r) == (0, 0x150));
    // A new table replaces the old one whole.
    check!(c, keys.receive(&[(0x200, 0x202)], true, true).is_ok());
    check!(c, keys.post_translated((0, 0x100), |r| r) == (0, 0x100));
    check!(c, keys.post_translated((0, 0x200), |r| r) == (0, 0x202));
    // An empty table makes every key go out as given.
    check!(c, keys.receive(&[], true, true).is_ok());
    check!(c, keys.post_translated((0, 0x200), |r| r) == (0, 0x200));

    // Parts travel as control messages: identity high, current key low.
    let frame = part_frame(
        5,
        &[(1, 2), (u32::MAX, 0x8000_0000)],
        FIRST_PART | LAST_PART,
    );
    let decoded = KeysMessage::from_frame(&Frame::decode(&frame.encode()));
    check!(
        c,
        decoded
            == Some(KeysMessage::KeyTablePart {
                request_id: 5,
                pair0: (1 << 32) | 2,
                pair1: (u64::from(u32::MAX) << 32) | 0x8000_0000,
                pair2: 0,
                pair3: 0,
                pair4: 0,
                count: 2,
                flags: FIRST_PART | LAST_PART,
            })
    );
    // More pairs than a part holds are cut, never read past.
    let long = [(7, 8); 9];
    let frame = part_frame(0, &long, 0);
    check!(
        c,
        matches!(
            KeysMessage::from_frame(&frame),
            Some(KeysMessage::KeyTablePart { count: 5, .. })
        )
    );
});

/// The messaging family before the node joins: every function fails with
/// `ENOTCONN` once its arguments are read, except freeing a null reply.
fn kernel_messages_before_join() -> Result<(), &'static str> {
    use crate::api::kernel_messages::*;
    let enotconn = -(bindings::ENOTCONN as i32);
    let message = [1u8; 8];
    let mut reply = [0u8; 4096];
    let mut out = core::ptr::null_mut();
    let msg = message.as_ptr().cast();
    // SAFETY: `message` has 8 readable bytes, `reply` the 4096 writable
    // bytes of `LITE_KMSG_MAX_REPLY`, `out` is a writable pointer; freeing
    // null does nothing.
    let results = unsafe {
        [
            ("reg_send", liteapi_reg_send_handler(None)),
            ("reg_send_reply", liteapi_reg_send_reply_handler(None)),
            (
                "reg_send_reply_opt",
                liteapi_reg_send_reply_opt_handler(None),
            ),
            ("defer_reply", liteapi_defer_reply() as i32),
            ("send_message", liteapi_send_message(2, msg, 8)),
            (
                "send_message_priority",
                liteapi_send_message_priority(2, msg, 8, 1),
            ),
            ("send_message_UD", liteapi_send_message_UD(2, msg, 8, 0)),
            (
                "send_reply",
                liteapi_send_reply(2, msg, 8, reply.as_mut_ptr().cast()),
            ),
            (
                "send_reply_UD",
                liteapi_send_reply_UD(2, msg, 8, reply.as_mut_ptr().cast()),
            ),
            (
                "send_reply_opt",
                liteapi_send_reply_opt(2, msg, 8, &mut out, 0),
            ),
            ("reg_atomic_send", liteapi_reg_atomic_send_handler(None)),
            (
                "reg_atomic_single_send",
                liteapi_reg_atomic_single_send_handler(None),
            ),
            // The membership is checked before the pieces are read.
            (
                "atomic_send",
                liteapi_atomic_send(2, core::ptr::null(), 1, reply.as_mut_ptr().cast()),
            ),
            (
                "atomic_single_send",
                liteapi_atomic_single_send(2, core::ptr::null(), 1),
            ),
        ]
    };
    // SAFETY: Null is a valid argument.
    unsafe { liteapi_free_recv_buf(core::ptr::null_mut()) };
    match results.iter().find(|(_, ret)| *ret != enotconn) {
        Some((name, _)) => Err(name),
        None => Ok(()),
    }
}
