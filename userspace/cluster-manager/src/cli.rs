//! Command line of `lite-cm`.

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use lite::sys::CM_DEFAULT_PORT;

/// Usage text printed for `--help` and after a command line error.
pub const USAGE: &str = "\
usage: lite-cm [--listen ADDR:PORT]

LITE cluster manager: assigns node ids and connects every node to every
other node as they join.

options:
  --listen ADDR:PORT  address to listen on (default 0.0.0.0:18500)
  -h, --help          show this help";

/// What the command line asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Run the manager on this address.
    Run {
        /// Address to listen on.
        listen: SocketAddr,
    },
    /// Print the usage text.
    Help,
}

/// A command line that cannot be obeyed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CliError {
    /// An argument that is not an option of `lite-cm`.
    UnknownArgument(String),
    /// An option given without its value.
    MissingValue(&'static str),
    /// A value that does not parse.
    InvalidValue {
        /// The option.
        option: &'static str,
        /// The value given.
        value: String,
    },
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::UnknownArgument(arg) => write!(f, "unknown argument '{arg}'"),
            CliError::MissingValue(option) => write!(f, "{option} needs a value"),
            CliError::InvalidValue { option, value } => {
                write!(
                    f,
                    "invalid value '{value}' for {option}: expected ADDR:PORT"
                )
            }
        }
    }
}

impl std::error::Error for CliError {}

/// Default listening address: every interface, the LITE default port.
pub fn default_listen() -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, CM_DEFAULT_PORT))
}

/// Parses the arguments that follow the program name.
pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Command, CliError> {
    const LISTEN: &str = "--listen";
    let mut listen = default_listen();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let value = match arg.as_str() {
            "-h" | "--help" => return Ok(Command::Help),
            LISTEN => args.next().ok_or(CliError::MissingValue(LISTEN))?,
            other => match other.strip_prefix("--listen=") {
                Some(value) => value.to_string(),
                None => return Err(CliError::UnknownArgument(arg)),
            },
        };
        // Numeric addresses only: resolving names would make startup
        // depend on the resolver.
        listen = value.parse().map_err(|_| CliError::InvalidValue {
            option: LISTEN,
            value,
        })?;
    }
    Ok(Command::Run { listen })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_strs(args: &[&str]) -> Result<Command, CliError> {
        parse(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn defaults_to_every_interface_on_the_lite_port() {
        assert_eq!(
            parse_strs(&[]),
            Ok(Command::Run {
                listen: "0.0.0.0:18500".parse().expect("literal address")
            })
        );
    }

    #[test]
    fn listen_accepts_both_spellings() {
        let expected = Ok(Command::Run {
            listen: "127.0.0.1:9000".parse().expect("literal address"),
        });
        assert_eq!(parse_strs(&["--listen", "127.0.0.1:9000"]), expected);
        assert_eq!(parse_strs(&["--listen=127.0.0.1:9000"]), expected);
    }

    #[test]
    fn help_wins() {
        assert_eq!(
            parse_strs(&["--listen", "1.2.3.4:5", "-h"]),
            Ok(Command::Help)
        );
        assert_eq!(parse_strs(&["--help"]), Ok(Command::Help));
    }

    #[test]
    fn errors_are_reported() {
        assert_eq!(
            parse_strs(&["--listen"]),
            Err(CliError::MissingValue("--listen"))
        );
        assert_eq!(
            parse_strs(&["--port", "1"]),
            Err(CliError::UnknownArgument("--port".into()))
        );
        assert!(matches!(
            parse_strs(&["--listen", "localhost:1"]),
            Err(CliError::InvalidValue { .. })
        ));
        assert!(matches!(
            parse_strs(&["--listen", "1.2.3.4"]),
            Err(CliError::InvalidValue { .. })
        ));
    }
}
