//! T8: a LITE-DSM region whose pages the victim and the survivors hold
//! when the victim dies. Survivor A creates it (its directory outlives the
//! victim); every node maps it; the victim writes page [`VICTIM_PAGE`] and
//! keeps it, survivor A writes page [`SURVIVOR_PAGE`], which every
//! survivor then reads. Once the death is known, an access to the
//! victim's page must raise `SIGBUS` (its only current copy died), never
//! hang or show stale bytes, while the survivors' page still reads what A
//! wrote and a page nobody held yet can be written and read back.
//!
//! The region spans chunks up to one the victim holds ([`Placement`]): a
//! page of that chunk, whose data home died with the victim, must raise
//! `SIGBUS` too, while the pages above live in a chunk of a survivor. T8
//! needs three nodes, so that some chunk lives on a survivor.
//!
//! In the leave/rejoin cycles, the lowest observer keeps a second region
//! ([`LEAVE_NAME`]) open throughout; before each leave that is a
//! `lite_leave`, the leaver opens it, writes its first page and keeps the
//! page while it leaves; once it joined again, it counts the leave on the
//! second page. After the cycles, if a leave was counted, the observer's
//! read of the first page must show a value the leaver wrote: a graceful
//! leave writes its changed pages back before the node goes (without
//! that, the page's only current copy leaves with the node and the read
//! shows the old bytes).
//!
//! Where memory cannot be mapped (the in-memory model), T8 does not run.

use std::io::Write;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use lite::dsm::{Mapping, Region};
use lite::sys::{CHUNK_SIZE, DSM_CREATE};

use crate::kernel::Kernel;
use crate::tap::Tap;

/// The region: its name and password; the pages used in a survivor's
/// chunk.
const NAME: u64 = 0x4453_4d2d_6661_696c;
/// The region the leaver writes before its leaves.
const LEAVE_NAME: u64 = 0x4453_4d2d_6c65_6176;
const PASSWORD: u64 = 0x4453_4d2d_7061_7373;
const PAGES: usize = 4;
const PAGE: usize = 4096;
const CHUNK_PAGES: usize = (CHUNK_SIZE / PAGE as u64) as usize;

/// Counted from the first page of the survivor's chunk, as the two below.
const VICTIM_PAGE: usize = 0;
const SURVIVOR_PAGE: usize = 1;
const FRESH_PAGE: usize = 2;

/// Where T8's region lies: LITE spreads the chunks of survivor A's region
/// round robin over the other nodes by id, so chunk `i` lives on the
/// `i`-th of them (counted modulo their number).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Placement {
    /// Survivor A.
    home: u32,
    pages: usize,
    /// First page of a chunk a survivor holds, where the pages above are.
    survivors_chunk: usize,
    /// First page of the chunk the victim holds.
    victims_chunk: usize,
}

impl Placement {
    /// T8's region when `victim` of `nodes` dies; `None` below three nodes.
    pub(super) fn of(victim: u32, nodes: u32) -> Option<Self> {
        let home = crate::plan::lowest_other(victim, nodes)?;
        let holders: Vec<u32> = (1..=nodes).filter(|&n| n != home).collect();
        let victims = holders.iter().position(|&n| n == victim)?;
        let survivors = holders.iter().position(|&n| n != victim)?;
        Some(Self {
            home,
            pages: victims.max(survivors) * CHUNK_PAGES + PAGES,
            survivors_chunk: survivors * CHUNK_PAGES,
            victims_chunk: victims * CHUNK_PAGES,
        })
    }
}
/// What the victim and survivor A write.
const VICTIM_VALUE: u64 = 0x7669_6374_696d;
const SURVIVOR_VALUE: u64 = 0x7375_7276_6976;

/// How long an access to the victim's page may take to raise `SIGBUS`.
const SIGBUS_LIMIT: Duration = Duration::from_secs(10);

#[derive(Debug)]
pub(super) struct Shared {
    // Unmapped before the descriptor closes.
    map: Mapping,
    _region: Region,
    base: usize,
    victims_chunk: usize,
}

