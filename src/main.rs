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
                    // One line: clap's first line without its "error: " prefix.
                    let text = e.render().to_string();
                    let first = text.lines().next().unwrap_or("invalid arguments");
                    let first = first.strip_prefix("error: ").unwrap_or(first);
                    eprintln!("fragkit: {first} (see --help)");
                    std::process::exit(2);
                }
            }
        }
    };
    match fragkit::cmd::dispatch(cli) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("fragkit: {e:#}");
            std::process::exit(2);
        }
    }
}
