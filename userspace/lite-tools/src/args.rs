//! A small command line parser: `--name VALUE`, `--name=VALUE` and `-h`/`--help`.
//!
//! The tools run in minimal guests and are linked statically, so this
//! replaces a full argument parsing crate.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write;
use std::str::FromStr;

/// One option that takes a value.
#[derive(Debug, Clone, Copy)]
pub struct OptionSpec {
    /// Long name without the dashes, e.g. `"cm"` for `--cm`.
    pub name: &'static str,
    /// Placeholder for the value in the usage text, e.g. `"IP"`.
    pub value_name: &'static str,
    /// One-line description, including the default if there is one.
    pub help: &'static str,
}

/// The option `--NAME VALUE_NAME`, described by `help`.
pub const fn option(
    name: &'static str,
    value_name: &'static str,
    help: &'static str,
) -> OptionSpec {
    OptionSpec {
        name,
        value_name,
        help,
    }
}

/// `--cm IP`, taken by every program that joins a cluster.
pub const CM_OPTION: OptionSpec = option(
    "cm",
    "IP",
    "IPv4 address of the cluster manager (port 18500)",
);

/// The command line interface of one program.
#[derive(Debug, Clone, Copy)]
pub struct Cli {
    /// Program name, as shown in the usage text.
    pub program: &'static str,
    /// Arguments as shown after the program name, e.g. `"--cm IP [--nodes N]"`.
    pub synopsis: &'static str,
    /// One-line description of the program.
    pub about: &'static str,
    /// Options the program accepts.
    pub options: &'static [OptionSpec],
}

/// A command line that cannot be obeyed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgError {
    /// `-h` or `--help` was given.
    HelpRequested,
    /// What is wrong: an unknown argument, a missing or repeated option, a
    /// missing value, or one that does not parse or is out of range.
    Invalid(String),
}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgError::HelpRequested => write!(f, "help requested"),
            ArgError::Invalid(problem) => f.write_str(problem),
        }
    }
}

impl std::error::Error for ArgError {}

/// Option values found on a command line.
#[derive(Debug, Clone, Default)]
pub struct Parsed {
    values: BTreeMap<&'static str, String>,
}

impl Cli {
    /// Usage text listing every option.
    pub fn usage(&self) -> String {
        let mut details = String::new();
        for option in self.options {
            let left = format!("--{} {}", option.name, option.value_name);
            details.push_str(&format!("  {left:<22} {}\n", option.help));
        }
        format!(
            "usage: {} {}\n\n{}\n\noptions:\n{details}  {:<22} show this help",
            self.program, self.synopsis, self.about, "-h, --help"
        )
    }

    /// Parses the arguments that follow the program name.
    pub fn parse(&self, args: impl IntoIterator<Item = String>) -> Result<Parsed, ArgError> {
        let mut parsed = Parsed::default();
        let mut args = args.into_iter();
        while let Some(arg) = args.next() {
            if arg == "-h" || arg == "--help" {
                return Err(ArgError::HelpRequested);
            }
            let unknown = || ArgError::Invalid(format!("unknown argument '{arg}'"));
            let Some(body) = arg.strip_prefix("--") else {
                return Err(unknown());
            };
            let (name, inline_value) = match body.split_once('=') {
                Some((name, value)) => (name, Some(value.to_string())),
                None => (body, None),
            };
            let Some(option) = self.options.iter().find(|o| o.name == name) else {
                return Err(unknown());
            };
            let problem = |what| ArgError::Invalid(format!("--{} {what}", option.name));
            let value = match inline_value {
                Some(value) => value,
                None => args.next().ok_or_else(|| problem("needs a value"))?,
            };
            if parsed.values.insert(option.name, value).is_some() {
                return Err(problem("given more than once"));
            }
        }
        Ok(parsed)
    }

    /// Parses the process's arguments; prints the usage and exits on
    /// `--help` (status 0) or on an error (status 2).
    pub fn parse_env_or_exit(&self) -> Parsed {
        match self.parse(std::env::args().skip(1)) {
            Ok(parsed) => parsed,
            Err(error) => self.exit_with(&error),
        }
    }

    /// Parses the process's arguments and makes them a configuration with
    /// `config`; exits as [`Cli::parse_env_or_exit`] does on an error.
    pub fn config_or_exit<T>(&self, config: impl FnOnce(&Parsed) -> Result<T, ArgError>) -> T {
        config(&self.parse_env_or_exit()).unwrap_or_else(|error| self.exit_with(&error))
    }

    /// Reports `error` the way [`Cli::parse_env_or_exit`] does and exits.
    pub fn exit_with(&self, error: &ArgError) -> ! {
        if *error == ArgError::HelpRequested {
            println!("{}", self.usage());
            let _ = std::io::stdout().flush();
            std::process::exit(0);
        }
        eprintln!("{}: {error}\n{}", self.program, self.usage());
        std::process::exit(2);
    }
}

impl Parsed {
    /// The raw value of `option`, if given.
    pub fn get(&self, option: &'static str) -> Option<&str> {
        self.values.get(option).map(String::as_str)
    }

