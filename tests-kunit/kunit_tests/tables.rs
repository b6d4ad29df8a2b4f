// SPDX-License-Identifier: GPL-2.0

//! Handles, permissions and the tables that hold them: the slot table,
//! the name table and the ring of pending entries.

use super::Check;
use crate::internal::memory::handle::Password;
use crate::internal::memory::permission::Permission;
use crate::internal::sharing::names::{NameTable, Published};
use crate::internal::util::handle;
use crate::internal::util::ring::Ring;
use crate::internal::util::slot_table::SlotTable;
use kernel::bindings;

kunit_case!(lite_test_handle_round_trip, |c| {
    for (index, generation) in [
        (0usize, 1u32),
        (1, 2),
        (4095, 77),
        (handle::MAX_INDEX, handle::MAX_GENERATION),
    ] {
        let id = handle::encode(index, generation);
        check!(c, id != 0);
        check!(c, (id as i64) > 0);
        check!(c, handle::decode(id) == Some((index, generation)));
    }
    check!(c, handle::next_generation(1) == 2);
    check!(c, handle::next_generation(handle::MAX_GENERATION) == 1);
});

kunit_case!(lite_test_handle_rejects_forged, |c| {
    check!(c, handle::decode(0).is_none());
    check!(c, handle::decode(1).is_none());
    check!(c, handle::decode(1 << 32).is_none());
    check!(c, handle::decode(u64::MAX).is_none());
    check!(c, handle::decode((1u64 << 63) | 1).is_none());
    check!(c, handle::decode((1 << 32) | 0xffff_ffff).is_some());
});

kunit_case!(lite_test_slot_table_reuse_and_stale_ids, |c| {
    let mut table = SlotTable::new();
    let Ok(a) = table.insert(10u32) else {
        check!(c, false);
        return;
    };
    let Ok(b) = table.insert(20u32) else {
        check!(c, false);
        return;
    };
    check!(c, a != b);
    check!(c, table.get(a) == Some(&10));
    check!(c, table.get(b) == Some(&20));
    check!(c, table.len() == 2);
    check!(c, table.remove(a) == Some(10));
    check!(c, table.get(a).is_none());
    check!(c, table.remove(a).is_none());
    check!(c, table.len() == 1);
    // The freed entry is reused under a new generation: the old id stays dead.
    let Ok(a2) = table.insert(30u32) else {
        check!(c, false);
        return;
    };
    check!(c, a2 != a);
    check!(
        c,
        handle::decode(a2).map(|(i, _)| i) == handle::decode(a).map(|(i, _)| i)
    );
    check!(c, table.get(a).is_none());
    check!(c, table.get(a2) == Some(&30));
    check!(c, table.get(0).is_none());
    check!(c, table.get(u64::MAX).is_none());
});

kunit_case!(lite_test_permissions, |c| {
    let rw = Permission::READ.union(Permission::WRITE);
    check!(c, Permission::from_bits(0x1f, Permission::ALL).is_ok());
    check!(c, Permission::from_bits(0x20, Permission::ALL).is_err());
    check!(c, Permission::from_bits(1 << 63, Permission::ALL).is_err());
    check!(
        c,
        Permission::from_bits(Permission::ADMIN.bits(), Permission::SHAREABLE).is_err()
    );
    check!(c, rw.require(Permission::READ).is_ok());
    check!(c, rw.require(rw).is_ok());
    check!(
        c,
        rw.require(Permission::SHARE) == Err(kernel::error::code::EPERM)
    );
    check!(c, Permission::READ.require(rw).is_err());
    // Granted = requested, published and allowed by the LMR, never ADMIN.
    let all = Permission::ALL;
    check!(c, Permission::grant(all, rw, all) == Ok(rw));
    check!(
        c,
        Permission::grant(Permission::WRITE, Permission::READ, all).is_err()
    );
    check!(
        c,
        Permission::grant(all, all, Permission::READ) == Ok(Permission::READ)
    );
    check!(c, Permission::grant(Permission::ADMIN, all, all).is_err());
    check!(
        c,
        !Permission::grant(all, all, all).is_ok_and(|g| g.contains(Permission::ADMIN))
    );
});

kunit_case!(lite_test_name_table, |c| {
    let entry = |name, lmr_id| Published {
        name,
        lmr_id,
        permission: Permission::READ,
        password: Password::from_raw(7),
        value: name as u32,
    };
    let mut table = NameTable::new();
    check!(c, table.insert(entry(1, 10)).is_ok());
    check!(c, table.insert(entry(2, 10)).is_ok());
    check!(c, table.insert(entry(3, 20)).is_ok());
    check!(
        c,
        table
            .insert(entry(1, 30))
            .map_err(|(e, refused)| (e, refused.lmr_id))
            == Err((kernel::error::code::EEXIST, 30))
    );
    check!(c, table.len() == 3);
    check!(
        c,
        table
            .find(2)
            .is_some_and(|e| e.lmr_id == 10 && e.value == 2)
    );
    check!(c, table.find(4).is_none());
    check!(c, table.take_of_lmr(10).is_some_and(|e| e.lmr_id == 10));
    check!(c, table.take_of_lmr(10).is_some_and(|e| e.lmr_id == 10));
    check!(c, table.take_of_lmr(10).is_none());
    check!(c, table.find(1).is_none() && table.find(2).is_none());
    check!(c, table.len() == 1);
    // A freed name can be published again, also for another LMR.
    check!(c, table.insert(entry(1, 40)).is_ok());
    check!(c, table.find(1).is_some_and(|e| e.lmr_id == 40));
    check!(c, table.take_of_lmr(99).is_none());
});

kunit_case!(lite_test_ring_fifo, |c| {
    let Ok(mut ring) = Ring::new(3) else {
        check!(c, false);
        return;
    };
    check!(c, ring.pop().is_none());
    check!(
        c,
        ring.push(1).is_ok() && ring.push(2).is_ok() && ring.push(3).is_ok()
    );
    check!(c, ring.push(4) == Err(4));
    check!(c, ring.pop() == Some(1));
    check!(c, ring.push(4).is_ok());
    check!(
        c,
        ring.pop() == Some(2) && ring.pop() == Some(3) && ring.pop() == Some(4)
    );
    check!(c, ring.pop().is_none());
});
