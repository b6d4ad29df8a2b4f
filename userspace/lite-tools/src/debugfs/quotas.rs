//! The quotas file in [`DEBUGFS_DIR`](super::DEBUGFS_DIR): each user's
//! limits and usage on this node, and what other nodes' LMRs may hold and
//! hold here, one line each, changed by writing one [`Command`] per
//! `write(2)`. Its format is in "Quotas" in the top-level README.

use std::collections::BTreeMap;
use std::fmt;

use super::{for_each_line, once};

/// The quotas file's name.
pub const QUOTAS_FILE: &str = "quotas";

named_enum! {
    /// In file order; the name is the resource's key in the file.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
    pub enum Resource {
        /// Bytes of LMRs allocated (`lite_alloc_remote`, `lite_wrap_alloc`),
        /// wherever their chunks are.
        RemoteMemory = "remote_memory",
        /// Bytes of this node's memory registered (`lite_register_lmr`).
        PinnedMemory = "pinned_memory",
        /// LMRs created: allocated, wrapped or registered.
        Lmrs = "lmrs",
        /// Names published (`lite_wrap_alloc`, `lite_add_ask_mr_table`).
        Names = "names",
        /// RPC ports registered (`lite_register_application`).
        RpcPorts = "rpc_ports",
        /// Locks created (`lite_create_lock`), for as long as the node is a
        /// member.
        Locks = "locks",
    }
}

/// Of bytes or of things.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// At most this many.
    At(u64),
    /// `unlimited`.
    Unlimited,
}

impl Limit {
    /// Whether holding `total` in all stays within the limit.
    pub fn allows(self, total: u64) -> bool {
        match self {
            Limit::At(limit) => total <= limit,
            Limit::Unlimited => true,
        }
    }

    /// A decimal number or `unlimited`.
    pub fn parse(text: &str) -> Result<Limit, String> {
        if text == "unlimited" {
            Ok(Limit::Unlimited)
        } else {
            decimal(text).map(Limit::At)
        }
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Limit::At(limit) => write!(f, "{limit}"),
            Limit::Unlimited => f.write_str("unlimited"),
        }
    }
}

/// One value for each [`Resource`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PerResource<T>(pub [T; 6]);

impl<T: Copy> PerResource<T> {
    /// The value of `resource`.
    pub fn get(&self, resource: Resource) -> T {
        self.0[resource as usize]
    }

    /// Sets the value of `resource`.
    pub fn set(&mut self, resource: Resource, value: T) {
        self.0[resource as usize] = value;
    }

    /// A copy with `value` for `resource`.
    pub fn with(mut self, resource: Resource, value: T) -> Self {
        self.set(resource, value);
        self
    }

    /// In file order.
    pub fn iter(&self) -> impl Iterator<Item = (Resource, T)> + '_ {
        Resource::ALL.into_iter().map(|r| (r, self.get(r)))
    }

    /// A value per resource computed from `f`.
    pub fn from_fn(f: impl Fn(Resource) -> T) -> Self {
        PerResource(Resource::ALL.map(f))
    }
}

impl<T: Copy + fmt::Display> fmt::Display for PerResource<T> {
    /// `remote_memory=V pinned_memory=V lmrs=V names=V rpc_ports=V locks=V`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (resource, value)) in self.iter().enumerate() {
            let space = if i == 0 { "" } else { " " };
            write!(f, "{space}{}={value}", resource.name())?;
        }
        Ok(())
    }
}

/// A user's limits.
pub type Limits = PerResource<Limit>;

/// What a user holds.
pub type Usage = PerResource<u64>;

impl Usage {
    /// Resource by resource.
    pub fn plus(&self, other: &Usage) -> Usage {
        Usage::from_fn(|r| self.get(r).saturating_add(other.get(r)))
    }

    /// Never below 0.
    pub fn minus(&self, other: &Usage) -> Usage {
        Usage::from_fn(|r| self.get(r).saturating_sub(other.get(r)))
    }

    /// Whether the user holds nothing.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|&value| value == 0)
    }
}

