//! What a call's result changes: the handles, names, ports, locks,
//! operations and descriptors a process holds (its pool) and the locks a
//! thread holds, as far as the result makes them certain.

use lite::sys::{LiteLock, ASYNC_NOWAIT};

use super::calls::Syscall;
use super::errnos::errno_of;
use super::generate::{OutParams, Planned, ThreadState};
use super::pool::{pack_lock, LmrKind, LmrRecord, Pool};
use super::shared::ProcShared;

/// Where not noted, on success only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Effect {
    None,
    /// The result is the handle.
    NewLmr {
        kind: LmrKind,
        size: Option<u64>,
        password: u64,
        permission: u64,
    },
    Release {
        handle: u64,
    },
    Publish {
        name: u64,
        handle: u64,
    },
    RegisterPort {
        port: u32,
        max_size: u64,
    },
    ClosePort {
        port: u32,
    },
    /// From the out-parameter.
    LearnLock,
    /// On `EOWNERDEAD` too.
    Lock(LiteLock),
    Unlock(LiteLock),
    /// The result is the region's descriptor.
    TouchRegion {
        size: u64,
    },
    NewOp,
    /// An operation whose reap returns the reply's length.
    NewCall,
    /// Unless the call was interrupted or told to not wait.
    Reap {
        op: u64,
    },
    /// Every operation started before is reaped.
    Fence,
    /// From the out-parameter.
    Receive,
    Reply {
        descriptor: u64,
    },
    /// The next descriptor is in the out-parameter receive record.
    ReplyAndReceive {
        descriptor: u64,
    },
}

impl Effect {
    pub(crate) fn new_lmr(
        kind: LmrKind,
        size: Option<u64>,
        password: u64,
        permission: u64,
    ) -> Self {
        Effect::NewLmr {
            kind,
            size,
            password,
            permission,
        }
    }
}

pub(crate) fn apply(
    planned: &Planned,
    ret: i64,
    pool: &mut Pool,
    state: &mut ThreadState,
    out: &OutParams,
    own: &ProcShared,
) {
    let ok = ret >= 0;
    let errno = errno_of(ret);
    // A descriptor the kernel wrote out (0 for none).
    let received = |pool: &mut Pool, descriptor: u64| {
        if descriptor != 0 {
            pool.descriptors.push(descriptor);
            own.descriptors.offer(descriptor);
        }
    };
    match planned.effect {
        Effect::None => {}
        Effect::TouchRegion { size } if ok => touch_region(ret, size),
        Effect::NewLmr {
            kind,
            size,
            password,
            permission,
        } if ok => {
            let handle = ret as u64;
            if pool.lmr(handle).is_none() {
                pool.add_lmr(LmrRecord {
                    handle,
                    password,
                    size,
                    permission,
                    kind,
                });
                own.handles.offer(handle);
                if let LmrKind::Wrapped { name } = kind {
                    own.names.offer(name);
                }
            }
        }
        Effect::Release { handle } if ok => pool.release_lmr(handle),
        Effect::Publish { name, handle } if ok => {
            pool.names.push((name, handle));
            own.names.offer(name);
        }
        Effect::RegisterPort { port, max_size } if ok => pool.ports.push((port, max_size)),
        Effect::ClosePort { port } if ok || errno == libc::ENOENT || errno == libc::EPERM => {
            pool.ports.retain(|&(p, _)| p != port)
        }
        Effect::LearnLock if ok => {
            let lock = out.lock;
            pool.add_lock(lock);
            own.locks.offer(pack_lock(lock));
            if planned.call == Syscall::CreateLock {
                state.locks_created += 1;
            }
        }
        Effect::Lock(lock) if ok || errno == libc::EOWNERDEAD => {
            state.uncertain.retain(|&l| l != lock);
            if !state.held.contains(&lock) {
                state.held.push(lock);
            }
        }
        Effect::Lock(lock)
            if ![
                libc::EINTR,
                libc::EAGAIN,
                libc::ENOENT,
                libc::EDEADLK,
                libc::EINVAL,
                libc::EFAULT,
                libc::EHOSTUNREACH,
            ]
            .contains(&errno) =>
        {
            // Neither taken nor refused for sure.
            state.held.retain(|&l| l != lock);
            if !state.uncertain.contains(&lock) {
                state.uncertain.push(lock);
            }
        }
        Effect::Unlock(lock) => {
            if ok {
                state.held.retain(|&l| l != lock);
                state.uncertain.retain(|&l| l != lock);
            } else if state.held.contains(&lock) && errno != libc::EFAULT {
                state.held.retain(|&l| l != lock);
                state.uncertain.push(lock);
            }
        }
        Effect::NewOp | Effect::NewCall if ok => {
            pool.ops.push(ret as u64);
            if planned.effect == Effect::NewCall {
                pool.calls.push(ret as u64);
            }
            own.ops.offer(ret as u64);
        }
        // Reaped whatever the operation's result, unless not waited for;
        // only the process's own ids count (another's may equal a later one).
        Effect::Reap { op }
            if ![libc::EAGAIN, libc::EINTR].contains(&errno)
                && planned.args[1] as u32 & !ASYNC_NOWAIT == 0
                && pool.ops.contains(&op) =>
        {
            pool.reaped(op)
        }
        Effect::Fence if errno != libc::EINTR => {
            pool.ops.clear();
            pool.calls.clear();
        }
        Effect::Receive if ok => received(pool, out.descriptor),
        Effect::Reply { descriptor } => {
            if ok {
                pool.answered(descriptor);
            } else if errno == libc::ENOENT {
                pool.descriptors.retain(|&d| d != descriptor);
            }
        }
        Effect::ReplyAndReceive { descriptor } => {
            if ok {
                pool.answered(descriptor);
                received(pool, out.receive.descriptor);
            } else if errno != libc::EMSGSIZE && errno != libc::EFAULT {
                // Whether the reply went out before the receive failed is
                // unknown: the descriptor is used no more either way.
                pool.descriptors.retain(|&d| d != descriptor);
            }
        }
        _ => {}
    }
    // A release that failed oddly leaves the handle in doubt.
    if let Effect::Release { handle } = planned.effect {
        if !ok && ![libc::EBADF, libc::EPERM, libc::EINVAL, libc::EINTR].contains(&errno) {
            pool.forget_lmr(handle);
        }
    }
}

