// SPDX-License-Identifier: GPL-2.0

//! The device access probe (`/sys/kernel/debug/lite/access_probe`): checks,
//! against every peer, that the peer's device itself confines remote access
//! to LITE's memory regions.
//!
//! For each check the prober asks the target for a queue pair of its own
//! (so that a refused access, which breaks a queue pair, leaves LITE's
//! connections alone), connected to one of the prober's, and for targets: a
//! buffer of its remote memory pool with that buffer's key, and the
//! address of memory outside every region (a canary of known bytes). The
//! prober then tries one access and asks the target what became of the
//! buffer and the canary. The target's device decides every access; no
//! LITE software on the target looks at it.

pub(crate) mod wire;

use crate::internal::node_id::NodeId;
use core::fmt::Write;
use kernel::{new_mutex, prelude::*, sync::Arc, sync::Mutex};

use self::wire::{ProbeMessage, TARGET_LIVE, TARGET_RELEASED, TARGET_REPLACED};
use super::core::{
    peer::Peer,
    subsystem::{Handling, Subsystem},
    wire::{Frame, Status},
    Core,
};
use super::keys::Keys;
use super::util::vec::push_or_return;
use crate::verbs::{
    CompletionQueue, Connection, DmaBuffer, KeyRegistry, RemoteEnd, RemotePool, RECV_DEPTH,
};

/// Bytes each access writes or reads.
const PROBE_LEN: usize = 64;

/// Bytes of the canary, memory no peer may reach.
const CANARY: u8 = 0x5a;

/// Bytes the prober writes.
const PATTERN: u8 = 0xa5;

/// Tries of a write the device must accept (see [`Probe::check_settled`]).
const WRITE_ATTEMPTS: u32 = 3;

/// Pause before trying such a write again, for a change of keys to settle.
const RETRY_PAUSE_MS: u32 = 500;

/// How long a target waits for its peers to take its new keys.
const SETTLE_MS: u32 = 30_000;

/// Beyond the end of any region (segments are at most 4 MiB).
const PAST_REGIONS: u64 = 8 << 20;

/// The checks, each against every peer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Check {
    /// A write into a pool buffer with its key is accepted.
    PoolWrite,
    /// A write to the canary with a pool key is refused.
    OutsideWrite,
    /// A read of the canary with a pool key is refused.
    OutsideRead,
    /// A write past the end of the buffer's region is refused.
    PastEnd,
    /// A write with the key of a region released since is refused.
    Released,
    /// A write with the key a live buffer had before the target replaced
    /// its keys (as it does when a peer is fenced) is refused.
    Replaced,
}

impl Check {
    const ALL: [Check; 6] = [
        Check::PoolWrite,
        Check::OutsideWrite,
        Check::OutsideRead,
        Check::PastEnd,
        Check::Released,
        Check::Replaced,
    ];

    /// What the target offers for the check.
    fn target(self) -> u32 {
        match self {
            Check::Released => TARGET_RELEASED,
            Check::Replaced => TARGET_REPLACED,
            _ => TARGET_LIVE,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Check::PoolWrite => "a write into a buffer of the remote memory pool is accepted",
            Check::OutsideWrite => {
                "a write outside LITE's regions is refused, the memory unchanged"
            }
            Check::OutsideRead => "a read outside LITE's regions is refused",
            Check::PastEnd => "a write past the end of a region is refused",
            Check::Released => "a write with the key of a released region is refused",
            Check::Replaced => {
                "a write with a since replaced key is refused, the memory in use unchanged"
            }
        }
    }
}

/// What a target keeps for one prober's check.
struct OpenProbe {
    prober: NodeId,
    /// Dropped first: no access reaches the buffers once it is gone.
    _connection: Connection,
    target: Option<DmaBuffer>,
    canary: DmaBuffer,
}

/// What a target offers a prober: its queue pair `(qpn, psn)`, the target
/// buffer `(addr, rkey)` and the canary's address.
type ProbeOffer = ((u32, u32), (u64, u32), u64);

/// The probe, as prober and as target.
#[pin_data]
pub(crate) struct Probe {
    core: Arc<Core>,
    /// Replaces the target's keys for [`Check::Replaced`].
    keys: Arc<Keys>,
    /// Open checks of probers, one per prober at a time.
    /// Lock class `lite:probe`: see the lock order in [`crate::internal::core`].
    #[pin]
    open: Mutex<KVec<OpenProbe>>,
}

