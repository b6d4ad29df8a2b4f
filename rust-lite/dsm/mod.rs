// SPDX-License-Identifier: GPL-2.0

//! LITE-DSM: distributed shared memory in the kernel, built on LITE's
//! kernel API ([`crate::api::rust_api`]) and nothing of its internals.
//!
//! A region is named cluster-wide by the node it was created on and a
//! 64-bit name. Its data is an LMR of that node, spread over the cluster by
//! LITE (so a region may be larger than one node's memory) and published
//! under the region's name with a password only LITE-DSM knows. Processes
//! open a region with `lite_dsm_open` and `mmap` the descriptor; every
//! process of a node shares the node's copies of its pages.
//!
//! Coherence is per page, single writer or many readers, kept by the
//! region's directory on its node ([`directory`]): a read fault asks for
//! reading and fetches the page from its home with an RDMA read; a write
//! fault asks for writing, for which the directory first takes every other
//! copy back (invalidations are LITE messages, answered once done), the
//! writer's after it wrote the page back. Every access therefore sees the
//! last write of the page, and accesses ordered by `lite_lock` /
//! `lite_unlock` or `lite_dist_barrier` see each other's writes; no DSM
//! call is needed to acquire or release.
//!
//! Failures: a page whose home or only writer is gone, or whose directory
//! is gone, cannot be faulted in; the access gets `SIGBUS`. Closing the
//! last file of a region on a node writes its changed pages back.
//!
//! # Lock order
//!
//! LITE-DSM's locks, by lockdep class: `lite_dsm:open` (an open, or the
//! start or stop of the node's DSM threads), `lite_dsm:state` (the node's
//! regions and directories), `lite_dsm:pages` (a region's copies),
//! `lite_dsm:directory` (a directory's holders) and `lite_dsm:closing` (a
//! close a kernel thread carries out for a closing task). This is the only nesting
//! of two of them (outer first); the test command checks that lockdep sees
//! no other:
//!
//! - `lite_dsm:open` → `lite_dsm:state`
//!
//! LITE-DSM calls LITE's API holding `lite_dsm:open` (to open a region)
//! and `lite_dsm:directory` (while the directory waits for nodes to give
//! up their copies, each call bounded by LITE's reply timeout and failing
//! with `EHOSTDOWN` once the node is declared gone), so LITE's locks nest
//! inside those; LITE never calls LITE-DSM holding one of its locks. The
//! cache threads that answer a directory take no directory lock, and a
//! fault, which waits for a directory, holds no lock while it does.
//! `lite_dsm:state` and `lite_dsm:pages` are never held across a call. A
//! page's lock (`lock_page`, which lockdep does not track) is taken before
//! `lite_dsm:pages` and never held across a call.

#![deny(unsafe_code)]

use kernel::{
    c_str, new_condvar, new_mutex,
    prelude::*,
    sync::{Arc, CondVar, Mutex},
};

use crate::{
    api::rust_api::{
        before_every_leave, Answer, Handler, LeaveHook, NodeId, QuotaCharge, Service, Session,
        MAX_ANSWER, PERMISSION_READ_WRITE,
    },
    errno,
    sys::{
        kthread, sched::sleep_uninterruptible_ms, secret::random_bytes, set_once::SetOnce,
        shared_mapping::PAGE_SIZE,
    },
};

mod directory;
pub(crate) mod region;
mod wire;

use directory::{Data, Directory, Opening};
use region::{Access, LocalRegion, RegionId};
use wire::{DirectoryAnswer, DirectoryRequest, Invalidation, Op, OPEN_CREATE};

/// `lite_dsm_open` flag: create the region on this node if it does not
/// exist (`LITE_DSM_CREATE`).
pub(crate) const DSM_CREATE: u32 = 0x1;

/// How often a `Detach` is sent before it is given up, and the pause
/// between tries: a directory busy with invalidations may let a call time
/// out, and a lost `Detach` would keep the region for good.
const DETACH_TRIES: u32 = 10;
const DETACH_RETRY_MS: u32 = 200;

