//! `lite-secret load FILE`: gives this node the cluster's secret, as the
//! key `lite:cluster` of type "user" in the user keyring, where
//! `lite_join` finds it; prints the key's serial. Exits 1 if the file or
//! the keyring refuses, 2 for a bad command line.

use std::path::Path;
use std::process::ExitCode;

use lite_tools::errno::describe_error;
use lite_tools::keyring::{
    add_cluster_secret, parse_secret_command, read_secret_file, SecretCommand, SECRET_USAGE,
    USER_KEYRING,
};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let file = match parse_secret_command(&args) {
        Ok(SecretCommand::Load(file)) => file,
        Ok(SecretCommand::Help) => {
            println!("{SECRET_USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("lite-secret: {e}\n{SECRET_USAGE}");
            return ExitCode::from(2);
        }
    };
    let added = read_secret_file(Path::new(&file)).and_then(|secret| {
        add_cluster_secret(&secret, USER_KEYRING).map_err(|e| {
            let why = describe_error(&e);
            format!("cannot add the key lite:cluster to the user keyring: {why}")
        })
    });
    match added {
        Ok(serial) => {
            println!("{serial}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("lite-secret: {e}");
            ExitCode::FAILURE
        }
    }
}
