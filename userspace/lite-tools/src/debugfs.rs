//! LITE's debugfs files in [`DEBUGFS_DIR`]; the membership and quota files
//! have modules of their own.
//!
//! The statistics file's format is in userspace/README.md: a `NAME VALUE`
//! line per field of `struct lite_stats`, then one line per operation type
//! and priority, with a latency histogram of [`LATENCY_BUCKETS`] buckets.

use std::collections::BTreeSet;
use std::fmt;
use std::io;
use std::path::Path;

use lite::sys::LiteStats;
use lite::Priority;

pub mod membership;
pub mod quotas;

/// Where LITE's debugfs files are.
pub const DEBUGFS_DIR: &str = "/sys/kernel/debug/lite";

/// Root only: reading it makes the node issue RDMA operations to itself through a queue pair of
/// its own, inside and outside LITE's memory regions, and returns one line
/// per check, `ok NAME` or `FAIL NAME: why`.
pub const ACCESS_PROBE_FILE: &str = "access_probe";

/// The statistics file in [`DEBUGFS_DIR`].
pub const STATS_FILE: &str = "stats";

/// Write-only: writing a node id N (decimal) makes the next RPC request this node posts to
/// node N carry a header whose length disagrees with the bytes written,
/// which breaks the ring it lands in; `0` disarms it, and an id of 64 or
/// more is refused with `EINVAL`.
pub const RPC_FAULT_FILE: &str = "rpc_fault_next";

/// Mode 0644: a gid (of the initial user namespace) whose members join, leave and change
/// LITE's settings like holders of `CAP_NET_ADMIN`, or [`NO_ADMIN_GROUP`]
/// for none, the default. Reading it gives the gid in decimal and a
/// newline; writing a decimal number sets it, which only `CAP_NET_ADMIN`
/// may do (`EPERM` otherwise, for the group's members too), and a number
/// above [`NO_ADMIN_GROUP`] is refused with `EINVAL`.
pub const ADMIN_GROUP_FILE: &str = "admin_group";

/// Mode 0644: the cluster manager's silence, in ms, after which this node
/// counts itself cut off.
pub const MANAGER_TIMEOUT_FILE: &str = "manager_timeout_ms";

/// Mode 0644: in ms.
pub const HEARTBEAT_FILE: &str = "heartbeat_ms";

/// What [`ADMIN_GROUP_FILE`] holds while no group administers LITE.
pub const NO_ADMIN_GROUP: u32 = u32::MAX;

named_enum! {
    /// A file of one decimal number.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub enum QosParam {
        /// 1 (low-priority operations may be throttled) or 0.
        Enabled = "qos_enabled",
        /// A low-priority operation waits while a high-priority one is in
        /// flight or ended less than this long ago.
        WindowUs = "qos_window_us",
        /// How long a throttled operation sleeps before looking again.
        DelayUs = "qos_delay_us",
        /// The longest a low-priority operation waits in all.
        MaxDelayUs = "qos_max_delay_us",
    }
}

impl QosParam {
    /// The file's name in [`DEBUGFS_DIR`].
    pub fn file_name(self) -> &'static str {
        self.name()
    }

    /// Per the uapi header.
    pub fn default_value(self) -> u64 {
        match self {
            QosParam::Enabled => 1,
            QosParam::WindowUs => 500,
            QosParam::DelayUs => 5000,
            QosParam::MaxDelayUs => 200_000,
        }
    }
}

/// The very file the kernel compiles, so the names cannot drift.
#[path = "../../../rust-lite/internal/qos/op_kind.rs"]
mod op_kind;

pub use op_kind::OpKind as Operation;

impl Operation {
    /// The operation named `name` in the statistics file.
    pub fn from_name(name: &str) -> Option<Operation> {
        Operation::ALL.into_iter().find(|op| op.name() == name)
    }
}

/// Buckets of the latency histogram: 2^0 ..= 2^20 µs, then unbounded.
pub const LATENCY_BUCKETS: usize = 22;

/// In microseconds; `None` for the last, unbounded bucket (or past it).
pub fn latency_bound(index: usize) -> Option<u64> {
    (index + 1 < LATENCY_BUCKETS).then(|| 1u64 << index)
}

/// The first whose upper bound is at least `us`.
pub fn latency_bucket(us: u64) -> usize {
    (0..LATENCY_BUCKETS - 1)
        .find(|&i| us <= 1u64 << i)
        .unwrap_or(LATENCY_BUCKETS - 1)
}

