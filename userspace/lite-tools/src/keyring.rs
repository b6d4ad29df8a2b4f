//! The cluster's secret in the kernel keyring, where `lite_join` looks for
//! it: the payload of the key of type "user" described `lite:cluster`,
//! found through the joining process's keyrings (see keyrings(7)).
//!
//! `lite-secret load FILE` puts it in the user keyring, which every process
//! of the user reaches while it has no session keyring of its own; a
//! process that joins a new session keyring no longer finds it.

use std::ffi::CStr;
use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use libc::{c_int, c_long};
use lite_cluster_manager::cm_wire::MAX_SECRET_LEN;

/// Type of the key holding the cluster's secret.
pub const KEY_TYPE: &CStr = c"user";

/// Description of the key holding the cluster's secret.
pub const KEY_DESCRIPTION: &CStr = c"lite:cluster";

/// `KEY_SPEC_SESSION_KEYRING`: the calling process's session keyring.
pub const SESSION_KEYRING: i32 = -3;

/// `KEY_SPEC_USER_KEYRING`: the calling user's keyring.
pub const USER_KEYRING: i32 = -4;

const KEYCTL_JOIN_SESSION_KEYRING: c_int = 1;

/// Checks that `secret` has a length nodes and the manager accept.
pub fn check_secret(secret: &[u8]) -> Result<(), String> {
    match secret.len() {
        0 => Err("the secret is empty".into()),
        len if len > MAX_SECRET_LEN => {
            Err(format!("the secret is longer than {MAX_SECRET_LEN} bytes"))
        }
        _ => Ok(()),
    }
}

/// Reads a secret file: the whole file is the secret.
pub fn read_secret_file(path: &Path) -> Result<Vec<u8>, String> {
    let file = File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let mut secret = Vec::with_capacity(MAX_SECRET_LEN + 1);
    // One byte more than allowed tells a long file without reading it all.
    file.take(MAX_SECRET_LEN as u64 + 1)
        .read_to_end(&mut secret)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    check_secret(&secret).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(secret)
}

/// Adds (or updates) the `lite:cluster` key with payload `secret` in
/// `keyring` ([`USER_KEYRING`], [`SESSION_KEYRING`], or a serial); returns
/// the key's serial.
pub fn add_cluster_secret(secret: &[u8], keyring: i32) -> io::Result<i32> {
    // SAFETY: the type and description are NUL-terminated strings, and the
    // payload is readable for the length passed; add_key copies them all.
    let serial: c_long = unsafe {
        libc::syscall(
            libc::SYS_add_key,
            KEY_TYPE.as_ptr(),
            KEY_DESCRIPTION.as_ptr(),
            secret.as_ptr(),
            secret.len(),
            keyring,
        )
    };
    serial_of(serial)
}

/// Makes the calling process join a new anonymous session keyring, linked
/// to nothing: from then on its searches no longer reach the user keyring.
/// Returns the new keyring's serial.
pub fn join_new_session_keyring() -> io::Result<i32> {
    // SAFETY: a NULL name asks for a new anonymous keyring; nothing is read.
    let serial: c_long = unsafe {
        libc::syscall(
            libc::SYS_keyctl,
            KEYCTL_JOIN_SESSION_KEYRING,
            std::ptr::null::<libc::c_char>(),
        )
    };
    serial_of(serial)
}

fn serial_of(ret: c_long) -> io::Result<i32> {
    if ret < 0 {
        return Err(io::Error::last_os_error());
    }
    i32::try_from(ret).map_err(|_| io::Error::other(format!("key serial {ret} out of range")))
}

/// What `lite-secret` is asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretCommand {
    /// Put the contents of this file in the user keyring.
    Load(String),
    /// Print the usage.
    Help,
}

/// Usage of `lite-secret`.
pub const SECRET_USAGE: &str = "\
usage: lite-secret load FILE

Adds the bytes of FILE (1 to 256) to the user keyring as the key of type
\"user\" described lite:cluster, the cluster's secret that lite_join proves
to the cluster manager (the same as `keyctl padd user lite:cluster @u <
FILE`), and prints the key's serial.";

/// Parses the arguments that follow the program name.
pub fn parse_secret_command(args: &[String]) -> Result<SecretCommand, String> {
    match args {
        [help] if help == "-h" || help == "--help" => Ok(SecretCommand::Help),
        [load, file] if load == "load" && !file.is_empty() => Ok(SecretCommand::Load(file.clone())),
        _ => Err(format!("expected 'load FILE', got {args:?}")),
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    #[test]
    fn a_secret_file_is_read_whole_and_holds_1_to_256_bytes() {
        let dir = std::env::temp_dir().join(format!("lite-secret-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("scratch directory");
        let good = dir.join("good");
        fs::write(&good, [0xa5; MAX_SECRET_LEN]).expect("write");
        let long = dir.join("long");
        fs::write(&long, [1; MAX_SECRET_LEN + 1]).expect("write");
        let empty = dir.join("empty");
        fs::write(&empty, b"").expect("write");
        let read = (
            read_secret_file(&good),
            read_secret_file(&long),
            read_secret_file(&empty),
            read_secret_file(&dir.join("missing")),
        );
        fs::remove_dir_all(&dir).expect("cleanup");
        assert_eq!(read.0, Ok(vec![0xa5; MAX_SECRET_LEN]));
        assert_eq!(check_secret(b"x"), Ok(()));
        assert!(read.1.is_err_and(|e| e.contains("longer than 256")));
        assert!(read.2.is_err_and(|e| e.contains("empty")));
        assert!(read.3.is_err_and(|e| e.contains("cannot open")));
    }

    #[test]
    fn the_command_line_loads_a_file_into_the_key_the_kernel_asks_for() {
        let args = |list: &[&str]| -> Vec<String> { list.iter().map(|s| s.to_string()).collect() };
        let path = "/etc/lite/cluster.secret";
        let load = parse_secret_command(&args(&["load", path]));
        assert_eq!(load, Ok(SecretCommand::Load(path.into())));
        let help = parse_secret_command(&args(&["--help"]));
        assert_eq!(help, Ok(SecretCommand::Help));
        for bad in [
            &[][..],
            &["load"],
            &["load", ""],
            &["store", "f"],
            &["load", "a", "b"],
        ] {
            assert!(parse_secret_command(&args(bad)).is_err(), "{bad:?}");
        }
        assert_eq!(KEY_TYPE, c"user");
        assert_eq!(KEY_DESCRIPTION, c"lite:cluster");
        // The kernel looks up a key of the "user" type with that description.
        let kernel = include_str!("../../../rust-lite/sys/secret.rs");
        assert!(kernel.contains("read_user_key(c_str!(\"lite:cluster\")"));
        assert!(kernel.contains("bindings::key_type_user"));
    }
}
