//! remote_memset, memcpy/memmove, asynchronous I/O, the large spread LMR,
//! statistics, and bad input to every new call. None of these needs the
//! other nodes' cooperation, so there are no barriers here.

use std::ffi::c_void;
use std::io::Write;
use std::ptr;
use std::time::Duration;

use libc::{EACCES, EBADF, EFAULT, EINVAL, ENOENT};
use lite::sys::{
    LiteStats, ASYNC_NOWAIT, CHUNK_SIZE, MAX_ASYNC_SIZE, MAX_REGISTER_SIZE, NODE_SPREAD, PERM_READ,
    PRIORITY_NONE,
};

use super::io::{
    check_each, check_errno, check_errnos, check_free, check_zero, expect_async_read_errno,
    expect_async_write_errno, handle_of, name_of, own_counters, read_at, read_vec, stats,
    unchanged, unless, write_ok, UserPages,
};
use super::{target_name, Node, UNKNOWN_HANDLE};
use crate::deadline::{retry_while_busy, Deadline, Retried};
use crate::errno::{describe_result, expect_zero};
use crate::kernel::{Kernel, Region};
use crate::pattern;
use crate::plan::next_node;
use crate::tap::Tap;

const POLL_LIMIT: Duration = Duration::from_secs(10);

const POLL_PAUSE: Duration = Duration::from_micros(200);

const KIB: u64 = 1024;

/// Size of the LMRs memset and the copies work on: two chunks.
const OPS_LMR_SIZE: u64 = CHUNK_SIZE + 256 * KIB;
/// Start of the window (around the chunk boundary) the checks mirror.
const WINDOW_START: u64 = CHUNK_SIZE - 256 * KIB;
const WINDOW_LEN: u64 = OPS_LMR_SIZE - WINDOW_START;

pub const LARGE_SPREAD_SIZE: u64 = 256 << 20;

/// An LMR with a local copy of what its window should hold.
struct Mirrored<'k, K: Kernel> {
    lmr: Region<'k, K>,
    expected: Vec<u8>,
    label: String,
    password: u64,
}

impl<'k, K: Kernel> Mirrored<'k, K> {
    fn new(kernel: &'k K, target: u32, me: u32, password: u64) -> Result<Self, String> {
        let lmr = Region::alloc(kernel, target, OPS_LMR_SIZE, 0, password)?;
        let seed = pattern::seed(&[u64::from(me), u64::from(target), 0x0905]);
        let mut expected = vec![0u8; WINDOW_LEN as usize];
        pattern::fill(seed, WINDOW_START, &mut expected);
        lmr.write(WINDOW_START, &expected, PRIORITY_NONE)?;
        Ok(Mirrored {
            lmr,
            expected,
            label: target_name(me, target),
            password,
        })
    }

    fn handle(&self) -> u64 {
        self.lmr.handle()
    }

    fn window(&mut self, offset: u64, len: u64) -> &mut [u8] {
        let start = (offset - WINDOW_START) as usize;
        &mut self.expected[start..start + len as usize]
    }

    /// Reads the whole window back and compares it byte by byte; after a
    /// difference, takes what was found as the new expectation so that
    /// later cases are judged on their own.
    fn verify(&mut self, kernel: &K) -> Result<(), String> {
        let found = read_vec(
            kernel,
            self.handle(),
            WINDOW_START,
            WINDOW_LEN as usize,
            self.password,
        )?;
        let outcome = pattern::verify_bytes(&found, &self.expected, WINDOW_START)
            .map_err(|m| format!("LMR on {}: {m}", self.label));
        self.expected = found;
        outcome
    }
}

pub(super) fn run<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node) {
    let (me, nodes, password) = (at.me, at.nodes, at.password);
    let next = next_node(me, nodes);
    let spread = if nodes > 1 { NODE_SPREAD } else { me };
    let mut lmrs = Vec::new();
    for target in [me, next, spread] {
        let description = format!(
            "node {me}: {OPS_LMR_SIZE} B LMR on {} for memset and copies allocated and filled",
            target_name(me, target)
        );
        let made = Mirrored::new(kernel, target, me, password);
        lmrs.extend(tap.check_value(&description, made));
    }
    if lmrs.len() == 3 {
        memset_cases(kernel, tap, &mut lmrs);
        copy_cases(kernel, tap, &mut lmrs);
    }
    for lmr in lmrs {
        let what = format!("the memset/copy LMR on {} returns 0", lmr.label);
        check_free(tap, me, &what, Some(lmr.lmr));
    }
    async_cases(kernel, tap, at, next);
    stats_cases(kernel, tap, at, next);
    large_spread(kernel, tap, at);
    bad_input(kernel, tap, at, next);
}