    /// Parses the value of a required option.
    pub fn required<T>(&self, option: &'static str) -> Result<T, ArgError>
    where
        T: FromStr,
        T::Err: fmt::Display,
    {
        self.required_with(option, parse_value)
    }

    /// Parses the value of an optional option, or returns `default`.
    pub fn optional<T>(&self, option: &'static str, default: T) -> Result<T, ArgError>
    where
        T: FromStr,
        T::Err: fmt::Display,
    {
        self.with(option, default, parse_value)
    }

    /// Parses the value of a required option with a custom function.
    pub fn required_with<T>(
        &self,
        option: &'static str,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Result<T, ArgError> {
        let missing = || ArgError::Invalid(format!("--{option} is required"));
        let value = self.get(option).ok_or_else(missing)?;
        parse(value).map_err(|reason| invalid(option, value, reason))
    }

    /// Parses the value of an optional option with a custom function (for
    /// lists and keywords), or returns `default`.
    pub fn with<T>(
        &self,
        option: &'static str,
        default: T,
        parse: impl FnOnce(&str) -> Result<T, String>,
    ) -> Result<T, ArgError> {
        match self.get(option) {
            Some(value) => parse(value).map_err(|reason| invalid(option, value, reason)),
            None => Ok(default),
        }
    }
}

/// The [`ArgError`] of `value`, given for `option`, for `reason`.
pub fn invalid(option: &'static str, value: &str, reason: impl Into<String>) -> ArgError {
    let reason = reason.into();
    ArgError::Invalid(format!("invalid value '{value}' for --{option}: {reason}"))
}

/// `value` parsed as a `T`, or why not.
fn parse_value<T>(value: &str) -> Result<T, String>
where
    T: FromStr,
    T::Err: fmt::Display,
{
    value.parse().map_err(|e: T::Err| e.to_string())
}

/// Checks that `value` lies in `range`, naming the option otherwise.
pub fn in_range<T>(
    option: &'static str,
    value: T,
    range: std::ops::RangeInclusive<T>,
) -> Result<T, ArgError>
where
    T: PartialOrd + fmt::Display + Copy,
{
    if range.contains(&value) {
        Ok(value)
    } else {
        Err(invalid(
            option,
            &value.to_string(),
            format!("must be between {} and {}", range.start(), range.end()),
        ))
    }
}

/// Parses a comma separated list of positive integers, e.g. `8,64,4096`.
pub fn parse_positive_list(text: &str) -> Result<Vec<u64>, String> {
    text.split(',')
        .map(|item| match item.trim().parse::<u64>() {
            Ok(0) => Err("sizes must be positive".to_string()),
            Ok(value) => Ok(value),
            Err(e) => Err(format!("'{}': {e}", item.trim())),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CLI: Cli = Cli {
        program: "tool",
        synopsis: "--cm IP [--nodes N]",
        about: "does things",
        options: &[
            option("cm", "IP", "manager address"),
            option("nodes", "N", "cluster size"),
        ],
    };

    fn parse(args: &[&str]) -> Result<Parsed, ArgError> {
        CLI.parse(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn both_spellings_are_accepted_and_values_taken_verbatim() {
        let parsed = parse(&["--cm", "10.0.0.1", "--nodes=3"]).expect("valid command line");
        assert_eq!(parsed.get("cm"), Some("10.0.0.1"));
        assert_eq!(parsed.required::<u32>("nodes"), Ok(3));
        assert_eq!(parsed.optional::<u32>("missing", 7), Ok(7));
        let upper = |text: &str| Ok::<_, String>(text.to_uppercase());
        assert_eq!(parsed.required_with("cm", upper), Ok("10.0.0.1".into()));
        let refuse = |_: &str| Err::<u32, _>("nope".to_string());
        assert_eq!(parsed.with("absent", 5, refuse), Ok(5));
        let refused = Err(invalid("nodes", "3", "nope"));
        assert_eq!(parsed.with("nodes", 0, refuse), refused);
        let parsed = parse(&["--cm", "--nodes"]).expect("value taken verbatim");
        assert_eq!(parsed.get("cm"), Some("--nodes"));
        let parsed = parse(&["--cm=a=b"]).expect("split at the first '='");
        assert_eq!(parsed.get("cm"), Some("a=b"));
    }

    #[test]
    fn errors_name_the_problem_and_usage_every_option() {
        for (args, error) in [
            (&["-h"][..], "help requested"),
            (&["--cm", "x", "--help"], "help requested"),
            (&["--bogus", "1"], "unknown argument '--bogus'"),
            (&["stray"], "unknown argument 'stray'"),
            (&["--cm"], "--cm needs a value"),
            (&["--cm", "a", "--cm", "b"], "--cm given more than once"),
        ] {
            let found = parse(args).err().map(|e| e.to_string());
            assert_eq!(found.as_deref(), Some(error), "{args:?}");
        }
        assert_eq!(parse(&["-h"]).err(), Some(ArgError::HelpRequested));
        let parsed = parse(&["--nodes", "three"]).expect("syntactically fine");
        let missing = ArgError::Invalid("--cm is required".into());
        assert_eq!(parsed.required::<u32>("cm"), Err(missing));
        let nodes = parsed.required::<u32>("nodes").map_err(|e| e.to_string());
        let invalid = "invalid value 'three' for --nodes: invalid digit found in string";
        assert_eq!(nodes, Err(invalid.to_string()));
        let usage = CLI.usage();
        assert!(usage.starts_with("usage: tool --cm IP [--nodes N]\n"));
        crate::tap::assert_contains_all(&usage, &["--cm IP", "cluster size", "--help"]);
    }

    #[test]
    fn values_are_checked_in_range_and_lists_are_positive() {
        assert_eq!(in_range("nodes", 3u32, 1..=63), Ok(3));
        let error = in_range("nodes", 0u32, 1..=63).expect_err("out of range");
        let expected = "invalid value '0' for --nodes: must be between 1 and 63";
        assert_eq!(error.to_string(), expected);
        assert_eq!(parse_positive_list("8,64, 512"), Ok(vec![8, 64, 512]));
        for bad in ["8,,64", "8,0", "-1", ""] {
            assert!(parse_positive_list(bad).is_err(), "{bad:?}");
        }
    }
}
