//! The recorded block trace the model replays (`fragkit trace --block` writes it).
//!
//! JSON: `{"version":1,"kind":"fragkit-blktrace","device":"loop3","sector_bytes":512,
//! "requests":[{"issue_ns":…,"complete_ns":…,"sector":…,"bytes":…,"op":"read"|"write"|
//! "discard"|"flush","inode":…,"offset":…}]}`; `inode`/`offset` may be absent (metadata,
//! journal, or not resolvable). Requests are in issue order.

use std::path::Path;

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    Read,
    Write,
    Discard,
    Flush,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// When the block layer issued it to the driver (ns, CLOCK_MONOTONIC).
    pub issue_ns: u64,
    /// When it completed (ns); equal to `issue_ns` when unknown.
    pub complete_ns: u64,
    /// First 512-byte sector on the traced device.
    pub sector: u64,
    pub bytes: u64,
    pub op: Op,
    /// Inode of the file the data belongs to, when resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inode: Option<u64>,
    /// Byte offset in that file of the request's first byte.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
}

impl Request {
    pub fn byte_offset(&self) -> u64 {
        self.sector * 512
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockTrace {
    pub version: u32,
    pub kind: String,
    /// Name of the traced block device (e.g. "loop3").
    #[serde(default)]
    pub device: String,
    /// Events the recorder lost (ring buffer full); 0 on a complete trace.
    #[serde(default)]
    pub dropped: u64,
    pub requests: Vec<Request>,
}

pub const KIND: &str = "fragkit-blktrace";

impl BlockTrace {
    pub fn new(device: &str, requests: Vec<Request>) -> BlockTrace {
        BlockTrace {
            version: 1,
            kind: KIND.into(),
            device: device.into(),
            dropped: 0,
            requests,
        }
    }

    /// Load and check a trace; errors are one line naming the file.
    pub fn load(path: &Path) -> anyhow::Result<BlockTrace> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("reading block trace {}: {e}", path.display()))?;
        let t: BlockTrace = serde_json::from_str(&text).map_err(|e| {
            anyhow::anyhow!(
                "{}: not a fragkit block trace (expected {{\"kind\":\"{KIND}\",\"requests\":[…]}}): {e}",
                path.display()
            )
        })?;
        t.check()
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        Ok(t)
    }

    pub fn check(&self) -> Result<(), String> {
        if self.kind != KIND || self.version != 1 {
            return Err(format!(
                "kind {:?} version {}, expected {KIND:?} version 1",
                self.kind, self.version
            ));
        }
        let mut last = 0;
        for (i, r) in self.requests.iter().enumerate() {
            if r.issue_ns < last {
                return Err(format!("request {i}: issue_ns goes back in time"));
            }
            last = r.issue_ns;
            if r.complete_ns < r.issue_ns {
                return Err(format!("request {i}: completes before it is issued"));
            }
            if r.sector
                .checked_mul(512)
                .and_then(|b| b.checked_add(r.bytes))
                .is_none()
            {
                return Err(format!("request {i}: sector {} overflows", r.sector));
            }
        }
        Ok(())
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("trace serialises")
    }
}
