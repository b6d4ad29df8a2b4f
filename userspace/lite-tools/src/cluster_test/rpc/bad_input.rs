//! Invalid arguments to every call, each with its exact errno.

use libc::{EADDRINUSE, EFAULT, EHOSTUNREACH, EINVAL};

use super::*;
use crate::cluster_test::io::check_errnos;
use crate::cluster_test::INVALID_PRIORITY;

pub(super) fn bad_input<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node) {
    let (me, nodes) = (at.me, at.nodes);
    let long_name = "n".repeat(MAX_PORT_NAME + 1);
    let (big, long) = (MAX_MESSAGE_SIZE + 1, MAX_PORT_NAME + 1);
    // Each registration that must fail: what is wrong, (port, max size,
    // name) and the errno.
    let mut refused = |what: &str, (port, max, name): (u32, u64, &str), errno| {
        let ret = register(kernel, port, max, name);
        if ret == 0 && port != SERVICE_PORT {
            kernel.unregister_application(port);
        }
        check_errno(tap, &format!("register_application of {what}"), ret, errno);
    };
    let what = format!("port {MAX_PORTS} (>= LITE_MAX_PORTS)");
    refused(&what, (MAX_PORTS, 64, "x"), EINVAL);
    refused("port 1000", (1000, 64, "x"), EINVAL);
    refused("max size 0", (UNUSED_PORT, 0, "x"), EINVAL);
    let what = format!("max size {big} (over LITE_MAX_MESSAGE_SIZE)");
    refused(&what, (UNUSED_PORT, big, "x"), EINVAL);
    let what = format!("a {long} B name (over LITE_MAX_PORT_NAME)");
    refused(&what, (UNUSED_PORT, 64, &long_name), EINVAL);
    let what = format!("port {SERVICE_PORT} (already registered)");
    refused(&what, (SERVICE_PORT, 64, "x"), EADDRINUSE);
    // SAFETY: a null name must be rejected without being read.
    let ret = unsafe { kernel.register_application(UNUSED_PORT, 64, ptr::null(), 4) };
    if ret == 0 {
        kernel.unregister_application(UNUSED_PORT);
    }
    let what = "register_application with a NULL name of 4 B";
    check_errno(tap, what, ret, EFAULT);
    check_errnos! { tap, "unregister_application";
        format!("(port {MAX_PORTS})") => kernel.unregister_application(MAX_PORTS), EINVAL;
        format!("(port {UNUSED_PORT}), never registered,") =>
            kernel.unregister_application(UNUSED_PORT), libc::ENOENT;
    }

    // Calls, sends and lookups aimed at nodes and ports that cannot be.
    let absent = MAX_NODES - 1;
    let service = format!("port {SERVICE_PORT} of node");
    let too_large = format!("port {MAX_PORTS} (>= LITE_MAX_PORTS) of node {me}");
    let never = format!("{service} 0 (never a member)");
    let beyond = format!("{service} {MAX_NODES} (>= LITE_MAX_NODES)");
    let mut targets = vec![
        (too_large, me, MAX_PORTS, EINVAL),
        (never, 0, SERVICE_PORT, EHOSTUNREACH),
        (beyond, MAX_NODES, SERVICE_PORT, EINVAL),
    ];
    let unreachable = format!("{service} {absent} (not in the cluster)");
    if nodes < absent {
        targets.push((unreachable, absent, SERVICE_PORT, EHOSTUNREACH));
    } else {
        for call in ["query_port", "send_reply_imm", "send"] {
            let point = format!("{call} to {unreachable}");
            tap.skip(&point, "the cluster is large enough to include it");
        }
    }
    let mut answer = [0u8; 16];
    for (what, node, port, errno) in targets {
        let ret = kernel.query_port(node, port);
        check_errno(tap, &format!("query_port of {what}"), ret, errno);
        let ret = call(kernel, node, port, b"hello", &mut answer);
        check_errno(tap, &format!("send_reply_imm to {what}"), ret, errno);
        let ret = send(kernel, node, port, b"hello", false);
        check_errno(tap, &format!("send to {what}"), ret, errno);
    }

    let service = |priority| port_priority(SERVICE_PORT, priority);
    let to_me = format!("to port {SERVICE_PORT} of node {me}");
    let invalid = format!("with priority {INVALID_PRIORITY}");
    let imm = |what: &str| format!("send_reply_imm {to_me} {what}");
    let sent = |what: &str| format!("send {to_me} {what}");
    let (none, invalid_priority) = (service(PRIORITY_NONE), service(INVALID_PRIORITY));
    check_errnos! { tap, "";
        imm(&invalid) => call(kernel, me, invalid_priority, b"hello", &mut answer), EINVAL;
        imm("of 0 B") => call(kernel, me, none, &[], &mut answer), EINVAL;
    }
    let unmapped: *mut c_void = ptr::without_provenance_mut(8);
    let reply = answer.as_mut_ptr().cast::<c_void>();
    let hello = b"hello".as_ptr().cast::<c_void>();
    // SAFETY (every unsafe call below): each buffer is live for the length
    // given, or is null or address 8 (never mapped), which the kernel must
    // reject without touching.
    check_errnos! { tap, "";
        imm("from unmapped address 0x8") =>
            unsafe { kernel.send_reply_imm(me, SERVICE_PORT, unmapped, 16, reply, 16) }, EFAULT;
        imm("with its reply to unmapped address 0x8") =>
            unsafe { kernel.send_reply_imm(me, SERVICE_PORT, hello, 5, unmapped, 16) }, EFAULT;
        imm("with a NULL request of 16 B") =>
            unsafe { kernel.send_reply_imm(me, SERVICE_PORT, ptr::null(), 16, reply, 16) }, EFAULT;
        sent(&invalid) => unsafe { kernel.send(me, invalid_priority, hello, 2) }, EINVAL;
        sent("of 0 B") => unsafe { kernel.send(me, SERVICE_PORT, hello, 0) }, EINVAL;
        sent("from unmapped address 0x8") =>
            unsafe { kernel.send(me, SERVICE_PORT, unmapped, 16) }, EFAULT;
        format!("receive_message on port {MAX_PORTS} (>= LITE_MAX_PORTS)") =>
            receive(kernel, MAX_PORTS, &mut [0u8; 16], RECV_NONBLOCK).0, EINVAL;
    }

    bad_multicasts(kernel, tap, me);
    bad_remote_buffers(kernel, tap, at);
}

