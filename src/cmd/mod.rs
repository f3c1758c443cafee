//! One function per subcommand; each returns the process exit status.

pub mod scan;
pub mod scratch;
pub mod watch;

use crate::cli::{Cli, Command};

pub fn dispatch(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Scan(args) => scan::run(args),
        Command::Scratch { action } => scratch::run(action),
        Command::Watch(args) => watch::run(args),
    }
}
