//! Runs each lab step as a real `fragkit` (or tool) command, so that every figure in the
//! report comes from a command a user can type, and the report can list them exactly.

use std::fs;
use std::io::{self, IsTerminal, Read};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;

/// One step as the report shows it.
#[derive(Debug, Clone, Serialize)]
pub struct StepRecord {
    pub n: usize,
    pub name: String,
    /// The command with the lab's paths shown as $BASE, $PICK, ... (see `variables`).
    pub command: String,
    pub seconds: f64,
    pub exit_status: i32,
    /// The command's stderr, relative to the output directory.
    pub log: String,
    /// Its stdout (usually a JSON report), relative to the output directory.
    pub output: Option<String>,
}

pub struct Runner {
    exe: PathBuf,
    out: PathBuf,
    /// Shell variables the shown commands use, longest path first when substituting.
    vars: Vec<(String, PathBuf)>,
    pub steps: Vec<StepRecord>,
    bar: ProgressBar,
    /// The next step's stdin when not /dev/null (a terminal, see `tool_output`).
    stdin: Option<OwnedFd>,
    /// The CPUs the next steps run on (a taskset -c list), None: any.
    pin: Option<String>,
    /// Set by SIGINT or SIGTERM: the running step is stopped and no other starts, so
    /// the lab ends through its normal path and tears its scratch file systems down.
    stop: &'static AtomicBool,
}

/// How long a step stopped with SIGTERM gets to end before SIGKILL.
const STEP_GRACE: Duration = Duration::from_secs(10);
/// How often a running step is checked for its end and for a stop.
const STEP_POLL: Duration = Duration::from_millis(20);

impl Runner {
    pub fn new(out: &Path, planned_steps: u64) -> Result<Runner> {
        let exe = std::env::current_exe().context("cannot find the fragkit executable")?;
        fs::create_dir_all(out.join("logs"))?;
        fs::create_dir_all(out.join("data"))?;
        let bar = ProgressBar::with_draw_target(
            Some(planned_steps),
            ProgressDrawTarget::stderr_with_hz(10),
        );
        if !io::stderr().is_terminal() {
            bar.set_draw_target(ProgressDrawTarget::hidden());
        }
        bar.set_style(
            ProgressStyle::with_template("{spinner} [{pos}/{len}] {msg} {elapsed}")
                .expect("static template"),
        );
        bar.enable_steady_tick(Duration::from_millis(200));
        Ok(Runner {
            exe,
            out: out.to_path_buf(),
            vars: vec![("OUT".into(), out.to_path_buf())],
            steps: Vec::new(),
            bar,
            stdin: None,
            pin: None,
            stop: fragkit_sys::signals::interrupt_flag(true),
        })
    }

