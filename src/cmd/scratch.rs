//! `fragkit scratch create|clone|destroy|list`

use anyhow::Result;

use crate::cli::{InfoFormat, ScratchAction};
use crate::report::scratch as out;
use crate::scratch::{self, Scratch, ScratchSpec};

pub fn run(action: ScratchAction) -> Result<i32> {
    match action {
        ScratchAction::Create {
            fs,
            size,
            dir,
            mkfs_args,
            mount_options,
            external_journal,
            format,
        } => {
            let spec = ScratchSpec {
                fs,
                size,
                dir,
                parent: None,
                mkfs_args: mkfs_args
                    .map(|a| a.split_whitespace().map(String::from).collect())
                    .unwrap_or_default(),
                mount_options,
                external_journal,
            };
            let info = Scratch::create(&spec)?.keep();
            print_info(&info, format)
        }
        ScratchAction::Clone {
            mountpoint,
            dir,
            format,
        } => {
            scratch::require_root("cloning a scratch file system")?;
            let info = Scratch::open_existing(&mountpoint)?.clone_to(dir)?.keep();
            print_info(&info, format)
        }
        ScratchAction::Destroy { mountpoint } => {
            scratch::require_root("destroying a scratch file system")?;
            Scratch::open_existing(&mountpoint)?.destroy()?;
            Ok(0)
        }
        ScratchAction::Guard { owner, dir } => {
            // Longer than a launcher waits between SIGTERM and SIGKILL (OpenMPI's
            // odls_base_sigkill_timeout, 1 s), so the other ranks are gone too.
            scratch::guard(&dir, owner, std::time::Duration::from_secs(3))?;
            Ok(0)
        }
        ScratchAction::List { format } => {
            let list = scratch::list_mounted();
            crate::report::to_stdout(|w| match format {
                InfoFormat::Json => crate::report::write_json_pretty(w, &list),
                InfoFormat::Table => out::write_list(w, &list),
            })?;
            Ok(0)
        }
    }
}

fn print_info(info: &scratch::ScratchInfo, format: InfoFormat) -> Result<i32> {
    crate::report::to_stdout(|w| match format {
        InfoFormat::Json => crate::report::write_json_pretty(w, info),
        InfoFormat::Table => out::write_info(w, &mut std::io::stderr(), info),
    })?;
    Ok(0)
}
