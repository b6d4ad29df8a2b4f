//! Sharing by name across nodes: wrap_alloc + ask_lmr, restricted
//! permissions, unmapping, revocation and registered user memory, every
//! phase on every node at the same time.

use std::ffi::c_void;
use std::io::Write;

use libc::EPERM;
use lite::sys::{PERM_READ, PERM_SHARE, PERM_WRITE};

use super::io::{
    barrier, check_errno, check_handle, check_zero, expect_async_read_errno,
    expect_async_write_errno, name_of, publish, read_at, read_vec, write_at, write_ok, InStep,
    UserPages,
};
use super::{password_of, Node};
use crate::errno::{errno_name, expect_errno, expect_zero};
use crate::kernel::{Kernel, Region};
use crate::pattern;
use crate::plan::{next_node, previous_node};
use crate::tap::Tap;

/// The permissions of the buffers registered here.
const PERM_ALL: u64 = PERM_READ | PERM_WRITE | PERM_SHARE;

const WRAP: u16 = 0x5752;
const READ_ONLY: u16 = 0x524f;
const WRITE_ONLY: u16 = 0x574f;
const READ_WRITE: u16 = 0x5257;
const REVOKE_ALLOC: u16 = 0x5241;
const REVOKE_REG: u16 = 0x5252;
const REG_ALIGNED: u16 = 0x4741;
const REG_UNALIGNED: u16 = 0x4755;

/// Bytes of wrapped or registered data before the stamp slots.
const DATA_LEN: usize = 65536;
/// One stamp slot per node id, after the data.
const SLOT: usize = 64;
const STAMP: usize = 16;
const SLOTS_LEN: usize = SLOT * 64;

fn stamp(writer: u32, owner: u32, kind: u16) -> Vec<u8> {
    let mut data = vec![0u8; STAMP];
    let seed = pattern::seed(&[u64::from(writer), u64::from(owner), u64::from(kind), 0x57a3]);
    pattern::fill(seed, 0, &mut data);
    data
}

fn data_seed(owner: u32, kind: u16) -> u64 {
    pattern::seed(&[u64::from(owner), u64::from(kind)])
}

/// An LMR with data and stamp slots after `writers` stamped it.
fn expected_with_stamps(owner: u32, kind: u16, len: usize, writers: &[u32]) -> Vec<u8> {
    let mut expected = vec![0u8; len];
    pattern::fill(data_seed(owner, kind), 0, &mut expected);
    for &writer in writers {
        let at = DATA_LEN + SLOT * writer as usize;
        expected[at..at + STAMP].copy_from_slice(&stamp(writer, owner, kind));
    }
    expected
}

pub(super) fn run<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node) -> InStep {
    wrapped_names(kernel, tap, at)?;
    permissions(kernel, tap, at)?;
    revocation(kernel, tap, at)?;
    registered_memory(kernel, tap, at)
}

/// The point `at("<what> returns -ERRNO")`.
fn check_errno_at<W: Write>(
    tap: &mut Tap<W>,
    at: &impl Fn(&str) -> String,
    what: &str,
    ret: libc::c_long,
    errno: i32,
) -> bool {
    let point = at(&format!("{what} returns -{}", errno_name(errno)));
    tap.check(&point, expect_errno(ret, errno))
}

fn all_nodes(nodes: u32) -> Vec<u32> {
    (1..=nodes).collect()
}

fn reads_back<K: Kernel>(kernel: &K, handle: u64, pw: u64, expected: &[u8]) -> Result<(), String> {
    let back = read_vec(kernel, handle, 0, expected.len(), pw)?;
    pattern::verify_bytes(&back, expected, 0).map_err(|m| m.to_string())
}

fn reads_pattern<K: Kernel>(
    kernel: &K,
    handle: u64,
    len: usize,
    pw: u64,
    seed: u64,
) -> Result<(), String> {
    let back = read_vec(kernel, handle, 0, len, pw)?;
    pattern::verify(seed, 0, &back).map_err(|m| m.to_string())
}

