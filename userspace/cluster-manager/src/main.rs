//! `lite-cm`: the LITE cluster manager daemon.

use std::process::ExitCode;

use lite_cluster_manager::cli::{self, Command};
use lite_cluster_manager::ClusterManager;

fn main() -> ExitCode {
    let (listen, config) = match cli::parse(std::env::args().skip(1)) {
        Ok(Command::Run { listen, config }) => (listen, config),
        Ok(Command::Help) => {
            println!("{}", cli::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("lite-cm: {e}\n{}", cli::USAGE);
            return ExitCode::from(2);
        }
    };
    let manager = match ClusterManager::bind(listen, config) {
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