/// Unreadable requests and unwritable reply buffers of calls to another
/// node, inline and staged: the kernel copies them straight between the
/// caller's memory and the device's buffers, and must fail with -EFAULT and
/// leave the call's reply slot and the server's ring usable.
fn bad_remote_buffers<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node) {
    let (me, nodes) = (at.me, at.nodes);
    if nodes < 2 {
        return;
    }
    let peer = me % nodes + 1;
    let unmapped: *mut c_void = ptr::without_provenance_mut(8);
    for size in [16usize, 4096, 65536] {
        let request = vec![0x3cu8; size];
        let mut answer = vec![0u8; size];
        let (reply, len) = (answer.as_mut_ptr().cast(), size as u64);
        let what = format!("node {me} -> node {peer}: send_reply_imm of {size} B");
        // SAFETY: address 8 is never mapped; `answer` is writable.
        let ret = unsafe { kernel.send_reply_imm(peer, SERVICE_PORT, unmapped, len, reply, len) };
        let point = format!("{what} from unmapped address 0x8");
        check_errno(tap, &point, ret, EFAULT);
        let request_at = request.as_ptr().cast();
        // SAFETY: the request is readable; address 8 is never mapped.
        let ret =
            unsafe { kernel.send_reply_imm(peer, SERVICE_PORT, request_at, len, unmapped, len) };
        let point = format!("{what} with its reply to unmapped address 0x8");
        check_errno(tap, &point, ret, EFAULT);
        let point = format!(
            "node {me} -> node {peer}: after those, an RPC of {size} B gets the transformed reply"
        );
        let served = transformed_call(kernel, peer, SERVICE_PORT, &request);
        tap.check(&point, served);
    }
}

fn bad_multicasts<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, me: u32) {
    let targets = vec![me; MAX_NODES as usize + 1];
    let mut lengths = vec![0i64; targets.len()];
    let mut replies = vec![0u8; 16 * targets.len()];
    let request = *b"hello";
    let buffers = (&mut lengths[..], &mut replies[..]);
    let valid = LiteMulticast {
        count: 1,
        ..multicast_args(&targets, &request, buffers, 16, SERVICE_PORT)
    };
    let mut refused = |what: &str, mut args: LiteMulticast, errno| {
        // SAFETY: every pointer in `args` is a live buffer at least as long
        // as `valid` describes, or an address the kernel must reject.
        let ret = unsafe { kernel.send_reply_multicast(&mut args) };
        let point = format!("node {me}: send_reply_multicast with {what}");
        check_errno(tap, &point, ret, errno);
    };
    refused("count 0", LiteMulticast { count: 0, ..valid }, EINVAL);
    let count = MAX_NODES + 1;
    let what = format!("count {count} (over LITE_MAX_NODES)");
    refused(&what, LiteMulticast { count, ..valid }, EINVAL);
    let what = format!("port {MAX_PORTS} (>= LITE_MAX_PORTS)");
    let args = LiteMulticast {
        port_priority: MAX_PORTS,
        ..valid
    };
    refused(&what, args, EINVAL);
    let what = "a request of 0 B";
    refused(what, LiteMulticast { size: 0, ..valid }, EINVAL);
    let what = "the node list at unmapped address 0x8";
    refused(what, LiteMulticast { nodes: 8, ..valid }, EFAULT);
    let what = "the request at unmapped address 0x8";
    refused(what, LiteMulticast { msg: 8, ..valid }, EFAULT);
    // SAFETY: a null argument must be rejected without being read.
    let ret = unsafe { kernel.send_reply_multicast(ptr::null_mut()) };
    let what = format!("node {me}: send_reply_multicast with a NULL argument");
    check_errno(tap, &what, ret, libc::EFAULT);
}
