//! `lite-cm`: the LITE cluster manager daemon.

use std::io::BufRead;
use std::process::ExitCode;
use std::sync::Arc;
use std::thread;

use lite_cluster_manager::cli::{self, CliError, Command, RunCommand};
use lite_cluster_manager::{ClusterManager, ClusterSecret};

fn main() -> ExitCode {
    let (listen, secret_file, config) = match cli::parse(std::env::args().skip(1)) {
        Ok(Command::Run {
            listen,
            secret_file,
            config,
        }) => (listen, secret_file, config),
        Ok(Command::Help) => {
            println!("{}", cli::USAGE);
            return ExitCode::SUCCESS;
        }
        // Says all there is to do; the usage would bury it.
        Err(e @ CliError::MissingSecretFile) => {
            eprintln!("lite-cm: {e}");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("lite-cm: {e}\n{}", cli::USAGE);
            return ExitCode::from(2);
        }
    };
    let secret = match ClusterSecret::read_file(&secret_file) {
        Ok(secret) => secret,
        Err(e) => {
            eprintln!(
                "lite-cm: cannot use {} as the cluster secret: {e}",
                secret_file.display()
            );
            return ExitCode::FAILURE;
        }
    };
    let manager = match ClusterManager::bind(listen, config, secret) {
        Ok(manager) => manager,
        Err(e) => {
            eprintln!("lite-cm: cannot listen on {listen}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let manager = Arc::new(manager);
    let obeying = Arc::clone(&manager);
    // Ends with the process: reading the input blocks until it closes.
    let commands = thread::Builder::new()
        .name("commands".into())
        .spawn(move || obey_commands(&obeying));
    if let Err(e) = commands {
        eprintln!("lite-cm: cannot read commands: {e}");
    }
    let error = manager.run();
    eprintln!("lite-cm: stopped: {error}");
    ExitCode::FAILURE
}

/// Carries out the commands of the standard input (see [`cli::USAGE`])
/// until it ends.
fn obey_commands(manager: &ClusterManager) {
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else {
            return;
        };
        if line.trim().is_empty() {
            continue;
        }
        match cli::parse_run_command(&line) {
            Ok(RunCommand::DeadAfter(dead_after)) => {
                let earlier = manager.set_dead_after(dead_after);
                eprintln!(
                    "lite-cm: dead after {} ms from now on (was {} ms)",
                    dead_after.as_millis(),
                    earlier.as_millis()
                );
            }
            Err(e) => eprintln!("lite-cm: ignored command '{}': {e}", line.trim()),
        }
    }
}
