//! An in-memory model of one node's view of LITE, following the uapi
//! header, so the cluster test can be run on any host. Defects can be
//! switched on to check that the cluster test notices them.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ffi::{c_char, c_void};
use std::net::Ipv4Addr;

use libc::c_long;
use lite::sys::{ALLOC_ATOMIC, CHUNK_SIZE, MAX_IP_LEN, MAX_LMR_SIZE, MAX_NODES, PRIORITY_LOW};

use crate::kernel::Kernel;

/// Defects the model can be given.
#[derive(Debug, Clone, Copy, Default)]
pub struct Defects {
    /// Writes beyond the first chunk land one chunk early.
    pub misplace_later_chunks: bool,
    /// Passwords are not checked.
    pub ignore_password: bool,
    /// Freed handles stay valid.
    pub keep_freed_handles: bool,
    /// The cluster manager cannot be reached.
    pub refuse_join: bool,
}

struct Lmr {
    data: Vec<u8>,
    password: u64,
}

#[derive(Default)]
struct State {
    joined: bool,
    next_handle: u64,
    lmrs: BTreeMap<u64, Lmr>,
    freed: BTreeMap<u64, Lmr>,
}

/// One node of a cluster of `nodes` nodes, all of which are present.
pub struct FakeKernel {
    id: u32,
    nodes: u32,
    defects: Defects,
    state: RefCell<State>,
}

/// Addresses below this are never mapped, like the first page of a process.
const FIRST_MAPPED_ADDRESS: usize = 4096;

fn err(errno: i32) -> c_long {
    -c_long::from(errno)
}

impl FakeKernel {
    /// A node that will get id `id` when it joins a cluster of `nodes`.
    pub fn new(id: u32, nodes: u32, defects: Defects) -> Self {
        FakeKernel {
            id,
            nodes,
            defects,
            state: RefCell::new(State {
                next_handle: 0x1000,
                ..State::default()
            }),
        }
    }

    /// Number of LMRs currently allocated.
    pub fn live_lmrs(&self) -> usize {
        self.state.borrow().lmrs.len()
    }

    fn joined(&self) -> bool {
        self.state.borrow().joined
    }

    /// Checks the state, priority, handle, password, range and buffer, in
    /// the order the cluster test's single-fault cases need.
    fn check_transfer(
        &self,
        handle: u64,
        address: usize,
        size: u64,
        offset: u64,
        priority: u32,
        password: u64,
    ) -> Result<(), c_long> {
        if !self.joined() {
            return Err(err(libc::ENOTCONN));
        }
        if priority > PRIORITY_LOW {
            return Err(err(libc::EINVAL));
        }
        let state = self.state.borrow();
        let lmr = match state.lmrs.get(&handle) {
            Some(lmr) => lmr,
            None if self.defects.keep_freed_handles => {
                state.freed.get(&handle).ok_or(err(libc::EBADF))?
            }
            None => return Err(err(libc::EBADF)),
        };
        if lmr.password != password && !self.defects.ignore_password {
            return Err(err(libc::EACCES));
        }
        let end = offset.checked_add(size).ok_or(err(libc::EINVAL))?;
        if end > lmr.data.len() as u64 {
            return Err(err(libc::EINVAL));
        }
        if size > 0 && address < FIRST_MAPPED_ADDRESS {
            return Err(err(libc::EFAULT));
        }
        Ok(())
    }

    /// Where byte `position` of an LMR is stored.
    fn placement(&self, position: u64) -> usize {
        let misplaced = self.defects.misplace_later_chunks && position >= CHUNK_SIZE;
        let position = if misplaced {
            position - CHUNK_SIZE
        } else {
            position
        };
        position as usize
    }
}

/// Splits `offset..offset + size` at chunk boundaries into (start, length).
fn chunk_segments(offset: u64, size: u64) -> impl Iterator<Item = (u64, usize)> {
    let end = offset + size;
    let mut start = offset;
    std::iter::from_fn(move || {
        if start >= end {
            return None;
        }
        let chunk_end = (start / CHUNK_SIZE + 1) * CHUNK_SIZE;
        let segment_end = chunk_end.min(end);
        let segment = (start, (segment_end - start) as usize);
        start = segment_end;
        Some(segment)
    })
}

