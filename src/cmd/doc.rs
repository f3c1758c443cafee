//! `fragkit completions SHELL` and `fragkit man`: generated from the same clap definitions
//! that parse the arguments, so they cannot drift from them (scripts/package installs both).

use std::path::Path;

use anyhow::{Context, Result};
use clap::CommandFactory;

use crate::cli::Cli;

pub fn completions(shell: clap_complete::Shell) -> Result<i32> {
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "fragkit", &mut buf);
    crate::report::to_stdout(|w| std::io::Write::write_all(w, &buf))?;
    Ok(0)
}

pub fn man(dir: Option<&Path>) -> Result<i32> {
    let cmd = Cli::command();
    match dir {
        None => {
            let mut buf = Vec::new();
            clap_mangen::Man::new(cmd).render(&mut buf)?;
            crate::report::to_stdout(|w| std::io::Write::write_all(w, &buf))?;
        }
        Some(d) => {
            std::fs::create_dir_all(d).with_context(|| format!("--dir {}", d.display()))?;
            clap_mangen::generate_to(cmd, d)
                .with_context(|| format!("--dir {}: writing man pages", d.display()))?;
        }
    }
    Ok(0)
}