/// Increments the first word of the first and last page through a mapping,
/// then closes `fd` (a region opened with size 0 is only closed).
fn touch_region(fd: i64, size: u64) {
    let Ok(region) = lite::dsm::Region::from_result(fd as libc::c_long, size) else {
        return;
    };
    if let Ok(map) = region.map() {
        let words = map.words();
        for index in [0, words.len().saturating_sub(512)] {
            if let Some(word) = words.get(index) {
                word.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fuzz::expect::Expect;
    use crate::fuzz::shared::Shared;

    #[test]
    fn effects_track_handles_locks_and_descriptors() {
        let shared = Shared::map().expect("shared");
        let own = &shared.procs[0];
        let mut pool = Pool::default();
        let mut state = ThreadState::default();
        let mut out = OutParams::new();
        let planned = |effect| Planned::of(Syscall::AllocRemote, &[], Expect::default(), effect);
        // The effect of a call that returned `ret`.
        macro_rules! apply {
            ($effect:expr, $ret:expr) => {
                apply(&planned($effect), $ret, &mut pool, &mut state, &out, own)
            };
        }
        let new = Effect::NewLmr {
            kind: LmrKind::Allocated { atomic: false },
            size: Some(64),
            password: 1,
            permission: 0xf,
        };
        apply!(new, 0x1_0000_0001);
        assert_eq!(pool.lmrs.len(), 1);
        let release = Effect::Release {
            handle: 0x1_0000_0001,
        };
        apply!(release, -i64::from(libc::EINTR));
        assert_eq!(pool.lmrs.len(), 1, "an interrupted free releases nothing");
        apply!(release, 0);
        assert!(pool.stale_handles.contains(&0x1_0000_0001));

        let lock = LiteLock { home: 1, number: 3 };
        apply!(Effect::Lock(lock), -i64::from(libc::EOWNERDEAD));
        assert_eq!(state.held, [lock]);
        apply!(Effect::Unlock(lock), 0);
        assert!(state.held.is_empty());

        out.descriptor = 77;
        apply!(Effect::Receive, 5);
        assert_eq!(pool.descriptors, [77]);
        apply!(Effect::Reply { descriptor: 77 }, 0);
        assert!(pool.descriptors.is_empty());
        assert!(pool.stale_descriptors.contains(&77));
    }
}