/// Counters of one operation type at one priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpStats {
    /// The operation type.
    pub op: Operation,
    /// The priority the operations ran with.
    pub priority: Priority,
    /// Operations issued.
    pub ops: u64,
    /// Bytes they moved.
    pub bytes: u64,
    /// Operations that failed.
    pub errors: u64,
    /// Operations QoS made wait.
    pub throttled: u64,
    /// Time spent throttled, in microseconds.
    pub throttled_us: u64,
    /// Operations per bucket (see [`latency_bound`]).
    pub latency_us: [u64; LATENCY_BUCKETS],
}

impl OpStats {
    /// All zero.
    pub fn new(op: Operation, priority: Priority) -> OpStats {
        OpStats {
            op,
            priority,
            ops: 0,
            bytes: 0,
            errors: 0,
            throttled: 0,
            throttled_us: 0,
            latency_us: [0; LATENCY_BUCKETS],
        }
    }

    /// Operations counted in the latency histogram.
    pub fn latency_count(&self) -> u64 {
        self.latency_us.iter().sum()
    }
}

type Field<T> = (&'static str, fn(&mut T) -> &mut u64);

/// Each named as the field.
macro_rules! fields {
    { $type:ty: $($field:ident)* } => { [$((stringify!($field), |s: &mut $type| &mut s.$field)),*] };
}

const COUNTERS: [Field<LiteStats>; 15] = fields! { LiteStats:
    lmrs registrations mappings published_names held_chunks handles processes
    async_in_flight connections rpc_ports locks lock_acquires lock_waits atomics qos_throttled
};

/// Between `priority=` and `latency_us=`, in file order.
const OP_COUNTERS: [Field<OpStats>; 5] =
    fields! { OpStats: ops bytes errors throttled throttled_us };

/// The contents of the statistics file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DebugStats {
    /// As `lite_get_stats` returns them.
    pub counters: LiteStats,
    /// One per operation type and priority, in file order.
    pub ops: Vec<OpStats>,
}

impl DebugStats {
    /// With a row for every operation and priority.
    pub fn new() -> DebugStats {
        let ops = Operation::ALL
            .into_iter()
            .flat_map(|op| Priority::ALL.map(|priority| OpStats::new(op, priority)))
            .collect();
        DebugStats {
            counters: LiteStats::default(),
            ops,
        }
    }

    /// The row of `op` at `priority`.
    pub fn op(&self, op: Operation, priority: Priority) -> Option<&OpStats> {
        self.ops
            .iter()
            .find(|row| row.op == op && row.priority == priority)
    }

    /// The row of `op` at `priority`, to update it.
    pub fn op_mut(&mut self, op: Operation, priority: Priority) -> Option<&mut OpStats> {
        self.ops
            .iter_mut()
            .find(|row| row.op == op && row.priority == priority)
    }

    /// At every priority.
    pub fn ops_of(&self, op: Operation) -> u64 {
        self.ops
            .iter()
            .filter(|row| row.op == op)
            .map(|row| row.ops)
            .sum()
    }
}

impl Default for DebugStats {
    fn default() -> Self {
        DebugStats::new()
    }
}

impl fmt::Display for DebugStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut counters = self.counters;
        for (name, field) in COUNTERS {
            writeln!(f, "{name} {}", field(&mut counters))?;
        }
        for row in &self.ops {
            write!(f, "op={} priority={}", row.op.name(), row.priority.name())?;
            let mut counts = *row;
            for (key, field) in OP_COUNTERS {
                write!(f, " {key}={}", field(&mut counts))?;
            }
            f.write_str(" latency_us=")?;
            for (index, count) in row.latency_us.iter().enumerate() {
                let separator = if index == 0 { "" } else { "," };
                match latency_bound(index) {
                    Some(bound) => write!(f, "{separator}{bound}:{count}")?,
                    None => write!(f, "{separator}inf:{count}")?,
                }
            }
            writeln!(f)?;
        }
        Ok(())
    }
}

fn parse_number<T: std::str::FromStr>(text: &str, what: &str) -> Result<T, String> {
    text.parse()
        .map_err(|_| format!("{what}: {text:?} is not a decimal number"))
}

