//! `lite-cm` without a usable secret file stops at once with one message
//! that says what to do.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Output};

fn lite_cm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lite-cm"))
        .args(args)
        .output()
        .expect("lite-cm runs")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn without_a_secret_file_the_manager_says_how_to_make_one() {
    let output = lite_cm(&["--listen", "127.0.0.1:0"]);
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert_eq!(message.lines().count(), 1, "{message}");
    assert!(
        message.starts_with("lite-cm: --secret-file FILE is required"),
        "{message}"
    );
    assert!(
        message.contains("head -c 32 /dev/urandom > FILE; chmod 600 FILE"),
        "{message}"
    );
}

#[test]
fn a_missing_open_or_empty_secret_file_is_refused_before_listening() {
    let dir = std::env::temp_dir().join(format!("lite-cm-cli-{}", std::process::id()));
    fs::create_dir_all(&dir).expect("scratch directory");
    let open = dir.join("open.secret");
    fs::write(&open, [7u8; 32]).expect("write");
    fs::set_permissions(&open, fs::Permissions::from_mode(0o644)).expect("chmod");
    let empty = dir.join("empty.secret");
    fs::write(&empty, b"").expect("write");
    fs::set_permissions(&empty, fs::Permissions::from_mode(0o600)).expect("chmod");
    let missing = dir.join("missing.secret");

    let cases = [
        (
            &missing,
            "no such file; create one with: head -c 32 /dev/urandom",
        ),
        (
            &open,
            "group or others may access it (mode 0644); make it private with chmod 600",
        ),
        (&empty, "the secret is empty"),
    ];
    let outputs: Vec<Output> = cases
        .iter()
        .map(|(path, _)| {
            let path = path.to_str().expect("UTF-8 path");
            lite_cm(&["--listen", "127.0.0.1:0", "--secret-file", path])
        })
        .collect();
    fs::remove_dir_all(&dir).expect("cleanup");
    for ((path, expected), output) in cases.iter().zip(&outputs) {
        let message = stderr(output);
        assert_eq!(output.status.code(), Some(1), "{message}");
        assert!(
            message.starts_with(&format!(
                "lite-cm: cannot use {} as the cluster secret: ",
                path.display()
            )),
            "{message}"
        );
        assert!(message.contains(expected), "{message}");
    }
}
