//! LITE-DSM: node 1 creates a region that every node maps, and litmus tests
//! of its coherence run on it, each many times with every value checked:
//! message passing under a LITE lock, store buffering across a barrier, two
//! writers of one page in turn, many readers then a writer, false sharing
//! of one page by every node at once, and writes and reads of pages in each
//! of the region's three chunks, which LITE puts on different nodes. The
//! region is larger than what any node lets node 1 hold on it: with three
//! nodes or more, every other node limits node 1's LMRs to [`SHARE`] more
//! than they hold there while node 1 creates it. Then misuse of
//! `lite_dsm_open` and `mmap`, and the region's end once every node closed
//! it. Node 1 also checks that creating the region charges its user's
//! quotas as an LMR of its size published under a name would, and that
//! the region's end gives them back.
//!
//! Every node enters every barrier of a case whatever it saw, so that a
//! wrong value fails the case without putting the nodes out of step.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use libc::{c_long, EACCES, EINVAL, ENOENT};
use lite::dsm::{Mapping, Region};
use lite::sys::{LiteLock, CHUNK_SIZE, DSM_CREATE, MAX_LMR_SIZE};

use super::io::{barrier, enter_barrier, out_of_step, status, unless, InStep, BARRIER_LIMIT};
use super::quotas::{limit_served, read_quotas, reset_served};
use super::sync::{ask_lock, create_lock};
use super::Node;
use crate::debugfs::quotas::{Resource, Usage};
use crate::errno::expect_errno;
use crate::kernel::Kernel;
use crate::tap::Tap;

/// The region's name ("DSM" and a number) and its size in pages: the
/// cases' [`PAGES`] at the start of its first chunk, and two more chunks.
const REGION_NAME: u64 = 0x4453_4d00_0000_0001;
const PAGES: usize = 16;
const CHUNK_PAGES: usize = (CHUNK_SIZE / PAGE as u64) as usize;
const REGION_PAGES: usize = 2 * CHUNK_PAGES + PAGES;
/// Pages on either side of the chunks' boundaries, each in another chunk.
const HOME_PAGES: [usize; 3] = [CHUNK_PAGES - 1, CHUNK_PAGES, 2 * CHUNK_PAGES];
/// What every other node lets node 1's LMRs hold on it beyond what they
/// hold while the region is created: less than the region.
const SHARE: u64 = CHUNK_SIZE + CHUNK_SIZE / 2;
const WORDS: usize = PAGE / 8;
const PAGE: usize = 4096;

/// Where each case works: the page of the lock number, the counter and its
/// mirror of the message passing case, the first of the store buffering
/// case's pages (one per node), and the pages of the other cases.
const LOCK_PAGE: usize = 0;
const COUNTER_PAGE: usize = 1;
const MIRROR_PAGE: usize = 2;
const FLAG_PAGES: usize = 3;
const MAX_FLAG_NODES: u32 = 8;
const TURNS_PAGE: usize = 11;
const READERS_PAGE: usize = 12;
const SHARED_PAGE: usize = 13;

const LOCKED_ROUNDS: u64 = 20;
const ROUNDS: u64 = 12;
const SHARED_INCREMENTS: u64 = 100;