fn memset_cases<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, lmrs: &mut [Mirrored<'_, K>]) {
    // (offset, size, byte): across the boundary, a few bytes on it, the
    // first and last byte of the window, all byte values' extremes.
    let fills: [(u64, u64, u32); 5] = [
        (CHUNK_SIZE - 96 * KIB, 160 * KIB, 0x5a),
        (CHUNK_SIZE - 5, 8, 0x00),
        (CHUNK_SIZE - 1, 2, 0xff),
        (WINDOW_START, 1, 0x01),
        (OPS_LMR_SIZE - 3, 3, 0x80),
    ];
    for lmr in lmrs.iter_mut() {
        let outcome = fills.iter().try_for_each(|&(offset, size, byte)| {
            let ret = kernel.remote_memset(lmr.handle(), offset, size, byte);
            expect_zero(ret).map_err(|e| format!("memset({offset}, {size}, {byte:#x}): {e}"))?;
            lmr.window(offset, size).fill(byte as u8);
            Ok(())
        });
        let ret = kernel.remote_memset(lmr.handle(), CHUNK_SIZE, 0, 0x33);
        let outcome = outcome
            .and_then(|()| expect_zero(ret).map_err(|e| format!("memset of 0 B: {e}")))
            .and_then(|()| lmr.verify(kernel));
        let point = format!(
            "remote_memset on the LMR on {} with bytes 0x5a, 0x00, 0xff, 0x01, 0x80 \
             across the chunk boundary reads back byte for byte",
            lmr.label
        );
        tap.check(&point, outcome);
    }
}

/// One copy between (or within) the mirrored LMRs, by the call `what`
/// begins with: `len` bytes `from` (LMR index, offset) `to` another.
struct Copy {
    what: &'static str,
    from: (usize, u64),
    to: (usize, u64),
    len: u64,
}

fn copy_cases<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, lmrs: &mut [Mirrored<'_, K>]) {
    let (local, remote, spread) = (0, 1, 2);
    let copies = [
        Copy {
            what: "memcpy from the local LMR to the remote one, across the boundary",
            from: (local, CHUNK_SIZE - 100 * KIB),
            to: (remote, CHUNK_SIZE - 60 * KIB),
            len: 200 * KIB,
        },
        Copy {
            what: "memcpy from the remote LMR to the spread one",
            from: (remote, CHUNK_SIZE - 3),
            to: (spread, CHUNK_SIZE - 130 * KIB + 1),
            len: 128 * KIB + 7,
        },
        Copy {
            what: "memmove from the spread LMR to the local one",
            from: (spread, CHUNK_SIZE - 64 * KIB),
            to: (local, CHUNK_SIZE + 16 * KIB + 3),
            len: 100 * KIB,
        },
        Copy {
            what:
                "memcpy within the remote LMR, non-overlapping, from before to after the boundary",
            from: (remote, CHUNK_SIZE - 250 * KIB),
            to: (remote, CHUNK_SIZE + 10 * KIB),
            len: 50 * KIB,
        },
    ];
    let moves = |index: usize| {
        [
            Copy {
                what: "memmove overlapping upwards (destination above source)",
                from: (index, CHUNK_SIZE - 64 * KIB - 1),
                to: (index, CHUNK_SIZE - 40 * KIB),
                len: 96 * KIB,
            },
            Copy {
                what: "memmove overlapping downwards (destination below source)",
                from: (index, CHUNK_SIZE - 16 * KIB),
                to: (index, CHUNK_SIZE - 48 * KIB + 5),
                len: 96 * KIB,
            },
        ]
    };
    let all = copies
        .into_iter()
        .chain([local, remote, spread].into_iter().flat_map(moves));
    for copy in all {
        let (what, (src, src_offset), (dst, dst_offset), len) =
            (copy.what, copy.from, copy.to, copy.len);
        let call = if what.starts_with("memmove") {
            K::memmove
        } else {
            K::memcpy
        };
        let (src_handle, dst_handle) = (lmrs[src].handle(), lmrs[dst].handle());
        let ret = call(kernel, src_handle, src_offset, dst_handle, dst_offset, len);
        let moved = lmrs[src].window(src_offset, len).to_vec();
        lmrs[dst].window(dst_offset, len).copy_from_slice(&moved);
        let outcome = expect_zero(ret).and_then(|()| lmrs[dst].verify(kernel));
        let within = if src == dst {
            format!(" on {}", lmrs[dst].label)
        } else {
            format!(" ({} -> {})", lmrs[src].label, lmrs[dst].label)
        };
        let point = format!(
            "{what}{within}: {len} B from offset {src_offset} to {dst_offset} reads back byte for byte"
        );
        tap.check(&point, outcome);
    }
    let (a, b) = (lmrs[local].handle(), lmrs[remote].handle());
    check_zero(tap, "memcpy of 0 B returns 0", kernel.memcpy(a, 0, b, 0, 0));
    let ret = kernel.memmove(a, 0, b, 0, 0);
    check_zero(tap, "memmove of 0 B returns 0", ret);
}