/// Largest region (`LITE_MAX_LMR_SIZE`).
const MAX_REGION_SIZE: u64 = 1 << 40;

/// LITE-DSM on this node, from LITE's load to its unload.
pub(crate) static DSM: SetOnce<Dsm> = SetOnce::new();

/// A region open on this node and the files open on it.
struct OpenRegion {
    region: Arc<LocalRegion>,
    files: usize,
}

/// What the node's DSM lock guards.
struct State {
    /// The membership the regions and directories belong to.
    session: Option<Session>,
    /// Whether this node's directory and cache threads run.
    serving: bool,
    /// Regions open here; a slot is free once its region closed.
    regions: KVec<Option<OpenRegion>>,
    /// Directories of regions created here.
    directories: KVec<Option<Arc<Directory>>>,
    /// The quota charge of the region an open of this node may create
    /// (by its name), or why the caller could not be charged, which the
    /// directory takes if it creates the region; set and cleared under
    /// `opening`.
    creation_charge: Option<(u64, Result<QuotaCharge>)>,
}

impl State {
    fn idle(&self) -> bool {
        self.regions.iter().all(Option::is_none) && self.directories.iter().all(Option::is_none)
    }

    fn region(&mut self, directory: NodeId, name: u64) -> Option<&mut OpenRegion> {
        self.regions
            .iter_mut()
            .flatten()
            .find(|open| open.region.id.directory == directory && open.region.id.name == name)
    }

    fn open_region(&mut self, region: &Arc<LocalRegion>) -> Option<&mut OpenRegion> {
        self.regions
            .iter_mut()
            .flatten()
            .find(|open| Arc::ptr_eq(&open.region, region))
    }

    fn directory(&self, name: u64) -> Option<&Arc<Directory>> {
        self.directories
            .iter()
            .flatten()
            .find(|dir| dir.name == name)
    }
}

/// Puts `value` in the first free slot of `slots`, or in a new one.
fn insert<T>(slots: &mut KVec<Option<T>>, value: T) -> Result {
    match slots.iter_mut().find(|slot| slot.is_none()) {
        Some(free) => *free = Some(value),
        None => slots.push(Some(value), GFP_KERNEL)?,
    }
    Ok(())
}

/// Empties the slots of `slots` holding what `remove` picks; returns what
/// they held, for the caller to drop with its lock released.
fn remove<T>(slots: &mut KVec<Option<T>>, remove: impl Fn(&T) -> bool) -> KVec<T> {
    let mut removed = KVec::new();
    for slot in slots.iter_mut() {
        if slot.as_ref().is_some_and(&remove) {
            if let Some(value) = slot.take() {
                // Without memory, the value is dropped here instead.
                let _ = removed.push(value, GFP_NOWAIT);
            }
        }
    }
    removed
}

/// LITE-DSM's state on this node.
#[pin_data]
pub(crate) struct Dsm {
    #[pin]
    opening: Mutex<()>,
    #[pin]
    state: Mutex<State>,
}

impl Dsm {
    /// Makes LITE-DSM available until LITE unloads.
    pub(crate) fn init() -> Result {
        let dsm = Arc::pin_init(
            pin_init!(Dsm {
                opening <- new_mutex!((), "lite_dsm:open"),
                state <- new_mutex!(
                    State {
                        session: None,
                        serving: false,
                        regions: KVec::new(),
                        directories: KVec::new(),
                        creation_charge: None,
                    },
                    "lite_dsm:state"
                ),
            }),
            GFP_KERNEL,
        )?;
        DSM.set(dsm).map_err(|_| EBUSY)?;
        before_every_leave(Arc::new(WriteBackBeforeLeave, GFP_KERNEL)?)
    }