impl Probe {
    /// The probe of the node of `core`.
    pub(crate) fn new(core: Arc<Core>, keys: Arc<Keys>) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Probe {
                core,
                keys,
                open <- new_mutex!(KVec::new(), "lite:probe"),
            }),
            GFP_KERNEL,
        )
    }

    /// Runs every check against every peer and writes one line per check:
    /// `ok NAME`, or `FAIL NAME: why`.
    pub(crate) fn run(&self, out: &mut impl Write) -> Result {
        let peers = self.core.connected_peers()?;
        if peers.is_empty() {
            writeln!(out, "FAIL no peer to probe").map_err(|_| ENOSPC)?;
        }
        for node in peers.iter() {
            for check in Check::ALL {
                let line = match self.check_settled(*node, check) {
                    Ok(true) => writeln!(out, "ok node {node}: {}", check.name()),
                    Ok(false) => writeln!(out, "FAIL node {node}: {}", check.name()),
                    Err(e) => writeln!(
                        out,
                        "FAIL node {node}: {}: error {}",
                        check.name(),
                        e.to_errno()
                    ),
                };
                line.map_err(|_| ENOSPC)?;
            }
        }
        Ok(())
    }

    /// [`Probe::check`], tried again when a write the device must accept
    /// was refused: the probe's queue pair uses the key the target gave,
    /// which a change of the target's keys meanwhile (another prober's
    /// [`Check::Replaced`], or a fence) retires. A device that refuses
    /// such writes fails every attempt.
    fn check_settled(&self, node: NodeId, check: Check) -> Result<bool> {
        let mut outcome = self.check(node, check);
        for _ in 1..WRITE_ATTEMPTS {
            if check != Check::PoolWrite || matches!(outcome, Ok(true)) {
                break;
            }
            crate::sys::sched::sleep_uninterruptible_ms(RETRY_PAUSE_MS);
            outcome = self.check(node, check);
        }
        outcome
    }

    /// Runs `check` against `node`; whether the device behaved as it must.
    fn check(&self, node: NodeId, check: Check) -> Result<bool> {
        let peer = self.core.peer(node)?;
        let local = self.connection()?;
        let (qpn, psn) = local.endpoint();
        let port = self.core.port();
        let reply = self.core.requests.call(&peer, |request_id| {
            ProbeMessage::Open {
                request_id,
                qpn,
                psn,
                gid_high: gid_half(&port.gid, 0),
                gid_low: gid_half(&port.gid, 8),
                lid: u32::from(port.lid),
                mtu: u32::from(port.mtu_bytes()),
                target: check.target(),
            }
            .to_frame()
        })?;
        let Some(ProbeMessage::Opened {
            status,
            qpn,
            psn,
            target_addr,
            target_rkey,
            lid_mtu,
            canary_addr,
            gid_high,
            gid_low,
            ..
        }) = ProbeMessage::from_frame(&reply)
        else {
            return Err(reply.status().to_error());
        };
        status.to_result()?;
        let target = RemoteEnd {
            qpn,
            psn,
            lid: (lid_mtu >> 16) as u16,
            mtu: lid_mtu as u16,
            gid: gid_of(gid_high, gid_low),
        };
        local.connect(&target, port)?;
        let buffer = DmaBuffer::new(&self.core.device().device, PROBE_LEN)?;
        buffer.fill(0, PROBE_LEN, PATTERN)?;
        let past = target_addr.checked_add(PAST_REGIONS).ok_or(EINVAL)?;
        let accepted = match check {
            Check::PoolWrite | Check::Released | Check::Replaced => {
                local.try_access(true, &buffer, PROBE_LEN, (target_addr, target_rkey))
            }
            Check::OutsideWrite => {
                local.try_access(true, &buffer, PROBE_LEN, (canary_addr, target_rkey))
            }
            Check::OutsideRead => {
                local.try_access(false, &buffer, PROBE_LEN, (canary_addr, target_rkey))
            }
            Check::PastEnd => local.try_access(true, &buffer, PROBE_LEN, (past, target_rkey)),
        };
        drop(local);
        let (written, intact) = self.verify(&peer)?;
        let accepted = accepted?;
        Ok(match check {
            Check::PoolWrite => accepted && written && intact,
            _ => !accepted && !written && intact,
        })
    }

    /// Asks `peer` what became of the targets, which closes its side.
    fn verify(&self, peer: &Peer) -> Result<(bool, bool)> {
        let reply = self.core.requests.call(peer, |request_id| {
            ProbeMessage::Verify { request_id }.to_frame()
        })?;
        match ProbeMessage::from_frame(&reply) {
            Some(ProbeMessage::Verdict {
                status,
                target_written,
                canary_intact,
                ..
            }) => {
                status.to_result()?;
                Ok((target_written, canary_intact))
            }
            _ => Err(reply.status().to_error()),
        }
    }

    /// A connection of the probe's own, in a completion queue of its own,
    /// not yet connected.
    fn connection(&self) -> Result<Connection> {
        let cq = CompletionQueue::new(self.core.device().device.clone(), RECV_DEPTH * 2)?;
        let connection = Connection::new(&self.core.device().pd, &cq, self.core.port(), u32::MAX)?;
        // A stranger to LITE's keys: what it is given is what the device sees.
        connection.keys().use_as_given();
        Ok(connection)
    }

    /// Target side of a [`ProbeMessage::Open`]: connects to the
    /// prober's queue pair `end` and offers it `offered`.
    fn open(
        &self,
        prober: NodeId,
        end: RemoteEnd,
        offered: u32,
    ) -> Result<(OpenProbe, ProbeOffer)> {
        let connection = self.connection()?;
        connection.connect(&end, self.core.port())?;
        let canary = DmaBuffer::new(&self.core.device().device, PROBE_LEN)?;
        canary.fill(0, PROBE_LEN, CANARY)?;
        let canary_addr = canary.dma_range(0, PROBE_LEN)?;
        let (target, remote) = match offered {
            TARGET_RELEASED => (None, self.released_region()?),
            TARGET_LIVE | TARGET_REPLACED => {
                let buffer = self.core.pool.allocate(PROBE_LEN)?;
                // Peers name regions by identity; the probe's queue pair
                // translates nothing, so it gets the key the device knows.
                let (addr, identity) = buffer.remote_range(0, PROBE_LEN)?;
                let key = if offered == TARGET_REPLACED {
                    self.keys.replace_keys()?;
                    self.keys.wait_settled(SETTLE_MS)?;
                    identity
                } else {
                    self.core.pool.registrar().keys().current(identity)
                };
                (Some(buffer), (addr, key))
            }
            _ => return Err(EINVAL),
        };
        let endpoint = connection.endpoint();
        let open = OpenProbe {
            prober,
            _connection: connection,
            target,
            canary,
        };
        Ok((open, (endpoint, remote, canary_addr)))
    }

    /// The address and key of a buffer of a pool released since.
    fn released_region(&self) -> Result<(u64, u32)> {
        let pool = KBox::pin_init(
            RemotePool::new(
                &self.core.device().pd,
                self.core.port(),
                &KeyRegistry::new()?,
            )?,
            GFP_KERNEL,
        )?;
        let buffer = pool.allocate(PROBE_LEN)?;
        let remote = buffer.remote_range(0, PROBE_LEN)?;
        drop(buffer);
        drop(pool);
        Ok(remote)
    }

    fn answer_open(&self, prober: NodeId, message: ProbeMessage) -> Option<Frame> {
        let ProbeMessage::Open {
            request_id,
            qpn,
            psn,
            gid_high,
            gid_low,
            lid,
            mtu,
            target,
        } = message
        else {
            return None;
        };
        // One check per prober at a time: an earlier one ends here.
        self.take(prober);
        let end = u16::try_from(mtu).map(|mtu| RemoteEnd {
            qpn,
            psn,
            lid: lid as u16,
            mtu,
            gid: gid_of(gid_high, gid_low),
        });
        let port = self.core.port();
        let opened = end
            .map_err(|_| EINVAL)
            .and_then(|end| self.open(prober, end, target))
            .and_then(|(open, offer)| {
                let kept = push_or_return(&mut self.open.lock(), open);
                // A check that cannot be kept is closed outside the lock.
                kept.map_err(|(e, _closed)| e)?;
                Ok(offer)
            });
        Some(
            match opened {
                Ok(((qpn, psn), (target_addr, target_rkey), canary_addr)) => ProbeMessage::Opened {
                    request_id,
                    status: Status::OK,
                    qpn,
                    psn,
                    target_addr,
                    target_rkey,
                    lid_mtu: (u32::from(port.lid) << 16) | u32::from(port.mtu_bytes()),
                    canary_addr,
                    gid_high: gid_half(&port.gid, 0),
                    gid_low: gid_half(&port.gid, 8),
                },
                Err(e) => ProbeMessage::Opened {
                    request_id,
                    status: e.into(),
                    qpn: 0,
                    psn: 0,
                    target_addr: 0,
                    target_rkey: 0,
                    lid_mtu: 0,
                    canary_addr: 0,
                    gid_high: 0,
                    gid_low: 0,
                },
            }
            .to_frame(),
        )
    }

    fn answer_verify(&self, prober: NodeId, request_id: u64) -> Frame {
        let verdict = self.take(prober).ok_or(ENOENT).and_then(|open| {
            let written = match &open.target {
                Some(target) => holds(target, PATTERN)?,
                None => false,
            };
            Ok((written, holds(&open.canary, CANARY)?))
        });
        match verdict {
            Ok((target_written, canary_intact)) => ProbeMessage::Verdict {
                request_id,
                status: Status::OK,
                target_written,
                canary_intact,
            },
            Err(e) => ProbeMessage::Verdict {
                request_id,
                status: e.into(),
                target_written: false,
                canary_intact: false,
            },
        }
        .to_frame()
    }

    /// Takes the open check of `prober`, if any.
    fn take(&self, prober: NodeId) -> Option<OpenProbe> {
        let mut table = self.open.lock();
        let index = table.iter().position(|open| open.prober == prober)?;
        // Rebuilt without it: the table holds a few entries at most.
        let mut kept = KVec::with_capacity(table.len(), GFP_KERNEL).ok()?;
        let mut taken = None;
        for (i, open) in core::mem::take(&mut *table).into_iter().enumerate() {
            if i == index {
                taken = Some(open);
            } else {
                // `kept` has room for every entry.
                let _ = kept.push(open, GFP_KERNEL);
            }
        }
        *table = kept;
        taken
    }
}