impl Kernel for FakeKernel {
    unsafe fn join(&self, cm_ip: *const c_char, _cm_port: u32, _ib_port: u32) -> c_long {
        if (cm_ip as usize) < FIRST_MAPPED_ADDRESS {
            return err(libc::EFAULT);
        }
        let mut text = Vec::new();
        for i in 0..MAX_IP_LEN {
            // SAFETY: callers pass NUL-terminated strings; reading stops at the NUL.
            let byte = unsafe { *cm_ip.add(i) } as u8;
            if byte == 0 {
                break;
            }
            text.push(byte);
        }
        if text.len() == MAX_IP_LEN {
            return err(libc::EINVAL);
        }
        let valid = std::str::from_utf8(&text)
            .ok()
            .and_then(|t| t.parse::<Ipv4Addr>().ok())
            .is_some();
        if !valid {
            return err(libc::EINVAL);
        }
        let mut state = self.state.borrow_mut();
        if state.joined {
            return err(libc::EISCONN);
        }
        if self.defects.refuse_join {
            return err(libc::ECONNREFUSED);
        }
        state.joined = true;
        self.id.into()
    }

    fn get_node_id(&self) -> c_long {
        if self.joined() {
            self.id.into()
        } else {
            err(libc::ENOTCONN)
        }
    }

    fn get_total_node(&self) -> c_long {
        if self.joined() {
            self.nodes.into()
        } else {
            err(libc::ENOTCONN)
        }
    }

    fn alloc_remote(&self, node: u32, size: u64, flags: u32, password: u64) -> c_long {
        if !self.joined() {
            return err(libc::ENOTCONN);
        }
        if node >= MAX_NODES || size == 0 || size > MAX_LMR_SIZE || flags & !ALLOC_ATOMIC != 0 {
            return err(libc::EINVAL);
        }
        if flags & ALLOC_ATOMIC != 0 && size != 8 {
            return err(libc::EINVAL);
        }
        if node > self.nodes || (node == 0 && self.nodes < 2) {
            return err(libc::EHOSTUNREACH);
        }
        let mut state = self.state.borrow_mut();
        state.next_handle += 1;
        let handle = state.next_handle;
        let lmr = Lmr {
            data: vec![0; size as usize],
            password,
        };
        state.lmrs.insert(handle, lmr);
        handle as c_long
    }

    unsafe fn rdma_write(
        &self,
        handle: u64,
        buf: *const c_void,
        size: u64,
        offset: u64,
        priority: u32,
        password: u64,
    ) -> c_long {
        if let Err(ret) =
            self.check_transfer(handle, buf as usize, size, offset, priority, password)
        {
            return ret;
        }
        let mut state = self.state.borrow_mut();
        let State { lmrs, freed, .. } = &mut *state;
        let Some(lmr) = lmrs.get_mut(&handle).or_else(|| freed.get_mut(&handle)) else {
            return err(libc::EBADF);
        };
        // SAFETY: the caller guarantees `size` readable bytes at `buf`.
        let source = unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), size as usize) };
        for (start, len) in chunk_segments(offset, size) {
            let from = (start - offset) as usize;
            let to = self.placement(start);
            lmr.data[to..to + len].copy_from_slice(&source[from..from + len]);
        }
        0
    }

    unsafe fn rdma_read(
        &self,
        handle: u64,
        buf: *mut c_void,
        size: u64,
        offset: u64,
        priority: u32,
        password: u64,
    ) -> c_long {
        if let Err(ret) =
            self.check_transfer(handle, buf as usize, size, offset, priority, password)
        {
            return ret;
        }
        let state = self.state.borrow();
        let Some(lmr) = state.lmrs.get(&handle).or_else(|| state.freed.get(&handle)) else {
            return err(libc::EBADF);
        };
        // SAFETY: the caller guarantees `size` writable bytes at `buf`,
        // not otherwise accessed during the call.
        let target = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), size as usize) };
        for (start, len) in chunk_segments(offset, size) {
            let from = self.placement(start);
            let to = (start - offset) as usize;
            target[to..to + len].copy_from_slice(&lmr.data[from..from + len]);
        }
        0
    }

    fn free(&self, handle: u64) -> c_long {
        if !self.joined() {
            return err(libc::ENOTCONN);
        }
        let mut state = self.state.borrow_mut();
        match state.lmrs.remove(&handle) {
            Some(lmr) => {
                if self.defects.keep_freed_handles {
                    state.freed.insert(handle, lmr);
                }
                0
            }
            None => err(libc::EBADF),
        }
    }

    fn dist_barrier(&self, num: u32) -> c_long {
        if !self.joined() {
            return err(libc::ENOTCONN);
        }
        if num == 0 || num > MAX_NODES {
            return err(libc::EINVAL);
        }
        0
    }
}