pub(crate) fn run<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node) -> InStep {
    let Node { me, nodes, .. } = at;
    let size = (REGION_PAGES * PAGE) as u64;
    let Some(missing) = kernel.dsm_open(1, REGION_NAME, 0, 0, REGION_PASSWORD) else {
        tap.skip("LITE-DSM", "this kernel maps no memory");
        return Ok(());
    };
    tap.check(
        &format!("node {me}: lite_dsm_open of a region not created yet returns -ENOENT"),
        expect_errno(missing, ENOENT),
    );
    barrier(kernel, tap, nodes, "looking for the DSM region")?;
    let limited = limit_node_1(kernel, tap, at, size);
    // Out of step, the limit goes at once, disturbing nothing after.
    let reset_limit = |out_of_step| {
        if limited.is_some() {
            let _ = reset_served(kernel, 1);
        }
        out_of_step
    };
    barrier(kernel, tap, nodes, "limiting node 1's share").map_err(reset_limit)?;
    let region_password = REGION_PASSWORD;
    // What node 1's user (this process's) holds before the region exists.
    let held_before = (me == 1).then(|| root_usage(kernel));
    let created = (me == 1).then(|| {
        let ret = kernel.dsm_open(1, REGION_NAME, size, DSM_CREATE, region_password);
        let region = open_and_map(ret, size)?;
        if let Some(Ok(before)) = &held_before {
            let charge = Usage::default()
                .with(Resource::RemoteMemory, size)
                .with(Resource::Lmrs, 1)
                .with(Resource::Names, 1);
            let now = root_usage(kernel)?;
            unless(now == before.plus(&charge), || {
                format!("creating charged {}, not {charge}", now.minus(before))
            })?;
        }
        let lock = create_lock(kernel, 1)?;
        region.1.words()[word(LOCK_PAGE, 0)].store(u64::from(lock.number), Ordering::SeqCst);
        Ok((region, lock))
    });
    if let Some(created) = &created {
        tap.check(
            "node 1: creates and maps the DSM region and its lock; the region charges its \
             user's quotas as an LMR of its size published under a name",
            status(created),
        );
    }
    barrier(kernel, tap, nodes, "creating the DSM region").map_err(reset_limit)?;
    if let Some(before) = limited {
        let held = before.and_then(|before| {
            let now = read_quotas(kernel)?.served_for(1);
            unless(now <= before + SHARE, || {
                format!("node 1's LMRs hold {now} B here, {before} B before")
            })?;
            reset_served(kernel, 1)
        });
        tap.check(
            &format!(
                "node {me}: holds at most {} MiB more of node 1's LMRs once the DSM region exists; \
                 \"limit node 1 default\" then lifts the limit",
                SHARE >> 20
            ),
            held,
        );
    }
    let shared = match created {
        Some(created) => created,
        None => {
            let ret = kernel.dsm_open(1, REGION_NAME, size, 0, region_password);
            open_and_map(ret, size).and_then(|region| {
                let number = region.1.words()[word(LOCK_PAGE, 0)].load(Ordering::SeqCst);
                let number = u32::try_from(number)
                    .map_err(|_| format!("lock number {number} in the region"))?;
                let lock = ask_lock(kernel, 1, number)?;
                Ok((region, lock))
            })
        }
    };
    if me != 1 {
        let description = format!("node {me}: opens and maps node 1's DSM region, finds its lock");
        tap.check(&description, status(&shared));
    }
    let shared = shared.ok();
    let map = shared.as_ref().map(|((_, map), _)| map);
    let lock = shared.as_ref().map(|(_, lock)| *lock);
    misuse(kernel, tap, at, size);

    let rounds = 2 * ROUNDS as usize;
    // Two writers fill one page in turn; then every node reads one page
    // and one node (each in turn) writes it, taking every reader's copy
    // back.
    let two_writers: Case<K> =
        |kernel, at, map, _| turns(kernel, at, map, TURNS_PAGE, |round| (round % 2 + 1) as u32);
    let readers_then_writer: Case<K> = |kernel, at, map, _| {
        let writer_of = |round| (round % u64::from(at.nodes)) as u32 + 1;
        turns(kernel, at, map, READERS_PAGE, writer_of)
    };
    let homes = "writes and reads of pages on different homes";
    let cases: [(&str, Case<K>, usize); 6] = [
        ("message passing under a LITE lock", message_passing, 2),
        ("store buffering across a barrier", store_buffering, rounds),
        ("two writers of one page in turn", two_writers, rounds),
        ("many readers then a writer", readers_then_writer, rounds),
        ("false sharing of one page by every node", false_sharing, 2),
        (homes, across_homes, rounds),
    ];
    for (name, case, barriers) in cases {
        let point = format!("node {me}: DSM {name}");
        barrier(kernel, tap, nodes, &format!("before the DSM case {name}"))?;
        let outcome = match (map, lock) {
            (Some(map), Some(lock)) => case(kernel, at, map, lock),
            _ => skip_case(kernel, at, barriers),
        };
        match outcome {
            Ok(outcome) => tap.check(&point, outcome),
            Err(reason) => return Err(out_of_step(tap, &point, &reason)),
        };
    }
    drop(shared);
    barrier(kernel, tap, nodes, "closing the DSM region")?;
    let gone = kernel.dsm_open(1, REGION_NAME, size, 0, region_password);
    let description = format!("node {me}: the DSM region is gone once every node closed it");
    tap.check(&description, expect_errno(gone.unwrap_or(0), ENOENT));
    if let Some(before) = held_before {
        // The case's lock, which node 1 keeps, is the only difference.
        let given_back = before.and_then(|before| {
            let now = root_usage(kernel)?;
            let locks = now.get(Resource::Locks);
            unless(now == before.with(Resource::Locks, locks), || {
                format!("its user holds {now}, not {before} and the lock")
            })
        });
        tap.check(
            "node 1: the region's end gives its quota charge back",
            given_back,
        );
    }
    barrier(kernel, tap, nodes, "the end of the DSM region")
}

