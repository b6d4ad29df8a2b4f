// SPDX-License-Identifier: GPL-2.0

//! Choosing the device and the addresses: IPv4 parsing, the GID of a port,
//! and the device parameter.

use super::Check;
use crate::internal::util::address::parse_ipv4;
use crate::sys::module_param::DeviceParam;
use crate::verbs::{choose_gid, GidEntry};
use kernel::bindings;

kunit_case!(lite_test_ipv4_parsing, |c| {
    check!(c, parse_ipv4(b"10.77.0.254") == Some([10, 77, 0, 254]));
    check!(c, parse_ipv4(b"0.0.0.0") == Some([0, 0, 0, 0]));
    check!(c, parse_ipv4(b"255.255.255.255") == Some([255; 4]));
    check!(c, parse_ipv4(b"256.0.0.1").is_none());
    check!(c, parse_ipv4(b"1.2.3").is_none());
    check!(c, parse_ipv4(b"1.2.3.4.5").is_none());
    check!(c, parse_ipv4(b"1..3.4").is_none());
    check!(c, parse_ipv4(b"a.b.c.d").is_none());
    check!(c, parse_ipv4(b"not-an-ip").is_none());
    check!(c, parse_ipv4(b"").is_none());
    check!(c, parse_ipv4(b" 1.2.3.4").is_none());
    check!(c, parse_ipv4(b"1.2.3.4444").is_none());
});

kunit_case!(lite_test_gid_choice, |c| {
    let v4 = |last: u8| {
        let mut gid = [0u8; 16];
        gid[10] = 0xff;
        gid[11] = 0xff;
        gid[12..].copy_from_slice(&[10, 77, 0, last]);
        gid
    };
    let mut link_local = [0u8; 16];
    link_local[0] = 0xfe;
    link_local[1] = 0x80;
    link_local[15] = 1;
    let entry = |index, gid, roce_v2| GidEntry {
        index,
        gid,
        roce_v2,
    };
    // rxe: an IPv6 link-local v2 entry first, then the IPv4 address.
    let rxe = [entry(0, link_local, true), entry(1, v4(1), true)];
    check!(c, choose_gid(rxe.into_iter(), true) == Some((1, v4(1))));
    // mlx: the v1 entry of an address comes before its v2 entry.
    let v1_first = [entry(0, v4(2), false), entry(1, v4(2), true)];
    check!(
        c,
        choose_gid(v1_first.into_iter(), true) == Some((1, v4(2)))
    );
    // Only v1 entries: no usable GID on RoCE.
    let v1_only = [entry(0, v4(3), false), entry(1, link_local, false)];
    check!(c, choose_gid(v1_only.into_iter(), true).is_none());
    // An IPv6-only port: its v2 GID.
    let v6 = [entry(0, [0; 16], true), entry(2, link_local, true)];
    check!(c, choose_gid(v6.into_iter(), true) == Some((2, link_local)));
    // InfiniBand: the first non-zero GID, whatever its type says.
    let ib = [entry(0, [0; 16], false), entry(1, link_local, false)];
    check!(
        c,
        choose_gid(ib.into_iter(), false) == Some((1, link_local))
    );
    check!(c, choose_gid(core::iter::empty(), true).is_none());
});

kunit_case!(lite_test_device_param, |c| {
    let is = |value: &[u8], expected: Option<&[u8]>| {
        DeviceParam::from_value(value).name().map(|n| n.as_bytes()) == expected
    };
    // Written with echo: the newline is not part of the name.
    check!(c, is(b"rxe1\n", Some(b"rxe1")));
    check!(c, is(b"  mlx5_0 \n\0garbage", Some(b"mlx5_0")));
    // Empty or blank: any device.
    check!(c, is(b"", None));
    check!(c, is(b" \n\0rxe0", None));
    // No NUL at all: the whole value, cut to a device name's length.
    let long = DeviceParam::from_value(&[b'a'; 100]);
    check!(c, long.name().map(|n| n.as_bytes().len()) == Some(63));
});
