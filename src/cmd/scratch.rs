//! `fragkit scratch create|clone|destroy|list`

use anyhow::Result;

use crate::cli::{InfoFormat, ScratchAction};
use crate::scratch::{self, Scratch, ScratchSpec};

pub fn run(action: ScratchAction) -> Result<i32> {
    match action {
        ScratchAction::Create {
            fs,
            size,
            dir,
            mkfs_args,
            mount_options,
            format,
        } => {
            let spec = ScratchSpec {
                fs,
                size,
                dir,
                mkfs_args: mkfs_args
                    .map(|a| a.split_whitespace().map(String::from).collect())
                    .unwrap_or_default(),
                mount_options,
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
        ScratchAction::List { format } => {
            let list = scratch::list_mounted();
            match format {
                InfoFormat::Json => println!("{}", serde_json::to_string_pretty(&list)?),
                InfoFormat::Table => {
                    for i in list {
                        println!(
                            "{}\t{}\t{}\t{}",
                            i.mountpoint.display(),
                            i.fs,
                            crate::units::HumanBytes(i.size),
                            i.loop_device.display()
                        );
                    }
                }
            }
            Ok(0)
        }
    }
}

fn print_info(info: &scratch::ScratchInfo, format: InfoFormat) -> Result<i32> {
    match format {
        InfoFormat::Json => println!("{}", serde_json::to_string_pretty(info)?),
        InfoFormat::Table => {
            println!("{}", info.mountpoint.display());
            eprintln!(
                "{} of {} on {} (image {}); remove with: fragkit scratch destroy {}",
                crate::units::HumanBytes(info.size),
                info.fs,
                info.loop_device.display(),
                info.image.display(),
                info.mountpoint.display()
            );
        }
    }
    Ok(0)
}