/// # Safety
///
/// `buf` must stay in place and untouched until the operation is reaped
/// (or fenced).
unsafe fn start_read<K: Kernel>(
    kernel: &K,
    handle: u64,
    buf: &mut [u8],
    offset: u64,
    password: u64,
) -> libc::c_long {
    let (at, len) = (buf.as_mut_ptr().cast(), buf.len() as u64);
    // SAFETY: as the caller promised.
    unsafe { kernel.rdma_read_async(handle, at, len, offset, PRIORITY_NONE, password) }
}

const IN_FLIGHT: u64 = 32;
const ASYNC_PIECE: u64 = 16 * KIB;

/// The operations started and the first failure.
fn write_pieces_async<K: Kernel>(
    kernel: &K,
    handle: u64,
    data: &[u8],
    base: u64,
    password: u64,
) -> (Vec<u64>, Result<(), String>) {
    let mut ops = Vec::new();
    for (i, piece) in (0..).zip(data.chunks(ASYNC_PIECE as usize)) {
        // SAFETY: the data is taken before the call returns.
        let ret = unsafe {
            kernel.rdma_write_async(
                handle,
                piece.as_ptr().cast(),
                ASYNC_PIECE,
                base + i * ASYNC_PIECE,
                PRIORITY_NONE,
                password,
            )
        };
        if ret <= 0 {
            let failed = format!("write_async {i} returned {}", describe_result(ret));
            return (ops, Err(failed));
        }
        ops.push(ret.unsigned_abs());
    }
    (ops, Ok(()))
}