impl Shared {
    /// The first word of page `page` of the survivor's chunk.
    fn word(&self, page: usize) -> &std::sync::atomic::AtomicU64 {
        // PANIC: every page used is below `PAGES` of the survivor's chunk,
        // all mapped.
        &self.map.words()[(self.base + page) * PAGE / 8]
    }
}

/// Opens T8's region, creating it with `create`; `None` where this kernel
/// maps no memory.
fn open<K: Kernel>(kernel: &K, place: Placement, create: bool) -> Option<std::io::Result<Shared>> {
    let opened = open_named(kernel, NAME, place.home, place.pages, create)?;
    Some(opened.map(|shared| Shared {
        base: place.survivors_chunk,
        victims_chunk: place.victims_chunk,
        ..shared
    }))
}

/// As [`open`].
fn open_named<K: Kernel>(
    kernel: &K,
    name: u64,
    home: u32,
    pages: usize,
    create: bool,
) -> Option<std::io::Result<Shared>> {
    let size = (pages * PAGE) as u64;
    let flags = if create { DSM_CREATE } else { 0 };
    let ret = kernel.dsm_open(home, name, size, flags, PASSWORD)?;
    Some(
        Region::from_result(ret, size)
            .and_then(|region| Ok((region.map()?, region)))
            .map(|(map, region)| Shared {
                map,
                _region: region,
                base: 0,
                victims_chunk: 0,
            }),
    )
}

const CREATE_LIMIT: Duration = Duration::from_secs(30);

