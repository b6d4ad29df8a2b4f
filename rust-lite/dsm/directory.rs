// SPDX-License-Identifier: GPL-2.0

//! A region's directory, kept by the node the region was created on: which
//! nodes hold each page and how, and the grants that order them.
//!
//! Each page has one writer or any number of readers. Before granting
//! writing, the directory invalidates every other copy; before granting
//! reading, it invalidates the writer, which first writes the page back to
//! its home. Grants of a page only grow, so a node can tell an answer that
//! an invalidation overtook. Requests are served one at a time, by the
//! node's directory thread.

use kernel::{new_mutex, prelude::*, sync::Arc, sync::Mutex};

use super::wire::Invalidation;
use crate::{
    api::rust_api::{NodeId, QuotaCharge, Service, Session},
    errno,
};

/// Who holds one page. An invalidation names the page's last grant,
/// which ends every grant its holder had.
struct PageEntry {
    writer: Option<NodeId>,
    /// The readers, one bit per node id ([`NodeId::bit`]).
    readers: u64,
    /// The page's last grant.
    last_grant: u64,
    /// Its only current copy was on a node that is gone.
    lost: bool,
}

/// One node's opening of the region, which lasts until the node closes
/// its last file of it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct Opening {
    pub(super) node: NodeId,
    /// Drawn at random by the node: a `Detach` that arrives late, after
    /// the node opened the region again, ends only the opening it names.
    pub(super) id: u64,
}

/// What the directory's lock guards.
struct DirectoryState {
    pages: KVVec<PageEntry>,
    /// The openings of the region; a slot is free once its opening ended.
    openings: KVec<Option<Opening>>,
    /// What the creator's user holds of its quotas for the region, until
    /// the region is removed.
    charge: Option<QuotaCharge>,
}

impl DirectoryState {
    /// Whether `node` has the region open.
    fn opened_by(&self, node: NodeId) -> bool {
        self.openings.iter().flatten().any(|held| held.node == node)
    }
}

/// The directory of one region.
#[pin_data]
pub(super) struct Directory {
    pub(super) name: u64,
    pub(super) incarnation: u64,
    /// The region's size in bytes, a whole number of pages.
    pub(super) size: u64,
    /// What openers must present.
    pub(super) password: u64,
    /// The region's data LMR and its password.
    pub(super) data: u64,
    pub(super) data_password: u64,
    /// Lock class `lite_dsm:directory`: held across invalidations, which
    /// the nodes' cache threads serve without it (see [`super`]).
    #[pin]
    state: Mutex<DirectoryState>,
}

/// The data LMR of a new region, and what names it.
pub(super) struct Data {
    pub(super) handle: u64,
    pub(super) password: u64,
    pub(super) incarnation: u64,
}

impl Directory {
    /// The directory of a new region `name` of `pages` pages of `size`
    /// bytes, whose data is `data`, opened by `creator`, whose user pays
    /// `charge`.
    pub(super) fn new(
        name: u64,
        size: u64,
        pages: usize,
        password: u64,
        data: Data,
        creator: (Opening, Option<QuotaCharge>),
    ) -> Result<Arc<Self>> {
        let (creator, charge) = creator;
        let mut entries = KVVec::with_capacity(pages, GFP_KERNEL)?;
        for _ in 0..pages {
            let entry = PageEntry {
                writer: None,
                readers: 0,
                last_grant: 0,
                lost: false,
            };
            entries.push(entry, GFP_KERNEL)?;
        }
        let mut openings = KVec::new();
        openings.push(Some(creator), GFP_KERNEL)?;
        let state = DirectoryState {
            pages: entries,
            openings,
            charge,
        };
        let Data {
            handle,
            password: data_password,
            incarnation,
        } = data;
        Arc::pin_init(
            pin_init!(Directory {
                name,
                incarnation,
                size,
                password,
                data: handle,
                data_password,
                state <- new_mutex!(state, "lite_dsm:directory"),
            }),
            GFP_KERNEL,
        )
    }