    /// Whether SIGINT or SIGTERM asked the lab to stop.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// The flag SIGINT and SIGTERM set, for waits the lab does itself.
    pub fn stop_flag(&self) -> &'static AtomicBool {
        self.stop
    }

    /// The output directory every step writes under.
    pub fn out(&self) -> &Path {
        &self.out
    }

    pub fn exe(&self) -> &Path {
        &self.exe
    }

    /// From now on show `path` as `$name` in commands.
    pub(crate) fn define(&mut self, name: &str, path: &Path) {
        self.vars.retain(|(n, _)| n != name);
        self.vars.push((name.to_string(), path.to_path_buf()));
        self.vars
            .sort_by_key(|(_, p)| std::cmp::Reverse(p.as_os_str().len()));
    }

    pub fn variables(&self) -> Vec<(String, PathBuf)> {
        self.vars.clone()
    }

    /// A note that stays on screen above the progress line (and goes to stderr otherwise).
    pub fn say(&self, text: &str) {
        if self.bar.is_hidden() {
            fragkit_sys::stderr_line!("{text}");
        } else {
            self.bar.println(text);
        }
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }

    /// The command line as a user would type it: fragkit by name, paths as variables.
    pub fn show(&self, program: &str, args: &[String]) -> String {
        let mut words = vec![program.to_string()];
        for a in args {
            words.push(self.shell_word(a));
        }
        words.join(" ")
    }

    fn shell_word(&self, a: &str) -> String {
        if a == self.exe.to_string_lossy() {
            return "fragkit".into();
        }
        shell_word(a, &self.vars)
    }

    /// Run `fragkit ARGS`; returns its stdout. `output` names the file stdout is kept in.
    pub fn fragkit(&mut self, name: &str, args: &[String], output: Option<&str>) -> Result<String> {
        let exe = self.exe.clone();
        let shown = self.show("fragkit", args);
        self.run(name, &exe, args, shown, output, &[0])
    }

    /// Run another program (an application the lab drives), accepting the exit statuses
    /// in `ok`.
    pub(crate) fn tool(
        &mut self,
        name: &str,
        program: &str,
        args: &[String],
        output: Option<&str>,
        ok: &[i32],
    ) -> Result<String> {
        let shown = self.show(program, args);
        self.run(name, Path::new(program), args, shown, output, ok)
    }

    /// Run a fragkit command whose exit status 1 means "done, some targets skipped or
    /// refused, listed in its report" (defrag): the lab reads the report instead of failing.
    pub(crate) fn fragkit_report(
        &mut self,
        name: &str,
        args: &[String],
        output: Option<&str>,
    ) -> Result<String> {
        let exe = self.exe.clone();
        let shown = self.show("fragkit", args);
        self.run(name, &exe, args, shown, output, &[0, 1])
    }

    /// Run `fragkit ARGS` (e.g. `bench writes -- TOOL ...`) with a terminal on its stdin
    /// when `tty`, accepting the exit statuses in `ok`. xfs_fsr writes what it did ("already
    /// fully defragmented", "No improvement will be made") to stdout only when its stdin is
    /// a terminal, and to syslog otherwise; bench writes passes its stdin on.
    pub(crate) fn fragkit_tty(
        &mut self,
        name: &str,
        args: &[String],
        output: &str,
        tty: bool,
        ok: &[i32],
    ) -> Result<String> {
        let _primary = if tty {
            let (primary, secondary) = fragkit_sys::pty::open()
                .map_err(|e| anyhow!("{name}: cannot open a pseudo-terminal for it: {e}"))?;
            self.stdin = Some(secondary);
            Some(primary)
        } else {
            None
        };
        let exe = self.exe.clone();
        let shown = self.show("fragkit", args);
        let out = self.run(name, &exe, args, shown, Some(output), ok);
        self.stdin = None;
        out
    }

    /// Record a step the lab did itself (shown as the equivalent command).
    pub fn record(&mut self, name: &str, shown: String, seconds: f64, output: Option<&str>) {
        let n = self.steps.len() + 1;
        self.steps.push(StepRecord {
            n,
            name: name.to_string(),
            command: shown,
            seconds,
            exit_status: 0,
            log: String::new(),
            output: output.map(|o| format!("data/{o}")),
        });
        self.bar.inc(1);
        self.say(&format!("  done  {name} ({seconds:.1} s)"));
    }

    /// Run the next steps on these CPUs (a taskset -c list, shown in their commands), or
    /// anywhere (None).
    pub(crate) fn pin_steps(&mut self, cpus: Option<String>) {
        self.pin = cpus;
    }

    pub fn begin(&self, name: &str) {
        self.bar.set_message(name.to_string());
    }

    fn run(
        &mut self,
        name: &str,
        program: &Path,
        args: &[String],
        shown: String,
        output: Option<&str>,
        ok: &[i32],
    ) -> Result<String> {
        if self.stopped() {
            bail!("{INTERRUPTED} before step '{name}'");
        }
        let n = self.steps.len() + 1;
        self.bar.set_message(name.to_string());
        let slug: String = name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let log = format!("logs/{n:02}-{slug}.log");
        let log_file = fs::File::create(self.out.join(&log))?;
        let t = Instant::now();
        let started = fragkit_core::units::unix_now();
        let mut command = match &self.pin {
            Some(cpus) => {
                let mut c = Command::new("taskset");
                c.args(["-c", cpus]).arg(program);
                c
            }
            None => Command::new(program),
        };
        let shown = match &self.pin {
            Some(cpus) => format!("taskset -c {cpus} {shown}"),
            None => shown,
        };
        let mut child = command
            .args(args)
            .stdin(match self.stdin.as_ref().map(OwnedFd::try_clone) {
                Some(fd) => Stdio::from(fd?),
                None => Stdio::null(),
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log_file))
            .spawn()
            .map_err(|e| anyhow!("{}: cannot run: {e}", program.display()))?;
        // Read stdout beside the wait, so a full pipe never stalls the step.
        let mut pipe = child.stdout.take().context("step's stdout")?;
        let reader = std::thread::spawn(move || {
            let mut bytes = Vec::new();
            pipe.read_to_end(&mut bytes).map(|_| bytes)
        });
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break status;
            }
            if self.stopped() {
                stop_child(&mut child);
                let _ = reader.join();
                bail!("{INTERRUPTED} during step '{name}'");
            }
            std::thread::sleep(STEP_POLL);
        };
        let stdout_bytes = reader
            .join()
            .map_err(|_| anyhow!("{name}: reading its output failed"))??;
        if self.stopped() {
            // The signal may have reached the step too (Ctrl-C goes to the whole group).
            bail!("{INTERRUPTED} during step '{name}'");
        }
        let seconds = t.elapsed().as_secs_f64();
        let stdout = String::from_utf8_lossy(&stdout_bytes).into_owned();
        let output = output.map(|o| format!("data/{o}"));
        if let Some(o) = &output {
            fs::write(self.out.join(o), &stdout)?;
        }
        let code = status.code().unwrap_or(-1);
        // As reproduce.sh notes its steps: `lab --report-only` reads the times back.
        {
            use std::io::Write as _;
            let mut times = fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(self.out.join("logs/steps.times"))?;
            writeln!(
                times,
                "{n} {started:.3} {:.3} {code}",
                fragkit_core::units::unix_now()
            )?;
        }
        self.steps.push(StepRecord {
            n,
            name: name.to_string(),
            command: shown.clone(),
            seconds,
            exit_status: code,
            log: log.clone(),
            output,
        });
        self.bar.inc(1);
        if !ok.contains(&code) {
            let text = fs::read_to_string(self.out.join(&log)).unwrap_or_default();
            let last = text
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("(no message)");
            bail!(
                "step '{name}' failed (exit {code}): {last}\n  command: {shown}\n  log: {}",
                self.out.join(&log).display()
            );
        }
        self.say(&format!("  done  {name} ({seconds:.1} s)"));
        Ok(stdout)
    }
}

