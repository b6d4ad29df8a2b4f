//! The cluster's secret and the HMAC-SHA256 computations of the mutual
//! authentication that opens every connection (the exchange is described
//! in [`cm_wire`](crate::cm_wire)).

use std::convert::Infallible;
use std::fmt;
use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::cm_wire::{
    auth_mac, frame_tag, MAC_LEN, MAX_SECRET_LEN, NONCE_LEN, SESSION_LABEL, TAG_LEN,
};

/// How to make a secret file, for error messages.
pub const CREATE_SECRET_HINT: &str =
    "create one with: head -c 32 /dev/urandom > FILE; chmod 600 FILE";

/// The secret every member of a cluster and its manager hold.
#[derive(Clone, PartialEq, Eq)]
pub struct ClusterSecret {
    bytes: Vec<u8>,
}

/// Why a secret cannot be used.
#[derive(Debug)]
pub enum SecretError {
    /// The file cannot be opened or read.
    Unreadable(io::Error),
    /// Group or others have some access to the file.
    OpenToOthers {
        /// The file's permission bits.
        mode: u32,
    },
    /// The secret has no byte.
    Empty,
    /// The secret is longer than [`MAX_SECRET_LEN`] bytes.
    TooLong,
}

impl fmt::Display for SecretError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretError::Unreadable(e) if e.kind() == io::ErrorKind::NotFound => {
                write!(f, "no such file; {CREATE_SECRET_HINT}")
            }
            SecretError::Unreadable(e) => write!(f, "cannot read it: {e}"),
            SecretError::OpenToOthers { mode } => write!(
                f,
                "group or others may access it (mode {mode:04o}); make it private with chmod 600"
            ),
            SecretError::Empty => write!(f, "the secret is empty; {CREATE_SECRET_HINT}"),
            SecretError::TooLong => write!(
                f,
                "the secret is longer than {MAX_SECRET_LEN} bytes, which nodes do not accept"
            ),
        }
    }
}

impl std::error::Error for SecretError {}

impl ClusterSecret {
    /// A secret of 1 to [`MAX_SECRET_LEN`] bytes.
    pub fn new(bytes: Vec<u8>) -> Result<Self, SecretError> {
        match bytes.len() {
            0 => Err(SecretError::Empty),
            len if len > MAX_SECRET_LEN => Err(SecretError::TooLong),
            _ => Ok(ClusterSecret { bytes }),
        }
    }

    /// Reads the secret from `path`: the whole file is the secret. A file
    /// that group or others may access is refused, as anyone who can read
    /// the secret can join the cluster or pose as its manager.
    pub fn read_file(path: &Path) -> Result<Self, SecretError> {
        let file = File::open(path).map_err(SecretError::Unreadable)?;
        // The open file's mode, so that it cannot change between the check
        // and the read.
        let mode = file
            .metadata()
            .map_err(SecretError::Unreadable)?
            .permissions()
            .mode();
        if mode & 0o077 != 0 {
            return Err(SecretError::OpenToOthers {
                mode: mode & 0o7777,
            });
        }
        let mut bytes = Vec::with_capacity(MAX_SECRET_LEN + 1);
        // One byte more than allowed tells a long file without reading it all.
        file.take(MAX_SECRET_LEN as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(SecretError::Unreadable)?;
        Self::new(bytes)
    }

    /// `HMAC(K, label | first | second)`: a proof or the session key.
    pub(crate) fn mac(
        &self,
        label: &[u8],
        first: &[u8; NONCE_LEN],
        second: &[u8; NONCE_LEN],
    ) -> [u8; MAC_LEN] {
        let keyed = |input: &[u8]| Ok::<_, Infallible>(hmac_sha256(&self.bytes, input));
        let Ok(mac) = auth_mac(keyed, label, first, second);
        mac
    }

    /// The session key of a connection whose nonces are `manager_nonce` and
    /// `node_nonce`.
    pub(crate) fn session_key(
        &self,
        manager_nonce: &[u8; NONCE_LEN],
        node_nonce: &[u8; NONCE_LEN],
    ) -> SessionKey {
        SessionKey(self.mac(SESSION_LABEL, manager_nonce, node_nonce))
    }
}

impl fmt::Debug for ClusterSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print the secret itself.
        write!(f, "ClusterSecret({} bytes)", self.bytes.len())
    }
}

/// The key that tags the frames of one authenticated connection.
#[derive(Clone)]
pub(crate) struct SessionKey([u8; MAC_LEN]);

impl SessionKey {
    /// The tag of `frame`, the `sequence`th frame sent in `direction`.
    pub(crate) fn tag(&self, direction: u8, sequence: u64, frame: &[u8]) -> [u8; TAG_LEN] {
        let keyed = |input: &[u8]| Ok::<_, Infallible>(hmac_sha256(&self.0, input));
        let Ok(tag) = frame_tag(keyed, direction, sequence, frame);
        tag
    }
}

/// HMAC-SHA256 of `input` keyed with `key`.
pub(crate) fn hmac_sha256(key: &[u8], input: &[u8]) -> [u8; MAC_LEN] {
    let mut mac =
        <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC accepts keys of any length");
    mac.update(input);
    mac.finalize().into_bytes().into()
}

