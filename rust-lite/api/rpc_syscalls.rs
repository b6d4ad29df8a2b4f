// SPDX-License-Identifier: GPL-2.0

//! Backends of LITE's RPC system calls (`lite_register_application` …
//! `lite_send_reply_multicast`); see `include/uapi/linux/lite.h`.

use crate::internal::node_id::NodeId;
use core::ffi::c_long;
use kernel::{
    bindings,
    error::from_result,
    prelude::*,
    uaccess::{UserPtr, UserSlice},
};

use super::{
    syscalls::{caller, to_ret},
    user::read_struct,
};
use crate::internal::{
    async_io::op::AsyncBuffer,
    core::limits::MAX_NODES,
    node::node,
    rpc::{
        payload::{Payload, ToUser},
        ring_protocol::{MAX_MESSAGE_SIZE, MAX_PORT_NAME},
        Target,
    },
};

/// A request of `size` bytes (1 to `LITE_MAX_MESSAGE_SIZE`) at `buf`,
/// read when it is sent.
fn user_message(buf: UserPtr, size: u64) -> Result<Payload<'static>> {
    if size == 0 || size > MAX_MESSAGE_SIZE {
        return Err(EINVAL);
    }
    Ok(Payload::User {
        at: buf,
        len: size as usize,
    })
}

/// A reply of up to `LITE_MAX_MESSAGE_SIZE` bytes (0 allowed) at `buf`,
/// read when it is sent.
fn user_reply(buf: UserPtr, size: u64) -> Result<Payload<'static>> {
    if size > MAX_MESSAGE_SIZE {
        return Err(crate::errno::EMSGSIZE());
    }
    Ok(Payload::User {
        at: buf,
        len: size as usize,
    })
}

/// Copies `data` out to `buf`.
fn write_out(buf: UserPtr, data: &[u8]) -> Result {
    UserSlice::new(buf, data.len()).writer().write_slice(data)
}

/// Room of a reply buffer: `LITE_MAX_MESSAGE_SIZE` is the most any reply
/// can need. A null buffer with room is refused before anything is sent.
fn reply_room(buf: UserPtr, max_reply: u64) -> Result<u64> {
    if buf == 0 && max_reply > 0 {
        return Err(EFAULT);
    }
    Ok(max_reply.min(MAX_MESSAGE_SIZE))
}

/// Backend of `lite_register_application`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_register_application(
    port: u32,
    max_size: u64,
    name: UserPtr,
    name_len: u64,
) -> c_long {
    from_result(|| {
        let (cluster, process) = caller()?;
        if name_len > MAX_PORT_NAME as u64 {
            return Err(EINVAL);
        }
        let mut text = [0u8; MAX_PORT_NAME];
        let text = &mut text[..name_len as usize];
        UserSlice::new(name, text.len()).reader().read_slice(text)?;
        cluster
            .rpc
            .register_application(&process, port, max_size, text)?;
        Ok(0)
    })
}

/// Backend of `lite_unregister_application`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_unregister_application(port: u32) -> c_long {
    from_result(|| {
        let (cluster, process) = caller()?;
        cluster.rpc.unregister_application(process.tgid, port)?;
        Ok(0)
    })
}

/// Backend of `lite_query_port`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_query_port(node_id: u32, port: u32) -> c_long {
    from_result(|| {
        let cluster = node()?.cluster()?;
        Ok(cluster.rpc.query_port(NodeId::new(node_id), port)? as c_long)
    })
}

/// The target of a send by the calling process, with its default priority.
fn caller_target(
    cluster: &crate::internal::cluster::Cluster,
    port_priority: u32,
) -> Result<Target> {
    let process = cluster.current_process()?;
    Ok(Target::unpack(port_priority)?.with_default(&process.default_priority))
}