    /// LITE-DSM, once LITE has loaded.
    pub(crate) fn get() -> Result<&'static Dsm> {
        DSM.get().ok_or(ENODEV)
    }

    /// Opens region `name` of `node` for the calling process (creating it
    /// on this node with [`DSM_CREATE`]); returns a file descriptor to map.
    ///
    /// # Errors
    ///
    /// `ENOTCONN` not a member; `EINVAL` unknown flags, a size of 0 or over
    /// `LITE_MAX_LMR_SIZE` on creation, creation on another node, or a size
    /// other than the region's; `ENOENT` no such region; `EACCES` a wrong
    /// password; `EEXIST` an LMR of this node is published under the name;
    /// `EDQUOT` creating beyond the caller's user's quotas, which charge a
    /// region as an LMR of its size published under one name; the errors
    /// of allocating the region's memory or reaching its node.
    pub(crate) fn open(
        &self,
        node: NodeId,
        name: u64,
        size: u64,
        flags: u32,
        password: u64,
    ) -> Result<i32> {
        if flags & !DSM_CREATE != 0 {
            return Err(EINVAL);
        }
        let session = Session::current()?;
        if !node.is_member_id() {
            return Err(EINVAL);
        }
        let create = flags & DSM_CREATE != 0;
        if create && (node != session.node_id() || size == 0 || size > MAX_REGION_SIZE) {
            return Err(EINVAL);
        }
        let size = round_to_pages(size)?;
        // Charged before anything is created, and kept only if the region
        // is; a caller beyond its quota may still open an existing region.
        let charge = create.then(|| session.charge_caller_for_lmr(size));
        let region = {
            let _opening = self.opening.lock();
            self.state.lock().creation_charge = charge.map(|charge| (name, charge));
            let region = self
                .serve(&session)
                .and_then(|()| self.find_or_attach(&session, node, name, size, create, password));
            let unused = self.state.lock().creation_charge.take();
            drop(unused);
            region
        };
        let region = match region {
            Ok(region) => region,
            Err(e) => {
                // The threads started for the region serve nothing else.
                self.stop_if_idle();
                return Err(e);
            }
        };
        match region.anchor().open(region.clone()) {
            Ok(fd) => Ok(fd),
            Err(e) => {
                self.release(region);
                Err(e)
            }
        }
    }

    /// The region a new file opens, counted as open by one more file.
    fn find_or_attach(
        &self,
        session: &Session,
        node: NodeId,
        name: u64,
        size: u64,
        create: bool,
        password: u64,
    ) -> Result<Arc<LocalRegion>> {
        if let Some(open) = self.state.lock().region(node, name) {
            let region = &open.region;
            if region.password != password {
                return Err(EACCES);
            }
            if size != 0 && size != region.pages as u64 * PAGE_SIZE as u64 {
                return Err(EINVAL);
            }
            open.files += 1;
            return Ok(region.clone());
        }
        let opening = u64::from_ne_bytes(random_bytes());
        let request = DirectoryRequest {
            op: Op::Open as u8,
            name,
            incarnation: 0,
            opening,
            index: size,
            password,
            flags: if create { OPEN_CREATE } else { 0 },
        };
        let answer = match call_directory(session, node, &request) {
            Ok(answer) => answer,
            // A node that serves no directory has no region.
            Err(e) if e == errno::ECONNREFUSED() => return Err(ENOENT),
            Err(e) => {
                // The directory may have counted the opening before the
                // call ended (a signal, say): it is told otherwise.
                detach_later(session, node, name, opening);
                return Err(e);
            }
        };
        let id = RegionId {
            directory: node,
            name,
            incarnation: answer.incarnation,
            opening,
        };
        let attached = usize::try_from(answer.pages)
            .map_err(|_| EINVAL)
            .and_then(|pages| {
                let data = session.map_published(
                    node,
                    name,
                    PERMISSION_READ_WRITE,
                    answer.data_password,
                )?;
                let region = LocalRegion::new(
                    session.clone(),
                    id,
                    pages,
                    password,
                    (data, answer.data_password),
                )
                .and_then(|region| {
                    let open = OpenRegion {
                        region: region.clone(),
                        files: 1,
                    };
                    insert(&mut self.state.lock().regions, open)?;
                    Ok(region)
                });
                if region.is_err() {
                    let _ = session.unmap(data);
                }
                region
            });
        if attached.is_err() {
            detach_later(session, node, name, opening);
        }
        attached
    }

    /// Starts this node's directory and cache threads for `session`,
    /// forgetting what a membership left before held. Called with
    /// `opening` held.
    fn serve(&self, session: &Session) -> Result {
        let forgotten = {
            let mut state = self.state.lock();
            let current = state.session.as_ref().is_some_and(|s| s.is(session));
            if current && state.serving {
                return Ok(());
            }
            if current {
                None
            } else {
                // Regions of a cluster left are only reached through their
                // files, whose accesses fail from now on.
                state.session = Some(session.clone());
                let regions = remove(&mut state.regions, |_| true);
                Some((regions, remove(&mut state.directories, |_| true)))
            }
        };
        drop(forgotten);
        let directory: Arc<dyn Handler> = Arc::new(DirectoryService, GFP_KERNEL)?;
        let cache: Arc<dyn Handler> = Arc::new(CacheService, GFP_KERNEL)?;
        session.serve(Service::DsmDirectory, directory)?;
        if let Err(e) = session.serve(Service::DsmCache, cache) {
            let _ = session.stop_serving(Service::DsmDirectory);
            return Err(e);
        }
        self.state.lock().serving = true;
        Ok(())
    }

    /// Stops this node's DSM threads if the node has neither regions nor
    /// directories. Not called from those threads.
    fn stop_if_idle(&self) {
        let _opening = self.opening.lock();
        let session = {
            let mut state = self.state.lock();
            if !state.idle() {
                return;
            }
            state.serving = false;
            state.session.take()
        };
        if let Some(session) = session {
            let _ = session.stop_serving(Service::DsmCache);
            let _ = session.stop_serving(Service::DsmDirectory);
        }
    }

    /// One file of `region` was closed; the last one writes its pages back
    /// and tells the directory.
    pub(crate) fn release(&self, region: Arc<LocalRegion>) {
        let last = {
            let mut state = self.state.lock();
            match state.open_region(&region) {
                Some(open) => {
                    open.files -= 1;
                    open.files == 0
                }
                // A region of a membership left: nothing to tell.
                None => false,
            }
        };
        if !last {
            return;
        }
        // The rest waits for the network. A kernel thread does it, which no
        // signal interrupts: a process killed with the region open loses
        // none of its writes, and the directory hears of the close. The
        // closing task waits for it unless a signal comes.
        let closed = region.clone();
        let closing = Arc::pin_init(
            pin_init!(Closing {
                region: closed,
                done <- new_mutex!(false, "lite_dsm:closing"),
                finished <- new_condvar!("lite_dsm:closed"),
            }),
            GFP_KERNEL,
        );
        let spawned = closing.and_then(|closing| {
            kthread::spawn(c_str!("lite_dsm_close"), closing.clone(), close_region)?;
            Ok(closing)
        });
        match spawned {
            Ok(closing) => {
                let mut done = closing.done.lock();
                while !*done {
                    if closing.finished.wait_interruptible(&mut done) {
                        break;
                    }
                }
            }
            Err(_) => self.close(region),
        }
    }

    /// Before this node leaves the cluster: writes back the pages every
    /// region open here changed and ends the node's openings, so the
    /// cluster keeps every write (LITE then moves the data's chunks held
    /// here, as for any LMR) and the directories count the node out. Files
    /// stay open; their accesses fail once the directory no longer counts
    /// the node. A region whose pages could not all be written back stays
    /// counted, so that its directory takes those pages for lost, not
    /// current, when the node is gone.
    pub(crate) fn before_leave(&self) {
        let _opening = self.opening.lock();
        let regions = {
            let state = self.state.lock();
            let mut regions = KVec::new();
            for open in state.regions.iter().flatten() {
                if regions.push(open.region.clone(), GFP_KERNEL).is_err() {
                    break;
                }
            }
            regions
        };
        for region in regions.iter() {
            if region.write_back_all().is_ok() {
                let id = &region.id;
                detach(region.session(), id.directory, id.name, id.opening);
            }
        }
    }

    /// Writes back the pages of `region`, which no file has open, and
    /// closes it unless a file opened it again meanwhile.
    fn close(&self, region: Arc<LocalRegion>) {
        // Still findable meanwhile, so that invalidations wait for the
        // pages they ask for to be written back.
        let _ = region.write_back_all();
        let removed = remove(&mut self.state.lock().regions, |open| {
            Arc::ptr_eq(&open.region, &region) && open.files == 0
        });
        if !removed.is_empty() {
            drop(removed);
            region.release_data();
            let id = &region.id;
            detach(region.session(), id.directory, id.name, id.opening);
            self.stop_if_idle();
        }
    }

    /// Checks that pages `first..first + pages` are in `region`.
    pub(crate) fn check_range(region: &LocalRegion, first: usize, pages: usize) -> Result {
        match first.checked_add(pages) {
            Some(end) if end <= region.pages => Ok(()),
            _ => Err(EINVAL),
        }
    }

    /// Serves a request to one of this node's directories.
    fn serve_directory(&self, message: &[u8], from: NodeId, answer: &mut dyn Answer) -> Result {
        let (request, op) = DirectoryRequest::decode(message)?;
        let session = self.state.lock().session.clone().ok_or(errno::ENOTCONN())?;
        let reply = match op {
            Op::Open => self.open_directory(&session, from, &request)?,
            Op::Acquire => {
                let directory = self.directory(request.name, request.incarnation)?;
                let index = usize::try_from(request.index).map_err(|_| EINVAL)?;
                let write = request.flags & wire::ACQUIRE_WRITE != 0;
                DirectoryAnswer {
                    pages: 0,
                    incarnation: 0,
                    data_password: 0,
                    grant: directory.acquire(&session, from, index, write)?,
                }
            }
            Op::Detach => {
                let found = self.state.lock().directory(request.name).cloned();
                if let Some(directory) = found {
                    let opening = Opening {
                        node: from,
                        id: request.opening,
                    };
                    if directory.detach(opening, |node| session.is_member(node)) {
                        self.remove_directory(&session, &directory);
                    }
                }
                return answer.reply(&[]);
            }
        };
        answer.reply(&reply.encode())
    }

    /// The directory of region `name`, `incarnation`.
    fn directory(&self, name: u64, incarnation: u64) -> Result<Arc<Directory>> {
        let state = self.state.lock();
        match state.directory(name) {
            Some(directory) if directory.incarnation == incarnation => Ok(directory.clone()),
            _ => Err(ENOENT),
        }
    }

    /// Opens, or creates, a region of this node for node `from`.
    fn open_directory(
        &self,
        session: &Session,
        from: NodeId,
        request: &DirectoryRequest,
    ) -> Result<DirectoryAnswer> {
        let opening = Opening {
            node: from,
            id: request.opening,
        };
        let found = self.state.lock().directory(request.name).cloned();
        let directory = match found {
            Some(directory) => {
                if directory.password != request.password {
                    return Err(EACCES);
                }
                if request.index != 0 && request.index != directory.size {
                    return Err(EINVAL);
                }
                directory.attach(opening)?;
                directory
            }
            None if request.flags & OPEN_CREATE != 0 && from == session.node_id() => {
                self.create_directory(session, opening, request)?
            }
            None => return Err(ENOENT),
        };
        Ok(DirectoryAnswer {
            pages: directory.size / PAGE_SIZE as u64,
            incarnation: directory.incarnation,
            data_password: directory.data_password,
            grant: 0,
        })
    }

    /// Creates region `request.name` of `request.index` bytes on this node.
    fn create_directory(
        &self,
        session: &Session,
        creator: Opening,
        request: &DirectoryRequest,
    ) -> Result<Arc<Directory>> {
        let size = request.index;
        let pages = usize::try_from(size / PAGE_SIZE as u64).map_err(|_| EINVAL)?;
        let charge = {
            let mut state = self.state.lock();
            match state.creation_charge.take() {
                Some((name, charge)) if name == request.name => Some(charge),
                other => {
                    state.creation_charge = other;
                    None
                }
            }
        };
        // The creator's user is beyond its quota: nothing is created.
        let charge = charge.transpose()?;
        let data_password = u64::from_ne_bytes(random_bytes());
        let handle = session.alloc_spread(size, data_password)?;
        let data = Data {
            handle,
            password: data_password,
            // Never 0, which no region is.
            incarnation: u64::from_ne_bytes(random_bytes()) | 1,
        };
        let created = session
            .publish(request.name, handle, PERMISSION_READ_WRITE, data_password)
            .and_then(|()| {
                let creator = (creator, charge);
                Directory::new(request.name, size, pages, request.password, data, creator)
            })
            .and_then(|directory| {
                let mut state = self.state.lock();
                // An open that a signal ended may have let the node stop
                // serving while its request waited here: a directory
                // created now would be served by nobody, and never freed.
                if !state.serving {
                    return Err(errno::ECONNREFUSED());
                }
                insert(&mut state.directories, directory.clone())?;
                Ok(directory)
            });
        if created.is_err() {
            let _ = session.free(handle);
        }
        created
    }

    /// Removes a directory no node has open, with its data.
    fn remove_directory(&self, session: &Session, directory: &Arc<Directory>) {
        let (removed, idle) = {
            let mut state = self.state.lock();
            let removed = remove(&mut state.directories, |d| Arc::ptr_eq(d, directory));
            (removed, state.idle())
        };
        drop(removed);
        let _ = session.free(directory.data);
        // Before the `Detach` that removed it is answered, so the quota is
        // back once the last close returns.
        directory.give_back_charge();
        if idle {
            // This thread is one of those to stop: another one stops them.
            let _ = Arc::new((), GFP_KERNEL)
                .map_err(Error::from)
                .and_then(|token| kthread::spawn(c_str!("lite_dsm_stop"), token, stop_when_idle));
        }
    }

    /// Serves an invalidation of this node's copy of a page.
    fn serve_cache(&self, message: &[u8], from: NodeId, answer: &mut dyn Answer) -> Result {
        let order = Invalidation::decode(message)?;
        let region = self
            .state
            .lock()
            .region(from, order.name)
            .filter(|open| open.region.id.incarnation == order.incarnation)
            .map(|open| open.region.clone());
        if let Some(region) = region {
            let index = usize::try_from(order.index).map_err(|_| EINVAL)?;
            region.invalidate(index, order.grant, order.write_back != 0)?;
        }
        answer.reply(&[])
    }

    /// The page a fault maps, with at least `want` access.
    pub(crate) fn fault<R>(
        region: &LocalRegion,
        index: usize,
        write: bool,
        finish: impl FnOnce(crate::sys::shared_mapping::PageLock<'_>) -> Result<R>,
    ) -> Result<R> {
        let want = if write { Access::Write } else { Access::Read };
        region.access(index, want, finish)
    }
}