/// `Err` once one of the case's barriers failed.
type CaseResult = Result<Result<(), String>, String>;
type Case<K> = fn(&K, Node, &Mapping, LiteLock) -> CaseResult;

const REGION_PASSWORD: u64 = 0x4453_4d70_6173_7377;

fn root_usage<K: Kernel>(kernel: &K) -> Result<Usage, String> {
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    Ok(read_quotas(kernel)?.usage_of(uid))
}

/// Every node but node 1, with three nodes or more: lets node 1's LMRs hold
/// at most [`SHARE`] more on this node while node 1 creates the region of
/// `size` bytes, so that it can only exist spread over the nodes; what
/// they held before, if limited.
fn limit_node_1<K: Kernel, W: Write>(
    kernel: &K,
    tap: &mut Tap<W>,
    at: Node,
    size: u64,
) -> Option<Result<u64, String>> {
    let Node { me, nodes, .. } = at;
    let what = format!(
        "node {me}: limits node 1's LMRs to {} MiB more on this node, less than the DSM \
         region's {size} B",
        SHARE >> 20
    );
    match (me, nodes) {
        (1, _) => None,
        (_, ..=2) => {
            tap.skip(
                &what,
                "needs two nodes besides node 1 to spread the region over",
            );
            None
        }
        _ => {
            let limited = limit_served(kernel, 1, SHARE);
            tap.check(&what, limited.clone().map(drop));
            Some(limited)
        }
    }
}

fn word(page: usize, index: usize) -> usize {
    page * WORDS + index
}

fn open_and_map(ret: Option<c_long>, size: u64) -> Result<(Region, Mapping), String> {
    let region = Region::from_result(ret.unwrap_or(-c_long::from(libc::ENOSYS)), size)
        .map_err(|e| format!("lite_dsm_open: {e}"))?;
    let map = region.map().map_err(|e| format!("mmap: {e}"))?;
    Ok((region, map))
}

fn step<K: Kernel>(kernel: &K, nodes: u32, name: &str) -> Result<(), String> {
    enter_barrier(kernel, nodes, BARRIER_LIMIT, name)
}

fn expect(first_wrong: &mut Option<String>, ok: bool, what: impl FnOnce() -> String) {
    if !ok && first_wrong.is_none() {
        *first_wrong = Some(what());
    }
}

fn verdict(first_wrong: Option<String>) -> CaseResult {
    Ok(first_wrong.map_or(Ok(()), Err))
}