fn wrapped_names<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node) -> InStep {
    let (me, nodes, password) = (at.me, at.nodes, at.password);
    let len = DATA_LEN + SLOTS_LEN;
    let mut data = vec![0u8; len];
    pattern::fill(data_seed(me, WRAP), 0, &mut data);
    let name = name_of(WRAP, me);
    // SAFETY: `data` is readable for `len` bytes.
    let ret = unsafe { kernel.wrap_alloc(data.as_ptr().cast(), len as u64, name, password) };
    let point = format!("node {me}: wrap_alloc of {len} B under name {name:#x} returns a handle");
    let handle = check_handle(tap, &point, ret);
    let point = format!("node {me}: the wrapped LMR holds a copy of the data");
    tap.check(&point, reads_back(kernel, handle, password, &data));
    // SAFETY: as above.
    let again = unsafe { kernel.wrap_alloc(data.as_ptr().cast(), 16, name, password) };
    if again > 0 {
        kernel.free(again.unsigned_abs());
    }
    let what = format!("node {me}: wrap_alloc under the same name again");
    check_errno(tap, &what, again, libc::EEXIST);
    barrier(kernel, tap, nodes, "publishing the wrapped names")?;

    for owner in all_nodes(nodes) {
        let (owner_name, owner_pw) = (name_of(WRAP, owner), password_of(owner));
        let ret = kernel.ask_lmr(owner, owner_name, PERM_READ, owner_pw ^ 0x55);
        let what = format!("node {me}: ask_lmr(node {owner}, wrapped name) with a wrong password");
        check_errno(tap, &what, ret, libc::EACCES);
        let ret = kernel.ask_lmr(owner, name_of(WRAP + 1, owner), PERM_READ, owner_pw);
        let what = format!("node {me}: ask_lmr(node {owner}) of an unpublished name");
        check_errno(tap, &what, ret, libc::ENOENT);
        let ret = kernel.ask_lmr(owner, owner_name, PERM_READ | PERM_WRITE, owner_pw);
        let point =
            format!("node {me}: ask_lmr(node {owner}, wrapped name, READ|WRITE) returns a handle");
        let mapping = check_handle(tap, &point, ret);
        let point =
            format!("node {me}: node {owner}'s wrapped data reads back through the mapping");
        let seed = data_seed(owner, WRAP);
        let read = reads_pattern(kernel, mapping, DATA_LEN, owner_pw, seed);
        tap.check(&point, read);
        let offset = (DATA_LEN + SLOT * me as usize) as u64;
        let point =
            format!("node {me}: write into node {owner}'s wrapped LMR (WRITE granted) returns 0");
        let mine = stamp(me, owner, WRAP);
        tap.check(&point, write_ok(kernel, mapping, offset, &mine, owner_pw));
        let point =
            format!("node {me}: umap_lmr of the mapping of node {owner}'s wrapped LMR returns 0");
        check_zero(tap, &point, kernel.umap_lmr(mapping));
        let ret = read_at(kernel, mapping, 0, &mut [0u8; 16], owner_pw);
        let what = format!("node {me}: read through the unmapped handle of node {owner}'s LMR");
        check_errno(tap, &what, ret, libc::EBADF);
        let what = format!("node {me}: umap_lmr of node {owner}'s LMR again");
        check_errno(tap, &what, kernel.umap_lmr(mapping), libc::EBADF);
    }
    let after = "every node wrote into every wrapped LMR";
    barrier(kernel, tap, nodes, after)?;

    let expected = expected_with_stamps(me, WRAP, len, &all_nodes(nodes));
    let point = format!(
        "node {me}: the wrapped LMR holds the writes of nodes 1..={nodes} and nothing else changed"
    );
    tap.check(&point, reads_back(kernel, handle, password, &expected));
    let point = format!("node {me}: free of the wrapped LMR returns 0");
    check_zero(tap, &point, kernel.free(handle));
    Ok(())
}

