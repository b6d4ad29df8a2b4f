//! One random call per step: arguments from the process's resources (live,
//! released, others'), boundary values and bad pointers, with its
//! [`Expect`] and [`Effect`].

use std::collections::VecDeque;
use std::ptr::addr_of_mut;

use lite::sys::{
    LiteLock, LiteMulticast, LiteReceive, ALLOC_ATOMIC, ASYNC_NOWAIT, CHUNK_SIZE, DSM_CREATE,
    MAX_ASYNC_SIZE, MAX_LMR_SIZE, MAX_LOCKS, MAX_MESSAGE_SIZE, MAX_NODES, MAX_PORTS, MAX_PORT_NAME,
    MAX_REGISTER_SIZE, PERM_ADMIN, PERM_ATOMIC, PERM_READ, PERM_SHARE, PERM_WRITE, RECV_NONBLOCK,
    SEND_NONBLOCK,
};

use super::calls::{args, Syscall};
use super::effects::Effect;
use super::expect::{Expect, Value};
use super::memory::{Arena, BadPointer, ASYNC_AREA, BULK_AREA, MAX_FUZZ_LMR, PAGE, SCRATCH};
use super::pool::{
    fuzz_name, size_class, size_of_name, unpack_lock, LmrKind, LmrRecord, Pool, MAX_LMRS,
    MAX_LMR_BYTES, MAX_PORTS_HELD, MAX_REGISTRATIONS, NAME_SLOTS, OWNER_PERMISSIONS, POOL_PORTS,
    SHARED_PASSWORD, SIZE_CLASSES,
};
use super::rng::Rng;
use super::shared::{Offered, ProcShared};
use super::worker::ProcessPlan;

/// A call not meant to block is signalled after this, then every few
/// hundred milliseconds.
pub(crate) const RUNNING_CALL_MS: u64 = 5_000;
/// Per thread: locks live as long as their home.
const MAX_LOCKS_CREATED: u32 = 64;
/// Every permission a handle can be asked for or granted, ADMIN aside.
const GRANTABLE: u64 = PERM_READ | PERM_WRITE | PERM_SHARE | PERM_ATOMIC;

pub(crate) struct Context<'a> {
    pub(crate) plan: ProcessPlan,
    pub(crate) arena: &'a Arena,
}

impl Context<'_> {
    pub(crate) fn own(&self) -> &'static ProcShared {
        &self.plan.shared.procs[self.plan.proc as usize]
    }

    /// This one's if it is alone.
    fn other(&self, rng: &mut Rng) -> &'static ProcShared {
        let procs = self.plan.procs;
        let other =
            (self.plan.proc + 1 + rng.below(u64::from(procs.max(2) - 1)) as u32) % procs.max(1);
        &self.plan.shared.procs[other as usize]
    }
}

#[derive(Debug, Default)]
pub(crate) struct ThreadState {
    pub(crate) thread: u32,
    /// The holder of a lock is a thread, not a process.
    pub(crate) held: Vec<LiteLock>,
    /// Locks whose state is unknown after an odd result.
    pub(crate) uncertain: Vec<LiteLock>,
    pub(crate) locks_created: u32,
    /// With the step, after a child waiting for them was killed: checked
    /// again when fuzzing is over.
    pub(crate) locks_away: Vec<(LiteLock, u64)>,
}

/// Written by the kernel.
#[repr(C)]
pub(crate) struct OutParams {
    pub(crate) lock: LiteLock,
    pub(crate) descriptor: u64,
    pub(crate) old: u64,
    pub(crate) receive: LiteReceive,
    pub(crate) multicast: LiteMulticast,
    pub(crate) nodes: [u32; MAX_NODES as usize],
    pub(crate) lengths: [i64; MAX_NODES as usize],
}

impl OutParams {
    pub(crate) fn new() -> Box<OutParams> {
        Box::new(OutParams {
            lock: LiteLock::default(),
            descriptor: 0,
            old: 0,
            receive: LiteReceive::default(),
            multicast: LiteMulticast::default(),
            nodes: [0; MAX_NODES as usize],
            lengths: [0; MAX_NODES as usize],
        })
    }