/// What [`Usage`] displays as, each resource once.
pub fn parse_usage(text: &str) -> Result<Usage, String> {
    complete(key_values(text.split_whitespace(), decimal)?)
}

/// Per the uapi header.
pub const DEFAULT_LIMITS: Limits = PerResource([
    Limit::At(1 << 30),
    Limit::Unlimited,
    Limit::At(65536),
    Limit::At(4096),
    Limit::At(1024),
    Limit::At(4096),
]);

/// What the quotas file shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotasFile {
    /// `limit default ...`: the limits of users without their own.
    pub defaults: Limits,
    /// `limit uid U ...`: users with limits of their own.
    pub users: BTreeMap<u32, Limits>,
    /// `limit node default remote_memory=V`: the bytes each other node's
    /// LMRs may hold on this node.
    pub node_default: Limit,
    /// `limit node N remote_memory=V`: nodes with a limit of their own.
    pub nodes: BTreeMap<u32, Limit>,
    /// `usage uid U ...`: every user holding anything.
    pub usage: BTreeMap<u32, Usage>,
    /// `served node N remote_memory=C`: bytes held here for other nodes'
    /// LMRs.
    pub served: BTreeMap<u32, u64>,
}

impl QuotasFile {
    /// Nothing if it has no `usage` line.
    pub fn usage_of(&self, uid: u32) -> Usage {
        self.usage.get(&uid).copied().unwrap_or_default()
    }

    /// Bytes held here for node `node`'s LMRs.
    pub fn served_for(&self, node: u32) -> u64 {
        self.served.get(&node).copied().unwrap_or(0)
    }

    /// The lines a write can change.
    pub fn limits_only(&self) -> QuotasFile {
        QuotasFile {
            usage: BTreeMap::new(),
            served: BTreeMap::new(),
            ..self.clone()
        }
    }
}

impl fmt::Display for QuotasFile {
    /// In the order the kernel writes it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "limit default {}", self.defaults)?;
        for (uid, limits) in &self.users {
            writeln!(f, "limit uid {uid} {limits}")?;
        }
        writeln!(f, "limit node default remote_memory={}", self.node_default)?;
        for (node, limit) in &self.nodes {
            writeln!(f, "limit node {node} remote_memory={limit}")?;
        }
        for (uid, usage) in &self.usage {
            writeln!(f, "usage uid {uid} {usage}")?;
        }
        for (node, bytes) in &self.served {
            writeln!(f, "served node {node} remote_memory={bytes}")?;
        }
        Ok(())
    }
}

/// ASCII digits only: no sign, no spaces.
fn decimal(text: &str) -> Result<u64, String> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{text:?} is not a decimal number"));
    }
    text.parse()
        .map_err(|_| format!("{text:?} does not fit 64 bits"))
}

fn id(text: &str, what: &str) -> Result<u32, String> {
    let value = decimal(text).map_err(|e| format!("{what}: {e}"))?;
    u32::try_from(value).map_err(|_| format!("{what}: {value} does not fit 32 bits"))
}

/// Each key a resource, at most once.
fn key_values<'a, T>(
    items: impl IntoIterator<Item = &'a str>,
    value: impl Fn(&str) -> Result<T, String>,
) -> Result<Vec<(Resource, T)>, String> {
    let mut found: Vec<(Resource, T)> = Vec::new();
    for item in items {
        let (key, text) = item
            .split_once('=')
            .ok_or_else(|| format!("expected KEY=VALUE, found {item:?}"))?;
        let resource = Resource::from_name(key).ok_or_else(|| format!("unknown key {key:?}"))?;
        if found.iter().any(|(r, _)| *r == resource) {
            return Err(format!("{key} given twice"));
        }
        found.push((resource, value(text).map_err(|e| format!("{key}: {e}"))?));
    }
    Ok(found)
}

