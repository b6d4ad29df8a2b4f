//! Authenticated joins: before this node joins, `lite_join` must fail, and
//! leave the node out of the cluster, when
//!
//! * the caller's keyrings hold a wrong cluster secret: the manager refuses
//!   the node's proof (`EKEYREJECTED`);
//! * they hold no cluster secret at all (`ENOKEY`);
//! * the manager does not hold the secret: a fake manager, a thread of
//!   this program listening on this node, answers the node's proof with
//!   that very proof instead of its own (`EKEYREJECTED`).
//!
//! Keyrings belong to processes, so each join runs in a copy of this
//! program. The first two join a new, empty session keyring, which hides
//! the user keyring holding the right secret (see [`crate::keyring`]); the
//! first then adds a wrong secret to it. The third keeps the right secret.
//!
//! Only the real kernel has keyrings; an in-memory model skips these.

use std::ffi::CString;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use libc::c_long;
use lite::sys::CM_DEFAULT_PORT;
use lite_cluster_manager::cm_wire::Message;
use lite_cluster_manager::frame::{read_message, write_message, ProtocolError};

use super::processes::{points_of, report_point, run_child, spawn};
use super::TestConfig;
use crate::errno::{describe_result, errno_name, expect_errno};
use crate::kernel::Kernel;
use crate::keyring::{add_cluster_secret, join_new_session_keyring, SESSION_KEYRING};
use crate::tap::Tap;
use crate::IB_PORT;

const KIND: &str = "join-auth";

const FAKE_MANAGER_PORT: u16 = 18599;

/// Longest the fake manager waits for the node, and for each of its frames.
const FAKE_MANAGER_TIMEOUT: Duration = Duration::from_secs(60);

const WHY_SKIPPED: &str = "needs the real kernel's keyrings";

/// The secret a child puts in its keyring instead of the cluster's.
const WRONG_SECRET: &[u8] = b"not this cluster's secret";

/// One join that must be refused: its name on the child's command line,
/// what `lite_join` must return (negated), and what the caller's keyrings
/// hold (`None`: the right secret, but the manager is a fake).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Case {
    name: &'static str,
    errno: i32,
    held: Option<&'static str>,
}

const WITH_WRONG_SECRET: Case = Case {
    name: "wrong-secret",
    errno: libc::EKEYREJECTED,
    held: Some("a wrong cluster secret"),
};
const WITHOUT_SECRET: Case = Case {
    name: "no-secret",
    errno: libc::ENOKEY,
    held: Some("no cluster secret"),
};
const FAKE_MANAGER: Case = Case {
    name: "fake-manager",
    errno: libc::EKEYREJECTED,
    held: None,
};

impl Case {
    const ALL: [Case; 3] = [WITH_WRONG_SECRET, WITHOUT_SECRET, FAKE_MANAGER];

    fn from_name(name: &str) -> Option<Case> {
        Case::ALL.into_iter().find(|case| case.name == name)
    }

    /// The test point; `manager` is where the join goes (for the fake
    /// manager, only its port is named: the address is this node's).
    fn description(self, manager: SocketAddr) -> String {
        let refused = format!(
            "returns -{} and leaves the node out of the cluster",
            errno_name(self.errno)
        );
        match self.held {
            Some(held) => {
                format!("join {manager} from a process whose keyrings hold {held} {refused}")
            }
            None => format!(
                "join a fake manager on this node's port {} that does not hold the cluster secret (it sends the node's own proof back) {refused}",
                manager.port()
            ),
        }
    }
}

/// `skip` when the node joined before the test started.
pub(super) fn run<K: Kernel, W: Write>(
    kernel: &K,
    tap: &mut Tap<W>,
    config: &TestConfig,
    skip: bool,
) {
    let manager = SocketAddr::new(IpAddr::V4(config.cm), CM_DEFAULT_PORT);
    for case in Case::ALL {
        let target = match case.held {
            None => SocketAddr::new(IpAddr::V4(config.cm), FAKE_MANAGER_PORT),
            Some(_) => manager,
        };
        let skipped = match skip {
            true => Some("node joined before the test started"),
            false => (!kernel.checks_cluster_secret()).then_some(WHY_SKIPPED),
        };
        tap.check_or_skip(&case.description(target), skipped, || {
            match case.held {
                None => own_address(config.cm).and_then(|ip| {
                    join_fake_manager(SocketAddr::new(IpAddr::V4(ip), FAKE_MANAGER_PORT))
                }),
                _ => join_in_child(case, target),
            }
            .and_then(|()| still_out(kernel))
        });
    }
}

