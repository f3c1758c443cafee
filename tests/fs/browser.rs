//! Headless Chromium (Debian's `chromium`, which scripts/install-deps installs) for the
//! tests that open fragkit's pages in a real browser: watch's live page, and every HTML or
//! SVG output opened on hostile names (html_xss.rs).

use std::process::{Command, Stdio};
use std::time::Duration;

/// Whether `chromium` runs here; when it does not, the browser tests say so on stderr and
/// pass without looking (the rest of the suite does not need a browser).
pub fn chromium_available(test: &str) -> bool {
    let ok = Command::new("chromium")
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("{test}: SKIPPED: no chromium on PATH (scripts/install-deps installs it)");
    }
    ok
}

/// Headless Chromium driven over the DevTools protocol on a pipe (--remote-debugging-pipe:
/// commands on fd 3, replies on fd 4, NUL-separated JSON), so the test opens no port of its
/// own and the browser only talks to the page's 127.0.0.1 address.
pub struct Browser {
    child: std::process::Child,
    to: std::fs::File,
    from: std::io::BufReader<std::fs::File>,
    next_id: u64,
    session: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    pub fn open(url: &str) -> Browser {
        use std::os::fd::{AsRawFd, OwnedFd};
        use std::os::unix::process::CommandExt;
        let profile = tempfile::tempdir().unwrap();
        let (cmd_r, cmd_w): (OwnedFd, OwnedFd) = nix::unistd::pipe().unwrap();
        let (res_r, res_w): (OwnedFd, OwnedFd) = nix::unistd::pipe().unwrap();
        let (cr, rw) = (cmd_r.as_raw_fd(), res_w.as_raw_fd());
        let mut cmd = Command::new("chromium");
        cmd.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--remote-debugging-pipe",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("about:blank")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        // SAFETY: only async-signal-safe fcntl/dup2 between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                let a = libc::fcntl(cr, libc::F_DUPFD, 10);
                let b = libc::fcntl(rw, libc::F_DUPFD, 10);
                if a < 0 || b < 0 || libc::dup2(a, 3) < 0 || libc::dup2(b, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            })
        };
        let child = cmd
            .spawn()
            .expect("start chromium (scripts/install-deps installs it)");
        drop((cmd_r, res_w));
        let mut b = Browser {
            child,
            to: std::fs::File::from(cmd_w),
            from: std::io::BufReader::new(std::fs::File::from(res_r)),
            next_id: 0,
            session: String::new(),
            _profile: profile,
        };
        let target = b.call(
            None,
            "Target.createTarget",
            serde_json::json!({ "url": url }),
        );
        let target_id = target["targetId"].as_str().unwrap().to_string();
        let attached = b.call(
            None,
            "Target.attachToTarget",
            serde_json::json!({ "targetId": target_id, "flatten": true }),
        );
        b.session = attached["sessionId"].as_str().unwrap().to_string();
        b
    }

    fn call(
        &mut self,
        session: Option<&str>,
        method: &str,
        params: serde_json::Value,
    ) -> serde_json::Value {
        use std::io::{BufRead, Write};
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = serde_json::json!({ "id": id, "method": method, "params": params });
        if let Some(s) = session {
            msg["sessionId"] = s.into();
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.to.write_all(&bytes).unwrap();
        loop {
            let mut buf = Vec::new();
            let n = self.from.read_until(0, &mut buf).unwrap();
            assert!(n > 0, "chromium closed the DevTools pipe");
            buf.pop();
            let v: serde_json::Value = serde_json::from_slice(&buf).unwrap();
            if v["id"] == id {
                assert!(v.get("error").is_none(), "{method}: {v}");
                return v["result"].clone();
            }
        }
    }

    /// The page's DOM as HTML, now.
    pub fn dom(&mut self) -> String {
        let s = self.session.clone();
        let r = self.call(
            Some(&s),
            "Runtime.evaluate",
            serde_json::json!({
                "expression": "document.documentElement.outerHTML",
                "returnByValue": true
            }),
        );
        r["result"]["value"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Poll the DOM until `pred` holds (or panic with the last DOM after 30 s).
    pub fn wait_dom(&mut self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let d = self.dom();
            if pred(&d) {
                return d;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "page never showed {what}:\n{d}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    /// The value of a JavaScript expression in the page (returned by value).
    pub fn eval(&mut self, expression: &str) -> serde_json::Value {
        let s = self.session.clone();
        let r = self.call(
            Some(&s),
            "Runtime.evaluate",
            serde_json::json!({ "expression": expression, "returnByValue": true }),
        );
        r["result"]["value"].clone()
    }

    /// Wait until the page has loaded (images failed or loaded, their handlers run), then a
    /// little more for anything the page runs after its load event.
    pub fn wait_loaded(&mut self) {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while self.eval("document.readyState") != "complete" {
            assert!(
                std::time::Instant::now() < deadline,
                "the page never loaded"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