/// `items` must name each resource once.
fn complete<T: Copy>(items: Vec<(Resource, T)>) -> Result<PerResource<T>, String> {
    let value = |resource: Resource| {
        let found = items.iter().find(|(r, _)| *r == resource);
        found.map(|&(_, value)| value)
    };
    if let Some(missing) = Resource::ALL.into_iter().find(|&r| value(r).is_none()) {
        return Err(format!("{} is missing", missing.name()));
    }
    Ok(PerResource(Resource::ALL.map(|r| {
        value(r).expect("every resource was found above")
    })))
}

fn remote_memory_only<T: Copy>(items: Vec<(Resource, T)>) -> Result<T, String> {
    match items.as_slice() {
        [(Resource::RemoteMemory, value)] => Ok(*value),
        _ => Err("a node line has remote_memory=V and nothing else".to_string()),
    }
}

/// Parses the quotas file. The `limit default` and `limit node default`
/// lines must be there once each; every `limit` and `usage` line of a
/// user names each resource once; lines of other kinds are ignored.
pub fn parse_quotas(text: &str) -> Result<QuotasFile, String> {
    let (mut defaults, mut node_default) = (None, None);
    let (mut users, mut nodes) = (BTreeMap::new(), BTreeMap::new());
    let (mut usage, mut served) = (BTreeMap::new(), BTreeMap::new());
    let counts = |items: &[&str]| key_values(items.iter().copied(), decimal);
    for_each_line(text, |line| {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["limit", ..] => match parse_command(line)? {
                Command::Defaults(items) => once(defaults.replace(complete(items)?), "repeated"),
                Command::User(uid, items) => {
                    once(users.insert(uid, complete(items)?), "repeated uid")
                }
                Command::NodeDefault(limit) => once(node_default.replace(limit), "repeated node"),
                Command::Node(node, limit) => once(nodes.insert(node, limit), "repeated node"),
                Command::UserDefault(_) | Command::NodeReset(_) => {
                    Err("a reset, which the file does not show".to_string())
                }
            },
            ["usage", "uid", uid, items @ ..] => {
                let parsed = counts(items).and_then(complete)?;
                once(usage.insert(id(uid, "uid")?, parsed), "repeated uid")
            }
            ["served", "node", node, items @ ..] => {
                let bytes = counts(items).and_then(remote_memory_only)?;
                once(served.insert(id(node, "node")?, bytes), "repeated node")
            }
            ["usage" | "served", ..] => Err("unknown line".to_string()),
            // Lines of kinds added later.
            _ => Ok(()),
        }
    })?;
    Ok(QuotasFile {
        defaults: defaults.ok_or("the limit default line is missing")?,
        users,
        node_default: node_default.ok_or("the limit node default line is missing")?,
        nodes,
        usage,
        served,
    })
}

/// A line written to the quotas file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `limit default KEY=V ...`: changes only the keys given.
    Defaults(Vec<(Resource, Limit)>),
    /// `limit uid U KEY=V ...`: the user's own limits, the defaults but
    /// for the keys given.
    User(u32, Vec<(Resource, Limit)>),
    /// `limit uid U default`: the user follows the defaults again.
    UserDefault(u32),
    /// `limit node default remote_memory=V`.
    NodeDefault(Limit),
    /// `limit node N remote_memory=V`.
    Node(u32, Limit),
    /// `limit node N default`: node N follows the default again.
    NodeReset(u32),
}

impl Command {
    /// `limit uid U` with every resource's limit.
    pub fn user_limits(uid: u32, limits: &Limits) -> Command {
        Command::User(uid, limits.iter().collect())
    }
}

impl fmt::Display for Command {
    /// Without the newline.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let keys: &[(Resource, Limit)] = match self {
            Command::Defaults(keys) => {
                f.write_str("limit default")?;
                keys
            }
            Command::User(uid, keys) => {
                write!(f, "limit uid {uid}")?;
                keys
            }
            Command::UserDefault(uid) => {
                write!(f, "limit uid {uid} default")?;
                &[]
            }
            Command::NodeDefault(limit) => {
                write!(f, "limit node default remote_memory={limit}")?;
                &[]
            }
            Command::Node(node, limit) => {
                write!(f, "limit node {node} remote_memory={limit}")?;
                &[]
            }
            Command::NodeReset(node) => {
                write!(f, "limit node {node} default")?;
                &[]
            }
        };
        keys.iter()
            .try_for_each(|(r, limit)| write!(f, " {}={limit}", r.name()))
    }
}