const PERM_LMR_SIZE: usize = 8192;

fn permissions<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node) -> InStep {
    let (me, nodes, password) = (at.me, at.nodes, at.password);
    let next = next_node(me, nodes);
    let seed = pattern::seed(&[u64::from(me), 0x9e53]);
    let lmr = Region::alloc(kernel, next, PERM_LMR_SIZE as u64, 0, password);
    let handle = lmr.as_ref().map_or(0, Region::handle);
    let mut contents = vec![0u8; PERM_LMR_SIZE];
    pattern::fill(seed, 0, &mut contents);
    let filled = lmr.as_ref().map_err(Clone::clone).map(Region::handle);
    let filled = filled.and_then(|lmr| write_ok(kernel, lmr, 0, &contents, password));
    tap.check(
        &format!("node {me}: {PERM_LMR_SIZE} B LMR on node {next} to publish with restricted permissions allocated and filled"),
        filled,
    );
    for (kind, perms, what) in [
        (READ_ONLY, PERM_READ, "READ"),
        (WRITE_ONLY, PERM_WRITE, "WRITE"),
        (READ_WRITE, PERM_READ | PERM_WRITE, "READ|WRITE"),
    ] {
        let point = format!("node {me}: add_ask_mr_table granting {what} returns 0");
        let ret = kernel.add_ask_mr_table(name_of(kind, me), handle, perms, password);
        check_zero(tap, &point, ret);
    }
    let what = format!("node {me}: add_ask_mr_table of a name already published");
    let ret = kernel.add_ask_mr_table(name_of(READ_ONLY, me), handle, PERM_READ, password);
    check_errno(tap, &what, ret, libc::EEXIST);
    // Publishing needs SHARE: a registration made without it.
    let outcome = UserPages::new(4096).and_then(|pages| {
        // SAFETY: the pages stay mapped until deregistered below.
        let ret = unsafe { pages.register(kernel, (0, 4096), PERM_READ | PERM_WRITE, password) };
        let registered = super::io::handle_of(ret, "register_lmr")?;
        let name = name_of(0x4e53, me);
        let published = kernel.add_ask_mr_table(name, registered, PERM_READ, password);
        let deregistered = kernel.deregister_lmr(registered);
        expect_errno(published, libc::EPERM)?;
        expect_zero(deregistered).map_err(|e| format!("deregister: {e}"))
    });
    let point =
        format!("node {me}: add_ask_mr_table of an LMR registered without SHARE returns -EPERM");
    tap.check(&point, outcome);
    barrier(kernel, tap, nodes, "publishing the restricted names")?;

    // Use the names of the previous node in the ring, so that every
    // owner has exactly one other user.
    let owner = previous_node(me, nodes);
    let pw = password_of(owner);
    let at = |what: &str| format!("node {me}: {what} (names of node {owner})");
    let mut buf = vec![0u8; 16];
    let scratch = buf.as_mut_ptr().cast::<c_void>();
    let ask = |kind, perms| kernel.ask_lmr(owner, name_of(kind, owner), perms, pw);

    let ret = ask(READ_ONLY, PERM_WRITE);
    let what = "ask_lmr asking only WRITE of a READ-only name";
    check_errno_at(tap, &at, what, ret, EPERM);
    let point = at("ask_lmr asking READ|WRITE of a READ-only name returns a handle");
    let ro = check_handle(tap, &point, ask(READ_ONLY, PERM_READ | PERM_WRITE));
    let owner_seed = pattern::seed(&[u64::from(owner), 0x9e53]);
    let point = at("read through the READ-only mapping works");
    let read = reads_pattern(kernel, ro, PERM_LMR_SIZE, pw, owner_seed);
    tap.check(&point, read);
    let mut denied = |what: &str, ret| check_errno_at(tap, &at, what, ret, EPERM);
    let ret = write_at(kernel, ro, 0, &[1u8; 16], pw);
    denied("rdma_write without WRITE", ret);
    let outcome = expect_async_write_errno(kernel, ro, scratch, 16, 0, pw, EPERM);
    let point = at("rdma_write_async without WRITE fails with -EPERM");
    tap.check(&point, outcome);
    let mut denied = |what: &str, ret| check_errno_at(tap, &at, what, ret, EPERM);
    let ret = kernel.remote_memset(ro, 0, 16, 1);
    denied("remote_memset without WRITE", ret);
    let ret = kernel.memcpy(ro, 0, ro, 4096, 16);
    denied("memcpy to a destination without WRITE", ret);
    let ret = kernel.memmove(ro, 0, ro, 8, 16);
    denied("memmove to a destination without WRITE", ret);
    denied("free of a mapping (no ADMIN)", kernel.free(ro));
    let ret = kernel.deregister_lmr(ro);
    denied("deregister_lmr of a mapping (no ADMIN)", ret);
    let ret = kernel.add_ask_mr_table(name_of(0x4d41, me), ro, PERM_READ, pw);
    check_errno_at(tap, &at, "add_ask_mr_table of a mapping", ret, libc::EINVAL);

    let point = at("ask_lmr asking READ|WRITE of a WRITE-only name returns a handle");
    let wo = check_handle(tap, &point, ask(WRITE_ONLY, PERM_READ | PERM_WRITE));
    let ret = read_at(kernel, wo, 0, &mut [0u8; 16], pw);
    check_errno_at(tap, &at, "rdma_read without READ", ret, EPERM);
    let outcome = expect_async_read_errno(kernel, wo, scratch, 16, 0, pw, EPERM);
    let point = at("rdma_read_async without READ fails with -EPERM");
    tap.check(&point, outcome);
    let ret = kernel.memcpy(wo, 0, wo, 4096, 16);
    check_errno_at(tap, &at, "memcpy from a source without READ", ret, EPERM);
    let written = stamp(me, owner, WRITE_ONLY);
    let point = at("rdma_write through the WRITE-only mapping returns 0");
    tap.check(&point, write_ok(kernel, wo, 0, &written, pw));
    let point = at("ask_lmr asking READ|WRITE|SHARE of a READ|WRITE name returns a handle");
    let rw = check_handle(tap, &point, ask(READ_WRITE, PERM_ALL));
    let point = at("the READ|WRITE mapping sees the write made through the WRITE-only one");
    tap.check(&point, reads_back(kernel, rw, pw, &written));
    let point = at("remote_memset through the READ|WRITE mapping returns 0");
    check_zero(tap, &point, kernel.remote_memset(rw, 4096, 16, 0x77));
    for (handle, what) in [(ro, "READ-only"), (wo, "WRITE-only"), (rw, "READ|WRITE")] {
        let point = at(&format!("umap_lmr of the {what} mapping returns 0"));
        check_zero(tap, &point, kernel.umap_lmr(handle));
    }
    barrier(kernel, tap, nodes, "using the restricted mappings")?;

    pattern::fill(seed, 0, &mut contents);
    // The node after this one uses its names.
    contents[..STAMP].copy_from_slice(&stamp(next, me, WRITE_ONLY));
    contents[4096..4096 + 16].fill(0x77);
    let point = format!("node {me}: the restricted LMR holds only the permitted writes");
    tap.check(&point, reads_back(kernel, handle, password, &contents));
    let point = format!("node {me}: free of the restricted LMR returns 0");
    tap.check(&point, lmr.and_then(Region::free));
    Ok(())
}

