//! Command line of `lite-cm`.

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::time::Duration;

use lite::sys::CM_DEFAULT_PORT;

use crate::auth::CREATE_SECRET_HINT;
use crate::ManagerConfig;

/// Usage text printed for `--help` and after a command line error.
pub const USAGE: &str = "\
usage: lite-cm --secret-file FILE [--listen ADDR:PORT] [--dead-after-ms MS]
               [--suspicion-ms MS] [--suspect-grace-ms MS]
               [--startup-grace-ms MS]

LITE cluster manager: assigns node ids, connects every node to every
other node as they join, and tells the nodes when one of them dies.
Only nodes holding the cluster's secret may join, and only to a manager
that holds it too.

options:
  --secret-file FILE     the cluster's secret: the whole file, 1 to 256
                         bytes, readable by its owner only (required; create
                         one with: head -c 32 /dev/urandom > FILE; chmod 600
                         FILE). Every node holds the same bytes as the
                         \"user\" key lite:cluster in its keyring:
                         keyctl padd user lite:cluster @u < FILE
  --listen ADDR:PORT     address to listen on (default 0.0.0.0:18500)
  --dead-after-ms MS     suspect a node once it has been silent (no
                         heartbeat) for MS milliseconds (default 3000);
                         twice as long while half of the nodes are late
  --suspicion-ms MS      declare a suspected node dead once it stayed silent
                         for MS milliseconds more and no peer heard from it
                         (default 800)
  --suspect-grace-ms MS  when a node reports its connection to a peer
                         failed, declare the peer dead at once if it has
                         been silent for MS milliseconds (default 1000)
  --startup-grace-ms MS  for MS milliseconds after starting, refuse joins
                         (EAGAIN: the node must retry) while the members of
                         an earlier manager resume, so that none of their
                         ids goes to a new node; 0 for a new cluster
                         (default: as --dead-after-ms)
  -h, --help             show this help