fn async_cases<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node, target: u32) {
    let (me, password) = (at.me, at.password);
    let description =
        format!("node {me}: {OPS_LMR_SIZE} B LMR on node {target} for asynchronous I/O allocated");
    let Some(lmr) = tap.check_value(
        &description,
        Region::alloc(kernel, target, OPS_LMR_SIZE, 0, password),
    ) else {
        return;
    };
    let handle = lmr.handle();
    let seed = pattern::seed(&[u64::from(me), u64::from(target), 0xa5c]);
    // Pieces run across the chunk boundary.
    let base = CHUNK_SIZE - IN_FLIGHT / 2 * ASYNC_PIECE;
    let offset_of = |i: u64| base + i * ASYNC_PIECE;

    let mut data = vec![0u8; (IN_FLIGHT * ASYNC_PIECE) as usize];
    pattern::fill(seed, base, &mut data);
    let (ops, mut outcome) = write_pieces_async(kernel, handle, &data, base, password);
    for (i, &op) in ops.iter().enumerate() {
        let ret = kernel.async_wait(op, 0);
        if ret != 0 && outcome.is_ok() {
            outcome = Err(format!("async_wait of write {i}: {}", describe_result(ret)));
        }
    }
    let outcome = outcome.and_then(|()| {
        let back = read_vec(kernel, handle, base, data.len(), password)?;
        pattern::verify(seed, base, &back).map_err(|m| format!("read back: {m}"))
    });
    let point =
        format!("{IN_FLIGHT} rdma_write_async of {ASYNC_PIECE} B in flight, each waited for, land");
    tap.check(&point, outcome);

    // Reads in flight: each into its own buffer, checked after its wait.
    let mut buffers = vec![vec![0u8; ASYNC_PIECE as usize]; IN_FLIGHT as usize];
    let mut outcome = Ok(());
    let mut ops = Vec::new();
    for (i, buf) in buffers.iter_mut().enumerate() {
        pattern::poison(seed, offset_of(i as u64), buf);
        // SAFETY: the buffer is neither moved nor touched until reaped below.
        let ret = unsafe { start_read(kernel, handle, buf, offset_of(i as u64), password) };
        if ret <= 0 {
            outcome = Err(format!("read_async {i} returned {}", describe_result(ret)));
            break;
        }
        ops.push(ret.unsigned_abs());
    }
    for (i, &op) in ops.iter().enumerate() {
        let ret = kernel.async_wait(op, 0);
        if ret != 0 && outcome.is_ok() {
            outcome = Err(format!("async_wait of read {i}: {}", describe_result(ret)));
        }
        if outcome.is_ok() {
            outcome = pattern::verify(seed, offset_of(i as u64), &buffers[i])
                .map_err(|m| format!("read {i}: {m}"));
        }
    }
    tap.check(
        &format!("{IN_FLIGHT} rdma_read_async of {ASYNC_PIECE} B in flight deliver the data when waited for"),
        outcome,
    );
    let op = ops.first().copied().unwrap_or(UNKNOWN_HANDLE);
    let what = "async_wait of an already reaped operation";
    check_errno(tap, what, kernel.async_wait(op, 0), libc::EINVAL);

    // Polling.
    let mut buf = vec![0u8; ASYNC_PIECE as usize];
    pattern::poison(seed, base, &mut buf);
    // SAFETY: `buf` stays untouched until the operation is reaped below
    // (or fenced if polling gives up).
    let ret = unsafe { start_read(kernel, handle, &mut buf, base, password) };
    let outcome = if ret > 0 {
        let op = ret.unsigned_abs();
        let done = Deadline::after(POLL_LIMIT, format!("read_async operation {op} to complete"));
        let polled = retry_while_busy(&done, &[libc::EAGAIN], POLL_PAUSE, || {
            kernel.async_wait(op, ASYNC_NOWAIT)
        });
        match polled {
            Ok(Retried { ret, busy }) => expect_zero(ret)
                .map_err(|e| format!("after {} polls: {e}", busy + 1))
                .and_then(|()| pattern::verify(seed, base, &buf).map_err(|m| m.to_string())),
            Err(e) => {
                kernel.fence();
                Err(e)
            }
        }
    } else {
        Err(format!("read_async returned {}", describe_result(ret)))
    };
    tap.check(
        "rdma_read_async polled with LITE_ASYNC_NOWAIT until done (-EAGAIN before) delivers the data",
        outcome,
    );

    // Fence.
    let seed2 = pattern::seed(&[seed, 2]);
    let mut data2 = vec![0u8; (8 * ASYNC_PIECE) as usize];
    pattern::fill(seed2, base, &mut data2);
    let (ops, outcome) = write_pieces_async(kernel, handle, &data2, base, password);
    let fenced = kernel.fence();
    let outcome = outcome
        .and_then(|()| expect_zero(fenced).map_err(|e| format!("fence: {e}")))
        .and_then(|()| {
            let back = read_vec(kernel, handle, base, data2.len(), password)?;
            pattern::verify(seed2, base, &back).map_err(|m| format!("read back: {m}"))
        });
    tap.check(
        "fence after 8 rdma_write_async returns 0 and the data has landed",
        outcome,
    );
    let op = ops.last().copied().unwrap_or(UNKNOWN_HANDLE);
    let what = "async_wait of an operation reaped by fence";
    check_errno(tap, what, kernel.async_wait(op, ASYNC_NOWAIT), libc::EINVAL);
    let ret = kernel.fence();
    check_zero(tap, "fence with nothing outstanding returns 0", ret);
    check_free(tap, me, "the asynchronous I/O LMR returns 0", Some(lmr));
}