/// Phase 1, every survivor: survivor A creates the region, the others
/// open it once it exists, before LITE's counters are first read (T7
/// compares them with later ones).
pub(super) fn set_up<K: Kernel, W: Write>(
    kernel: &K,
    tap: &mut Tap<W>,
    me: u32,
    place: Placement,
) -> Option<Shared> {
    let home = place.home;
    let description = if me == home {
        "T8: lite_dsm_open creates a DSM region on survivor A, mapped".to_string()
    } else {
        format!("T8: the DSM region of node {home} opens and maps")
    };
    let started = Instant::now();
    let opened = loop {
        let opened = open(kernel, place, me == home)?;
        let missing = matches!(&opened, Err(e) if e.raw_os_error() == Some(libc::ENOENT));
        if !missing || started.elapsed() > CREATE_LIMIT {
            break opened.map_err(|e| format!("lite_dsm_open and mmap: {e}"));
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    tap.check_value(&description, opened)
}

/// Phase 2, survivor A: writes the survivors' page.
pub(super) fn write_survivors_page(shared: &Option<Shared>) {
    if let Some(shared) = shared {
        shared
            .word(SURVIVOR_PAGE)
            .store(SURVIVOR_VALUE, Ordering::SeqCst);
    }
}

/// Phase 3, every survivor, so that each holds a copy.
pub(super) fn read_survivors_page<W: Write>(tap: &mut Tap<W>, shared: &Option<Shared>) {
    if let Some(shared) = shared {
        let seen = shared.word(SURVIVOR_PAGE).load(Ordering::SeqCst);
        tap.check(
            "T8: the survivors' DSM page reads what survivor A wrote",
            expect_value(seen, SURVIVOR_VALUE),
        );
    }
}

/// The victim, in phase 2: opens the region, writes its page and keeps it
/// until it dies.
pub(super) fn victim_holds_a_page<K: Kernel>(
    kernel: &K,
    place: Placement,
) -> Option<Result<(), String>> {
    let shared = open(kernel, place, false)?;
    Some(shared.map_err(|e| e.to_string()).map(|shared| {
        shared
            .word(VICTIM_PAGE)
            .store(VICTIM_VALUE, Ordering::SeqCst);
        // Held until the machine is killed, like the victim's other state.
        std::mem::forget(shared);
    }))
}

/// Once the death is known, every survivor: the victim's page and a page
/// of the victim's chunk raise `SIGBUS`, the survivors' page keeps its
/// value, and a page nobody held works; then the region is closed.
pub(super) fn check_after_death<W: Write>(tap: &mut Tap<W>, me: u32, shared: Option<Shared>) {
    let Some(shared) = shared else {
        return;
    };
    let victim_page = std::ptr::from_ref(shared.word(VICTIM_PAGE));
    tap.check(
        "T8: reading the page the dead victim held raises SIGBUS",
        raises_sigbus(victim_page.cast()),
    );
    let lost_home = std::ptr::from_ref(&shared.map.words()[shared.victims_chunk * PAGE / 8]);
    tap.check(
        "T8: reading a DSM page whose data lived on the dead victim raises SIGBUS",
        raises_sigbus(lost_home.cast()),
    );
    let seen = shared.word(SURVIVOR_PAGE).load(Ordering::SeqCst);
    tap.check(
        "T8: the survivors' DSM page still reads what survivor A wrote",
        expect_value(seen, SURVIVOR_VALUE),
    );
    // Each survivor its own word of one page nobody held before the death.
    let fresh =
        &shared.map.words()[(shared.base + FRESH_PAGE) * PAGE / 8 + me as usize % (PAGE / 8)];
    let value = u64::from(me) << 32 | 0xf5;
    fresh.store(value, Ordering::SeqCst);
    tap.check(
        "T8: a DSM page nobody held can be written and read back",
        expect_value(fresh.load(Ordering::SeqCst), value),
    );
    drop(shared);
}

fn expect_value(seen: u64, want: u64) -> Result<(), String> {
    if seen == want {
        Ok(())
    } else {
        Err(format!("read {seen:#x}, not {want:#x}"))
    }
}

/// Whether reading the word at `at` kills a child process with `SIGBUS`
/// within [`SIGBUS_LIMIT`].
fn raises_sigbus(at: *const u64) -> Result<(), String> {
    // SAFETY: the child only reads the shared mapping and exits, touching
    // nothing another thread of this process might have locked.
    let child = unsafe { libc::fork() };
    if child < 0 {
        return Err(format!("fork: {}", std::io::Error::last_os_error()));
    }
    if child == 0 {
        // std's stack-overflow handler would run first and may spin on a
        // lock another thread held at the fork, then print on the console
        // in the middle of the parent's TAP lines: die of the signal
        // directly instead.
        // SAFETY: `signal` is async-signal-safe; nothing else in the child
        // uses these handlers.
        unsafe {
            libc::signal(libc::SIGBUS, libc::SIG_DFL);
            libc::signal(libc::SIGSEGV, libc::SIG_DFL);
        }
        // SAFETY: `at` is in a shared mapping the child inherited.
        let _ = unsafe { std::ptr::read_volatile(at) };
        // SAFETY: ends the child at once, without running this process's
        // exit handlers.
        unsafe { libc::_exit(0) };
    }
    let started = Instant::now();
    let mut status = 0;
    loop {
        // SAFETY: `status` is writable; `child` is our child.
        let waited = unsafe { libc::waitpid(child, &mut status, libc::WNOHANG) };
        if waited == child {
            break;
        }
        if waited < 0 || started.elapsed() > SIGBUS_LIMIT {
            // SAFETY: `child` is our child, not reaped yet.
            unsafe { libc::kill(child, libc::SIGKILL) };
            // SAFETY: as above.
            unsafe { libc::waitpid(child, &mut status, 0) };
            return Err(format!(
                "the access was still blocked after {SIGBUS_LIMIT:?}"
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let elapsed = started.elapsed().as_millis();
    match (libc::WIFSIGNALED(status), libc::WTERMSIG(status)) {
        (true, libc::SIGBUS) => Ok(()),
        (true, signal) => Err(format!(
            "the child died of signal {signal} after {elapsed} ms"
        )),
        (false, _) => Err(format!(
            "the read returned (exit status {}) after {elapsed} ms: stale bytes",
            libc::WEXITSTATUS(status)
        )),
    }
}

/// The words of the leave region: the value last written before a leave
/// (first page), and how many leaves wrote one (second page).
const LEAVE_VALUE_WORD: usize = 0;
const LEAVES_WORD: usize = PAGE / 8;

fn leave_value(cycle: u32) -> u64 {
    0x6c65_6176_0000_0000 | u64::from(cycle)
}

/// The lowest observer, before the cycles: creates the leave region and
/// keeps it until [`check_after_leaves`]; `None` where this kernel maps no
/// memory.
pub(super) fn create_leave_region<K: Kernel, W: Write>(
    kernel: &K,
    tap: &mut Tap<W>,
    me: u32,
) -> Option<Shared> {
    let created = open_named(kernel, LEAVE_NAME, me, PAGES, true)?;
    tap.check_value(
        &format!("leave/rejoin: node {me} creates a DSM region for the leaver to write"),
        created.map_err(|e| format!("lite_dsm_open and mmap: {e}")),
    )
}

/// The leaver, before a `lite_leave` in `cycle`: opens the observer's
/// leave region and writes its first page, which it keeps (the file stays
/// open) through the leave; `None` where this kernel maps no memory.
pub(super) fn write_before_leave<K: Kernel>(
    kernel: &K,
    owner: u32,
    cycle: u32,
) -> Option<Result<Shared, String>> {
    let opened = open_named(kernel, LEAVE_NAME, owner, PAGES, false)?;
    Some(
        opened
            .map_err(|e| format!("lite_dsm_open and mmap of node {owner}'s region: {e}"))
            .inspect(|shared| {
                shared.map.words()[LEAVE_VALUE_WORD].store(leave_value(cycle), Ordering::SeqCst);
            }),
    )
}

/// The leaver, back after a leave [`write_before_leave`] wrote for.
pub(super) fn count_leave<K: Kernel>(kernel: &K, owner: u32) -> Result<(), String> {
    let Some(opened) = open_named(kernel, LEAVE_NAME, owner, PAGES, false) else {
        return Ok(());
    };
    let shared = opened.map_err(|e| format!("lite_dsm_open and mmap: {e}"))?;
    shared.map.words()[LEAVES_WORD].fetch_add(1, Ordering::SeqCst);
    Ok(())
}

/// The lowest observer, after the cycles: the leave region's first page
/// shows what the leaver wrote before its last `lite_leave`.
pub(super) fn check_after_leaves<W: Write>(tap: &mut Tap<W>, me: u32, shared: Option<Shared>) {
    let Some(shared) = shared else {
        return;
    };
    let words = shared.map.words();
    let leaves = words[LEAVES_WORD].load(Ordering::SeqCst);
    let what = format!(
        "leave/rejoin: node {me} reads what the leaver wrote to a DSM page just before \
         its lite_leave (its pages are written back before it goes)"
    );
    if leaves == 0 {
        tap.skip(&what, "no cycle left with lite_leave");
        return;
    }
    let seen = words[LEAVE_VALUE_WORD].load(Ordering::SeqCst);
    let written = (1..=super::rejoin::CYCLES).any(|cycle| seen == leave_value(cycle));
    tap.check(
        &what,
        if written {
            Ok(())
        } else {
            Err(format!(
                "read {seen:#x} after {leaves} leaves, not a value the leaver wrote"
            ))
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_region_reaches_the_victims_chunk_and_keeps_its_pages_on_a_survivor() {
        let chunks = |victim, nodes| {
            Placement::of(victim, nodes).map(|p| {
                (
                    p.home,
                    p.pages,
                    p.survivors_chunk / CHUNK_PAGES,
                    p.victims_chunk / CHUNK_PAGES,
                )
            })
        };
        // Survivor A's chunks go to the other nodes by id: [2, 3, 4].
        assert_eq!(chunks(4, 4), Some((1, 2 * CHUNK_PAGES + PAGES, 0, 2)));
        assert_eq!(chunks(2, 4), Some((1, CHUNK_PAGES + PAGES, 1, 0)));
        // Survivor A is node 2; its chunks go to [1, 3].
        assert_eq!(chunks(1, 3), Some((2, CHUNK_PAGES + PAGES, 1, 0)));
        // With one survivor, every chunk is the victim's.
        assert_eq!(chunks(2, 2), None);
    }
}