    /// As a pointer to pass.
    pub(crate) fn lock_record(&mut self, lock: LiteLock) -> u64 {
        self.lock = lock;
        addr_of_mut!(self.lock) as u64
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Planned {
    pub(crate) call: Syscall,
    pub(crate) args: [u64; 6],
    pub(crate) expect: Expect,
    pub(crate) interrupt_after_ms: u64,
    pub(crate) effect: Effect,
}

impl Planned {
    /// A call that does not block by design, the arguments after `given` 0.
    pub(crate) fn of(call: Syscall, given: &[u64], expect: Expect, effect: Effect) -> Self {
        Planned {
            call,
            args: args(given),
            expect,
            interrupt_after_ms: RUNNING_CALL_MS,
            effect,
        }
    }

    /// For a call that blocks by design.
    pub(crate) fn blocking(self, ms: u64) -> Self {
        Planned {
            interrupt_after_ms: ms,
            ..self
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct HandleChoice {
    raw: u64,
    /// If the process holds it.
    record: Option<LmrRecord>,
    /// Whether no call can accept it: released, or never a handle (handles
    /// are above 0 and fit a non-negative return value, as every handle
    /// another process offers does).
    certainly_invalid: bool,
}

impl HandleChoice {
    fn own(record: LmrRecord) -> Self {
        let (raw, record) = (record.handle, Some(record));
        HandleChoice {
            raw,
            record,
            certainly_invalid: false,
        }
    }

    /// Another process's (which may mean something here), a made-up value,
    /// or one the process `released`, never valid again.
    fn not_held(raw: u64, released: bool) -> Self {
        let never = raw == 0 || raw > i64::MAX as u64;
        HandleChoice {
            raw,
            record: None,
            certainly_invalid: released || never,
        }
    }

    fn not_ours(self) -> Reason {
        let reason = "a handle that is no handle of this process";
        (self.certainly_invalid, reason)
    }

    /// To an LMR of its own (`owner`) or to a mapping.
    fn held_as(self, owner: bool) -> bool {
        self.record.is_some_and(|r| r.kind.is_owner() == owner)
    }

    fn size(self) -> Option<u64> {
        self.record.and_then(|r| r.size)
    }

    fn lacks(self, permission: u64) -> bool {
        self.record.is_some_and(|r| r.permission & permission == 0)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Area {
    Scratch,
    Async,
    Bulk,
}

pub(crate) struct Planner<'a, 'c> {
    pub(crate) rng: &'a mut Rng,
    pub(crate) ctx: &'a Context<'c>,
    pub(crate) pool: &'a Pool,
    pub(crate) state: &'a ThreadState,
    pub(crate) out: &'a mut OutParams,
}

type Generator = fn(&mut Planner<'_, '_>, Syscall) -> Planned;

/// Weights are per thousand-ish; `lite_join` and `lite_leave` are the
/// unprivileged process's.
const CALLS: [(Syscall, u32, Generator); 39] = [
    (Syscall::GetNodeId, 8, |p, c| p.node_ids(c)),
    (Syscall::GetTotalNode, 8, |p, c| p.node_ids(c)),
    (Syscall::AllocRemote, 60, |p, c| p.alloc_remote(c)),
    (Syscall::RdmaWrite, 60, |p, c| p.transfer(c)),
    (Syscall::RdmaRead, 60, |p, c| p.transfer(c)),
    (Syscall::Free, 35, |p, c| p.release(c)),
    (Syscall::DistBarrier, 12, |p, c| p.barrier(c)),
    (Syscall::RemoteMemset, 30, |p, c| p.memset(c)),
    (Syscall::Memcpy, 22, |p, c| p.copy(c)),
    (Syscall::Memmove, 22, |p, c| p.copy(c)),
    (Syscall::WrapAlloc, 25, |p, c| p.wrap_alloc(c)),
    (Syscall::AddAskMrTable, 25, |p, c| p.publish(c)),
    (Syscall::AskLmr, 40, |p, c| p.ask_lmr(c)),
    (Syscall::UmapLmr, 20, |p, c| p.release(c)),
    (Syscall::RegisterLmr, 20, |p, c| p.register_lmr(c)),
    (Syscall::DeregisterLmr, 18, |p, c| p.release(c)),
    (Syscall::RdmaWriteAsync, 35, |p, c| p.transfer(c)),
    (Syscall::RdmaReadAsync, 35, |p, c| p.transfer(c)),
    (Syscall::AsyncWait, 40, |p, c| p.async_wait(c)),
    (Syscall::Fence, 8, |p, c| p.fence(c)),
    (Syscall::GetStats, 8, |p, c| p.get_stats(c)),
    (Syscall::RegisterApplication, 20, |p, c| p.register_port(c)),
    (Syscall::UnregisterApplication, 10, |p, c| p.close_port(c)),
    (Syscall::QueryPort, 15, |p, c| p.query_port(c)),
    (Syscall::SendReplyImm, 35, |p, c| p.send(c)),
    (Syscall::SendReplyImmAsync, 20, |p, c| p.send(c)),
    (Syscall::Send, 30, |p, c| p.send(c)),
    (Syscall::ReceiveMessage, 50, |p, c| p.receive(c)),
    (Syscall::ReplyMessage, 30, |p, c| p.reply(c)),
    (Syscall::ReplyAndReceiveMessage, 15, |p, c| p.reply(c)),
    (Syscall::SendReplyMulticast, 10, |p, c| p.multicast(c)),
    (Syscall::FetchAdd, 22, |p, c| p.atomic(c)),
    (Syscall::CompareSwp, 22, |p, c| p.atomic(c)),
    (Syscall::CreateLock, 8, |p, c| p.create_lock(c)),
    (Syscall::AskLock, 18, |p, c| p.ask_lock(c)),
    (Syscall::Lock, 30, |p, c| p.lock(c)),
    (Syscall::Unlock, 35, |p, c| p.lock(c)),
    (Syscall::SetPriority, 8, |p, c| p.set_priority(c)),
    (Syscall::DsmOpen, 12, |p, c| p.dsm_open(c)),
];

/// Few, so that processes and nodes meet in them.
const DSM_NAMES: [u64; 3] = [
    0x4653_4d00_0000_0001,
    0x4653_4d00_0000_0002,
    0x4653_4d00_0000_0003,
];
const DSM_SIZES: [u64; 3] = [4096, 8192, 65536];
const BAD_DSM_SIZES: [u64; 3] = [0, MAX_LMR_SIZE + 1, u64::MAX];

const SMALL_SIZES: [u64; 9] = [1, 7, 8, 9, 64, 4095, 4096, 4097, 65536];
const CHUNK_SIZES: [u64; 4] = [CHUNK_SIZE - 1, CHUNK_SIZE, CHUNK_SIZE + 1, MAX_FUZZ_LMR];
const BAD_SIZES: [u64; 4] = [0, MAX_LMR_SIZE + 1, u64::MAX, i64::MIN as u64];
const MESSAGE_SIZES: [u64; 6] = [1, 8, 64, 4096, 65536, MAX_MESSAGE_SIZE];
const BAD_MESSAGE_SIZES: [u64; 3] = [0, MAX_MESSAGE_SIZE + 1, u64::MAX];

/// The reason applies if the condition holds.
type Reason = (bool, &'static str);

const REFUSED_NODE: &str = "a node id of 64 or more";

/// 64 or more in the low 32 bits, the only ones the kernel reads.
fn refused_node(node: u64) -> Reason {
    (node as u32 >= MAX_NODES, REFUSED_NODE)
}

fn refused_port(port: u64) -> Reason {
    (port as u32 >= MAX_PORTS, "a port of 64 or more")
}

fn refused_priority(priority: u64) -> Reason {
    (priority as u32 > 2, "a priority above LITE_PRIORITY_LOW")
}

fn refused_message_size(size: u64) -> Reason {
    let refused = size == 0 || size > MAX_MESSAGE_SIZE;
    (
        refused,
        "a message size of 0 or above LITE_MAX_MESSAGE_SIZE",
    )
}

impl Planner<'_, '_> {
    pub(crate) fn plan(&mut self) -> Planned {
        let weights: Vec<u32> = CALLS.iter().map(|&(_, weight, _)| weight).collect();
        let (call, _, generate) = CALLS[self.rng.weighted(&weights)];
        generate(self, call)
    }

    fn node_ids(&mut self, call: Syscall) -> Planned {
        let me = self.ctx.plan.me.into();
        let value = if call == Syscall::GetNodeId {
            Value::Range(me, me)
        } else {
            Value::Range(1, MAX_NODES.into())
        };
        Planned::of(call, &[], Expect::value(value), Effect::None)
    }

    fn fence(&mut self, call: Syscall) -> Planned {
        let expect = Expect::value(Value::Zero);
        Planned::of(call, &[], expect, Effect::Fence).blocking(self.blocking_ms())
    }

    fn blocking_ms(&mut self) -> u64 {
        self.rng.between(100, 3000)
    }

    fn wait_ms(&mut self, blocks: bool) -> u64 {
        if blocks {
            self.blocking_ms()
        } else {
            RUNNING_CALL_MS
        }
    }

    /// Some out of range only in their upper 32 bits, which the kernel
    /// drops.
    fn node(&mut self) -> u64 {
        let me = u64::from(self.ctx.plan.me);
        match self.rng.below(100) {
            0..=34 => me,
            35..=79 => self.rng.between(1, self.ctx.plan.nodes.max(1).into()),
            80..=84 => 0,
            _ => {
                let past = u64::from(self.ctx.plan.nodes) + 1;
                self.rng
                    .choose(&[past, 63, 64, 65, u64::from(u32::MAX), 1 << 32 | me])
            }
        }
    }

    /// This node `me_percent` times in a hundred, another member up to 90.
    fn member(&mut self, me_percent: u64) -> u64 {
        let (me, nodes) = (self.ctx.plan.me, self.ctx.plan.nodes.max(1));
        match self.rng.below(100) {
            roll if roll < me_percent || (roll <= 89 && nodes == 1) => me.into(),
            0..=89 => {
                let other = self.rng.between(1, u64::from(nodes - 1)) as u32;
                (other + u32::from(other >= me)).into()
            }
            _ => self.node(),
        }
    }

    fn priority(&mut self) -> u64 {
        let bad = [3, 4, u64::from(u32::MAX), 1 << 32 | 1];
        self.rng.mostly(85, |rng| rng.below(3), &bad)
    }

    /// Mostly the shared one, so that other fuzzers can map a published LMR.
    fn lmr_password(&mut self) -> u64 {
        self.rng.or_random(80, SHARED_PASSWORD)
    }

    fn handle(&mut self, prefer: impl Fn(&LmrRecord) -> bool) -> HandleChoice {
        let roll = self.rng.below(100);
        if roll < 72 {
            let preferred: Vec<&LmrRecord> = self.pool.lmrs.iter().filter(|r| prefer(r)).collect();
            if let Some(record) = self.rng.pick(&preferred) {
                return HandleChoice::own(**record);
            }
            if let Some(record) = self.rng.pick(&self.pool.lmrs) {
                return HandleChoice::own(*record);
            }
        }
        if roll < 80 {
            let stale: Vec<u64> = self.pool.stale_handles.iter().copied().collect();
            if let Some(&handle) = self.rng.pick(&stale) {
                return HandleChoice::not_held(handle, true);
            }
        }
        if roll < 87 {
            let other = self.ctx.other(self.rng);
            if let Some(handle) = other.handles.pick(self.rng) {
                if self.pool.lmr(handle).is_none() {
                    return HandleChoice::not_held(handle, false);
                }
            }
        }
        let (random, sign) = (self.rng.next_u64(), i64::MIN as u64);
        let made_up = [0, 1, u64::MAX, sign, 1 << 32, 0x1_0000_0001, random];
        HandleChoice::not_held(self.rng.choose(&made_up), false)
    }

    fn password(&mut self, choice: HandleChoice) -> (u64, bool) {
        match choice.record {
            Some(record) if self.rng.percent(92) => (record.password, false),
            Some(record) => (record.password ^ (1 + self.rng.below(u64::MAX - 1)), true),
            None => (self.rng.next_u64(), false),
        }
    }

    /// Mostly inside (4 KiB if `size` is unknown); whether it is certainly
    /// outside.
    fn range(&mut self, size: Option<u64>) -> (u64, u64, bool) {
        let s = size.unwrap_or(PAGE as u64).max(1);
        let (offset, len) = match self.rng.below(100) {
            0..=49 => {
                let offset = self.rng.below(s);
                let len = self.rng.between(0, (s - offset).min(4096));
                (offset, len)
            }
            50..=59 => (0, s),
            60..=69 if s > CHUNK_SIZE => {
                let offset = CHUNK_SIZE - self.rng.between(1, 64);
                (offset, self.rng.between(1, 128).min(s - offset))
            }
            60..=74 => (s, 0),
            _ => self.rng.choose(&[
                (s, 1),
                (s - 1, 2),
                (u64::MAX, 1),
                (1, u64::MAX),
                (i64::MIN as u64, 8),
                (0, s + 1),
                (s + 4096, 0),
                (0, u64::MAX),
            ]),
        };
        let outside = size.is_some() && offset.checked_add(len).is_none_or(|end| end > s);
        (offset, len, outside)
    }

    /// Whether the access certainly faults.
    fn buffer(&mut self, len: u64, kernel_writes: bool, area: Area) -> (u64, bool) {
        if self.rng.percent(12) {
            return self.bad_pointer(len, kernel_writes);
        }
        let (start, room) = match area {
            Area::Scratch => (self.ctx.arena.scratch(self.state.thread as usize), SCRATCH),
            Area::Async => (self.ctx.arena.async_area(), ASYNC_AREA),
            Area::Bulk => (self.ctx.arena.bulk_area(), BULK_AREA),
        };
        let room = room as u64;
        let slack = room.saturating_sub(len.min(room));
        (start + self.rng.below(slack + 1), false)
    }

    fn bad_pointer(&mut self, len: u64, kernel_writes: bool) -> (u64, bool) {
        let kind = self.rng.choose(&BadPointer::ALL);
        (
            self.ctx.arena.bad_pointer(kind),
            kind.faults(len, kernel_writes),
        )
    }

    fn or_bad_pointer(
        &mut self,
        percent: u32,
        good: u64,
        len: u64,
        kernel_writes: bool,
    ) -> (u64, bool) {
        if self.rng.percent(percent) {
            (good, false)
        } else {
            self.bad_pointer(len, kernel_writes)
        }
    }

    /// Port, largest message and buffer; whether every message (at least
    /// one byte) would fault, so that the receive certainly fails (a
    /// message, or the lack of one, is an error).
    fn receive_target<const N: usize>(&mut self, sizes: &[u64; N]) -> (u64, u64, u64, bool) {
        let port = self.some_port(65);
        let max_size = self.rng.choose(sizes);
        let (buf, _) = self.buffer(max_size.min(MAX_MESSAGE_SIZE), true, Area::Async);
        let bad = BadPointer::ALL
            .into_iter()
            .find(|&kind| self.ctx.arena.bad_pointer(kind) == buf);
        let faults = bad.is_some_and(|kind| kind.faults(1, true));
        (port, max_size, buf, faults)
    }

    fn alloc_remote(&mut self, call: Syscall) -> Planned {
        let node = self.node();
        let atomic = self.rng.percent(15);
        let mut flags = if atomic { u64::from(ALLOC_ATOMIC) } else { 0 };
        let mut size = if atomic {
            8
        } else if self.rng.percent(80) {
            self.rng.choose(&SMALL_SIZES)
        } else if self.rng.percent(40) {
            self.rng.choose(&CHUNK_SIZES)
        } else {
            self.rng.choose(&BAD_SIZES)
        };
        if self.rng.percent(5) {
            flags = self.rng.choose(&[2, 3, u64::from(u32::MAX), 1 << 32]);
        }
        let full = self.pool.lmrs.len() >= MAX_LMRS
            || self.pool.allocated_bytes().saturating_add(size) > MAX_LMR_BYTES;
        if full && (1..=MAX_LMR_SIZE).contains(&size) {
            size = self.rng.choose(&BAD_SIZES);
        }
        let password = self.lmr_password();
        let atomic = flags as u32 & ALLOC_ATOMIC != 0;
        let bad_size = size == 0 || size > MAX_LMR_SIZE;
        let wrong_size = atomic && size != 8;
        let expect = Expect::value(Value::Positive).failing_if(&[
            (bad_size, "size 0 or above LITE_MAX_LMR_SIZE"),
            (flags as u32 & !ALLOC_ATOMIC != 0, "unknown flags"),
            (wrong_size, "LITE_ALLOC_ATOMIC with a size other than 8"),
            refused_node(node),
        ]);
        let permission = OWNER_PERMISSIONS | if atomic { PERM_ATOMIC } else { 0 };
        let kind = LmrKind::Allocated { atomic };
        let effect = Effect::new_lmr(kind, Some(size), password, permission);
        Planned::of(call, &[node, size, flags, password], expect, effect)
    }

    fn transfer(&mut self, call: Syscall) -> Planned {
        let write = matches!(call, Syscall::RdmaWrite | Syscall::RdmaWriteAsync);
        let asynchronous = matches!(call, Syscall::RdmaWriteAsync | Syscall::RdmaReadAsync);
        let choice = self.handle(|_| true);
        let (offset, mut len, outside) = self.range(choice.size());
        if asynchronous && self.rng.percent(3) {
            len = MAX_ASYNC_SIZE + 1;
        }
        let area = if asynchronous && !write {
            Area::Async
        } else {
            Area::Scratch
        };
        let (buf, faults) = self.buffer(len, !write, area);
        let priority = self.priority();
        let (password, wrong_password) = self.password(choice);
        let needed = if write { PERM_WRITE } else { PERM_READ };
        let (value, effect) = if asynchronous {
            (Value::Positive, Effect::NewOp)
        } else {
            (Value::Zero, Effect::None)
        };
        // An asynchronous read stores its data only when it is reaped.
        let faults = faults && (write || !asynchronous);
        let too_long = asynchronous && len > MAX_ASYNC_SIZE;
        let expect = Expect::value(value).failing_if(&[
            choice.not_ours(),
            (outside, "offset + size past the end of the LMR"),
            refused_priority(priority),
            (wrong_password, "a wrong password"),
            (choice.lacks(needed), "a handle without the permission"),
            (faults, "a buffer the kernel cannot access"),
            (too_long, "a size above LITE_MAX_ASYNC_SIZE"),
        ]);
        let args = [choice.raw, buf, len, offset, priority, password];
        Planned::of(call, &args, expect, effect)
    }

    fn release(&mut self, call: Syscall) -> Planned {
        let owner = call != Syscall::UmapLmr;
        let choice = self.handle(|r| r.kind.is_owner() == owner);
        let wrong_kind = if owner {
            "a mapping's handle, which lacks ADMIN"
        } else {
            "a handle that is no mapping"
        };
        let expect = Expect::value(Value::Zero)
            .failing_if(&[choice.not_ours(), (choice.held_as(!owner), wrong_kind)]);
        let handle = choice.raw;
        Planned::of(call, &[handle], expect, Effect::Release { handle })
    }

    fn barrier(&mut self, call: Syscall) -> Planned {
        let nodes = u64::from(self.ctx.plan.nodes.max(1));
        let num = match self.rng.below(100) {
            0..=69 => self.rng.between(1, nodes),
            70..=79 => self.rng.between(nodes + 1, MAX_NODES.into()),
            _ => self.rng.choose(&[0, 65, u64::from(u32::MAX), 1 << 32 | 1]),
        };
        let bad_count = num as u32 == 0 || num as u32 > MAX_NODES;
        let mut expect = Expect::value(Value::Zero);
        expect.fail_if(bad_count, "a count of 0 or above LITE_MAX_NODES");
        Planned::of(call, &[num], expect, Effect::None).blocking(self.blocking_ms())
    }

    fn memset(&mut self, call: Syscall) -> Planned {
        let choice = self.handle(|r| r.permission & PERM_WRITE != 0);
        let (offset, len, outside) = self.range(choice.size());
        let bad_bytes = [256, u64::from(u32::MAX), 1 << 32 | 7];
        let byte = self.rng.mostly(90, |rng| rng.below(256), &bad_bytes);
        let expect = Expect::value(Value::Zero).failing_if(&[
            choice.not_ours(),
            (outside, "offset + size past the end of the LMR"),
            (byte as u32 > 255, "a byte value above 255"),
            (choice.lacks(PERM_WRITE), "a handle without WRITE"),
        ]);
        let args = [choice.raw, offset, len, byte];
        Planned::of(call, &args, expect, Effect::None)
    }

    fn copy(&mut self, call: Syscall) -> Planned {
        let src = self.handle(|r| r.permission & PERM_READ != 0);
        let dst = if self.rng.percent(30) {
            src
        } else {
            self.handle(|r| r.permission & PERM_WRITE != 0)
        };
        let (src_offset, len, src_outside) = self.range(src.size());
        let dst_size = dst.size().unwrap_or(PAGE as u64);
        let inside = |rng: &mut Rng| rng.below(dst_size.saturating_sub(len) + 1);
        let outside = [dst_size, u64::MAX, dst_size.saturating_sub(1)];
        let dst_offset = self.rng.mostly(85, inside, &outside);
        let dst_outside =
            dst.size().is_some() && dst_offset.checked_add(len).is_none_or(|end| end > dst_size);
        let src_invalid = src.certainly_invalid;
        let expect = Expect::value(Value::Zero).failing_if(&[
            (src_invalid, "a source that is no handle of this process"),
            (
                dst.certainly_invalid,
                "a destination that is no handle of this process",
            ),
            (src_outside, "the source range past the end of its LMR"),
            (dst_outside, "the destination range past the end of its LMR"),
            (src.lacks(PERM_READ), "a source without READ"),
            (dst.lacks(PERM_WRITE), "a destination without WRITE"),
        ]);
        let args = [src.raw, src_offset, dst.raw, dst_offset, len];
        Planned::of(call, &args, expect, Effect::None)
    }

    fn own_name(&mut self, size: Option<u64>) -> u64 {
        let class = size.map_or(super::pool::UNSIZED_CLASS, size_class);
        let ProcessPlan { me, proc, .. } = self.ctx.plan;
        fuzz_name(me, proc, class, self.rng.below(NAME_SLOTS))
    }

    fn wrap_alloc(&mut self, call: Syscall) -> Planned {
        let class = self.rng.index(SIZE_CLASSES.len());
        let full = self.pool.lmrs.len() >= MAX_LMRS
            || self.pool.allocated_bytes() + SIZE_CLASSES[class] > MAX_LMR_BYTES;
        let size = if full || self.rng.percent(10) {
            self.rng.choose(&[0, MAX_LMR_SIZE + 1, u64::MAX])
        } else {
            SIZE_CLASSES[class]
        };
        let name = match self.rng.below(100) {
            0..=84 => self.own_name(Some(size)),
            85..=92 => self.rng.pick(&self.pool.names).map_or(0, |&(name, _)| name),
            _ => self.rng.choose(&[0, u64::MAX, 1]),
        };
        let (data, faults) = self.buffer(size, false, Area::Bulk);
        let mut expect = Expect::value(Value::Positive);
        expect.fail_if(faults, "data the kernel cannot read");
        let kind = LmrKind::Wrapped { name };
        let effect = Effect::new_lmr(kind, Some(size), SHARED_PASSWORD, OWNER_PERMISSIONS);
        Planned::of(call, &[data, size, name, SHARED_PASSWORD], expect, effect)
    }

    /// Whether they are certainly refused: unknown bits, or ADMIN where
    /// `admin_refused`.
    fn permission(&mut self, admin_refused: bool) -> (u64, bool) {
        if self.rng.percent(88) {
            let bits = self.rng.between(1, GRANTABLE) & GRANTABLE;
            return (if bits == 0 { PERM_READ } else { bits }, false);
        }
        let bad = self
            .rng
            .choose(&[0x20, 1 << 40, u64::MAX, PERM_ADMIN | PERM_READ]);
        let refused =
            bad & !(GRANTABLE | PERM_ADMIN) != 0 || (admin_refused && bad & PERM_ADMIN != 0);
        (bad, refused)
    }

    fn publish(&mut self, call: Syscall) -> Planned {
        let choice = self.handle(|r| r.kind.is_owner() && r.permission & PERM_SHARE != 0);
        let name = if self.rng.percent(85) {
            self.own_name(choice.size())
        } else {
            self.rng.choose(&[0, u64::MAX, 2])
        };
        let (permission, refused) = self.permission(true);
        let (password, wrong_password) = self.password(choice);
        let mapping = choice.held_as(false);
        let expect = Expect::value(Value::Zero).failing_if(&[
            choice.not_ours(),
            (refused, "permission bits that cannot be granted"),
            (wrong_password, "a wrong password"),
            (mapping, "a mapping's handle, which cannot be published"),
            (choice.lacks(PERM_SHARE), "a handle without SHARE"),
        ]);
        let handle = choice.raw;
        let args = [name, handle, permission, password];
        Planned::of(call, &args, expect, Effect::Publish { name, handle })
    }

    fn ask_lmr(&mut self, call: Syscall) -> Planned {
        let node = self.member(35);
        let name = match self.rng.below(100) {
            // A name another process of this node published.
            0..=29 if node as u32 == self.ctx.plan.me => {
                let other = self.ctx.other(self.rng);
                other.names.pick(self.rng).unwrap_or(0)
            }
            0..=89 => fuzz_name(
                node as u32,
                self.rng.below(u64::from(self.ctx.plan.procs.max(1))) as u32,
                self.rng.below(SIZE_CLASSES.len() as u64),
                self.rng.below(NAME_SLOTS),
            ),
            _ => self.rng.choose(&[0, u64::MAX, 3]),
        };
        let (permission, refused) = self.permission(false);
        let password = self.rng.or_random(92, SHARED_PASSWORD);
        let expect = Expect::value(Value::Positive)
            .failing_if(&[(refused, "unknown permission bits"), refused_node(node)]);
        let kind = LmrKind::Mapping {
            owner: node as u32,
            name,
        };
        let effect = Effect::new_lmr(kind, size_of_name(name), password, permission);
        Planned::of(call, &[node, name, permission, password], expect, effect)
    }

    fn register_lmr(&mut self, call: Syscall) -> Planned {
        let full =
            self.pool.registrations() >= MAX_REGISTRATIONS || self.pool.lmrs.len() >= MAX_LMRS;
        let size = if full || self.rng.percent(12) {
            self.rng.choose(&[0, MAX_REGISTER_SIZE + 1, u64::MAX])
        } else {
            let page = PAGE as u64;
            let sizes = [8, 8, 64, page, page + 1, 65536, CHUNK_SIZE + page];
            self.rng.choose(&sizes)
        };
        let (mut buf, faults) = self.buffer(size, true, Area::Bulk);
        if !faults && size == 8 {
            buf &= !7;
        }
        let (permission, refused) = self.permission(false);
        let password = self.lmr_password();
        let bad_size = size == 0 || size > MAX_REGISTER_SIZE;
        let expect = Expect::value(Value::Positive).failing_if(&[
            (bad_size, "size 0 or above LITE_MAX_REGISTER_SIZE"),
            (faults, "memory not mapped writable"),
            (refused, "unknown permission bits"),
        ]);
        let kind = LmrKind::Registered;
        let effect = Effect::new_lmr(kind, Some(size), password, permission | PERM_ADMIN);
        Planned::of(call, &[buf, size, permission, password], expect, effect)
    }

    /// An id of a kind this process keeps in `own`, by a roll of 100: up
    /// to `cuts[0]` one of `own`; up to `cuts[1]` one of `stale`, released
    /// and certainly refused; up to `cuts[2]` one another process offers
    /// (`(0, true)` if it offers none but this process's). Whether it is
    /// certainly refused; `Err` with a higher roll, for the caller.
    fn held_id(
        &mut self,
        own: &[u64],
        stale: &VecDeque<u64>,
        offered: fn(&ProcShared) -> &Offered,
        cuts: [u64; 3],
    ) -> Result<(u64, bool), u64> {
        let roll = self.rng.below(100);
        if roll <= cuts[0] && !own.is_empty() {
            return Ok((own[self.rng.index(own.len())], false));
        }
        if roll <= cuts[1] && !stale.is_empty() {
            return Ok((stale[self.rng.index(stale.len())], true));
        }
        if roll > cuts[2] {
            return Err(roll);
        }
        let other = self.ctx.other(self.rng);
        Ok(match offered(other).pick(self.rng) {
            Some(id) if !own.contains(&id) => (id, false),
            _ => (0, true),
        })
    }

    fn async_wait(&mut self, call: Syscall) -> Planned {
        let pool = self.pool;
        let (op, certain) = match self.held_id(&pool.ops, &pool.stale_ops, |p| &p.ops, [64, 74, 84])
        {
            Ok(found) => found,
            Err(_) => (self.rng.choose(&[0, u64::MAX, i64::MIN as u64]), true),
        };
        let flags = match self.rng.below(100) {
            0..=39 => 0,
            40..=91 => u64::from(ASYNC_NOWAIT),
            _ => self.rng.choose(&[2, 3, 0x8000_0000]),
        };
        // Reaping a call returns its reply's length.
        let value = if self.pool.calls.contains(&op) {
            Value::Range(0, MAX_MESSAGE_SIZE as i64)
        } else {
            Value::Zero
        };
        let expect = Expect::value(value).failing_if(&[
            (certain, "an operation id this process does not have"),
            (flags as u32 & !ASYNC_NOWAIT != 0, "unknown flags"),
        ]);
        Planned::of(call, &[op, flags], expect, Effect::Reap { op })
            .blocking(self.wait_ms(flags == 0))
    }

    fn get_stats(&mut self, call: Syscall) -> Planned {
        let sizes = |rng: &mut Rng| rng.choose(&[120, 8, 64, 4096, u64::MAX]);
        let size = self.rng.mostly(85, sizes, &[0, 7]);
        // The kernel writes at most its struct's size, far below a scratch
        // buffer, whatever size is given.
        let (buf, faults) = self.buffer(size.min(4096), true, Area::Scratch);
        let expect = Expect::value(Value::Zero).failing_if(&[
            (size < 8, "a size below 8"),
            (faults, "a buffer the kernel cannot write"),
        ]);
        Planned::of(call, &[buf, size], expect, Effect::None)
    }

    fn pool_port(&mut self) -> u64 {
        self.rng.below(POOL_PORTS.into())
    }

    fn own_port(&mut self) -> u64 {
        match self.rng.pick(&self.pool.ports) {
            Some(&(port, _)) => port.into(),
            None => self.pool_port(),
        }
    }

    fn bad_port(&mut self) -> u64 {
        self.rng.choose(&[64, 100, 1000])
    }

    fn register_port(&mut self, call: Syscall) -> Planned {
        let full = self.pool.ports.len() >= MAX_PORTS_HELD;
        let port = if full || self.rng.percent(10) {
            self.bad_port()
        } else {
            self.pool_port()
        };
        let max_size = self
            .rng
            .mostly(90, |rng| rng.choose(&MESSAGE_SIZES), &BAD_MESSAGE_SIZES);
        let longest = MAX_PORT_NAME as u64;
        let name_len = self
            .rng
            .mostly(90, |rng| rng.between(0, longest), &[longest + 1, u64::MAX]);
        let (name, faults) = if self.rng.percent(40) {
            (self.ctx.arena.bad_pointer(BadPointer::ReadOnly), false)
        } else {
            self.buffer(name_len.min(longest), false, Area::Scratch)
        };
        let expect = Expect::value(Value::Zero).failing_if(&[
            refused_port(port),
            refused_message_size(max_size),
            (name_len > longest, "a name longer than LITE_MAX_PORT_NAME"),
            (faults && name_len > 0, "a name the kernel cannot read"),
        ]);
        let effect = Effect::RegisterPort {
            port: port as u32,
            max_size,
        };
        Planned::of(call, &[port, max_size, name, name_len], expect, effect)
    }

    fn close_port(&mut self, call: Syscall) -> Planned {
        let port = self.some_port(70);
        let expect = Expect::value(Value::Zero).failing_if(&[refused_port(port)]);
        let effect = Effect::ClosePort { port: port as u32 };
        Planned::of(call, &[port], expect, effect)
    }

    fn query_port(&mut self, call: Syscall) -> Planned {
        let node = self.node();
        let port = match self.rng.below(100) {
            0..=84 => self.pool_port(),
            85..=89 => 63,
            _ => self.bad_port(),
        };
        let expect = Expect::value(Value::Range(1, MAX_MESSAGE_SIZE as i64))
            .failing_if(&[refused_port(port), refused_node(node)]);
        Planned::of(call, &[node, port], expect, Effect::None)
    }

    /// Whether it is certainly refused (a bad port or priority, or the
    /// non-blocking flag where `nonblock_refused`); whether it has that flag.
    fn port_priority(
        &mut self,
        node: u64,
        nonblock_percent: u32,
        nonblock_refused: bool,
    ) -> (u64, bool, bool) {
        let port = match self.rng.below(100) {
            0..=49 if node as u32 == self.ctx.plan.me => self.own_port(),
            0..=94 => self.pool_port(),
            _ => self.bad_port(),
        };
        let priority = if self.rng.percent(92) {
            self.rng.below(3)
        } else {
            self.rng.between(3, 0x7fff)
        };
        let nonblock = self.rng.percent(nonblock_percent);
        let flag = if nonblock { SEND_NONBLOCK } else { 0 };
        let port_priority = port | priority << 16 | u64::from(flag);
        let refused = port as u32 >= MAX_PORTS || priority > 2 || (nonblock && nonblock_refused);
        (port_priority, refused, nonblock)
    }

    fn message_size(&mut self) -> u64 {
        let sizes = |rng: &mut Rng| rng.choose(&[1, 8, 64, 4096, 65536]);
        self.rng.mostly(90, sizes, &BAD_MESSAGE_SIZES)
    }

    fn send(&mut self, call: Syscall) -> Planned {
        let with_reply = matches!(call, Syscall::SendReplyImm | Syscall::SendReplyImmAsync);
        let asynchronous = call == Syscall::SendReplyImmAsync;
        let node = self.member(40);
        let (port_priority, port_refused, nonblock) =
            self.port_priority(node, if with_reply { 3 } else { 50 }, with_reply);
        let refused = refused_node(node).0 || port_refused;
        let size = self.message_size();
        let (msg, faults) = self.buffer(size, false, Area::Scratch);
        let mut expect = Expect::value(Value::Zero).failing_if(&[
            (refused, "a bad node, port, priority or flag"),
            refused_message_size(size),
            (faults, "a message the kernel cannot read"),
        ]);
        let mut args = [node, port_priority, msg, size, 0, 0];
        if with_reply {
            let max_reply = self.rng.choose(&[0, 1, 64, 4096, 65536, u64::MAX]);
            let room = max_reply.min(MAX_MESSAGE_SIZE);
            let reply = if self.rng.percent(6) {
                0
            } else {
                self.buffer(room, true, Area::Scratch).0
            };
            expect.fail_if(reply == 0 && max_reply > 0, "a null reply buffer with room");
            // A call's id, or a blocking call's reply length.
            expect.value = if asynchronous {
                Value::Positive
            } else {
                Value::Range(0, room as i64)
            };
            args[4] = reply;
            args[5] = max_reply;
        }
        let effect = if asynchronous {
            Effect::NewCall
        } else {
            Effect::None
        };
        let planned = Planned::of(call, &args, expect, effect);
        if nonblock {
            planned
        } else {
            planned.blocking(self.rng.between(200, 3000))
        }
    }

    fn receive_flags(&mut self) -> (u64, bool) {
        match self.rng.below(100) {
            0..=64 => (u64::from(RECV_NONBLOCK), false),
            65..=94 => (0, false),
            _ => (self.rng.choose(&[2, 3, 0x8000_0000]), true),
        }
    }

    /// Own `own_percent` times in a hundred, a pool port up to 90.
    fn some_port(&mut self, own_percent: u64) -> u64 {
        match self.rng.below(100) {
            roll if roll < own_percent => self.own_port(),
            0..=89 => self.pool_port(),
            _ => self.bad_port(),
        }
    }

    fn receive(&mut self, call: Syscall) -> Planned {
        let sizes = [0, 1, 64, 4096, 65536, MAX_MESSAGE_SIZE, u64::MAX];
        let (port, max_size, buf, buf_faults) = self.receive_target(&sizes);
        let descriptor = addr_of_mut!(self.out.descriptor) as u64;
        let (descriptor, descriptor_faults) = self.or_bad_pointer(92, descriptor, 8, true);
        let (flags, unknown) = self.receive_flags();
        let expect = Expect::value(Value::Range(0, MAX_MESSAGE_SIZE as i64)).failing_if(&[
            refused_port(port),
            (unknown, "unknown flags"),
            (descriptor_faults, "a descriptor the kernel cannot write"),
            // Messages are never empty: one taken would fault, none is an error.
            (buf_faults, "a buffer the kernel cannot write"),
        ]);
        let args = [port, buf, max_size, descriptor, flags];
        Planned::of(call, &args, expect, Effect::Receive).blocking(self.wait_ms(flags == 0))
    }

    fn reply(&mut self, call: Syscall) -> Planned {
        // A descriptor to answer; whether it certainly is none of this
        // process's unanswered ones.
        let (own, stale) = (&self.pool.descriptors, &self.pool.stale_descriptors);
        let (descriptor, stale) = match self.held_id(own, stale, |p| &p.descriptors, [59, 69, 79]) {
            Ok(found) => found,
            // A one-way message's descriptor is 0: never answerable.
            Err(80..=89) => (0, true),
            Err(_) => (self.rng.next_u64(), false),
        };
        let sizes = |rng: &mut Rng| rng.choose(&[0, 1, 64, 4096, 65536, MAX_MESSAGE_SIZE]);
        let size = self
            .rng
            .mostly(92, sizes, &[MAX_MESSAGE_SIZE + 1, u64::MAX]);
        let (buf, faults) = self.buffer(size, false, Area::Scratch);
        let receives = call == Syscall::ReplyAndReceiveMessage;
        let value = if receives {
            Value::Range(0, MAX_MESSAGE_SIZE as i64)
        } else {
            Value::Zero
        };
        let too_long = size > MAX_MESSAGE_SIZE;
        let mut expect = Expect::value(value).failing_if(&[
            (
                stale,
                "a descriptor that is no unanswered one of this process",
            ),
            (too_long, "a reply above LITE_MAX_MESSAGE_SIZE"),
            (faults, "a reply the kernel cannot read"),
        ]);
        if !receives {
            let effect = Effect::Reply { descriptor };
            return Planned::of(call, &[buf, size, descriptor], expect, effect);
        }
        let sizes = [1, 64, 4096, MAX_MESSAGE_SIZE, u64::MAX];
        let (port, max_size, recv_buf, recv_faults) = self.receive_target(&sizes);
        let (flags, unknown) = self.receive_flags();
        self.out.receive = LiteReceive {
            buf: recv_buf,
            max_size,
            descriptor: 0,
            port: port as u32,
            flags: flags as u32,
        };
        // Read-only is bad too: the new descriptor is written there.
        let next = addr_of_mut!(self.out.receive) as u64;
        let (next, next_faults) = self.or_bad_pointer(90, next, 32, true);
        // Past a record it cannot access, the kernel reads nothing: the
        // first reason found is the one kept.
        expect = expect.failing_if(&[
            (next_faults, "a receive record the kernel cannot access"),
            refused_port(port),
            (unknown, "unknown receive flags"),
            (recv_faults, "a receive buffer the kernel cannot write"),
        ]);
        let effect = Effect::ReplyAndReceive { descriptor };
        let args = [buf, size, descriptor, next];
        Planned::of(call, &args, expect, effect).blocking(self.wait_ms(flags == 0))
    }

    fn multicast(&mut self, call: Syscall) -> Planned {
        let nodes = u64::from(self.ctx.plan.nodes.max(1));
        let count = match self.rng.below(100) {
            0..=69 => self.rng.between(1, nodes),
            70..=84 => self.rng.between(1, MAX_NODES.into()),
            _ => self.rng.choose(&[0, 65, u64::from(u32::MAX)]),
        } as u32;
        let targets = count.min(MAX_NODES);
        for i in 0..targets as usize {
            self.out.nodes[i] = match self.rng.below(100) {
                0..=79 => self.rng.between(1, nodes) as u32,
                _ => self.rng.choose(&[0, 64, u32::MAX, self.ctx.plan.me]),
            };
        }
        let (port_priority, refused, _) = self.port_priority(u64::from(self.ctx.plan.me), 3, true);
        let size = self.message_size();
        let (msg, msg_faults) = self.buffer(size, false, Area::Scratch);
        // At most 64 replies of 16 KiB: inside the arena from any scratch.
        let max_reply = self.rng.choose(&[0, 64, 4096, 16384]);
        let replies = if self.rng.percent(5) {
            0
        } else {
            let room = u64::from(targets) * max_reply;
            self.buffer(room, true, Area::Scratch).0
        };
        let lengths = addr_of_mut!(self.out.lengths) as u64;
        let room = u64::from(targets) * 8;
        let (lengths, lengths_fault) = self.or_bad_pointer(92, lengths, room, true);
        self.out.multicast = LiteMulticast {
            nodes: addr_of_mut!(self.out.nodes) as u64,
            lengths,
            msg,
            size,
            replies,
            max_reply,
            count,
            port_priority: port_priority as u32,
        };
        let record = addr_of_mut!(self.out.multicast) as u64;
        let (record, record_faults) = self.or_bad_pointer(92, record, 56, false);
        // Past a record it cannot read, the kernel reads nothing: the first
        // reason found is the one kept.
        let null_replies = replies == 0 && max_reply > 0;
        let expect = Expect::value(Value::Range(0, targets.into())).failing_if(&[
            (record_faults, "a call record the kernel cannot read"),
            (count == 0 || count > MAX_NODES, "a count of 0 or above 64"),
            (refused, "a bad port, priority or flag"),
            refused_message_size(size),
            (msg_faults, "a message the kernel cannot read"),
            (lengths_fault, "a lengths array the kernel cannot write"),
            (null_replies, "a null reply buffer with room"),
        ]);
        Planned::of(call, &[record], expect, Effect::None).blocking(self.rng.between(200, 3000))
    }

    fn atomic(&mut self, call: Syscall) -> Planned {
        let choice = self.handle(|r| r.size == Some(8) && r.permission & PERM_ATOMIC != 0);
        let old = addr_of_mut!(self.out.old) as u64;
        let (old, faults) = self.or_bad_pointer(90, old, 8, true);
        let priority = self.priority();
        let value = self.rng.choose(&[0, 1, u64::MAX]);
        let value = self.rng.or_random(50, value);
        let never_atomic = choice.record.is_some_and(|r| r.never_atomic());
        let expect = Expect::value(Value::Zero).failing_if(&[
            choice.not_ours(),
            (never_atomic, "a handle without ATOMIC or not of 8 bytes"),
            (faults, "an old-value pointer the kernel cannot write"),
            refused_priority(priority),
        ]);
        let args = if call == Syscall::FetchAdd {
            [choice.raw, old, value, priority, 0, 0]
        } else {
            let new_value = self.rng.next_u64();
            [choice.raw, old, value, new_value, priority, 0]
        };
        Planned::of(call, &args, expect, Effect::None)
    }

    fn create_lock(&mut self, call: Syscall) -> Planned {
        let home = self.member(50);
        // Past its quota a thread only tries with a bad pointer, which is
        // refused before a lock is created.
        let bad = self.state.locks_created >= MAX_LOCKS_CREATED || self.rng.percent(10);
        let (lock, faults) = if bad {
            let kind = self
                .rng
                .pick(&BadPointer::ALL[..6])
                .copied()
                .unwrap_or(BadPointer::Null);
            (self.ctx.arena.bad_pointer(kind), true)
        } else {
            (addr_of_mut!(self.out.lock) as u64, false)
        };
        let expect = Expect::value(Value::Range(0, i64::from(MAX_LOCKS) - 1)).failing_if(&[
            (faults, "a lock record the kernel cannot write"),
            refused_node(home),
        ]);
        Planned::of(call, &[home, lock], expect, Effect::LearnLock)
    }

    fn known_lock(&mut self) -> Option<LiteLock> {
        if self.rng.percent(70) {
            if let Some(&lock) = self.rng.pick(&self.pool.locks) {
                return Some(lock);
            }
        }
        let other = self.ctx.other(self.rng);
        other.locks.pick(self.rng).map(unpack_lock)
    }

    fn ask_lock(&mut self, call: Syscall) -> Planned {
        let (home, number) = match (self.rng.below(100), self.known_lock()) {
            (0..=49, Some(lock)) => (u64::from(lock.home), u64::from(lock.number)),
            (0..=84, _) => (self.member(50), self.rng.below(64)),
            _ => (
                self.member(50),
                self.rng
                    .choose(&[u64::from(MAX_LOCKS), u64::from(u32::MAX)]),
            ),
        };
        let record = addr_of_mut!(self.out.lock) as u64;
        let (lock, faults) = self.or_bad_pointer(90, record, 8, true);
        let expect = Expect::value(Value::Zero).failing_if(&[
            (number as u32 >= MAX_LOCKS, "a lock number no home keeps"),
            (faults, "a lock record the kernel cannot write"),
            refused_node(home),
        ]);
        // A lock written elsewhere (past a bad pointer that does not fault)
        // is not in the record the effect reads.
        let effect = if lock == record {
            Effect::LearnLock
        } else {
            Effect::None
        };
        Planned::of(call, &[home, number, lock], expect, effect)
    }

    fn made_up_lock(&mut self) -> LiteLock {
        LiteLock {
            home: self.member(50) as u32,
            number: self.rng.choose(&[MAX_LOCKS, u32::MAX]),
        }
    }

    /// Mostly of a lock the thread holds (more often for an unlock) or
    /// knows.
    fn lock(&mut self, call: Syscall) -> Planned {
        let locking = call == Syscall::Lock;
        let (held_cut, known_cut) = if locking { (7, 89) } else { (59, 84) };
        let lock = match self.rng.below(100) {
            roll if roll <= held_cut && !self.state.held.is_empty() => {
                self.rng.pick(&self.state.held).copied().unwrap_or_default()
            }
            roll if roll <= known_cut => self.known_lock().unwrap_or_else(|| self.made_up_lock()),
            _ => self.made_up_lock(),
        };
        // The out-parameter filled with the lock, or a bad pointer through
        // which the kernel reads no lock (it cannot read it, or reads the
        // read-only page's pattern, which names no node) and changes none.
        // Through [`BadPointer::Straddle`] it would read whatever lock any
        // thread of the process last had written there (by `lite_ask_lock`,
        // say), and take or release a lock the thread cannot name.
        let bad = !self.rng.percent(93);
        let (pointer, effect) = if bad {
            let kinds: Vec<BadPointer> = BadPointer::ALL
                .into_iter()
                .filter(|&kind| kind != BadPointer::Straddle)
                .collect();
            let kind = self.rng.pick(&kinds).copied().unwrap_or(BadPointer::Null);
            (self.ctx.arena.bad_pointer(kind), Effect::None)
        } else if locking {
            (self.out.lock_record(lock), Effect::Lock(lock))
        } else {
            (self.out.lock_record(lock), Effect::Unlock(lock))
        };
        let (held, uncertain) = (
            self.state.held.contains(&lock),
            self.state.uncertain.contains(&lock),
        );
        let reason = (bad, "a lock record the kernel cannot read");
        if locking {
            let expect = Expect::value(Value::Zero).failing_if(&[
                reason,
                (held && !uncertain, "a lock this thread holds"),
                (lock.number >= MAX_LOCKS, "a lock number no home keeps"),
                (lock.home >= MAX_NODES, REFUSED_NODE),
            ]);
            Planned::of(call, &[pointer], expect, effect).blocking(self.blocking_ms())
        } else {
            let not_held = (!held && !uncertain, "a lock this thread does not hold");
            let expect = Expect::value(Value::Zero).failing_if(&[reason, not_held]);
            Planned::of(call, &[pointer], expect, effect)
        }
    }

    /// The worker maps and touches the region before closing it.
    fn dsm_open(&mut self, call: Syscall) -> Planned {
        let me = u64::from(self.ctx.plan.me);
        let create = self.rng.percent(40);
        let node = if create {
            self.rng.or_random(85, me)
        } else {
            self.member(50)
        };
        let name = self.rng.choose(&DSM_NAMES) + node % 4 * 0x100;
        let size = self
            .rng
            .mostly(90, |rng| rng.choose(&DSM_SIZES), &BAD_DSM_SIZES);
        let flags = match self.rng.below(100) {
            0..=94 => u64::from(create) * u64::from(DSM_CREATE),
            _ => self.rng.choose(&[2, 0x80, 1 << 32 | 2]),
        };
        let password = self.rng.or_random(92, SHARED_PASSWORD);
        let bad_size = BAD_DSM_SIZES.contains(&size) && size != 0;
        let expect = Expect::value(Value::Positive).failing_if(&[
            (flags as u32 & !DSM_CREATE != 0, "unknown flags"),
            (
                create && node as u32 != me as u32,
                "creating a region on another node",
            ),
            (
                create && (size == 0 || bad_size),
                "creating a region of a bad size",
            ),
            (!create && bad_size, "a size no region has"),
            (
                node as u32 == 0 || node as u32 >= MAX_NODES,
                "no node's region",
            ),
        ]);
        Planned::of(
            call,
            &[node, name, size, flags, password],
            expect,
            Effect::TouchRegion { size },
        )
    }

    fn set_priority(&mut self, call: Syscall) -> Planned {
        let priority = self.priority();
        let expect = Expect::value(Value::Range(0, 2)).failing_if(&[refused_priority(priority)]);
        Planned::of(call, &[priority], expect, Effect::None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fuzz::shared::Shared;

    /// FNV-1a, a hash that stays the same across toolchains.
    fn fnv1a(text: &str) -> u64 {
        text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        })
    }

    /// Each step with a line telling all of it, addresses as offsets into
    /// the arena or the out-parameters, which move between runs.
    fn plan_steps(
        seed: u64,
        pool: &Pool,
        state: &ThreadState,
        mut look: impl FnMut(&Arena, &Planned),
    ) -> Vec<(Planned, String)> {
        let arena = Arena::new(2).expect("arena");
        let shared = Shared::map().expect("shared");
        let plan = ProcessPlan {
            seed: 0,
            me: 2,
            nodes: 3,
            procs: 3,
            threads: 2,
            proc: 1,
            deadline_ms: 0,
            shared,
        };
        let ctx = Context {
            plan,
            arena: &arena,
        };
        let mut out = OutParams::new();
        let out_start = std::ptr::addr_of!(*out) as u64;
        let out_end = out_start + std::mem::size_of::<OutParams>() as u64;
        let arena_start = arena.bad_pointer(BadPointer::ReadOnly);
        let place = |value: u64| {
            if arena.holds(value, 0) {
                format!("arena+{:#x}", value - arena_start)
            } else if (out_start..out_end).contains(&value) {
                format!("out+{:#x}", value - out_start)
            } else {
                format!("{value:#x}")
            }
        };
        let mut rng = Rng::from_seed(seed);
        let mut steps = Vec::new();
        for _ in 0..4000 {
            let mut step = rng.split();
            let mut planner = Planner {
                rng: &mut step,
                ctx: &ctx,
                pool,
                state,
                out: &mut out,
            };
            let planned = planner.plan();
            // Through anything but the thread's record the kernel must read
            // no lock (one taken or released there, the thread cannot name),
            // and the call must fail.
            let lock_call = matches!(planned.call, Syscall::Lock | Syscall::Unlock);
            if lock_call && planned.args[0] != std::ptr::addr_of!(out.lock) as u64 {
                let kind = BadPointer::ALL
                    .into_iter()
                    .find(|&kind| arena.bad_pointer(kind) == planned.args[0]);
                let no_lock =
                    |kind: BadPointer| kind == BadPointer::ReadOnly || kind.faults(8, false);
                assert!(kind.is_some_and(no_lock), "{planned:?}");
                assert!(planned.expect.must_fail.is_some(), "{planned:?}");
            }
            look(&arena, &planned);
            let args: Vec<String> = planned.args.iter().map(|&a| place(a)).collect();
            let (m, r) = (&out.multicast, &out.receive);
            let records = [
                m.nodes,
                m.lengths,
                m.msg,
                m.size,
                m.replies,
                m.max_reply,
                m.count.into(),
                m.port_priority.into(),
                r.buf,
                r.max_size,
                r.port.into(),
                r.flags.into(),
                out.lock.home.into(),
                out.lock.number.into(),
            ];
            let records: Vec<String> = records.iter().map(|&a| place(a)).collect();
            let line = format!(
                "{:?} {args:?} {records:?} {:?} {:?} {}\n",
                planned.call, planned.expect, planned.effect, planned.interrupt_after_ms
            );
            steps.push((planned, line));
        }
        steps
    }

    /// Only an intended change to how the fuzzer draws (or to the arena's
    /// layout) may change the digest.
    #[test]
    fn planning_draws_what_it_always_drew() {
        let mut pool = Pool::default();
        let kinds = [
            LmrKind::Allocated { atomic: true },
            LmrKind::Wrapped {
                name: fuzz_name(2, 1, 1, 0),
            },
            LmrKind::Registered,
            LmrKind::Mapping {
                owner: 3,
                name: fuzz_name(3, 0, 2, 1),
            },
        ];
        for (i, kind) in kinds.into_iter().enumerate() {
            pool.add_lmr(LmrRecord {
                handle: 0x1_0000_0001 + i as u64,
                password: SHARED_PASSWORD,
                size: Some([8, 4096, 65536, 64][i]),
                permission: [0x1f, 0xf, 0x3, 0x1][i],
                kind,
            });
        }
        pool.release_lmr(0x1_0000_0009);
        pool.ops.extend([11, 12]);
        pool.calls.push(12);
        pool.reaped(10);
        pool.descriptors.push(21);
        pool.answered(20);
        pool.ports.push((5, 4096));
        let lock = LiteLock { home: 1, number: 7 };
        pool.add_lock(lock);
        let state = ThreadState {
            thread: 1,
            held: vec![lock],
            ..ThreadState::default()
        };
        // Along the way: a released handle must be refused, and a buffer
        // the kernel writes lies in the arena unless the call must fail.
        let mut released = 0;
        let mut reads = 0;
        let look = |arena: &Arena, planned: &Planned| {
            let must_fail = planned.expect.must_fail.is_some();
            let release = matches!(planned.effect, Effect::Release { .. });
            if release && planned.args[0] == 0x1_0000_0009 {
                released += 1;
                assert!(must_fail, "{planned:?}");
            }
            let (buf, len) = (planned.args[1], planned.args[2]);
            let bad = BadPointer::ALL.iter().any(|&k| arena.bad_pointer(k) == buf);
            if planned.call == Syscall::RdmaRead && !bad && !must_fail {
                reads += 1;
                assert!(arena.holds(buf, len.min(MAX_FUZZ_LMR)), "{buf:#x} {len}");
            }
        };
        let steps = plan_steps(3, &pool, &state, look);
        let text: String = steps.iter().map(|(_, line)| line.as_str()).collect();
        assert_eq!(
            fnv1a(&text),
            11_620_304_016_890_769_451,
            "{}",
            &text[..2000]
        );
        assert!(released > 0 && reads > 0, "{released} {reads}");
        // Every call comes up in a few thousand steps, but those of the
        // unprivileged process; another seed draws other steps.
        for call in Syscall::ALL {
            let drawn = steps.iter().any(|(p, _)| p.call == call);
            let by_unprivileged = matches!(call, Syscall::Join | Syscall::Leave);
            assert_eq!(drawn, !by_unprivileged, "{call:?}");
        }
        let other: String = plan_steps(4, &pool, &state, |_, _| {})
            .into_iter()
            .map(|(_, line)| line)
            .collect();
        assert_ne!(other, text);
    }
}