    /// Counts `opening` of the region.
    pub(super) fn attach(&self, opening: Opening) -> Result {
        super::insert(&mut self.state.lock().openings, opening)
    }

    /// Ends `opening`, if the directory counts it, and the openings of
    /// nodes that are no members any more; returns whether no opening is
    /// left. A node whose last opening ended wrote its pages back first,
    /// so it holds no copies any more; the copies of nodes that are gone
    /// stay recorded, for [`Directory::acquire`] to take for lost.
    pub(super) fn detach(&self, opening: Opening, is_member: impl Fn(NodeId) -> bool) -> bool {
        let mut state = self.state.lock();
        for slot in state.openings.iter_mut() {
            if slot.is_some_and(|held| held == opening || !is_member(held.node)) {
                *slot = None;
            }
        }
        if !state.opened_by(opening.node) {
            let bit = opening.node.bit().unwrap_or(0);
            for entry in state.pages.iter_mut() {
                if entry.writer == Some(opening.node) {
                    entry.writer = None;
                }
                entry.readers &= !bit;
            }
        }
        state.openings.iter().all(Option::is_none)
    }

    /// Gives the creator's quota back: the region is being removed.
    pub(super) fn give_back_charge(&self) {
        let charge = self.state.lock().charge.take();
        drop(charge);
    }

    /// Grants `node` reading, or writing if `write`, of page `index`, once
    /// every copy that would conflict is gone; returns the grant.
    ///
    /// # Errors
    ///
    /// `EINVAL` no such page; `ENOENT` `node` does not have the region
    /// open (it closed it, or is leaving); `EHOSTDOWN` the page's only
    /// current copy was lost with its node; the error that kept a holder
    /// from giving up its copy (the request may be made again).
    pub(super) fn acquire(
        &self,
        session: &Session,
        node: NodeId,
        index: usize,
        write: bool,
    ) -> Result<u64> {
        let requester = node.bit().ok_or(EINVAL)?;
        let mut state = self.state.lock();
        if !state.opened_by(node) {
            return Err(ENOENT);
        }
        let entry = state.pages.get_mut(index).ok_or(EINVAL)?;
        if entry.lost {
            return Err(errno::EHOSTDOWN());
        }
        if let Some(writer) = entry.writer {
            if writer != node {
                match self.invalidate(session, index, writer, entry.last_grant, true) {
                    Err(e) if e == errno::EHOSTDOWN() => {
                        entry.lost = true;
                        entry.writer = None;
                        return Err(e);
                    }
                    result => result?,
                }
            }
            entry.writer = None;
        }
        if write {
            for reader in NodeId::all() {
                let bit = reader.bit().unwrap_or(0);
                if entry.readers & bit == 0 {
                    continue;
                }
                if reader != node {
                    match self.invalidate(session, index, reader, entry.last_grant, false) {
                        // A reader that is gone took no change with it.
                        Err(e) if e == errno::EHOSTDOWN() => {}
                        result => result?,
                    }
                }
                entry.readers &= !bit;
            }
            entry.writer = Some(node);
        } else {
            entry.readers |= requester;
        }
        entry.last_grant += 1;
        Ok(entry.last_grant)
    }

    /// Makes `holder` give up every copy of page `index` it holds under
    /// grants up to `grant`, written back first if `write_back`.
    fn invalidate(
        &self,
        session: &Session,
        index: usize,
        holder: NodeId,
        grant: u64,
        write_back: bool,
    ) -> Result {
        let order = Invalidation {
            name: self.name,
            incarnation: self.incarnation,
            index: index as u64,
            grant,
            write_back: u8::from(write_back),
        };
        let mut answer = [0u8; 0];
        match session.call(holder, Service::DsmCache, &order.encode(), &mut answer) {
            // A node that serves no copies wrote back everything it held
            // when it closed its last region.
            Err(e) if e == errno::ECONNREFUSED() => Ok(()),
            result => result.map(|_| ()),
        }
    }
}