fn field<'a>(item: Option<&'a str>, key: &str) -> Result<&'a str, String> {
    let item = item.ok_or_else(|| format!("missing {key}="))?;
    match item.split_once('=') {
        Some((found, value)) if found == key => Ok(value),
        _ => Err(format!("expected {key}=..., found {item:?}")),
    }
}

fn parse_histogram(text: &str) -> Result<[u64; LATENCY_BUCKETS], String> {
    let buckets: Vec<&str> = text.split(',').collect();
    if buckets.len() != LATENCY_BUCKETS {
        let found = buckets.len();
        return Err(format!(
            "latency_us has {found} buckets, expected {LATENCY_BUCKETS}"
        ));
    }
    let mut histogram = [0; LATENCY_BUCKETS];
    for (index, (slot, bucket)) in histogram.iter_mut().zip(buckets).enumerate() {
        let (bound, count) = bucket
            .split_once(':')
            .ok_or_else(|| format!("latency bucket {bucket:?} is not BOUND:COUNT"))?;
        let expected = latency_bound(index).map_or("inf".to_string(), |b| b.to_string());
        if bound != expected {
            return Err(format!(
                "latency bucket {index} has bound {bound:?}, expected {expected}"
            ));
        }
        *slot = parse_number(count, &format!("latency bucket {bound}"))?;
    }
    Ok(histogram)
}

fn parse_op_line(line: &str) -> Result<OpStats, String> {
    let mut items = line.split_whitespace();
    let op_name = field(items.next(), "op")?;
    let op = Operation::from_name(op_name).ok_or_else(|| format!("unknown op {op_name:?}"))?;
    let priority_name = field(items.next(), "priority")?;
    let priority = Priority::ALL
        .into_iter()
        .find(|p| p.name() == priority_name);
    let priority = priority.ok_or_else(|| format!("unknown priority {priority_name:?}"))?;
    let mut row = OpStats::new(op, priority);
    for (key, counter) in OP_COUNTERS {
        *counter(&mut row) = parse_number(field(items.next(), key)?, key)?;
    }
    row.latency_us = parse_histogram(field(items.next(), "latency_us")?)?;
    if let Some(extra) = items.next() {
        return Err(format!("unexpected {extra:?} after latency_us"));
    }
    Ok(row)
}

/// Lines trimmed, empty ones skipped; an error names the line.
pub(crate) fn for_each_line<'a>(
    text: &'a str,
    mut read: impl FnMut(&'a str) -> Result<(), String>,
) -> Result<(), String> {
    for (number, line) in (1..).zip(text.lines().map(str::trim)) {
        if !line.is_empty() {
            read(line).map_err(|e| format!("line {number}: {e}: {line:?}"))?;
        }
    }
    Ok(())
}

/// `Ok` if a line set nothing an earlier line had set (`previous`, what it
/// replaced, is `None`); `repeated` otherwise.
pub(crate) fn once<V>(previous: Option<V>, repeated: &str) -> Result<(), String> {
    previous.map_or(Ok(()), |_| Err(repeated.to_string()))
}

/// Parses the statistics file. Every `struct lite_stats` field must be
/// there once, and one line for every operation type and priority; other
/// `NAME VALUE` lines (counters added later) are ignored.
pub fn parse_stats(text: &str) -> Result<DebugStats, String> {
    let mut counters = LiteStats::default();
    let mut seen = BTreeSet::new();
    let mut ops: Vec<OpStats> = Vec::new();
    for_each_line(text, |line| {
        if line.starts_with("op=") {
            let row = parse_op_line(line)?;
            if ops
                .iter()
                .any(|r| (r.op, r.priority) == (row.op, row.priority))
            {
                return Err("repeated operation and priority".into());
            }
            ops.push(row);
            return Ok(());
        }
        let (name, value) = line
            .split_once(' ')
            .ok_or("expected NAME VALUE or op=...")?;
        let value = parse_number(value.trim(), name)?;
        if let Some((_, field)) = COUNTERS.iter().find(|(n, _)| *n == name) {
            *field(&mut counters) = value;
            return once(seen.replace(name), "repeated counter");
        }
        Ok(())
    })?;
    if let Some((missing, _)) = COUNTERS.iter().find(|(n, _)| !seen.contains(n)) {
        return Err(format!("counter {missing} is missing"));
    }
    for OpStats { op, priority, .. } in DebugStats::new().ops {
        if !ops.iter().any(|r| (r.op, r.priority) == (op, priority)) {
            let (op, priority) = (op.name(), priority.name());
            return Err(format!("no line for op={op} priority={priority}"));
        }
    }
    Ok(DebugStats { counters, ops })
}