/// Every node increments a counter under the lock and, on another page, a
/// mirror of it: each holder must find the mirror the last holder left.
fn message_passing<K: Kernel>(kernel: &K, at: Node, map: &Mapping, lock: LiteLock) -> CaseResult {
    let words = map.words();
    let (counter, mirror) = (&words[word(COUNTER_PAGE, 0)], &words[word(MIRROR_PAGE, 0)]);
    let mut wrong = None;
    for _ in 0..LOCKED_ROUNDS {
        // SAFETY: `lock` is a lock record of this process, readable.
        let ret = unsafe { kernel.lock(&lock) };
        if ret < 0 {
            expect(&mut wrong, false, || format!("lite_lock returned {ret}"));
            break;
        }
        let value = counter.load(Ordering::SeqCst);
        let seen = mirror.load(Ordering::SeqCst);
        expect(&mut wrong, seen == value * 7, || {
            format!("under the lock, the mirror was {seen} for a counter of {value}")
        });
        counter.store(value + 1, Ordering::SeqCst);
        mirror.store((value + 1) * 7, Ordering::SeqCst);
        // SAFETY: as above.
        let ret = unsafe { kernel.unlock(&lock) };
        expect(&mut wrong, ret == 0, || {
            format!("lite_unlock returned {ret}")
        });
    }
    step(kernel, at.nodes, "the DSM message passing increments")?;
    let total = counter.load(Ordering::SeqCst);
    let want = LOCKED_ROUNDS * u64::from(at.nodes);
    expect(&mut wrong, total == want, || {
        format!("the counter is {total}, not {want}")
    });
    step(kernel, at.nodes, "reading the DSM message passing counter")?;
    verdict(wrong)
}

/// Each round, every node writes the round into its own page, then after a
/// barrier reads every node's page: all must hold the round.
fn store_buffering<K: Kernel>(kernel: &K, at: Node, map: &Mapping, _lock: LiteLock) -> CaseResult {
    let words = map.words();
    let flag = |node: u32| &words[word(FLAG_PAGES + ((node - 1) % MAX_FLAG_NODES) as usize, 0)];
    let mut wrong = None;
    for round in 1..=ROUNDS {
        flag(at.me).store(round, Ordering::SeqCst);
        step(kernel, at.nodes, "a DSM store buffering write")?;
        for node in 1..=at.nodes.min(MAX_FLAG_NODES) {
            let seen = flag(node).load(Ordering::SeqCst);
            expect(&mut wrong, seen == round, || {
                format!("round {round}: node {node}'s flag read {seen}")
            });
        }
        step(kernel, at.nodes, "a DSM store buffering read")?;
    }
    verdict(wrong)
}

/// Each round, `writer_of(round)` fills `page` with the round's pattern;
/// after a barrier every node checks every word of it.
fn turns<K: Kernel>(
    kernel: &K,
    at: Node,
    map: &Mapping,
    page: usize,
    writer_of: impl Fn(u64) -> u32,
) -> CaseResult {
    let words = &map.words()[word(page, 0)..word(page + 1, 0)];
    let pattern = |round: u64, index: usize| round << 32 | index as u64;
    let mut wrong = None;
    for round in 1..=ROUNDS {
        if at.me == writer_of(round) {
            fill(words, |index| pattern(round, index));
        }
        step(kernel, at.nodes, "a DSM writer's turn")?;
        for (index, value) in words.iter().enumerate() {
            let seen = value.load(Ordering::SeqCst);
            expect(&mut wrong, seen == pattern(round, index), || {
                format!("round {round}: word {index} read {seen:#x}")
            });
        }
        step(kernel, at.nodes, "the DSM readers' turn")?;
    }
    verdict(wrong)
}

/// In each round every node writes its own word of a page in each of the
/// region's chunks, then reads every node's words of all of them.
fn across_homes<K: Kernel>(kernel: &K, at: Node, map: &Mapping, _lock: LiteLock) -> CaseResult {
    let words = map.words();
    // PANIC: every page of `HOME_PAGES` is below `REGION_PAGES`, all of
    // them mapped, and a word index below `WORDS` is within its page.
    let own = |node: u32, page: usize| &words[word(page, node as usize % WORDS)];
    let value =
        |round: u64, node: u32, page: usize| round << 48 | u64::from(node) << 32 | page as u64;
    let mut wrong = None;
    for round in 1..=ROUNDS {
        for page in HOME_PAGES {
            own(at.me, page).store(value(round, at.me, page), Ordering::SeqCst);
        }
        step(kernel, at.nodes, "the DSM writes across homes")?;
        for page in HOME_PAGES {
            for node in 1..=at.nodes {
                let seen = own(node, page).load(Ordering::SeqCst);
                expect(&mut wrong, seen == value(round, node, page), || {
                    format!("round {round}: node {node}'s word of page {page} read {seen:#x}")
                });
            }
        }
        step(kernel, at.nodes, "the DSM reads across homes")?;
    }
    verdict(wrong)
}