/// A fresh nonce from the kernel's random number generator.
pub(crate) fn random_nonce() -> io::Result<[u8; NONCE_LEN]> {
    let mut nonce = [0u8; NONCE_LEN];
    let mut filled = 0;
    while filled < NONCE_LEN {
        let rest = &mut nonce[filled..];
        // SAFETY: `rest` is writable for the length passed.
        let got = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        match usize::try_from(got) {
            Ok(got) => filled += got,
            Err(_) => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
        }
    }
    Ok(nonce)
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::path::PathBuf;

    use super::*;
    use crate::cm_wire::{MANAGER_LABEL, NODE_LABEL};

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn hmac_sha256_matches_rfc_4231() {
        assert_eq!(
            hex(&hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    /// Fixed values for the other implementation of the protocol (the
    /// node's, in the kernel) to check itself against.
    #[test]
    fn proofs_session_key_and_tag_have_known_values() {
        let secret = ClusterSecret::new(b"cluster secret".to_vec()).expect("valid secret");
        let manager_nonce = [0x11u8; NONCE_LEN];
        let node_nonce = [0x22u8; NONCE_LEN];
        assert_eq!(
            hex(&secret.mac(NODE_LABEL, &manager_nonce, &node_nonce)),
            "21513c8be5c0d4d581d003832cad1478acc8df5e2619a09e274919660cd17a53"
        );
        assert_eq!(
            hex(&secret.mac(MANAGER_LABEL, &node_nonce, &manager_nonce)),
            "912c1489d4fae1c6f580a8cc64540c3303d438a3a3d8689f4fbba9ddaaeaa21d"
        );
        let session = secret.session_key(&manager_nonce, &node_nonce);
        assert_eq!(
            hex(&session.0),
            "750a4d0a859eb0e0af53cfda6f7841ba313f6993f24f780b8229b11dab589151"
        );
        assert_eq!(
            hex(&session.tag(b'M', 1, b"frame")),
            "4fcd96b34695bb6e193e6a0f37487d9b"
        );
    }

    #[test]
    fn nonces_differ() {
        let first = random_nonce().expect("getrandom");
        let second = random_nonce().expect("getrandom");
        assert_ne!(first, second);
    }

    #[test]
    fn secrets_are_1_to_256_bytes() {
        assert!(matches!(
            ClusterSecret::new(Vec::new()),
            Err(SecretError::Empty)
        ));
        assert!(ClusterSecret::new(vec![7]).is_ok());
        assert!(ClusterSecret::new(vec![7; MAX_SECRET_LEN]).is_ok());
        assert!(matches!(
            ClusterSecret::new(vec![7; MAX_SECRET_LEN + 1]),
            Err(SecretError::TooLong)
        ));
        let secret = ClusterSecret::new(b"do not print".to_vec()).expect("valid secret");
        assert_eq!(format!("{secret:?}"), "ClusterSecret(12 bytes)");
    }

    /// A private scratch directory, removed when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Self {
            let dir = std::env::temp_dir().join(format!("lite-cm-{name}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).expect("scratch directory");
            Scratch(dir)
        }

        fn file(&self, name: &str, contents: &[u8], mode: u32) -> PathBuf {
            let path = self.0.join(name);
            fs::write(&path, contents).expect("write");
            fs::set_permissions(&path, fs::Permissions::from_mode(mode)).expect("chmod");
            path
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn a_secret_file_must_be_private_and_of_a_valid_length() {
        let scratch = Scratch::new("secret-files");
        let good = scratch.file("good", &[0xa5; 32], 0o600);
        assert_eq!(
            ClusterSecret::read_file(&good).expect("a private 32-byte file"),
            ClusterSecret::new(vec![0xa5; 32]).expect("valid secret")
        );
        let read_only = scratch.file("read-only", b"x", 0o400);
        assert!(ClusterSecret::read_file(&read_only).is_ok());

        for mode in [0o644, 0o640, 0o604, 0o620] {
            let open = scratch.file("open", b"secret", mode);
            match ClusterSecret::read_file(&open) {
                Err(e @ SecretError::OpenToOthers { .. }) => {
                    assert!(e.to_string().contains("chmod 600"), "{e}");
                    assert!(e.to_string().contains(&format!("{mode:04o}")), "{e}");
                }
                other => panic!("mode {mode:o}: {other:?}"),
            }
        }
        let empty = scratch.file("empty", b"", 0o600);
        assert!(matches!(
            ClusterSecret::read_file(&empty),
            Err(SecretError::Empty)
        ));
        let long = scratch.file("long", &[1; MAX_SECRET_LEN + 1], 0o600);
        assert!(matches!(
            ClusterSecret::read_file(&long),
            Err(SecretError::TooLong)
        ));
        let missing = ClusterSecret::read_file(&scratch.0.join("missing"));
        match missing {
            Err(e @ SecretError::Unreadable(_)) => {
                assert!(e.to_string().contains("head -c 32 /dev/urandom"), "{e}");
            }
            other => panic!("{other:?}"),
        }
    }
}