/// This node's address towards the manager at `cm`: where the fake manager
/// listens. No packet is sent.
fn own_address(cm: Ipv4Addr) -> Result<Ipv4Addr, String> {
    let socket =
        UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).map_err(|e| format!("UDP socket: {e}"))?;
    socket
        .connect((cm, CM_DEFAULT_PORT))
        .map_err(|e| format!("no route to the manager {cm}: {e}"))?;
    match socket.local_addr().map(|address| address.ip()) {
        Ok(IpAddr::V4(ip)) => Ok(ip),
        Ok(other) => Err(format!("this node's address towards {cm} is {other}")),
        Err(e) => Err(format!("this node's address towards {cm}: {e}")),
    }
}

/// The node must not be a member. One that is (the kernel let a refused
/// join through) leaves again, so that the real join can go on.
fn still_out<K: Kernel>(kernel: &K) -> Result<(), String> {
    let id = kernel.get_node_id();
    if id > 0 {
        let left = kernel.leave(0);
        return Err(format!(
            "the node joined as node {id}; leaving again returned {}",
            describe_result(left)
        ));
    }
    expect_errno(id, libc::ENOTCONN).map_err(|e| format!("get_node_id: {e}"))
}

fn join_in_child(case: Case, manager: SocketAddr) -> Result<(), String> {
    let points = points_of(spawn(KIND, &[&case.name, &manager.ip(), &manager.port()])?)?;
    match <[_; 1]>::try_from(points) {
        Ok([(_, outcome)]) => outcome,
        Err(points) => Err(format!(
            "the child reported {} points instead of one",
            points.len()
        )),
    }
}

/// Runs the join to a fake manager listening at `address` in a child: a
/// manager without the cluster's secret, on a thread of this program,
/// listening on every address at `address`'s port.
fn join_fake_manager(address: SocketAddr) -> Result<(), String> {
    let port = address.port();
    let listener = TcpListener::bind((Ipv4Addr::UNSPECIFIED, port))
        .map_err(|e| format!("the fake manager cannot listen on port {port}: {e}"))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("the fake manager's socket: {e}"))?;
    // Tells the thread to stop waiting for a node that never came.
    let stop = AtomicBool::new(false);
    thread::scope(|scope| {
        let fake = thread::Builder::new()
            .name("fake manager".into())
            .spawn_scoped(scope, || serve_one_node(&listener, &stop))
            .map_err(|e| format!("starting the fake manager: {e}"))?;
        let joined = join_in_child(FAKE_MANAGER, address);
        stop.store(true, Ordering::SeqCst);
        let exchange = fake.join();
        joined.and(exchange.unwrap_or_else(|_| Err("the fake manager panicked".into())))
    })
}

/// Waits for one node and plays a manager that does not hold the secret.
fn serve_one_node(listener: &TcpListener, stop: &AtomicBool) -> Result<(), String> {
    let deadline = Instant::now() + FAKE_MANAGER_TIMEOUT;
    let stream = loop {
        match listener.accept() {
            Ok((stream, _)) => break stream,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if stop.load(Ordering::SeqCst) || Instant::now() >= deadline {
                    return Err("no node connected to the fake manager".into());
                }
                thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(format!("the fake manager's accept failed: {e}")),
        }
    };
    impersonate(stream).map_err(|e| format!("the fake manager: {e}"))
}

/// Challenges the node, then sends its own proof back as the manager's:
/// the best a manager without the secret can do without guessing.
fn impersonate(mut stream: TcpStream) -> Result<(), String> {
    let configure = |stream: &TcpStream| -> std::io::Result<()> {
        stream.set_nonblocking(false)?;
        stream.set_read_timeout(Some(FAKE_MANAGER_TIMEOUT))?;
        stream.set_write_timeout(Some(FAKE_MANAGER_TIMEOUT))
    };
    configure(&stream).map_err(|e| format!("socket: {e}"))?;
    let challenge = Message::Challenge {
        nonce: *b"fake manager nce",
    };
    write_message(&mut stream, &challenge).map_err(|e| format!("sending Challenge: {e}"))?;
    let proof = match read_message(&mut stream) {
        Ok(Message::Auth { proof, .. }) => proof,
        Ok(other) => return Err(format!("expected Auth, got {:?}", other.kind())),
        Err(e) => return Err(format!("expected Auth: {e}")),
    };
    write_message(&mut stream, &Message::AuthOk { proof })
        .map_err(|e| format!("sending AuthOk: {e}"))?;
    // A node that refused the proof hangs up without another frame.
    match read_message(&mut stream) {
        Err(ProtocolError::Closed) => Ok(()),
        Err(ProtocolError::Io(e)) if e.kind() == std::io::ErrorKind::ConnectionReset => Ok(()),
        Ok(message) => Err(format!(
            "the node went on with {:?} after a wrong proof",
            message.kind()
        )),
        Err(e) => Err(format!("after AuthOk: {e}")),
    }
}

