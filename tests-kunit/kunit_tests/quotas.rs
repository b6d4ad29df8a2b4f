// SPDX-License-Identifier: GPL-2.0

//! QoS admission decisions, operation latency statistics, and quotas:
//! their commands and charges.

use super::Check;
use crate::errno;
use crate::internal::node_id::NodeId;
use crate::internal::qos::op_stats::TextBuffer;
use crate::internal::quota::amounts::{Amounts, Resource, UNLIMITED};
use crate::internal::quota::command::{Changes, Command};
use crate::internal::quota::{Payer, Quotas};
use kernel::bindings;
use kernel::error::code::EINVAL;

kunit_case!(lite_test_qos_decisions, |c| {
    use crate::internal::qos::admission::{decide, Decision, Params};
    let on = Params {
        enabled: true,
        window_us: 200,
        delay_us: 50,
        max_delay_us: 1000,
    };
    let off = Params {
        enabled: false,
        ..on
    };
    // Idle: go at once.
    check!(c, decide(&on, 0, 10_000, 0) == Decision::Go);
    // High-priority work in flight or recent: wait one delay.
    check!(c, decide(&on, 1, 10_000, 0) == Decision::Wait(50));
    check!(c, decide(&on, 0, 199, 0) == Decision::Wait(50));
    check!(c, decide(&on, 0, 200, 0) == Decision::Go);
    // Never longer than the maximum in all.
    check!(c, decide(&on, 3, 0, 980) == Decision::Wait(20));
    check!(c, decide(&on, 3, 0, 1000) == Decision::Go);
    // Switched off: never wait.
    check!(c, decide(&off, 5, 0, 0) == Decision::Go);
});

kunit_case!(lite_test_op_latency_buckets, |c| {
    use crate::internal::qos::op_stats::{latency_bucket, LATENCY_BUCKETS};
    check!(c, latency_bucket(0) == 0);
    check!(c, latency_bucket(1) == 0);
    check!(c, latency_bucket(2) == 1);
    check!(c, latency_bucket(3) == 2);
    check!(c, latency_bucket(4) == 2);
    check!(c, latency_bucket(5) == 3);
    check!(c, latency_bucket(1 << 20) == 20);
    check!(c, latency_bucket((1 << 20) + 1) == LATENCY_BUCKETS - 1);
    check!(c, latency_bucket(u64::MAX) == LATENCY_BUCKETS - 1);
});

kunit_case!(lite_test_quota_commands, |c| {
    let parse = |line: &str| Command::parse(line.as_bytes());
    let mut changes = [None; Resource::COUNT];
    changes[Resource::RemoteMemory as usize] = Some(1 << 20);
    changes[Resource::Locks as usize] = Some(UNLIMITED);
    check!(
        c,
        parse("limit uid 1000 remote_memory=1048576 locks=unlimited\n")
            == Ok(Command::SetUser {
                uid: 1000,
                changes: Changes(changes),
            })
    );
    check!(
        c,
        parse("limit default lmrs=5")
            == Ok(Command::SetDefaults(Changes({
                let mut only = [None; Resource::COUNT];
                only[Resource::Lmrs as usize] = Some(5);
                only
            })))
    );
    check!(
        c,
        parse("limit uid 7 default") == Ok(Command::ResetUser { uid: 7 })
    );
    check!(
        c,
        parse("limit node default remote_memory=9") == Ok(Command::SetNodeDefault(9))
    );
    check!(
        c,
        parse("limit node 3 remote_memory=unlimited")
            == Ok(Command::SetNode {
                node: NodeId::new(3),
                limit: UNLIMITED
            })
    );
    check!(
        c,
        parse("limit node 3 default")
            == Ok(Command::ResetNode {
                node: NodeId::new(3)
            })
    );
    // Malformed lines change nothing.
    for bad in [
        "",
        "limit",
        "limit uid",
        "limit uid 5",
        "limit uid x lmrs=1",
        "limit uid 4294967296 lmrs=1",
        "limit uid 5 lmrs=1 lmrs=2",
        "limit uid 5 lmrs=",
        "limit uid 5 lmrs=-1",
        "limit uid 5 lmrs=18446744073709551615",
        "limit uid 5 lmrs=99999999999999999999",
        "limit uid 5 bogus=1",
        "limit uid 5 default extra",
        "limit node 0 remote_memory=1",
        "limit node 64 remote_memory=1",
        "limit node 2 lmrs=1",
        "limit node default",
        "quota uid 5 lmrs=1",
    ] {
        check!(c, parse(bad) == Err(EINVAL));
    }
});

