// SPDX-License-Identifier: GPL-2.0

//! A region as one node sees it: the node's copies of its pages, shared by
//! every process of the node that has it open, and the faults that fetch
//! them and the invalidations that take them back.
//!
//! A copy is valid for reading or for writing under a grant of the
//! region's directory. A fault asks the directory with no lock held,
//! fetches the page from its home with an RDMA read, then installs it
//! unless an invalidation of that grant overtook the answer, in which case
//! it asks again.

use kernel::{new_mutex, page::Page, prelude::*, sync::Arc, sync::Mutex};

use super::wire::{DirectoryAnswer, DirectoryRequest, Op, ACQUIRE_WRITE};
use crate::{
    api::rust_api::{NodeId, Place, Service, Session, MAX_ANSWER},
    sys::shared_mapping::{Anchor, PageLock, PAGE_SIZE},
};

/// What a node's copy of a page allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Access {
    /// No valid copy: the page is mapped nowhere on this node.
    None,
    /// A copy that every holder reads; mapped read-only.
    Read,
    /// The only copy, which this node may change; home's copy is stale.
    Write,
}

/// Times a fault asks the directory again when invalidations overtake its
/// grants before it lets the access fault anew.
const FAULT_ATTEMPTS: usize = 16;

/// One page as this node holds it.
struct Slot {
    /// The copy, once the page was first granted here. Kept until the
    /// region goes, so that a fault and an invalidation lock the same page.
    page: Option<Arc<Page>>,
    access: Access,
    /// The grant `access` holds under.
    grant: u64,
    /// The largest grant the directory invalidated: answers of grants up
    /// to it arrive too late to be installed.
    revoked: u64,
}

/// Which region, and how its node reaches it.
pub(super) struct RegionId {
    /// The node whose directory serves it.
    pub(super) directory: NodeId,
    /// Its name.
    pub(super) name: u64,
    /// Which region of that name.
    pub(super) incarnation: u64,
    /// This node's opening of it, which the directory counts.
    pub(super) opening: u64,
}

/// A region open on this node.
#[pin_data]
pub(crate) struct LocalRegion {
    pub(super) id: RegionId,
    /// What openers on this node must present.
    pub(super) password: u64,
    /// Pages in the region.
    pub(super) pages: usize,
    session: Session,
    /// The region's data LMR, mapped for this node's kernel callers.
    data: u64,
    data_password: u64,
    anchor: Anchor,
    /// Lock class `lite_dsm:pages`, taken after a page's lock (see the
    /// lock order in [`super`]).
    #[pin]
    slots: Mutex<KVVec<Slot>>,
}

impl LocalRegion {
    /// The region `id` of `pages` pages whose data this node reaches as
    /// LMR `data`.
    pub(super) fn new(
        session: Session,
        id: RegionId,
        pages: usize,
        password: u64,
        data: (u64, u64),
    ) -> Result<Arc<Self>> {
        let mut slots = KVVec::with_capacity(pages, GFP_KERNEL)?;
        for _ in 0..pages {
            let slot = Slot {
                page: None,
                access: Access::None,
                grant: 0,
                revoked: 0,
            };
            slots.push(slot, GFP_KERNEL)?;
        }
        let anchor = Anchor::new()?;
        let (data, data_password) = data;
        Arc::pin_init(
            pin_init!(LocalRegion {
                id,
                password,
                pages,
                session,
                data,
                data_password,
                anchor,
                slots <- new_mutex!(slots, "lite_dsm:pages"),
            }),
            GFP_KERNEL,
        )
    }

    /// The session the region was opened in.
    pub(super) fn session(&self) -> &Session {
        &self.session
    }

    /// The mappings of the region on this node.
    pub(super) fn anchor(&self) -> &Anchor {
        &self.anchor
    }