fn fill(words: &[AtomicU64], value: impl Fn(usize) -> u64) {
    for (index, word) in words.iter().enumerate() {
        word.store(value(index), Ordering::SeqCst);
    }
}

/// Every node increments its own word of one page at once, unlocked: the
/// page moves between the nodes, and no increment may be lost.
fn false_sharing<K: Kernel>(kernel: &K, at: Node, map: &Mapping, _lock: LiteLock) -> CaseResult {
    let words = &map.words()[word(SHARED_PAGE, 0)..word(SHARED_PAGE + 1, 0)];
    let mine = &words[at.me as usize % WORDS];
    for _ in 0..SHARED_INCREMENTS {
        mine.store(mine.load(Ordering::SeqCst) + 1, Ordering::SeqCst);
    }
    step(kernel, at.nodes, "the DSM false sharing increments")?;
    let mut wrong = None;
    for node in 1..=at.nodes {
        let seen = words[node as usize % WORDS].load(Ordering::SeqCst);
        expect(&mut wrong, seen == SHARED_INCREMENTS, || {
            format!("node {node}'s word is {seen}, not {SHARED_INCREMENTS}")
        });
    }
    step(kernel, at.nodes, "reading the DSM false sharing words")?;
    verdict(wrong)
}

/// Enters a case's barriers without the region, and fails the case.
fn skip_case<K: Kernel>(kernel: &K, at: Node, barriers: usize) -> CaseResult {
    for _ in 0..barriers {
        step(kernel, at.nodes, "a DSM case without the region")?;
    }
    Ok(Err("the region is not mapped".into()))
}

fn misuse<K: Kernel, W: Write>(kernel: &K, tap: &mut Tap<W>, at: Node, size: u64) {
    let me = at.me;
    let other = if me == 1 { 2 } else { 1 };
    let own_name = REGION_NAME + u64::from(me) * 0x100;
    let open =
        |node, name, size, flags, pw| kernel.dsm_open(node, name, size, flags, pw).unwrap_or(0);
    let region_pw = REGION_PASSWORD;
    let mut fails = |what: &str, ret, errno| {
        let description = format!("node {me}: lite_dsm_open {what} fails");
        tap.check(&description, expect_errno(ret, errno));
    };
    let (create, too_large) = (DSM_CREATE, MAX_LMR_SIZE + 1);
    let ret = open(me, own_name, size, 0x80, 1);
    fails("with unknown flags", ret, EINVAL);
    let on_other = open(other, own_name, size, create, 1);
    fails(&format!("creating on node {other}"), on_other, EINVAL);
    fails("creating 0 bytes", open(me, own_name, 0, create, 1), EINVAL);
    let what = "creating more than LITE_MAX_LMR_SIZE";
    fails(what, open(me, own_name, too_large, create, 1), EINVAL);
    let ret = open(me, own_name, u64::MAX, create, 1);
    fails("creating u64::MAX bytes", ret, EINVAL);
    let ret = open(1, REGION_NAME, 0, 0, region_pw ^ 1);
    fails("with a wrong password", ret, EACCES);
    let ret = open(1, REGION_NAME, size + 4096, 0, region_pw);
    fails("with a wrong size", ret, EINVAL);
    let fd = open(1, REGION_NAME, 0, 0, region_pw);
    let region = match Region::from_result(fd, size) {
        Ok(region) => region,
        Err(e) => {
            let what = format!("node {me}: lite_dsm_open for the mmap cases");
            return tap.not_ok(&what, &e.to_string());
        }
    };
    let past_end = "a mapping past the region's end";
    let mappings = [
        ("a private mapping", REGION_PAGES, libc::MAP_PRIVATE),
        (past_end, REGION_PAGES + 1, libc::MAP_SHARED),
    ];
    for (what, pages, flags) in mappings {
        // 0 if it maps.
        let errno = match region.map_with(pages * PAGE, flags) {
            Ok(_) => 0,
            Err(e) => e.raw_os_error().unwrap_or(libc::EIO),
        };
        let description = format!("node {me}: mmap of {what} fails with EINVAL");
        tap.check(&description, expect_errno(-c_long::from(errno), EINVAL));
    }
}