/// A close that a kernel thread carries out, and the closing task awaits.
#[pin_data]
struct Closing {
    region: Arc<LocalRegion>,
    /// Lock class `lite_dsm:closing`, taken with no other lock held.
    #[pin]
    done: Mutex<bool>,
    #[pin]
    finished: CondVar,
}

/// Body of the thread that closes a region no file has open.
fn close_region(closing: Arc<Closing>) {
    if let Ok(dsm) = Dsm::get() {
        dsm.close(closing.region.clone());
    }
    *closing.done.lock() = true;
    closing.finished.notify_all();
}

/// A `Detach` that a kernel thread sends.
struct LateDetach {
    session: Session,
    directory: NodeId,
    name: u64,
    opening: u64,
}

/// Tells the directory on `directory` that this node's `opening` of region
/// `name` ended, from a kernel thread, which no signal interrupts.
fn detach_later(session: &Session, directory: NodeId, name: u64, opening: u64) {
    let job = LateDetach {
        session: session.clone(),
        directory,
        name,
        opening,
    };
    let send = |job: Arc<LateDetach>| {
        detach(&job.session, job.directory, job.name, job.opening);
    };
    let spawned = Arc::new(job, GFP_KERNEL)
        .map_err(Error::from)
        .and_then(|job| kthread::spawn(c_str!("lite_dsm_detach"), job, send));
    if spawned.is_err() {
        detach(session, directory, name, opening);
    }
}