/// Backend of `lite_send_reply_imm`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_send_reply_imm(
    node_id: u32,
    port_priority: u32,
    msg: UserPtr,
    size: u64,
    reply: UserPtr,
    max_reply: u64,
) -> c_long {
    from_result(|| {
        let cluster = node()?.cluster()?;
        let target = caller_target(&cluster, port_priority)?;
        if target.nonblocking {
            return Err(EINVAL);
        }
        let room = reply_room(reply, max_reply)?;
        let message = user_message(msg, size)?;
        let len = cluster
            .rpc
            .call(NodeId::new(node_id), &target, message, room, ToUser(reply))?;
        Ok(len as c_long)
    })
}

/// Backend of `lite_send_reply_imm_async`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_send_reply_imm_async(
    node_id: u32,
    port_priority: u32,
    msg: UserPtr,
    size: u64,
    reply: UserPtr,
    max_reply: u64,
) -> c_long {
    from_result(|| {
        let (cluster, process) = caller()?;
        let target = Target::unpack(port_priority)?.with_default(&process.default_priority);
        if target.nonblocking {
            return Err(EINVAL);
        }
        let room = reply_room(reply, max_reply)?;
        let message = user_message(msg, size)?;
        let id = cluster
            .async_io
            .submit_call(&process, AsyncBuffer::User(reply), || {
                cluster
                    .rpc
                    .call_async(NodeId::new(node_id), &target, message, room)
            })?;
        to_ret(id)
    })
}

/// Backend of `lite_send`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_send(
    node_id: u32,
    port_priority: u32,
    msg: UserPtr,
    size: u64,
) -> c_long {
    from_result(|| {
        let cluster = node()?.cluster()?;
        let target = caller_target(&cluster, port_priority)?;
        let message = user_message(msg, size)?;
        cluster
            .rpc
            .send_one_way(NodeId::new(node_id), &target, message)?;
        Ok(0)
    })
}

/// Receives into user memory; see [`Rpc::receive`](crate::internal::rpc::Rpc::receive).
fn receive_to_user(
    port: u32,
    buf: UserPtr,
    max_size: u64,
    descriptor: UserPtr,
    flags: u32,
) -> Result<c_long> {
    let (cluster, process) = caller()?;
    // Fail before taking a message if the descriptor cannot be stored.
    let descriptor_out = UserSlice::new(descriptor, 8);
    descriptor_out.writer().write_slice(&0u64.to_ne_bytes())?;
    let (len, id) = cluster
        .rpc
        .receive(&process, port, max_size, flags, |data| write_out(buf, data))?;
    UserSlice::new(descriptor, 8)
        .writer()
        .write_slice(&id.to_ne_bytes())?;
    Ok(len as c_long)
}

/// Backend of `lite_receive_message`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_receive_message(
    port: u32,
    buf: UserPtr,
    max_size: u64,
    descriptor: UserPtr,
    flags: u32,
) -> c_long {
    from_result(|| receive_to_user(port, buf, max_size, descriptor, flags))
}

/// Backend of `lite_reply_message`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_reply_message(buf: UserPtr, size: u64, descriptor: u64) -> c_long {
    from_result(|| {
        let (cluster, process) = caller()?;
        cluster
            .rpc
            .reply(&process, descriptor, user_reply(buf, size)?)?;
        Ok(0)
    })
}

/// Backend of `lite_reply_and_receive_message`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_reply_and_receive_message(
    buf: UserPtr,
    size: u64,
    descriptor: u64,
    next: UserPtr,
) -> c_long {
    from_result(|| {
        let args: bindings::lite_receive = read_struct(next)?;
        {
            let (cluster, process) = caller()?;
            cluster
                .rpc
                .reply(&process, descriptor, user_reply(buf, size)?)?;
        }
        let descriptor_field = next
            .checked_add(core::mem::offset_of!(bindings::lite_receive, descriptor))
            .ok_or(EFAULT)?;
        let recv_buf = UserPtr::try_from(args.buf).map_err(|_| EFAULT)?;
        receive_to_user(
            args.port,
            recv_buf,
            args.max_size,
            descriptor_field,
            args.flags,
        )
    })
}