    /// Page `index` with at least `want` access, locked, handed to
    /// `finish`, which gives it to the mm.
    ///
    /// # Errors
    ///
    /// `EINVAL` no such page; `EAGAIN` invalidations kept overtaking the
    /// grants (the access faults again); the directory's errors
    /// (`EHOSTDOWN`: the page was lost with a node); the errors of reading
    /// the page from its home.
    pub(super) fn access<R>(
        &self,
        index: usize,
        want: Access,
        finish: impl FnOnce(PageLock<'_>) -> Result<R>,
    ) -> Result<R> {
        for _ in 0..FAULT_ATTEMPTS {
            let (page, have) = {
                let slots = self.slots.lock();
                let slot = slots.get(index).ok_or(EINVAL)?;
                (slot.page.clone(), slot.access)
            };
            if have >= want {
                if let Some(page) = page {
                    let lock = PageLock::new(&page);
                    if self.slot_access(index)? >= want {
                        return finish(lock);
                    }
                }
                continue;
            }
            let grant = self.ask(index, want)?;
            let page = match page {
                Some(page) => page,
                None => self.page(index)?,
            };
            // A copy valid for reading is current: the directory would
            // have invalidated it before granting anyone else writing.
            let fetched = match have {
                Access::None => Some(self.fetch(index)?),
                _ => None,
            };
            let lock = PageLock::new(&page);
            let mut slots = self.slots.lock();
            let slot = slots.get_mut(index).ok_or(EINVAL)?;
            if slot.revoked >= grant {
                continue;
            }
            if slot.access < want {
                match (&fetched, slot.access) {
                    (Some(bytes), Access::None) => lock.fill(bytes)?,
                    (None, Access::None) => continue,
                    _ => {}
                }
                slot.access = want;
            }
            slot.grant = slot.grant.max(grant);
            drop(slots);
            return finish(lock);
        }
        Err(EAGAIN)
    }

    fn slot_access(&self, index: usize) -> Result<Access> {
        let slots = self.slots.lock();
        Ok(slots.get(index).ok_or(EINVAL)?.access)
    }

    /// Page `index`'s copy, allocated (zeroed) the first time.
    fn page(&self, index: usize) -> Result<Arc<Page>> {
        let new = Arc::new(Page::alloc_page(GFP_KERNEL | __GFP_ZERO)?, GFP_KERNEL)?;
        let mut slots = self.slots.lock();
        let slot = slots.get_mut(index).ok_or(EINVAL)?;
        match &slot.page {
            Some(page) => {
                let page = page.clone();
                // Another fault got there first: the new page is freed with
                // the lock released.
                drop(slots);
                drop(new);
                Ok(page)
            }
            None => {
                slot.page = Some(new.clone());
                Ok(new)
            }
        }
    }

    /// Asks the directory for `want` access to page `index`; returns the
    /// grant.
    fn ask(&self, index: usize, want: Access) -> Result<u64> {
        let request = DirectoryRequest {
            op: Op::Acquire as u8,
            name: self.id.name,
            incarnation: self.id.incarnation,
            opening: self.id.opening,
            index: index as u64,
            password: 0,
            flags: if want == Access::Write {
                ACQUIRE_WRITE
            } else {
                0
            },
        };
        let mut answer = [0u8; MAX_ANSWER];
        let len = self.session.call(
            self.id.directory,
            Service::DsmDirectory,
            &request.encode(),
            &mut answer,
        )?;
        let answer = answer.get(..len).ok_or(EINVAL)?;
        Ok(DirectoryAnswer::decode(answer)?.grant)
    }

    /// Where page `index` lies in the data LMR.
    fn place(&self, index: usize) -> Result<Place> {
        let offset = (index as u64).checked_mul(PAGE_SIZE as u64).ok_or(EINVAL)?;
        Ok(Place {
            offset,
            priority: 0,
            password: self.data_password,
        })
    }

    /// Reads page `index` from its home.
    fn fetch(&self, index: usize) -> Result<KBox<[u8; PAGE_SIZE]>> {
        let mut bytes = zeroed_page()?;
        self.session
            .read(self.data, self.place(index)?, &mut bytes[..])?;
        Ok(bytes)
    }

    /// Gives up this node's copy of page `index` if it holds under `grant`
    /// or an earlier grant, writing it back to its home first if
    /// `write_back` and this node wrote it.
    ///
    /// # Errors
    ///
    /// `EINVAL` no such page, or the errors of writing it back (the copy
    /// is given up all the same).
    pub(super) fn invalidate(&self, index: usize, grant: u64, write_back: bool) -> Result {
        let page = {
            let mut slots = self.slots.lock();
            let slot = slots.get_mut(index).ok_or(EINVAL)?;
            slot.revoked = slot.revoked.max(grant);
            if slot.access == Access::None || slot.grant > grant {
                return Ok(());
            }
            slot.page.clone()
        };
        let Some(page) = page else {
            return Ok(());
        };
        let lock = PageLock::new(&page);
        let wrote = {
            let mut slots = self.slots.lock();
            let slot = slots.get_mut(index).ok_or(EINVAL)?;
            if slot.access == Access::None || slot.grant > grant {
                return Ok(());
            }
            let wrote = slot.access == Access::Write;
            slot.access = Access::None;
            wrote
        };
        self.anchor.take_back(index);
        if !(write_back && wrote) {
            return Ok(());
        }
        let mut bytes = zeroed_page()?;
        lock.copy_to(&mut bytes)?;
        // Unlocked before the network: the directory answers no other
        // request for the page until this one is written back.
        drop(lock);
        self.session
            .write(self.data, self.place(index)?, &bytes[..])
    }

    /// Writes every page this node changed back to its home and gives up
    /// every copy: nothing maps the region on this node any more.
    pub(super) fn write_back_all(&self) -> Result {
        let mut result = Ok(());
        for index in 0..self.pages {
            let held = {
                let slots = self.slots.lock();
                slots
                    .get(index)
                    .filter(|slot| slot.access != Access::None)
                    .map(|slot| slot.grant)
            };
            if let Some(grant) = held {
                let written = self.invalidate(index, grant, true);
                result = result.and(written);
            }
        }
        result
    }

    /// Stops reaching the region's data, once nothing of it is held here.
    pub(super) fn release_data(&self) {
        let _ = self.session.unmap(self.data);
    }
}

/// A page-sized buffer.
fn zeroed_page() -> Result<KBox<[u8; PAGE_SIZE]>> {
    KBox::init(kernel::init::zeroed(), GFP_KERNEL)
}