/// Whether every byte of `buffer` is `byte`.
fn holds(buffer: &DmaBuffer, byte: u8) -> Result<bool> {
    let mut bytes = [0u8; PROBE_LEN];
    buffer.read_bytes(0, &mut bytes)?;
    Ok(bytes.iter().all(|&b| b == byte))
}

/// Eight bytes of a GID from `at` (0 or 8), as one word.
fn gid_half(gid: &[u8; 16], at: usize) -> u64 {
    let mut half = [0u8; 8];
    // PANIC: callers pass 0 or 8, so the range lies within the 16 bytes.
    half.copy_from_slice(&gid[at..at + 8]);
    u64::from_be_bytes(half)
}

/// A GID from its two halves.
fn gid_of(high: u64, low: u64) -> [u8; 16] {
    let mut gid = [0u8; 16];
    // PANIC: constant ranges within the 16 bytes.
    gid[..8].copy_from_slice(&high.to_be_bytes());
    gid[8..].copy_from_slice(&low.to_be_bytes());
    gid
}

impl Subsystem for Probe {
    fn on_message(&self, _peer: &Arc<Peer>, frame: &Frame) -> Handling {
        // Queue pairs are created and destroyed on a worker.
        match ProbeMessage::from_frame(frame) {
            Some(ProbeMessage::Open { .. } | ProbeMessage::Verify { .. }) => Handling::Defer,
            _ => Handling::Done,
        }
    }

    fn serve(&self, peer: &Arc<Peer>, frame: &Frame) -> Option<Frame> {
        match ProbeMessage::from_frame(frame)? {
            ProbeMessage::Verify { request_id } => Some(self.answer_verify(peer.node, request_id)),
            message => self.answer_open(peer.node, message),
        }
    }

    fn on_peer_gone(&self, node: NodeId) {
        while self.take(node).is_some() {}
    }
}
