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
                    eprintln!("fragkit: {msg} (see --help)");
                    std::process::exit(2);
                }
            }
        }
    };
    match fragkit::cmd::dispatch(cli) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            // Ranks other than 0 whose peer failed stay quiet: the failing rank and rank 0
            // have said it.
            let quiet = e
                .downcast_ref::<fragkit::cluster::PeerFailed>()
                .is_some_and(|p| p.quiet);
            if !quiet {
                eprintln!("fragkit: {e:#}");
            }
            std::process::exit(2);
        }
    }
}