/// `register_lmr` of `len` bytes at `start` of `pages` with every
/// permission; -ENOMEM when the pages could not be mapped.
fn register_all<K: Kernel>(
    kernel: &K,
    pages: &Result<UserPages, String>,
    (start, len): (usize, usize),
    pw: u64,
) -> libc::c_long {
    match pages {
        // SAFETY: the callers deregister before dropping the pages.
        Ok(pages) => unsafe { pages.register(kernel, (start, len as u64), PERM_ALL, pw) },
        Err(_) => -libc::c_long::from(libc::ENOMEM),
    }
}

fn revocation<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node) -> InStep {
    let (me, nodes, password) = (at.me, at.nodes, at.password);
    let next = next_node(me, nodes);
    let point = format!("node {me}: 65536 B LMR on node {next} to revoke allocated");
    let allocated = check_handle(tap, &point, kernel.alloc_remote(next, 65536, 0, password));
    let pages = UserPages::new(8192);
    let registered = register_all(kernel, &pages, (0, 8192), password);
    let point = format!("node {me}: 8192 B buffer to revoke registered");
    let registered = check_handle(tap, &point, registered);
    let revoked = [
        (REVOKE_ALLOC, allocated, "allocated"),
        (REVOKE_REG, registered, "registered"),
    ];
    for (kind, handle, what) in revoked {
        let point = format!("node {me}: publish the {what} LMR to revoke");
        tap.check(&point, publish(kernel, name_of(kind, me), handle, password));
    }
    // Out of step, the buffer is deregistered before its pages go.
    let deregister = |out_of_step| {
        kernel.deregister_lmr(registered);
        out_of_step
    };
    barrier(kernel, tap, nodes, "publishing the LMRs to revoke").map_err(deregister)?;

    let owner = previous_node(me, nodes);
    let pw = password_of(owner);
    let mut mappings = Vec::new();
    for (kind, _, what) in revoked {
        let point = format!("node {me}: map node {owner}'s {what} LMR to be revoked");
        let ret = kernel.ask_lmr(owner, name_of(kind, owner), PERM_READ | PERM_WRITE, pw);
        let mapping = check_handle(tap, &point, ret);
        let point =
            format!("node {me}: read node {owner}'s {what} LMR before revocation returns 0");
        check_zero(tap, &point, read_at(kernel, mapping, 0, &mut [0u8; 16], pw));
        mappings.push((kind, mapping, what));
    }
    barrier(kernel, tap, nodes, "mapping the LMRs to revoke").map_err(deregister)?;

    let point = format!("node {me}: free of the published allocated LMR returns 0");
    check_zero(tap, &point, kernel.free(allocated));
    let point = format!("node {me}: deregister_lmr of the published registered LMR returns 0");
    check_zero(tap, &point, kernel.deregister_lmr(registered));
    barrier(kernel, tap, nodes, "revoking the published LMRs")?;

    for (kind, mapping, what) in mappings {
        let at = |check: &str| format!("node {me}: {check} on node {owner}'s revoked {what} LMR");
        let mut buf = vec![0u8; 16];
        let scratch = buf.as_mut_ptr().cast::<c_void>();
        let mut revoked = |call: &str, ret| check_errno_at(tap, &at, call, ret, libc::EKEYREVOKED);
        revoked("rdma_read", read_at(kernel, mapping, 0, &mut [0u8; 16], pw));
        revoked("rdma_write", write_at(kernel, mapping, 0, &[0u8; 16], pw));
        revoked("remote_memset", kernel.remote_memset(mapping, 0, 16, 1));
        let revoked = libc::EKEYREVOKED;
        let outcome = expect_async_read_errno(kernel, mapping, scratch, 16, 0, pw, revoked);
        tap.check(&at("rdma_read_async fails with -EKEYREVOKED"), outcome);
        let ret = kernel.ask_lmr(owner, name_of(kind, owner), PERM_READ, pw);
        check_errno_at(tap, &at, "ask_lmr of its name", ret, libc::ENOENT);
        check_zero(tap, &at("umap_lmr returns 0"), kernel.umap_lmr(mapping));
        let ret = read_at(kernel, mapping, 0, &mut [0u8; 16], pw);
        check_errno_at(tap, &at, "rdma_read after umap", ret, libc::EBADF);
    }
    let what = format!("node {me}: free of the revoked allocated LMR again");
    check_errno(tap, &what, kernel.free(allocated), libc::EBADF);
    let what = format!("node {me}: deregister_lmr of the revoked registered LMR again");
    check_errno(tap, &what, kernel.deregister_lmr(registered), libc::EBADF);
    drop(pages);
    Ok(())
}