/// Backend of `lite_send_reply_multicast`.
#[no_mangle]
pub(crate) extern "C" fn lite_rs_send_reply_multicast(call: UserPtr) -> c_long {
    from_result(|| {
        let cluster = node()?.cluster()?;
        let args: bindings::lite_multicast = read_struct(call)?;
        let to_ptr = |v: u64| UserPtr::try_from(v).map_err(|_| EFAULT);
        let (nodes_ptr, lengths_ptr, msg, size) = (args.nodes, args.lengths, args.msg, args.size);
        let (replies, max_reply, count, port_priority) =
            (args.replies, args.max_reply, args.count, args.port_priority);
        let count = count as usize;
        if count == 0 || count > MAX_NODES {
            return Err(EINVAL);
        }
        let target = caller_target(&cluster, port_priority)?;
        if target.nonblocking {
            return Err(EINVAL);
        }
        let room = reply_room(to_ptr(replies)?, max_reply)?;
        // Every reply slot of the output must be addressable.
        (count as u64)
            .checked_mul(max_reply)
            .and_then(|total| total.checked_add(replies))
            .ok_or(EINVAL)?;
        let mut raw_nodes = KVec::from_elem(0u8, count * 4, GFP_KERNEL)?;
        UserSlice::new(to_ptr(nodes_ptr)?, count * 4)
            .reader()
            .read_slice(&mut raw_nodes)?;
        let mut nodes = KVec::with_capacity(count, GFP_KERNEL)?;
        for raw in raw_nodes.chunks_exact(4) {
            nodes.push(
                NodeId::new(u32::from_ne_bytes([raw[0], raw[1], raw[2], raw[3]])),
                GFP_KERNEL,
            )?;
        }
        // Probe the lengths array before sending anything.
        let lengths = to_ptr(lengths_ptr)?;
        let zeros = KVec::from_elem(0u8, count * 8, GFP_KERNEL)?;
        UserSlice::new(lengths, count * 8)
            .writer()
            .write_slice(&zeros)?;
        // Read once, so that every node gets the same bytes.
        let message = user_message(to_ptr(msg)?, size)?.to_vec()?;
        let results = cluster.rpc.multicast(
            nodes.iter().copied(),
            &target,
            Payload::Kernel(&message),
            room,
        )?;
        let mut replied = 0;
        for (i, result) in results.iter().enumerate() {
            let length = match result {
                Ok(reply) => {
                    let at = replies + i as u64 * max_reply;
                    match write_out(to_ptr(at)?, reply) {
                        Ok(()) => {
                            replied += 1;
                            reply.len() as i64
                        }
                        Err(e) => i64::from(e.to_errno()),
                    }
                }
                Err(e) => i64::from(e.to_errno()),
            };
            UserSlice::new(lengths + i * 8, 8)
                .writer()
                .write_slice(&length.to_ne_bytes())?;
        }
        Ok(replied)
    })
}

/// Arms the RPC fault injection of `lite_debugfs.c`: the next request this
/// node posts to `node` breaks its ring on the server (0 disarms).
/// `-EINVAL` for a node id out of range, `-EPERM` without `CAP_NET_ADMIN`.
#[cfg(CONFIG_LITE_FAULT_INJECTION)]
#[no_mangle]
pub(crate) extern "C" fn lite_rs_rpc_fault_next(node: u64) -> core::ffi::c_int {
    from_result(|| {
        if !crate::sys::cred::may_administer() {
            return Err(EPERM);
        }
        let node = u32::try_from(node)
            .ok()
            .filter(|&n| (n as usize) < MAX_NODES)
            .ok_or(EINVAL)?;
        crate::internal::rpc::fault_injection::inject_bad_header(NodeId::new(node));
        Ok(0)
    })
}