fn stats_cases<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node, target: u32) {
    let (me, password) = (at.me, at.password);
    let outcome = (|| -> Result<(), String> {
        let before = stats(kernel)?;
        let lmr = Region::alloc(kernel, target, 4096, 0, password)?;
        let name = name_of(0x57a7, me);
        expect_zero(kernel.add_ask_mr_table(name, lmr.handle(), PERM_READ, password))
            .map_err(|e| format!("add_ask_mr_table: {e}"))?;
        let mapping = handle_of(kernel.ask_lmr(me, name, PERM_READ, password), "ask_lmr")?;
        let pages = UserPages::new(4096)?;
        // SAFETY: the pages stay mapped until deregistered below.
        let ret = unsafe { pages.register(kernel, (0, 4096), PERM_READ, password) };
        let registered = handle_of(ret, "register_lmr")?;
        let during = stats(kernel)?;
        expect_zero(kernel.deregister_lmr(registered)).map_err(|e| format!("deregister: {e}"))?;
        expect_zero(kernel.umap_lmr(mapping)).map_err(|e| format!("umap: {e}"))?;
        lmr.free()?;
        let after = stats(kernel)?;
        let expected = LiteStats {
            lmrs: before.lmrs + 2,
            registrations: before.registrations + 1,
            mappings: before.mappings + 1,
            published_names: before.published_names + 1,
            handles: before.handles + 3,
            ..during
        };
        if during != expected {
            return Err(format!("before {before:?}, with them {during:?}"));
        }
        // Node-wide counters may change through other nodes meanwhile.
        if own_counters(&after) != own_counters(&before) {
            return Err(format!("before {before:?}, after release {after:?}"));
        }
        Ok(())
    })();
    tap.check(
        "get_stats counts this process's LMR, registration, mapping, name and handles, and forgets them when released",
        outcome,
    );
    let mut stats = LiteStats {
        registrations: 0xdead,
        ..LiteStats::default()
    };
    // SAFETY: `stats` is writable for its whole size; the kernel may write 8 B.
    let ret = unsafe { kernel.get_stats(&mut stats, 8) };
    let outcome = expect_zero(ret).and_then(|()| {
        unless(stats.registrations == 0xdead, || {
            format!("wrote past 8 B: {stats:?}")
        })
    });
    tap.check(
        "get_stats with size 8 returns 0 and writes only 8 B",
        outcome,
    );
}

/// Sampled bytes per chunk of the large spread LMR, at four places.
const SAMPLE: u64 = 512;

fn large_spread<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node) {
    let (me, nodes, password) = (at.me, at.nodes, at.password);
    let target = if nodes > 1 { NODE_SPREAD } else { me };
    let size = LARGE_SPREAD_SIZE;
    let label = format!(
        "node {me}: {} MiB LMR on {}",
        size >> 20,
        target_name(me, target)
    );
    let Some(lmr) = tap.check_value(
        &format!("{label} allocated"),
        Region::alloc(kernel, target, size, 0, password),
    ) else {
        return;
    };
    let seed = pattern::seed(&[u64::from(me), size, 0x5bead]);
    let chunks = size / CHUNK_SIZE;
    let samples = |chunk: u64| {
        let start = chunk * CHUNK_SIZE;
        let inside = start + 4096 + (pattern::seed(&[seed, chunk]) % (CHUNK_SIZE - 3 * 4096));
        let mut offsets = vec![start, inside & !7, start + CHUNK_SIZE - SAMPLE];
        if chunk + 1 < chunks {
            // Straddles the boundary to the next chunk.
            offsets.push(start + CHUNK_SIZE - SAMPLE / 2 + 1);
        }
        offsets
    };
    let offsets: Vec<u64> = (0..chunks).flat_map(samples).collect();
    let mut buf = vec![0u8; SAMPLE as usize];
    let mut written_sum = 0u64;
    let outcome = offsets.iter().try_for_each(|&offset| {
        pattern::fill(seed, offset, &mut buf);
        written_sum = checksum(written_sum, &buf);
        write_ok(kernel, lmr.handle(), offset, &buf, password)
    });
    tap.check(
        &format!("{label}: {SAMPLE} B samples written in every chunk, across every boundary"),
        outcome,
    );
    let mut read_sum = 0u64;
    let mut first_bad = None;
    let outcome = offsets.iter().try_for_each(|&offset| {
        let ret = read_at(kernel, lmr.handle(), offset, &mut buf, password);
        expect_zero(ret).map_err(|e| format!("read at offset {offset}: {e}"))?;
        read_sum = checksum(read_sum, &buf);
        if first_bad.is_none() {
            first_bad = pattern::verify(seed, offset, &buf).err();
        }
        Ok(())
    });
    let outcome = outcome.and_then(|()| {
        unless(read_sum == written_sum && first_bad.is_none(), || {
            format!(
                "checksum {read_sum:#x}, expected {written_sum:#x}; first difference: {}",
                first_bad.map_or("none".to_string(), |m| m.to_string())
            )
        })
    });
    tap.check(
        &format!("{label}: checksum of the samples read back matches"),
        outcome,
    );
    // An LMR larger than the limit, so only the size is wrong; the buffer
    // is as large as the request in case the kernel ignored the limit.
    let over = MAX_ASYNC_SIZE + 1;
    let mut big = vec![0u8; over as usize];
    let (handle, at) = (lmr.handle(), big.as_mut_ptr().cast());
    let point =
        |call: &str| format!("{call} of {over} B (over LITE_MAX_ASYNC_SIZE) returns -EINVAL");
    let outcome = expect_async_read_errno(kernel, handle, at, over, 0, password, libc::EINVAL);
    tap.check(&point("rdma_read_async"), outcome);
    let outcome = expect_async_write_errno(kernel, handle, at, over, 0, password, libc::EINVAL);
    tap.check(&point("rdma_write_async"), outcome);
    drop(big);
    tap.check(&format!("{label}: free returns 0"), lmr.free());
}

