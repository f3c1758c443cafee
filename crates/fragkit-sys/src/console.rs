//! The process's standard error as a diagnostic channel that never panics.
//!
//! `eprintln!` panics when stderr is closed (`fragkit scan x 2>&- `, or a pipe whose reader
//! went away): a warning must never end a command half-way through a defrag or leave a
//! scratch file system behind. [`stderr_line!`] writes the line if it can and otherwise
//! drops it; the command goes on and ends with its own status.
//!
//! Diagnostics name files, and a file name may hold control characters (ESC starting a
//! terminal escape sequence, OSC, CR rewriting the line, a newline faking a second
//! message): [`stderr_line!`] escapes every control character of the line it writes, and
//! [`printable`] / [`Shown`] do the same for names in tables on stdout. The one rule:
//! C0 (U+0000–U+001F), DEL and C1 (U+0080–U+009F) are written as Rust escapes (`\u{1b}`,
//! `\r`, `\n`, `\t`); everything else, non-ASCII included, is written as it is.

use std::borrow::Cow;
use std::fmt;
use std::path::Path;

/// `eprintln!` without the panic: one line to stderr, lost if stderr is closed; control
/// characters in it are escaped ([`printable`]), so it stays one line and cannot drive the
/// terminal.
#[macro_export]
macro_rules! stderr_line {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let line = ::std::format!($($arg)*);
        let _ = writeln!(std::io::stderr().lock(), "{}", $crate::console::printable(&line));
    }};
}

/// `text` with every control character (C0, DEL, C1) escaped; borrowed when there is none.
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A path for a terminal: bytes that are not UTF-8 as U+FFFD, control characters escaped
/// ([`printable`]). For tables and messages; JSON and CSV keep names losslessly instead.
pub struct Shown<'a>(pub &'a Path);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lossy = self.0.to_string_lossy();
        f.write_str(&printable(&lossy))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        assert!(matches!(printable("plain ünïcode"), Cow::Borrowed(_)));
        assert_eq!(
            printable("a\u{1b}]0;pwned\u{7}b\rc\nd\u{9b}e\u{7f}"),
            "a\\u{1b}]0;pwned\\u{7}b\\rc\\nd\\u{9b}e\\u{7f}"
        );
        use std::os::unix::ffi::OsStrExt;
        let p = Path::new(std::ffi::OsStr::from_bytes(b"/x/\x1b[31mred\xff"));
        assert_eq!(Shown(p).to_string(), "/x/\\u{1b}[31mred\u{fffd}");
    }
}