fn registered_memory<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node) -> InStep {
    let (me, nodes, password) = (at.me, at.nodes, at.password);
    let len = DATA_LEN + SLOTS_LEN;
    // (kind, what, offset into the mapping): page aligned, and unaligned.
    let layouts = [
        (REG_ALIGNED, "page-aligned", 0usize),
        (REG_UNALIGNED, "unaligned", 100usize),
    ];
    let mut buffers = Vec::new();
    for (kind, what, start) in layouts {
        let pages = UserPages::new(start + len);
        if let Ok(pages) = &pages {
            let mut data = vec![0u8; len];
            pattern::fill(data_seed(me, kind), 0, &mut data);
            pages.store(start, &data);
        }
        let handle = register_all(kernel, &pages, (start, len), password);
        let point = format!("node {me}: register_lmr of a {what} {len} B buffer returns a handle");
        let handle = check_handle(tap, &point, handle);
        let point = format!("node {me}: publish the {what} registered buffer");
        tap.check(&point, publish(kernel, name_of(kind, me), handle, password));
        buffers.push((kind, what, start, pages, handle));
    }
    // Out of step, the buffers are deregistered before their pages go.
    let deregister = |out_of_step| {
        for (.., handle) in &buffers {
            kernel.deregister_lmr(*handle);
        }
        out_of_step
    };
    let after = "registering and publishing user buffers";
    barrier(kernel, tap, nodes, after).map_err(deregister)?;

    for owner in all_nodes(nodes) {
        let pw = password_of(owner);
        for (kind, what, _) in layouts {
            let mapping = kernel.ask_lmr(owner, name_of(kind, owner), PERM_READ | PERM_WRITE, pw);
            let offset = (DATA_LEN + SLOT * me as usize) as u64;
            let outcome = super::io::handle_of(mapping, "ask_lmr").and_then(|mapping| {
                let back = read_vec(kernel, mapping, 0, DATA_LEN, pw);
                let written = write_ok(kernel, mapping, offset, &stamp(me, owner, kind), pw);
                let unmapped = expect_zero(kernel.umap_lmr(mapping));
                pattern::verify(data_seed(owner, kind), 0, &back?).map_err(|m| m.to_string())?;
                written?;
                unmapped.map_err(|e| format!("umap: {e}"))
            });
            tap.check(
                &format!("node {me}: node {owner}'s {what} registered buffer mapped, read, written and unmapped"),
                outcome,
            );
        }
    }
    let after = "every node wrote into every registered buffer";
    barrier(kernel, tap, nodes, after).map_err(deregister)?;

    for (kind, what, start, pages, handle) in buffers {
        let expected = expected_with_stamps(me, kind, len, &all_nodes(nodes));
        let outcome = match &pages {
            Ok(pages) => pattern::verify_bytes(&pages.load(start, len), &expected, 0)
                .map_err(|m| m.to_string()),
            Err(e) => Err(e.clone()),
        };
        let point =
            format!("node {me}: its own {what} buffer shows the writes of nodes 1..={nodes}");
        tap.check(&point, outcome);
        let point = format!("node {me}: deregister_lmr of the {what} buffer returns 0");
        check_zero(tap, &point, kernel.deregister_lmr(handle));
        drop(pages);
    }
    Ok(())
}
