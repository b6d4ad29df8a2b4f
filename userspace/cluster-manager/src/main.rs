//! `lite-cm`: the LITE cluster manager daemon.

use std::process::ExitCode;

use lite_cluster_manager::cli::{self, CliError, Command};
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
    let error = manager.run();
    eprintln!("lite-cm: stopped: {error}");
    ExitCode::FAILURE
}