kunit_case!(lite_test_quota_charges, |c| {
    let Ok(quotas) = Quotas::new(1 << 20) else {
        check!(c, false);
        return;
    };
    let user = Payer::User(1000);
    let lmr = |bytes| Amounts::of(Resource::RemoteMemory, bytes).with(Resource::Lmrs, 1);
    let set = |line: &str| Command::parse(line.as_bytes()).and_then(|cmd| quotas.apply(cmd));
    check!(c, set("limit uid 1000 remote_memory=100 lmrs=2").is_ok());
    let first = quotas.charge(user, lmr(60));
    check!(c, first.is_ok());
    // Beyond the bytes: refused, and nothing is charged.
    check!(
        c,
        quotas.charge(user, lmr(41)).err() == Some(errno::EDQUOT())
    );
    check!(c, quotas.usage(1000) == lmr(60));
    let second = quotas.charge(user, lmr(40));
    check!(c, second.is_ok());
    // Beyond the count.
    check!(
        c,
        quotas.charge(user, lmr(0)).err() == Some(errno::EDQUOT())
    );
    // Another user, and kernel callers, are not affected.
    let other = quotas.charge(Payer::User(1001), lmr(1 << 20));
    check!(c, other.is_ok());
    check!(c, quotas.charge(Payer::Kernel, lmr(u64::MAX)).is_ok());
    // A new user's refused first charge leaves no trace.
    check!(
        c,
        quotas.charge(Payer::User(1002), lmr(2 << 30)).err() == Some(errno::EDQUOT())
    );
    // Dropping a charge gives it back.
    drop(first);
    check!(c, quotas.usage(1000) == lmr(40));
    let mut text = [0u8; 1024];
    let mut out = TextBuffer::new(&mut text);
    check!(c, quotas.write_text(&mut out).is_ok());
    let len = out.len();
    let text = &text[..len];
    let has = |line: &[u8]| text.windows(line.len()).any(|w| w == line);
    check!(
        c,
        has(concat!(
            "limit default remote_memory=1073741824 pinned_memory=unlimited lmrs=65536 ",
            "names=4096 rpc_ports=1024 locks=4096\n"
        )
        .as_bytes())
    );
    check!(
        c,
        has(b"limit uid 1000 remote_memory=100 pinned_memory=unlimited lmrs=2 names=4096")
    );
    check!(
        c,
        has(
            b"usage uid 1000 remote_memory=40 pinned_memory=0 lmrs=1 names=0 rpc_ports=0 locks=0\n"
        )
    );
    check!(c, has(b"usage uid 1001 remote_memory=1048576 "));
    check!(c, has(b"limit node default remote_memory=1048576\n"));
    check!(c, !has(b"uid 1002"));
    // Back to the defaults: the larger default allows more.
    check!(c, set("limit uid 1000 default").is_ok());
    check!(c, quotas.charge(user, lmr(1000)).is_ok());
    // A lowered default refuses further charges only.
    check!(c, set("limit default lmrs=1").is_ok());
    check!(
        c,
        quotas.charge(Payer::User(1001), lmr(0)).err() == Some(errno::EDQUOT())
    );
    check!(c, quotas.usage(1001) == lmr(1 << 20));
    drop(other);
    drop(second);
    check!(
        c,
        quotas.usage(1000) == Amounts::ZERO && quotas.usage(1001) == Amounts::ZERO
    );
    // A user back on the defaults and holding nothing is forgotten.
    let mut text = [0u8; 1024];
    let mut out = TextBuffer::new(&mut text);
    check!(c, quotas.write_text(&mut out).is_ok());
    let len = out.len();
    check!(c, !text[..len].windows(4).any(|w| w == b"uid "));
    // Node limits.
    check!(c, quotas.node_limit(NodeId::new(5)) == 1 << 20);
    check!(c, set("limit node 5 remote_memory=7").is_ok());
    check!(
        c,
        quotas.node_limit(NodeId::new(5)) == 7 && quotas.node_limit(NodeId::new(6)) == 1 << 20
    );
    check!(c, set("limit node 5 default").is_ok());
    check!(c, quotas.node_limit(NodeId::new(5)) == 1 << 20);
});