/// Reads file `name` of [`DEBUGFS_DIR`].
pub fn read_file(name: &str) -> io::Result<String> {
    std::fs::read_to_string(Path::new(DEBUGFS_DIR).join(name))
}

/// In one write.
pub fn write_file(name: &str, text: &str) -> io::Result<()> {
    std::fs::write(Path::new(DEBUGFS_DIR).join(name), text)
}

/// The newline is optional.
pub fn parse_qos(text: &str) -> Result<u64, String> {
    parse_number(text.trim(), "QoS parameter")
}

/// A gid in decimal ([`NO_ADMIN_GROUP`] for none) and a newline.
pub fn parse_admin_group(text: &str) -> Result<u32, String> {
    let number = text
        .strip_suffix('\n')
        .ok_or_else(|| format!("admin group {text:?} does not end with a newline"))?;
    let value: u64 = parse_number(number, "admin group")?;
    u32::try_from(value).map_err(|_| format!("admin group {value} is above {NO_ADMIN_GROUP}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tap::assert_contains;

    fn sample() -> DebugStats {
        let mut stats = DebugStats::new();
        stats.counters.lmrs = 3;
        stats.counters.connections = 2;
        stats.counters.qos_throttled = 7;
        let row = stats
            .op_mut(Operation::Atomic, Priority::High)
            .expect("every row exists");
        row.ops = 5;
        row.bytes = 40;
        row.latency_us[latency_bucket(3)] = 4;
        row.latency_us[LATENCY_BUCKETS - 1] = 1;
        stats
    }

    /// The statistics file as the kernel's `op_stats::write_text` writes
    /// it (not through [`DebugStats`]' `Display`), and its rows: one per
    /// `Operation::ALL` × `Priority::ALL`, in that order, row `i` counting
    /// `i + 1` operations.
    fn kernel_text() -> (String, Vec<(Operation, Priority, u64)>) {
        let rows: Vec<_> = Operation::ALL
            .into_iter()
            .flat_map(|op| Priority::ALL.map(|priority| (op, priority)))
            .zip(1..)
            .map(|((op, priority), ops)| (op, priority, ops))
            .collect();
        let bounds: String = (0..LATENCY_BUCKETS - 1)
            .map(|i| format!("{}:0,", 1u64 << i))
            .collect();
        let counters = COUNTERS.map(|(name, _)| format!("{name} 0\n")).concat();
        let lines = rows.iter().map(|(op, priority, ops)| {
            let (op, priority) = (op.name(), priority.name());
            format!("op={op} priority={priority} ops={ops} bytes=0 errors=0 throttled=0 throttled_us=0 latency_us={bounds}inf:0\n")
        });
        (counters + &lines.collect::<String>(), rows)
    }

    #[test]
    fn operation_names_are_the_kernel_s_documented_ones() {
        // The names are an interface (userspace/README.md, scripts reading
        // the file): renaming one in rust-lite/internal/qos/op_kind.rs
        // must be a deliberate change here too.
        let names: Vec<_> = Operation::ALL.iter().map(|op| op.name()).collect();
        let documented = "read write read_async write_async atomic memset memcpy rpc_call \
                          rpc_send rpc_reply lock rpc_call_async";
        assert_eq!(names, documented.split(' ').collect::<Vec<_>>());
        for (index, op) in Operation::ALL.into_iter().enumerate() {
            assert_eq!(op as usize, index, "{op:?} is out of table order");
            assert_eq!(Operation::from_name(op.name()), Some(op));
        }
        assert_eq!(Operation::from_name("rpc"), None);
        assert_eq!(Operation::from_name("Read"), None);
    }

    #[test]
    fn the_kernel_s_text_parses_row_for_row_and_round_trips() {
        let (text, expected) = kernel_text();
        let stats = parse_stats(&text).expect("the kernel's format parses");
        let rows: Vec<_> = stats
            .ops
            .iter()
            .map(|r| (r.op, r.priority, r.ops))
            .collect();
        assert_eq!(rows, expected);
        // Userspace writes the same text back.
        assert_eq!(stats.to_string(), text);
        // Counters, every column and histogram bucket, and unknown
        // counters (skipped) of the example line.
        let mut sample = sample();
        let text = sample.to_string().replace(
            "op=lock priority=low ops=0 bytes=0 errors=0 throttled=0 throttled_us=0 latency_us=1:0,",
            "op=lock priority=low ops=9 bytes=0 errors=1 throttled=2 throttled_us=300 latency_us=1:8,",
        ) + "some_later_counter 12\n";
        let row = sample
            .op_mut(Operation::Lock, Priority::Low)
            .expect("every row exists");
        (row.ops, row.errors, row.throttled, row.throttled_us) = (9, 1, 2, 300);
        row.latency_us[0] = 8;
        let parsed = parse_stats(&text).expect("parses");
        assert_eq!(parsed, sample);
        let row = parsed.op(Operation::Lock, Priority::Low).expect("row");
        assert_eq!(row.latency_count(), 8);
        assert_eq!(parsed.ops_of(Operation::Lock), 9);
        assert!(text.starts_with("lmrs 3\nregistrations 0\n"), "{text}");
        let atomic = "op=atomic priority=high ops=5 bytes=40 errors=0 throttled=0 throttled_us=0 \
                      latency_us=1:0,2:0,4:4,8:0,";
        crate::tap::assert_contains_all(
            &text,
            &[
                "\nqos_throttled 7\nop=read priority=none ops=0 ",
                atomic,
                ",1048576:0,inf:1\n",
            ],
        );
        // Latency buckets are powers of two, then inf.
        assert_eq!(
            [0, 20, 21].map(latency_bound),
            [Some(1), Some(1 << 20), None]
        );
        let us = [0, 1, 3, 4, 1 << 20, (1 << 20) + 1];
        assert_eq!(us.map(latency_bucket), [0, 0, 2, 2, 20, 21]);
    }

    #[test]
    fn malformed_files_are_rejected_with_the_line() {
        let good = sample().to_string();
        let (all_but_last, last) = good.trim_end().rsplit_once('\n').expect("rows");
        let cases = [
            (good.replace("lmrs 3\n", ""), "counter lmrs is missing"),
            (good.replace("lmrs 3", "lmrs three"), "line 1"),
            (format!("{good}handles 1\n"), "repeated counter"),
            (
                good.replace("op=memset priority=low", "op=memset priority=urgent"),
                "unknown priority",
            ),
            (good.replace("op=memset", "op=bzero"), "unknown op"),
            (good.replace(",inf:1", ""), "latency_us has 21 buckets"),
            (good.replace(",inf:1", ",inf:1,0:0"), "has 23 buckets"),
            (
                good.replace("2:0,4:4", "3:0,4:4"),
                "bucket 1 has bound \"3\"",
            ),
            (good.replace(" bytes=40", ""), "expected bytes=..."),
            (
                good.replace("inf:1\n", "inf:1 extra\n"),
                "unexpected \"extra\"",
            ),
            (all_but_last.to_string(), "no line for op=rpc_call_async"),
            (format!("{good}{last}\n"), "repeated operation"),
        ];
        for (text, expected) in cases {
            let error = parse_stats(&text).expect_err(expected);
            assert!(error.contains(expected), "{expected}: {error}");
        }
    }

    #[test]
    fn the_settings_files_have_their_documented_names_defaults_and_format() {
        let found: Vec<_> = QosParam::ALL
            .iter()
            .map(|p| (p.file_name(), p.default_value()))
            .collect();
        let documented = [
            ("qos_enabled", 1),
            ("qos_window_us", 500),
            ("qos_delay_us", 5000),
            ("qos_max_delay_us", 200_000),
        ];
        assert_eq!(found, documented);
        assert_eq!(parse_qos("1\n"), Ok(1));
        assert_eq!(parse_qos(" 200 "), Ok(200));
        assert!(parse_qos("yes").is_err());
        // The admin group is a gid and a newline.
        assert_eq!(parse_admin_group("4294967295\n"), Ok(NO_ADMIN_GROUP));
        assert_eq!(parse_admin_group("4301\n"), Ok(4301));
        for text in ["4301", " 4301\n", "staff\n"] {
            assert!(parse_admin_group(text).is_err(), "{text:?}");
        }
        let error = parse_admin_group("4294967296\n").expect_err("above u32");
        assert_contains(&error, "above 4294967295");
    }
}