/// Body of the thread that stops the DSM threads once idle.
fn stop_when_idle(_token: Arc<()>) {
    if let Ok(dsm) = Dsm::get() {
        dsm.stop_if_idle();
    }
}

/// Rounds `size` up to whole pages.
fn round_to_pages(size: u64) -> Result<u64> {
    let page = PAGE_SIZE as u64;
    Ok(size.checked_add(page - 1).ok_or(EINVAL)? / page * page)
}

/// Sends `request` to the directory on `node`.
fn call_directory(
    session: &Session,
    node: NodeId,
    request: &DirectoryRequest,
) -> Result<DirectoryAnswer> {
    let mut answer = [0u8; MAX_ANSWER];
    let len = session.call(node, Service::DsmDirectory, &request.encode(), &mut answer)?;
    DirectoryAnswer::decode(answer.get(..len).ok_or(EINVAL)?)
}

/// Tells the directory on `node` that this node's `opening` of region
/// `name` ended. Tried again while the call fails and the directory's node
/// is a member, at most [`DETACH_TRIES`] times.
fn detach(session: &Session, node: NodeId, name: u64, opening: u64) {
    let request = DirectoryRequest {
        op: Op::Detach as u8,
        name,
        incarnation: 0,
        opening,
        index: 0,
        password: 0,
        flags: 0,
    };
    let mut answer = [0u8; 0];
    for _ in 0..DETACH_TRIES {
        match session.call(node, Service::DsmDirectory, &request.encode(), &mut answer) {
            Ok(_) => return,
            // No directory, or its node is gone: nothing counts the opening.
            Err(e) if e == errno::ECONNREFUSED() || e == errno::EHOSTDOWN() => return,
            Err(_) if !session.is_member(node) => return,
            Err(_) => sleep_uninterruptible_ms(DETACH_RETRY_MS),
        }
    }
}

/// LITE-DSM's part of a leave: [`Dsm::before_leave`].
struct WriteBackBeforeLeave;

impl LeaveHook for WriteBackBeforeLeave {
    fn before_leave(&self) {
        if let Ok(dsm) = Dsm::get() {
            dsm.before_leave();
        }
    }
}

/// A service's handling of one message.
type ServeFn = fn(&Dsm, &[u8], NodeId, &mut dyn Answer) -> Result;

/// The directory thread's handler.
struct DirectoryService;

impl Handler for DirectoryService {
    fn handle(&self, message: &mut [u8], from: NodeId, answer: &mut dyn Answer) -> Result {
        Dsm::get()?.serve_directory(message, from, answer)
    }

    fn code(&self) -> usize {
        let code: ServeFn = Dsm::serve_directory;
        code as usize
    }
}

/// The cache thread's handler.
struct CacheService;

impl Handler for CacheService {
    fn handle(&self, message: &mut [u8], from: NodeId, answer: &mut dyn Answer) -> Result {
        Dsm::get()?.serve_cache(message, from, answer)
    }

    fn code(&self) -> usize {
        let code: ServeFn = Dsm::serve_cache;
        code as usize
    }
}