/// A simple order-dependent checksum (FNV-1a, 64-bit); `sum` 0 starts one.
pub(super) fn checksum(mut sum: u64, data: &[u8]) -> u64 {
    if sum == 0 {
        sum = 0xcbf2_9ce4_8422_2325;
    }
    for &byte in data {
        sum = (sum ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    sum
}

fn bad_input<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node, target: u32) {
    let (me, password) = (at.me, at.password);
    let description = format!("node {me}: 4096 B probe LMR for the new calls' bad input allocated");
    let Some(lmr) = tap.check_value(
        &description,
        Region::alloc(kernel, target, 4096, 0, password),
    ) else {
        return;
    };
    let h = lmr.handle();
    let unmapped: *mut c_void = ptr::without_provenance_mut(8);
    let mut scratch = vec![0u8; 4096];
    let seed = pattern::seed(&[u64::from(me), 0xbad2]);
    let mut contents = vec![0u8; 4096];
    pattern::fill(seed, 0, &mut contents);
    tap.check(
        "fill the probe LMR for the new calls",
        lmr.write(0, &contents, PRIORITY_NONE),
    );

    let bad = name_of(0xbad, me);
    let at = scratch.as_mut_ptr().cast::<c_void>();
    let big = MAX_REGISTER_SIZE + 4096;
    let unknown_bit = "unknown permission bit 0x100";
    // SAFETY (every unsafe call below): address 8 is never mapped and the
    // kernel must not touch it; nothing is read or registered for 0
    // bytes; and the kernel must reject a size or permission before it
    // pins anything.
    check_errnos! { tap, "";
        "remote_memset with byte 256" => kernel.remote_memset(h, 0, 16, 256), EINVAL;
        "remote_memset of 16 B at offset 4090 of 4096" =>
            kernel.remote_memset(h, 4090, 16, 1), EINVAL;
        "remote_memset with overflowing offset + size" =>
            kernel.remote_memset(h, u64::MAX, 2, 1), EINVAL;
        "remote_memset with an unknown handle" =>
            kernel.remote_memset(UNKNOWN_HANDLE, 0, 16, 1), EBADF;
        "memcpy with an unknown source handle" => kernel.memcpy(UNKNOWN_HANDLE, 0, h, 0, 16), EBADF;
        "memcpy with an unknown destination handle" =>
            kernel.memcpy(h, 0, UNKNOWN_HANDLE, 0, 16), EBADF;
        "memcpy with overflowing source offset + size" =>
            kernel.memcpy(h, u64::MAX, h, 0, 2), EINVAL;
        "memcpy with a destination range past the end" => kernel.memcpy(h, 0, h, 4095, 2), EINVAL;
        "memmove with overflowing destination offset + size" =>
            kernel.memmove(h, 0, h, u64::MAX, 2), EINVAL;
        "memmove with an unknown source handle" =>
            kernel.memmove(UNKNOWN_HANDLE, 0, h, 0, 16), EBADF;
        "memmove of 2^64-1 B" => kernel.memmove(h, 0, h, 0, u64::MAX), EINVAL;
        "wrap_alloc from unmapped address 0x8" =>
            released(kernel, unsafe { kernel.wrap_alloc(unmapped, 16, bad, password) }), EFAULT;
        "wrap_alloc of 0 B" =>
            released(kernel, unsafe { kernel.wrap_alloc(at, 0, bad, password) }), EINVAL;
        format!("add_ask_mr_table with {unknown_bit}") =>
            kernel.add_ask_mr_table(bad, h, 0x100, password), EINVAL;
        "add_ask_mr_table with an unknown handle" =>
            kernel.add_ask_mr_table(bad, UNKNOWN_HANDLE, PERM_READ, password), EBADF;
        "add_ask_mr_table with a wrong password" =>
            kernel.add_ask_mr_table(bad, h, PERM_READ, password ^ 1), EACCES;
        format!("ask_lmr with {unknown_bit}") =>
            released(kernel, kernel.ask_lmr(me, bad, PERM_READ | 0x100, password)), EINVAL;
        "ask_lmr of a name never published" =>
            released(kernel, kernel.ask_lmr(me, bad, PERM_READ, password)), ENOENT;
        "umap_lmr of an unknown handle" => kernel.umap_lmr(UNKNOWN_HANDLE), EBADF;
        "umap_lmr of an allocated LMR (not a mapping)" => kernel.umap_lmr(h), EINVAL;
        "register_lmr of unmapped address 0x8" =>
            released(kernel, unsafe { kernel.register_lmr(unmapped, 4096, PERM_READ, password) }),
            EFAULT;
        "register_lmr of 0 B" =>
            released(kernel, unsafe { kernel.register_lmr(at, 0, PERM_READ, password) }), EINVAL;
        format!("register_lmr of {big} B (over LITE_MAX_REGISTER_SIZE)") =>
            released(kernel, unsafe { kernel.register_lmr(at, big, PERM_READ, password) }), EINVAL;
        format!("register_lmr with {unknown_bit}") =>
            released(kernel, unsafe { kernel.register_lmr(at, 4096, 0x100, password) }), EINVAL;
        "deregister_lmr of an unknown handle" => kernel.deregister_lmr(UNKNOWN_HANDLE), EBADF;
    }
    check_each! { tap;
        "rdma_write_async from unmapped address 0x8 returns -EFAULT" =>
            expect_async_write_errno(kernel, h, unmapped, 16, 0, password, EFAULT);
        "rdma_read_async into unmapped address 0x8 fails with -EFAULT" =>
            expect_async_read_errno(kernel, h, unmapped, 16, 0, password, EFAULT);
        "rdma_write_async with an unknown handle returns -EBADF" =>
            expect_async_write_errno(kernel, UNKNOWN_HANDLE, at, 16, 0, password, EBADF);
        "rdma_read_async with overflowing offset + size returns -EINVAL" =>
            expect_async_read_errno(kernel, h, at, 2, u64::MAX, password, EINVAL);
        "rdma_write_async with a wrong password returns -EACCES" =>
            expect_async_write_errno(kernel, h, at, 16, 0, password ^ 1, EACCES);
        "rdma_read_async of 16 B at offset 4090 of 4096 returns -EINVAL" =>
            expect_async_read_errno(kernel, h, at, 16, 4090, password, EINVAL);
    }
    check_errnos! { tap, "";
        format!("async_wait of unknown operation {UNKNOWN_HANDLE:#x}") =>
            kernel.async_wait(UNKNOWN_HANDLE, 0), EINVAL;
        "async_wait with unknown flag 0x80" => kernel.async_wait(UNKNOWN_HANDLE, 0x80), EINVAL;
        // SAFETY: the kernel must reject the size before writing.
        "get_stats with size 7" => unsafe { kernel.get_stats(at.cast(), 7) }, EINVAL;
        // SAFETY: address 8 is never mapped; the kernel must not touch it.
        "get_stats into unmapped address 0x8" =>
            unsafe { kernel.get_stats(unmapped.cast(), 64) }, EFAULT;
    }
    let outcome = unchanged(&lmr, seed, &mut contents);
    tap.check(
        "the rejected new calls left the probe LMR unchanged",
        outcome,
    );
    check_free(tap, me, "the new calls' probe LMR returns 0", Some(lmr));
}

/// `ret`, after releasing the handle a call that must fail created anyway.
fn released<K: Kernel>(kernel: &K, ret: libc::c_long) -> libc::c_long {
    if ret > 0 {
        let handle = ret.unsigned_abs();
        if kernel.umap_lmr(handle) != 0 {
            kernel.deregister_lmr(handle);
        }
    }
    ret
}
