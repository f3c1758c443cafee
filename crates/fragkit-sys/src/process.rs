//! Other processes: whether one still runs.

/// Whether process `pid` is running: it exists and is not a zombie (a process that ended
/// and waits for its parent to collect it has stopped using what it held). From
/// /proc/PID/stat, whose third field is the state; the name before it is in parentheses
/// and may hold spaces or parentheses, so the state is read after the last ')'.
pub fn running(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    match stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].trim_start().chars().next())
    {
        Some('Z' | 'X' | 'x') | None => false,
        Some(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_runs_and_a_reaped_child_does_not() {
        assert!(running(std::process::id()));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Ended but not collected: a zombie, not running.
        while std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| !s.contains(") Z"))
            .unwrap_or(false)
        {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(!running(pid));
        child.wait().unwrap();
        assert!(!running(pid));
    }
}
