//! Labelled barrier rounds, as the README's test section describes them: node
//! [`BOARD_HOME`] publishes a board with a slot per node and parity of the
//! round, which every node writes before each barrier and reads after it.
//! Alternating slots suffice: a node past round `k` may write its slot of
//! round `k + 1`, but cannot pass round `k + 1`, hence cannot overwrite its
//! slot of round `k`, before every node has read it.
//!
//! The board belongs to the thread that runs the node's test (one thread
//! per node when the fake cluster runs the test on a host), so that every
//! barrier of the test checks its label without each case carrying it.

use std::cell::RefCell;

use lite::sys::{PERM_READ, PERM_WRITE};

use super::io::{barrier_failed, handle_of, name_of, read_vec, write_ok};
use super::password_of;
use crate::errno::describe_result;
use crate::kernel::Kernel;

pub const BOARD_HOME: u32 = 1;

/// Kind of the board's name ("BR"), see [`name_of`].
const BOARD_KIND: u16 = 0x4252;

/// Bytes of one slot: the round's number, then its name.
const SLOT: usize = 128;

/// Bytes of the name in a slot; longer names are cut.
const LABEL_LEN: usize = SLOT - 8;

/// Slots per node: one per parity of the round number.
const SLOTS_PER_NODE: usize = 2;

thread_local! {
    /// Once attached.
    static BOARD: RefCell<Option<Board>> = const { RefCell::new(None) };
}

/// The board as one node uses it.
#[derive(Debug)]
struct Board {
    /// Handle of the board: the LMR on [`BOARD_HOME`], or its mapping.
    handle: u64,
    me: u32,
    nodes: u32,
    /// The last round this node entered.
    round: u64,
}

/// A round as written into a slot: its number, then its name (cut to
/// [`LABEL_LEN`] bytes, padded with zeros).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Label([u8; SLOT]);

impl Label {
    fn new(round: u64, name: &str) -> Self {
        let mut bytes = [0u8; SLOT];
        bytes[..8].copy_from_slice(&round.to_le_bytes());
        let len = name.len().min(LABEL_LEN);
        // PANIC: `len` is at most the length of both.
        bytes[8..8 + len].copy_from_slice(&name.as_bytes()[..len]);
        Label(bytes)
    }

    fn from_slot(slot: &[u8]) -> Self {
        let mut bytes = [0u8; SLOT];
        // PANIC: callers pass slots of SLOT bytes.
        bytes.copy_from_slice(&slot[..SLOT]);
        Label(bytes)
    }

    fn describe(&self) -> String {
        let (round, name) = self.0.split_at(8);
        let round = u64::from_le_bytes(round.try_into().unwrap_or_default());
        let end = name.iter().position(|&b| b == 0).unwrap_or(LABEL_LEN);
        format!("round {round} ({})", String::from_utf8_lossy(&name[..end]))
    }
}

fn slot_offset(node: u32, round: u64) -> u64 {
    let parity = round % SLOTS_PER_NODE as u64;
    (u64::from(node - 1) * SLOTS_PER_NODE as u64 + parity) * SLOT as u64
}

fn board_size(nodes: u32) -> u64 {
    u64::from(nodes) * (SLOTS_PER_NODE * SLOT) as u64
}

fn board_name() -> u64 {
    name_of(BOARD_KIND, BOARD_HOME)
}

/// Allocated and published on [`BOARD_HOME`], nothing elsewhere.
#[derive(Debug)]
pub struct Published(Option<u64>);

/// On [`BOARD_HOME`] only, before the barrier that precedes [`attach`].
pub fn publish<K: Kernel>(kernel: &K, me: u32, nodes: u32) -> Result<Published, String> {
    if me != BOARD_HOME {
        return Ok(Published(None));
    }
    let pw = password_of(BOARD_HOME);
    let handle = handle_of(
        kernel.alloc_remote(BOARD_HOME, board_size(nodes), 0, pw),
        "alloc_remote of the barrier label board",
    )?;
    let published = kernel.add_ask_mr_table(board_name(), handle, PERM_READ | PERM_WRITE, pw);
    if published != 0 {
        let _ = kernel.free(handle);
        return Err(format!(
            "add_ask_mr_table of the barrier label board returned {}",
            describe_result(published)
        ));
    }
    Ok(Published(Some(handle)))
}

/// After the barrier that follows [`publish`] on every node: maps the
/// board (on [`BOARD_HOME`] it is the one published); from then on every
/// [`labelled`] round is checked.
pub fn attach<K: Kernel>(
    kernel: &K,
    me: u32,
    nodes: u32,
    published: Published,
) -> Result<(), String> {
    let handle = match published.0 {
        Some(handle) => handle,
        None if me == BOARD_HOME => return Err("the barrier label board was not published".into()),
        None => handle_of(
            kernel.ask_lmr(
                BOARD_HOME,
                board_name(),
                PERM_READ | PERM_WRITE,
                password_of(BOARD_HOME),
            ),
            "ask_lmr of the barrier label board",
        )?,
    };
    BOARD.with(|board| {
        *board.borrow_mut() = Some(Board {
            handle,
            me,
            nodes,
            round: 0,
        })
    });
    Ok(())
}

/// Stops checking rounds; every node calls it after the same round. The
/// other nodes unmap the board, then every node enters `last_round`, and
/// only then does the holder free the board: no node reads a freed one.
pub fn detach<K: Kernel, T>(kernel: &K, last_round: impl FnOnce() -> T) -> T {
    let board = BOARD.with(|board| board.borrow_mut().take());
    if let Some(board) = &board {
        if board.me != BOARD_HOME {
            // A failure leaves a mapping that ends with the process.
            let _ = kernel.umap_lmr(board.handle);
        }
    }
    let result = last_round();
    if let Some(board) = board {
        if board.me == BOARD_HOME {
            // A failure leaves an LMR that ends with the process.
            let _ = kernel.free(board.handle);
        }
    }
    result
}