/// What an error says when SIGINT or SIGTERM stopped the lab.
pub const INTERRUPTED: &str = "interrupted by SIGINT or SIGTERM";

/// End a step: SIGTERM (commands that can stop cleanly do), SIGKILL after STEP_GRACE.
fn stop_child(child: &mut std::process::Child) {
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
    let t = Instant::now();
    while t.elapsed() < STEP_GRACE {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(STEP_POLL);
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// One argument as sh reads it back unchanged: plain words as they are, words holding a
/// variable's path as "...${NAME}..." with `\ " $ `` escaped in the rest, others in
/// single quotes (spaces, quotes, `$()`, newlines and all).
pub fn shell_word(a: &str, vars: &[(String, PathBuf)]) -> String {
    // Escaping is per character, so an escaped path is found in the escaped word.
    let esc = |t: &str| {
        let mut o = String::with_capacity(t.len());
        for c in t.chars() {
            if matches!(c, '\\' | '"' | '$' | '`') {
                o.push('\\');
            }
            o.push(c);
        }
        o
    };
    let mut text = esc(a);
    let mut substituted = false;
    for (name, path) in vars {
        let p = esc(&path.to_string_lossy());
        if !p.is_empty() && text.contains(&p) {
            text = text.replace(&p, &format!("${{{name}}}"));
            substituted = true;
        }
    }
    let plain = |c: char| c.is_ascii_alphanumeric() || "_./:=,@%+-".contains(c);
    if substituted {
        format!("\"{text}\"")
    } else if !a.is_empty() && a.chars().all(plain) {
        a.to_string()
    } else {
        format!("'{}'", a.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::shell_word;
    use std::path::PathBuf;

    /// sh -c 'printf %s WORD' must print the argument back.
    #[test]
    fn words_survive_the_shell() {
        let vars = vec![("OUT".to_string(), PathBuf::from("/tmp/o ut$(x)"))];
        for a in [
            "plain",
            "with space",
            "it's",
            "a\"b",
            "$(touch /tmp/fragkit-pwned)",
            "`id`",
            "line\nbreak",
            "back\\slash",
            "",
            "/tmp/o ut$(x)/maps/a b$(y).png",
        ] {
            let w = shell_word(a, &vars);
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("OUT='/tmp/o ut$(x)'; printf %s {w}"))
                .output()
                .unwrap();
            assert_eq!(String::from_utf8_lossy(&out.stdout), a, "{w}");
        }
        assert!(shell_word("/tmp/o ut$(x)/f", &vars).contains("${OUT}"));
    }
}