While it runs, lite-cm reads commands from its standard input, one per
line (none if the input is empty or closed):
  dead-after-ms MS       as --dead-after-ms, from now on";

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Run the manager on this address.
    Run {
        /// Address to listen on.
        listen: SocketAddr,
        /// The file holding the cluster's secret.
        secret_file: PathBuf,
        /// Tunables, the defaults but for those given on the command line.
        config: ManagerConfig,
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
    /// No `--secret-file`.
    MissingSecretFile,
    /// A value that does not parse.
    InvalidValue {
        /// The option.
        option: &'static str,
        /// The value given.
        value: String,
        /// What the option takes.
        expected: &'static str,
    },
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::UnknownArgument(arg) => write!(f, "unknown argument '{arg}'"),
            CliError::MissingValue(option) => write!(f, "{option} needs a value"),
            CliError::MissingSecretFile => write!(
                f,
                "{SECRET_FILE} FILE is required: the cluster's secret, which every node holds too; {CREATE_SECRET_HINT}"
            ),
            CliError::InvalidValue {
                option,
                value,
                expected,
            } => {
                write!(
                    f,
                    "invalid value '{value}' for {option}: expected {expected}"
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

const SECRET_FILE: &str = "--secret-file";
const LISTEN: &str = "--listen";
const DEAD_AFTER: &str = "--dead-after-ms";
const SUSPECT_GRACE: &str = "--suspect-grace-ms";

/// See [`USAGE`].
const SUSPICION: &str = "--suspicion-ms";
const STARTUP_GRACE: &str = "--startup-grace-ms";

/// Parses the arguments that follow the program name.
pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Command, CliError> {
    let mut listen = default_listen();
    let mut secret_file = None;
    let mut config = ManagerConfig::default();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        if arg == "-h" || arg == "--help" {
            return Ok(Command::Help);
        }
        let (name, inline_value) = match arg.split_once('=') {
            Some((name, value)) => (name, Some(value.to_string())),
            None => (arg.as_str(), None),
        };
        let option = match name {
            SECRET_FILE => SECRET_FILE,
            LISTEN => LISTEN,
            DEAD_AFTER => DEAD_AFTER,
            SUSPECT_GRACE => SUSPECT_GRACE,
            SUSPICION => SUSPICION,
            STARTUP_GRACE => STARTUP_GRACE,
            _ => return Err(CliError::UnknownArgument(arg.clone())),
        };
        let value = match inline_value {
            Some(value) => value,
            None => args.next().ok_or(CliError::MissingValue(option))?,
        };
        match option {
            SECRET_FILE if value.is_empty() => return Err(CliError::MissingValue(option)),
            SECRET_FILE => secret_file = Some(PathBuf::from(value)),
            DEAD_AFTER => config.dead_after = parse_millis(option, value)?,
            SUSPECT_GRACE => config.suspect_grace = parse_millis(option, value)?,
            SUSPICION => config.suspicion = parse_millis(option, value)?,
            STARTUP_GRACE => {
                config.startup_grace = Some(parse_millis_or_zero(option, value)?);
            }
            // Numeric addresses only: resolving names would make startup
            // depend on the resolver.
            _ => {
                listen = value.parse().map_err(|_| CliError::InvalidValue {
                    option,
                    value,
                    expected: "ADDR:PORT",
                })?;
            }
        }
    }
    let secret_file = secret_file.ok_or(CliError::MissingSecretFile)?;
    Ok(Command::Run {
        listen,
        secret_file,
        config,
    })
}

/// A command read from the standard input while the manager runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunCommand {
    /// `dead-after-ms MS`: [`ManagerConfig::dead_after`] from now on.
    DeadAfter(Duration),
}

/// Parses one line of the standard input (see [`USAGE`]).
pub fn parse_run_command(line: &str) -> Result<RunCommand, CliError> {
    let mut words = line.split_whitespace();
    match (words.next(), words.next(), words.next()) {
        (Some("dead-after-ms"), Some(value), None) => Ok(RunCommand::DeadAfter(parse_millis(
            "dead-after-ms",
            value.to_string(),
        )?)),
        (Some("dead-after-ms"), None, None) => Err(CliError::MissingValue("dead-after-ms")),
        _ => Err(CliError::UnknownArgument(line.trim().to_string())),
    }
}

/// Parses a positive number of milliseconds.
fn parse_millis(option: &'static str, value: String) -> Result<Duration, CliError> {
    match value.parse::<u64>() {
        Ok(millis) if millis > 0 => Ok(Duration::from_millis(millis)),
        _ => Err(CliError::InvalidValue {
            option,
            value,
            expected: "a number of milliseconds above 0",
        }),
    }
}

/// Parses a number of milliseconds, 0 included.
fn parse_millis_or_zero(option: &'static str, value: String) -> Result<Duration, CliError> {
    match value.parse::<u64>() {
        Ok(millis) => Ok(Duration::from_millis(millis)),
        _ => Err(CliError::InvalidValue {
            option,
            value,
            expected: "a number of milliseconds",
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "/etc/lite/cluster.secret";

    /// Parses `args` after a `--secret-file`, which every run needs.
    fn parse_strs(args: &[&str]) -> Result<Command, CliError> {
        parse(
            [SECRET_FILE, SECRET]
                .iter()
                .chain(args)
                .map(|s| s.to_string()),
        )
    }

    fn run_on(listen: &str, config: ManagerConfig) -> Result<Command, CliError> {
        Ok(Command::Run {
            listen: listen.parse().expect("literal address"),
            secret_file: PathBuf::from(SECRET),
            config,
        })
    }

    #[test]
    fn defaults_to_every_interface_on_the_lite_port() {
        assert_eq!(
            parse_strs(&[]),
            run_on("0.0.0.0:18500", ManagerConfig::default())
        );
    }

    #[test]
    fn the_secret_file_is_required_and_its_error_says_how_to_make_one() {
        let without = |args: &[&str]| parse(args.iter().map(|s| s.to_string()));
        assert_eq!(without(&[]), Err(CliError::MissingSecretFile));
        assert_eq!(
            without(&["--listen", "127.0.0.1:9000"]),
            Err(CliError::MissingSecretFile)
        );
        let message = CliError::MissingSecretFile.to_string();
        assert!(
            message.starts_with("--secret-file FILE is required"),
            "{message}"
        );
        assert!(
            message.contains("head -c 32 /dev/urandom > FILE; chmod 600 FILE"),
            "{message}"
        );
        assert_eq!(
            without(&["--secret-file=/s"]),
            Ok(Command::Run {
                listen: default_listen(),
                secret_file: PathBuf::from("/s"),
                config: ManagerConfig::default(),
            })
        );
        assert_eq!(
            without(&["--secret-file"]),
            Err(CliError::MissingValue("--secret-file"))
        );
        assert_eq!(
            without(&["--secret-file="]),
            Err(CliError::MissingValue("--secret-file"))
        );
        assert_eq!(without(&["--help"]), Ok(Command::Help));
    }

    #[test]
    fn listen_accepts_both_spellings() {
        let expected = run_on("127.0.0.1:9000", ManagerConfig::default());
        assert_eq!(parse_strs(&["--listen", "127.0.0.1:9000"]), expected);
        assert_eq!(parse_strs(&["--listen=127.0.0.1:9000"]), expected);
    }

    #[test]
    fn liveness_times_accept_both_spellings() {
        let expected = run_on(
            "0.0.0.0:18500",
            ManagerConfig {
                dead_after: Duration::from_millis(1500),
                suspicion: Duration::from_millis(700),
                suspect_grace: Duration::from_millis(250),
                ..ManagerConfig::default()
            },
        );
        assert_eq!(
            parse_strs(&[
                "--dead-after-ms",
                "1500",
                "--suspect-grace-ms=250",
                "--suspicion-ms=700"
            ]),
            expected
        );
        assert_eq!(
            parse_strs(&[
                "--suspicion-ms",
                "700",
                "--suspect-grace-ms",
                "250",
                "--dead-after-ms=1500"
            ]),
            expected
        );
    }

    #[test]
    fn run_commands_parse_or_say_why_not() {
        assert_eq!(
            parse_run_command("dead-after-ms 10000\n"),
            Ok(RunCommand::DeadAfter(Duration::from_secs(10)))
        );
        assert_eq!(
            parse_run_command("dead-after-ms"),
            Err(CliError::MissingValue("dead-after-ms"))
        );
        assert!(matches!(
            parse_run_command("dead-after-ms 0"),
            Err(CliError::InvalidValue { .. })
        ));
        assert_eq!(
            parse_run_command("dead-after-ms 5 6"),
            Err(CliError::UnknownArgument("dead-after-ms 5 6".into()))
        );
        assert_eq!(
            parse_run_command("reboot"),
            Err(CliError::UnknownArgument("reboot".into()))
        );
        assert!(USAGE.contains("\n  dead-after-ms MS "));
    }

    #[test]
    fn startup_grace_defaults_to_dead_after_and_may_be_zero() {
        let Ok(Command::Run { config, .. }) = parse_strs(&["--dead-after-ms", "1500"]) else {
            panic!("a valid command line");
        };
        assert_eq!(config.startup_grace, None);
        assert_eq!(config.grace(), Duration::from_millis(1500));
        for (args, grace) in [
            (&["--startup-grace-ms", "0"][..], 0),
            (
                &["--startup-grace-ms=2500", "--dead-after-ms", "1500"][..],
                2500,
            ),
        ] {
            let Ok(Command::Run { config, .. }) = parse_strs(args) else {
                panic!("a valid command line: {args:?}");
            };
            assert_eq!(config.startup_grace, Some(Duration::from_millis(grace)));
            assert_eq!(config.grace(), Duration::from_millis(grace));
        }
        for bad in ["-1", "1.5", "3s", ""] {
            assert_eq!(
                parse_strs(&["--startup-grace-ms", bad]),
                Err(CliError::InvalidValue {
                    option: "--startup-grace-ms",
                    value: bad.into(),
                    expected: "a number of milliseconds",
                }),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn usage_states_the_defaults() {
        let defaults = ManagerConfig::default();
        assert!(USAGE.contains(&format!("(default {})", defaults.dead_after.as_millis())));
        assert!(USAGE.contains(&format!("(default {})", defaults.suspect_grace.as_millis())));
        assert!(USAGE.contains(&format!("(default {})", defaults.suspicion.as_millis())));
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
            parse_strs(&["--dead-after-ms"]),
            Err(CliError::MissingValue("--dead-after-ms"))
        );
        assert_eq!(
            parse_strs(&["--port", "1"]),
            Err(CliError::UnknownArgument("--port".into()))
        );
        assert_eq!(
            parse_strs(&["--port=1"]),
            Err(CliError::UnknownArgument("--port=1".into()))
        );
        assert!(matches!(
            parse_strs(&["--listen", "localhost:1"]),
            Err(CliError::InvalidValue { .. })
        ));
        assert!(matches!(
            parse_strs(&["--listen", "1.2.3.4"]),
            Err(CliError::InvalidValue { .. })
        ));
        for bad in ["0", "-5", "1.5", "3s", ""] {
            assert_eq!(
                parse_strs(&["--dead-after-ms", bad]),
                Err(CliError::InvalidValue {
                    option: "--dead-after-ms",
                    value: bad.into(),
                    expected: "a number of milliseconds above 0",
                }),
                "{bad:?}"
            );
        }
        assert!(matches!(
            parse_strs(&["--suspect-grace-ms", "0"]),
            Err(CliError::InvalidValue { .. })
        ));
    }
}