/// Enters a round named `name` with `enter`, labelled when a board is
/// attached: writes the label first, then after the round checks that
/// every node entered the same one. `Err` is a [`barrier_failed`] reason.
pub fn labelled<K: Kernel>(
    kernel: &K,
    name: &str,
    enter: impl FnOnce() -> Result<(), String>,
) -> Result<(), String> {
    let Some((handle, me, nodes, round)) = BOARD.with(|board| {
        board.borrow_mut().as_mut().map(|board| {
            board.round += 1;
            (board.handle, board.me, board.nodes, board.round)
        })
    }) else {
        return enter();
    };
    let pw = password_of(BOARD_HOME);
    let mine = Label::new(round, name);
    write_ok(kernel, handle, slot_offset(me, round), &mine.0, pw)
        .map_err(|e| barrier_failed(&format!("labelling {}: {e}", mine.describe())))?;
    enter()?;
    let size = board_size(nodes) as usize;
    let board = read_vec(kernel, handle, 0, size, pw)
        .map_err(|e| barrier_failed(&format!("reading the barrier label board: {e}")))?;
    let mismatches: Vec<String> = (1..=nodes)
        .filter(|&node| node != me)
        .filter_map(|node| {
            let offset = slot_offset(node, round) as usize;
            // PANIC: the board holds every node's slots, `offset` one of them.
            let theirs = Label::from_slot(&board[offset..offset + SLOT]);
            (theirs != mine).then(|| format!("node {node} entered {}", theirs.describe()))
        })
        .collect();
    if mismatches.is_empty() {
        Ok(())
    } else {
        Err(barrier_failed(&format!(
            "this node entered {}, but {}",
            mine.describe(),
            mismatches.join(", ")
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster_test::io::enter_barrier;
    use crate::fake_kernel::{Defects, FakeKernel};
    use std::time::Duration;

    /// Each node of a fake cluster enters a labelled barrier per name of
    /// its own list, then must hold nothing; what its rounds returned.
    fn enter_rounds(names: &[&[&str]]) -> Vec<Vec<Result<(), String>>> {
        let nodes = names.len() as u32;
        let kernels = FakeKernel::cluster(nodes, Defects::default());
        let results = std::thread::scope(|scope| {
            let threads: Vec<_> = (1..=nodes)
                .zip(&kernels)
                .zip(names)
                .map(|((me, kernel), names)| {
                    scope.spawn(move || {
                        // SAFETY: a NUL-terminated address.
                        assert_eq!(
                            unsafe { kernel.join(c"10.0.0.1".as_ptr(), 18500, 1) },
                            libc::c_long::from(me)
                        );
                        let barrier = |name: &str| {
                            enter_barrier(kernel, nodes, Duration::from_secs(10), name)
                        };
                        let published = publish(kernel, me, nodes).expect("publish");
                        barrier("publishing").expect("barrier");
                        attach(kernel, me, nodes, published).expect("attach");
                        let rounds: Vec<_> = names
                            .iter()
                            .map(|name| labelled(kernel, name, || barrier(name)))
                            .collect();
                        detach(kernel, || barrier("the last label")).expect("barrier");
                        assert_eq!(kernel.live_handles(), 0);
                        rounds
                    })
                })
                .collect();
            threads
                .into_iter()
                .map(|t| t.join().expect("node thread"))
                .collect()
        });
        assert_eq!(kernels[0].live_lmrs(), 0);
        results
    }

    #[test]
    fn a_round_entered_at_another_point_fails_on_every_node() {
        let ahead: &[&str] = &["first", "third"];
        let behind: &[&str] = &["first", "second"];
        let results = enter_rounds(&[behind, ahead, behind]);
        for (me, rounds) in (1..).zip(&results) {
            assert_eq!(rounds[0], Ok(()));
            let failed = rounds[1]
                .as_ref()
                .expect_err("the second round is out of step");
            let out_of_step = "barrier failed: this node entered round 2 (";
            assert!(failed.starts_with(out_of_step), "{failed}");
            let other = if me == 2 {
                "node 1 entered round 2 (second)"
            } else {
                "node 2 entered round 2 (third)"
            };
            assert!(failed.contains(other), "node {me}: {failed}");
        }
    }

    #[test]
    fn slots_are_distinct_and_inside_the_board_and_labels_read_back_cut() {
        let nodes = 4;
        let mut offsets: Vec<u64> = (1..=nodes)
            .flat_map(|node| [1, 2].map(|round| slot_offset(node, round)))
            .collect();
        offsets.sort_unstable();
        offsets.dedup();
        assert_eq!(offsets.len(), 8);
        let on_the_board = |&o: &u64| o + SLOT as u64 <= board_size(nodes);
        assert!(offsets.iter().all(on_the_board));
        assert_eq!(slot_offset(2, 3), slot_offset(2, 5));
        let label = Label::new(7, "dist_barrier(3) after the concurrent RPCs");
        assert_eq!(Label::from_slot(&label.0), label);
        let described = "round 7 (dist_barrier(3) after the concurrent RPCs)";
        assert_eq!(label.describe(), described);
        let long = "x".repeat(2 * LABEL_LEN);
        let cut = Label::new(1, &long);
        assert_eq!(cut.describe(), format!("round 1 ({})", &long[..LABEL_LEN]));
    }
}
