//! One function per subcommand; each returns the process exit status.

pub mod advise;
pub mod age;
pub mod bench;
pub mod defrag;
pub mod doc;
pub mod free;
pub mod lab;
pub mod map;
pub mod probe;
pub mod scan;
pub mod scratch;
pub mod ssd;
pub mod trace;
#[cfg(feature = "watch")]
pub mod watch;

use crate::cli::{Cli, Command};

pub fn dispatch(cli: Cli) -> anyhow::Result<i32> {
    match cli.command {
        Command::Scan(args) => scan::run(args),
        Command::Scratch { action } => scratch::run(action),
        Command::Defrag(args) => defrag::run(args),
        Command::Advise(args) => advise::run(args),
        Command::Bench { action } => bench::run(action),
        Command::Probe { action } => probe::run(action),
        Command::Free(args) => free::run(args),
        Command::Map(args) => map::run(args),
        Command::Trace(args) => trace::run(args),
        Command::Age { action } => age::run(action),
        Command::Ssd(args) => ssd::run(args),
        #[cfg(feature = "watch")]
        Command::Watch(args) => watch::run(args),
        Command::Lab(args) => lab::run(args),
        Command::Completions { shell } => doc::completions(shell),
        Command::Man { dir } => doc::man(dir.as_deref()),
    }
}
