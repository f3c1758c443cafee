//! `fragkit scratch` output: the mount point (what scripts capture) and where it came from.

use std::io::{self, Write};

use crate::scratch::ScratchInfo;
use crate::units::HumanBytes;

/// The mount point on stdout; what it is and how to remove it on `note` (stderr).
pub fn write_info(w: &mut dyn Write, note: &mut dyn Write, info: &ScratchInfo) -> io::Result<()> {
    writeln!(w, "{}", info.mountpoint.display())?;
    w.flush()?;
    writeln!(
        note,
        "{} of {} on {} (image {}); remove with: fragkit scratch destroy {}",
        HumanBytes(info.size),
        info.fs,
        info.loop_device.display(),
        info.image.display(),
        info.mountpoint.display()
    )
}

/// One line per mounted scratch file system.
pub(crate) fn write_list(w: &mut dyn Write, list: &[ScratchInfo]) -> io::Result<()> {
    for i in list {
        writeln!(
            w,
            "{}\t{}\t{}\t{}",
            i.mountpoint.display(),
            i.fs,
            HumanBytes(i.size),
            i.loop_device.display()
        )?;
    }
    Ok(())
}
