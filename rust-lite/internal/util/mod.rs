// SPDX-License-Identifier: GPL-2.0

//! Containers and helpers that know nothing of LITE.

pub(crate) mod address;
pub(crate) mod clock;
pub(crate) mod handle;
pub(crate) mod ring;
pub(crate) mod slot_table;
pub(crate) mod vec;
pub(crate) mod workers;
