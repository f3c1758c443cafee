//! Progress shown on a terminal while files are mapped (nothing when stderr is not one).

use std::io::{self, IsTerminal};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A spinner counting mapped files; short runs finish before the first tick and never draw.
pub(crate) fn files_spinner() -> ProgressBar {
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr_with_hz(10));
    if !io::stderr().is_terminal() {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    bar.set_style(
        ProgressStyle::with_template("{spinner} {pos} files mapped ({per_sec}) {elapsed}")
            .expect("static template"),
    );
    bar.enable_steady_tick(Duration::from_millis(250));
    bar
}