/// The exit status, or `None` for other child kinds.
pub(super) fn child_main<K: Kernel>(kernel: &K, args: &[String]) -> Option<i32> {
    let parse = |rest: &[String]| {
        let [case, ip, port] = rest else {
            return Err(format!("expected CASE IP PORT, got {rest:?}"));
        };
        match (Case::from_name(case), ip.parse(), port.parse()) {
            (Some(case), Ok(ip), Ok(port)) => Ok((case, SocketAddr::new(IpAddr::V4(ip), port))),
            _ => Err(format!("bad CASE IP PORT {rest:?}")),
        }
    };
    run_child(args, KIND, parse, |(case, manager)| {
        report_point(
            &case.description(manager),
            join_refused(kernel, case, manager),
        );
        0
    })
}

/// Prepares this process's keyrings for `case`; the join must then fail.
fn join_refused<K: Kernel>(kernel: &K, case: Case, manager: SocketAddr) -> Result<(), String> {
    if case.held.is_some() {
        join_new_session_keyring().map_err(|e| format!("joining a new session keyring: {e}"))?;
    }
    if case == WITH_WRONG_SECRET {
        add_cluster_secret(WRONG_SECRET, SESSION_KEYRING)
            .map_err(|e| format!("adding a wrong secret to the session keyring: {e}"))?;
    }
    let ip = CString::new(manager.ip().to_string()).map_err(|e| e.to_string())?;
    // SAFETY: `ip` is a NUL-terminated string that outlives the call.
    let ret: c_long = unsafe { kernel.join(ip.as_ptr(), manager.port().into(), IB_PORT) };
    expect_errno(ret, case.errno)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tap::assert_contains;

    #[test]
    fn cases_survive_the_command_line_and_name_their_errno_without_colon_space() {
        let manager: SocketAddr = "10.77.0.254:18500".parse().expect("address");
        for case in Case::ALL {
            assert_eq!(Case::from_name(case.name), Some(case));
            let description = case.description(manager);
            assert!(!description.contains(": "), "{description}");
            assert_contains(&description, &format!("-{} ", errno_name(case.errno)));
        }
        assert_eq!(Case::from_name("right-secret"), None);
    }

    #[test]
    fn the_fake_manager_sends_the_nodes_proof_back_and_expects_a_hang_up() {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind");
        let address = listener.local_addr().expect("address");
        listener.set_nonblocking(true).expect("nonblocking");
        let fake = thread::spawn(move || serve_one_node(&listener, &AtomicBool::new(false)));

        let mut node = TcpStream::connect(address).expect("connect");
        let Ok(Message::Challenge { nonce }) = read_message(&mut node) else {
            panic!("no Challenge");
        };
        let auth = Message::Auth {
            nonce,
            proof: [0x42; 32],
        };
        write_message(&mut node, &auth).expect("send Auth");
        let message = read_message(&mut node);
        assert!(matches!(message, Ok(Message::AuthOk { proof }) if proof == [0x42; 32]));
        drop(node);
        assert_eq!(fake.join().expect("fake manager"), Ok(()));
    }

    #[test]
    fn a_fake_manager_nobody_calls_gives_up_when_told() {
        let address: SocketAddr = (Ipv4Addr::LOCALHOST, 0).into();
        let listener = TcpListener::bind(address).expect("bind");
        listener.set_nonblocking(true).expect("nonblocking");
        let stop = AtomicBool::new(true);
        let nobody = "no node connected to the fake manager";
        assert_eq!(serve_one_node(&listener, &stop), Err(nobody.into()));
    }
}