/// Parses one written line (a final newline allowed), as the kernel
/// should: anything that is not exactly a [`Command`] is an error, and so
/// is a `limit default` or `limit uid U` without a key.
pub fn parse_command(text: &str) -> Result<Command, String> {
    let line = text.strip_suffix('\n').unwrap_or(text);
    if line.contains('\n') {
        return Err("more than one line".to_string());
    }
    let words: Vec<&str> = line.split_whitespace().collect();
    let keys = |items: &[&str]| {
        if items.is_empty() {
            return Err("no KEY=VALUE".to_string());
        }
        key_values(items.iter().copied(), Limit::parse)
    };
    match words.as_slice() {
        ["limit", "default", rest @ ..] => Ok(Command::Defaults(keys(rest)?)),
        ["limit", "uid", uid, "default"] => Ok(Command::UserDefault(id(uid, "uid")?)),
        ["limit", "uid", uid, rest @ ..] => Ok(Command::User(id(uid, "uid")?, keys(rest)?)),
        ["limit", "node", "default", rest @ ..] => {
            Ok(Command::NodeDefault(remote_memory_only(keys(rest)?)?))
        }
        ["limit", "node", node, "default"] => Ok(Command::NodeReset(id(node, "node")?)),
        ["limit", "node", node, rest @ ..] => Ok(Command::Node(
            id(node, "node")?,
            remote_memory_only(keys(rest)?)?,
        )),
        _ => Err(format!("not a command: {line:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file as the uapi header describes it.
    const SAMPLE: &str = "limit default remote_memory=1073741824 pinned_memory=unlimited lmrs=65536 names=4096 rpc_ports=1024 locks=4096\n\
                          limit uid 1000 remote_memory=268435456 pinned_memory=unlimited lmrs=100 names=4096 rpc_ports=1024 locks=4096\n\
                          limit node default remote_memory=4294967296\n\
                          limit node 2 remote_memory=1048576\n\
                          usage uid 0 remote_memory=4096 pinned_memory=0 lmrs=1 names=0 rpc_ports=0 locks=3\n\
                          usage uid 1000 remote_memory=0 pinned_memory=8192 lmrs=1 names=1 rpc_ports=0 locks=0\n\
                          served node 2 remote_memory=524288\n";

    #[test]
    fn the_headers_lines_parse_and_limits_allow_up_to_their_value() {
        let file = parse_quotas(SAMPLE).expect("parses");
        let own = DEFAULT_LIMITS
            .with(Resource::RemoteMemory, Limit::At(268_435_456))
            .with(Resource::Lmrs, Limit::At(100));
        let usage = [
            (0, PerResource([4096, 0, 1, 0, 0, 3])),
            (1000, PerResource([0, 8192, 1, 1, 0, 0])),
        ];
        let expected = QuotasFile {
            defaults: DEFAULT_LIMITS,
            users: [(1000, own)].into(),
            node_default: Limit::At(4 << 30),
            nodes: [(2, Limit::At(1 << 20))].into(),
            usage: usage.into(),
            served: [(2, 512 << 10)].into(),
        };
        assert_eq!(file, expected);
        assert_eq!(file.usage_of(1000).get(Resource::PinnedMemory), 8192);
        assert!(file.usage_of(5).is_empty());
        assert_eq!((file.served_for(2), file.served_for(3)), (512 << 10, 0));
        // The file's own text is what the kernel writes.
        assert_eq!(file.to_string(), SAMPLE);
        assert_eq!(parse_quotas(&file.to_string()), Ok(file));
        // Limits allow up to and including their value; usages add and subtract.
        assert!(Limit::At(3).allows(3));
        assert!(!Limit::At(3).allows(4));
        assert!(Limit::Unlimited.allows(u64::MAX));
        let usage = PerResource([1, 1, 1, 1, 1, 5]);
        assert_eq!(usage.plus(&usage).get(Resource::Locks), 10);
        let line = "remote_memory=1 pinned_memory=1 lmrs=1 names=1 rpc_ports=1 locks=5";
        assert_eq!(usage.to_string(), line);
        assert_eq!(parse_usage(&usage.to_string()), Ok(usage));
        assert!(parse_usage("lmrs=1").is_err());
        assert_eq!(usage.minus(&usage.plus(&usage)), Usage::default());
        assert_eq!(usage.plus(&usage).minus(&usage), usage);
    }

    #[test]
    fn broken_files_are_refused_with_the_line() {
        for (line, missing) in [(0, "limit default"), (2, "limit node default")] {
            let without = SAMPLE.replace(SAMPLE.lines().nth(line).expect("a line"), "");
            let error = format!("the {missing} line is missing");
            assert_eq!(parse_quotas(&without), Err(error));
        }
        for (broken, why) in [
            ("limit default lmrs=1\n", "lmrs alone"),
            (
                "limit default remote_memory=1 pinned_memory=1 lmrs=1 names=1 rpc_ports=1 locks=x\n",
                "locks=x",
            ),
            (
                "usage uid 3 remote_memory=unlimited pinned_memory=0 lmrs=0 names=0 rpc_ports=0 locks=0\n",
                "unlimited usage",
            ),
            ("served node 2 lmrs=3\n", "served lmrs"),
            ("limit node 2 remote_memory=1 lmrs=2\n", "two node keys"),
            ("limit group 3 lmrs=1\n", "unknown kind"),
            ("limit default\n", "no keys"),
            ("usage\n", "too short"),
        ] {
            let text = format!("{SAMPLE}{broken}");
            let error = parse_quotas(&text).expect_err(why);
            assert!(error.contains(&format!("line {}", SAMPLE.lines().count() + 1)), "{why}: {error}");
        }
        // Lines of other kinds are left to later versions.
        assert!(parse_quotas(&format!("{SAMPLE}note something new\n")).is_ok());
    }

    #[test]
    fn commands_read_back_as_written_and_nothing_else_parses() {
        let limits = DEFAULT_LIMITS.with(Resource::Lmrs, Limit::At(8));
        for command in [
            Command::Defaults(vec![(Resource::Names, Limit::At(5))]),
            Command::user_limits(4243, &limits),
            Command::UserDefault(4243),
            Command::NodeDefault(Limit::Unlimited),
            Command::Node(2, Limit::At(1 << 20)),
            Command::NodeReset(2),
        ] {
            let line = command.to_string();
            assert_eq!(parse_command(&format!("{line}\n")), Ok(command), "{line}");
        }
        let line = "limit uid 1000 remote_memory=1073741824 pinned_memory=unlimited lmrs=8 \
                    names=4096 rpc_ports=1024 locks=4096";
        assert_eq!(Command::user_limits(1000, &limits).to_string(), line);
        let own = vec![
            (Resource::RemoteMemory, Limit::At(1 << 28)),
            (Resource::Lmrs, Limit::At(100)),
        ];
        let line = "limit uid 1000 remote_memory=268435456 lmrs=100";
        assert_eq!(parse_command(line), Ok(Command::User(1000, own)));
        for line in [
            "",
            "limit default",
            "limit uid 5",
            "limit default bogus=1",
            "limit default lmrs=many",
            "limit default lmrs=-1",
            "limit default lmrs=+1",
            "limit default lmrs=18446744073709551616",
            "limit default lmrs=1 lmrs=2",
            "limit uid someone lmrs=1",
            "limit node 2 lmrs=5",
            "limit node default",
            "usage uid 0 lmrs=0",
            "served node 2 remote_memory=0",
            "limit default lmrs=1\nlimit default names=1",
        ] {
            assert!(parse_command(line).is_err(), "{line:?}");
        }
    }
}
