// A closed stdout or stderr must never panic a command: print through writers that
// return errors (stdout) or `stderr_line!` (diagnostics).
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]
use clap::Parser;

fn main() {
    let cli = match fragkit::cli::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            match e.kind() {
                ErrorKind::DisplayHelp
                | ErrorKind::DisplayVersion
                | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => e.exit(),
                _ => {
                    // One line: clap's first paragraph without its "error: " prefix.
                    let text = e.render().to_string();
                    let first: Vec<&str> = text
                        .lines()
                        .take_while(|l| !l.trim().is_empty())
                        .map(str::trim)
                        .collect();
                    let msg = first.join(" ");
                    let msg = msg.strip_prefix("error: ").unwrap_or(&msg);
                    // Under a launcher every rank parses the same command line: rank 0
                    // says it once.
                    if fragkit::cluster::launcher_rank().is_none_or(|r| r == 0) {
                        fragkit_sys::stderr_line!("fragkit: {msg} (see --help)");
                    }
                    std::process::exit(2);
                }
            }
        }
    };
    match fragkit::cmd::dispatch(cli) {
        Ok(code) => std::process::exit(code),
        // `fragkit scan ... | head`: the reader has what it wanted; not an error.
        Err(e) if broken_pipe(&e) => std::process::exit(0),
        Err(e) => {
            // Ranks other than 0 whose peer failed stay quiet: the failing rank and rank 0
            // have said it; so do they for an error every rank hits alike.
            let quiet = e
                .downcast_ref::<fragkit::cluster::PeerFailed>()
                .is_some_and(|p| p.quiet)
                || e.downcast_ref::<fragkit::cluster::EveryRank>()
                    .is_some_and(|x| x.quiet());
            if !quiet {
                fragkit_sys::stderr_line!("fragkit: {e:#}");
            }
            std::process::exit(2);
        }
    }
}

/// Whether the error (anywhere in its chain) is a write to a closed pipe.
fn broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            || c.downcast_ref::<serde_json::Error>()
                .and_then(|j| j.io_error_kind())
                .is_some_and(|k| k == std::io::ErrorKind::BrokenPipe)
    })
}
