//! The modeled device a command prices a file's reads on: an SSD (`ssd`: dies, channels, a
//! write-order FTL) or the rotational disk (`hdd`). One entry point for both, so a command
//! that compares layouts (advise, bench) asks the same question of either.

use crate::ssd::params::ParamError;
use crate::ssd::trace::{Op, Request};
use fragkit_sys::fiemap::Extent;

/// A `--model` / `--device` spec: an SSD preset (`ssd::params::PRESETS`, `g,S`) or the
/// disk model (`hdd`, `hdd@OFFSET`).
#[derive(Debug, Clone, PartialEq)]
pub enum DeviceModel {
    Ssd(crate::ssd::Params),
    Hdd(crate::hdd::Params),
}

/// Modeled cost of a set of reads at queue depth 1.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReadCost {
    pub time_ns: u64,
    /// Device read requests after splitting where the file's pieces end.
    pub device_reads: u64,
    /// SSD: FAST'24's die collisions (`ssd::Report::collisions`); 0 on a disk.
    pub collisions: u64,
    /// Disk: requests that moved the head to another track; 0 on an SSD.
    pub seeks: u64,
}

impl ReadCost {
    pub fn add(&mut self, o: &ReadCost) {
        self.time_ns += o.time_ns;
        self.device_reads += o.device_reads;
        self.collisions += o.collisions;
        self.seeks += o.seeks;
    }
}

/// The SSD with the die granularity g and stripe S that `fragkit probe alignment DEV
/// --format json` inferred (its `inference`), saved in `file`; the rest of the device
/// (timings, channels) is the g,S model's.
fn measured(file: &str) -> anyhow::Result<DeviceModel> {
    use anyhow::{anyhow, bail};
    let usage =
        "expected measured:FILE, FILE saved from `fragkit probe alignment DEV --format json`";
    if file.is_empty() {
        bail!("measured: {usage}");
    }
    let text =
        std::fs::read_to_string(file).map_err(|e| anyhow!("measured:{file}: {e}; {usage}"))?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| anyhow!("measured:{file}: not JSON ({e}); {usage}"))?;
    let inf = v
        .get("inference")
        .ok_or_else(|| anyhow!("measured:{file}: no 'inference' in it; {usage}"))?;
    let size = |k: &str| inf.get(k).and_then(serde_json::Value::as_u64);
    let (Some(g), Some(stripe)) = (size("granularity"), size("stripe")) else {
        bail!("measured:{file}: the probe found no die structure (no granularity and stripe): give g,S instead");
    };
    let mut p = crate::ssd::Params::parse(&format!("{g},{stripe}"))
        .map_err(|e| anyhow!("measured:{file}: {e}"))?;
    p.validate()?;
    // A floor reached at the last period probed is a lower bound on S; the name says so.
    p.name = if inf
        .get("stripe_lower_bound")
        .and_then(serde_json::Value::as_bool)
        == Some(true)
    {
        format!("measured (g={g}, S>={stripe})")
    } else {
        format!("measured (g={g}, S={stripe})")
    };
    Ok(DeviceModel::Ssd(p))
}

/// Application requests per replay: at queue depth 1 each request starts on an idle device,
/// so a long read is the sum of its segments and the SSD's mapping stays bounded.
const SEGMENT_REQUESTS: usize = 1024;

impl DeviceModel {
    /// `hdd…` is the disk model; `measured:FILE` the SSD `fragkit probe alignment` found;
    /// anything else an SSD spec. One-line errors.
    pub fn parse(spec: &str) -> anyhow::Result<DeviceModel> {
        if spec.trim().to_ascii_lowercase().starts_with("hdd") {
            return Ok(DeviceModel::Hdd(crate::hdd::Params::parse(spec)?));
        }
        if let Some(file) = spec.trim().strip_prefix("measured") {
            return measured(file.strip_prefix(':').unwrap_or_default());
        }
        let p = crate::ssd::Params::parse(spec)
            .map_err(|e| anyhow::anyhow!("{e}; or hdd / hdd@OFFSET for the disk model"))?;
        p.validate()?;
        Ok(DeviceModel::Ssd(p))
    }

    /// The preset's name as reports print it.
    pub fn name(&self) -> &str {
        match self {
            DeviceModel::Ssd(p) => &p.name,
            DeviceModel::Hdd(p) => &p.name,
        }
    }

    /// S: the span after which an SSD's write-order placement comes back to the same die
    /// (dies × g); None on a disk.
    pub fn stripe_bytes(&self) -> Option<u64> {
        match self {
            DeviceModel::Ssd(p) => Some(p.stripe_bytes()),
            DeviceModel::Hdd(_) => None,
        }
    }

    /// Modeled cost of `reads` (file offset, length), one at a time, of a file laid out as
    /// `extents` (sorted by logical offset).
    pub fn read_cost(
        &self,
        extents: &[Extent],
        reads: &[(u64, u64)],
    ) -> Result<ReadCost, ParamError> {
        let mut total = ReadCost::default();
        for seg in reads.chunks(SEGMENT_REQUESTS) {
            let c = match self {
                DeviceModel::Ssd(p) => {
                    let r = crate::ssd::layout::model_reads(p, extents, seg, 1)?;
                    ReadCost {
                        time_ns: r.read_time_ns,
                        device_reads: r.device_reads,
                        collisions: r.collisions,
                        seeks: 0,
                    }
                }
                DeviceModel::Hdd(p) => {
                    let r = crate::hdd::layout::model_reads(p, extents, seg, 1)?;
                    ReadCost {
                        time_ns: r.time_ns,
                        device_reads: r.device_requests,
                        collisions: 0,
                        seeks: r.seeks,
                    }
                }
            };
            total.add(&c);
        }
        Ok(total)
    }

    /// Modeled time to write `bytes` to one contiguous place starting at device byte
    /// `address`, in `request_size` requests one at a time: what a migration's writes of
    /// that many bytes cost the device.
    pub fn write_ns(&self, address: u64, bytes: u64, request_size: u64) -> Result<u64, ParamError> {
        let rs = request_size.max(4096);
        let mut total = 0;
        let mut done = 0;
        while done < bytes {
            // Segments as for reads: each starts on an idle device at queue depth 1.
            let seg_end =
                bytes.min(done.saturating_add(rs.saturating_mul(SEGMENT_REQUESTS as u64)));
            let reqs: Vec<Request> = (done..seg_end)
                .step_by(usize::try_from(rs).unwrap_or(usize::MAX))
                .enumerate()
                .map(|(k, o)| {
                    let k = k as u64;
                    Request {
                        issue_ns: 2 * k,
                        complete_ns: 2 * k + 1,
                        sector: (address + o) / 512,
                        bytes: rs.min(seg_end - o),
                        op: Op::Write,
                        inode: None,
                        offset: None,
                    }
                })
                .collect();
            total += match self {
                DeviceModel::Ssd(p) => {
                    crate::ssd::Ssd::replay(p, crate::ssd::Placement::WriteOrder, &reqs)?
                        .total_time_ns
                }
                DeviceModel::Hdd(p) => crate::hdd::Hdd::replay(p, &reqs)?.write_time_ns,
            };
            done = seg_end;
        }
        Ok(total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: u64 = 1024;

    #[test]
    fn parse_picks_the_disk_or_an_ssd_and_names_it() {
        assert_eq!(DeviceModel::parse("hdd").unwrap().name(), "hdd");
        assert!(DeviceModel::parse("hdd").unwrap().stripe_bytes().is_none());
        let s = DeviceModel::parse("fast24").unwrap();
        assert_eq!(s.name(), "fast24");
        assert!(s.stripe_bytes().unwrap() > 0);
        let dir = tempfile::tempdir().unwrap();
        let probe = dir.path().join("probe.json");
        std::fs::write(
            &probe,
            r#"{"inference":{"granularity":32768,"stripe":1048576,"stripe_lower_bound":false}}"#,
        )
        .unwrap();
        let m = DeviceModel::parse(&format!("measured:{}", probe.display())).unwrap();
        assert_eq!(m.stripe_bytes(), Some(1 << 20));
        assert_eq!(m.name(), "measured (g=32768, S=1048576)");
        std::fs::write(
            &probe,
            r#"{"inference":{"granularity":null,"stripe":null}}"#,
        )
        .unwrap();
        let e = DeviceModel::parse(&format!("measured:{}", probe.display()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no die structure"), "{e}");
        for bad in ["measured", "measured:/nonexistent/probe.json"] {
            let e = DeviceModel::parse(bad).unwrap_err().to_string();
            assert!(e.contains("probe alignment"), "{bad}: {e}");
        }
        let e = DeviceModel::parse("nonsense").unwrap_err().to_string();
        assert!(e.contains("hdd"), "{e}");
    }

    /// Segments add up: the cost of a long read equals the sum of its halves'.
    #[test]
    fn read_cost_is_additive_over_segments() {
        for spec in ["fast24", "hdd"] {
            let d = DeviceModel::parse(spec).unwrap();
            let ext: Vec<Extent> = (0..600)
                .map(|i| Extent::plain(i * 64 * K, (1 << 30) + i * 320 * K, 64 * K))
                .collect();
            let reads: Vec<(u64, u64)> = (0..1200).map(|i| (i * 32 * K, 32 * K)).collect();
            let whole = d.read_cost(&ext, &reads).unwrap();
            let mut parts = d.read_cost(&ext, &reads[..1024]).unwrap();
            parts.add(&d.read_cost(&ext, &reads[1024..]).unwrap());
            assert_eq!(whole, parts, "{spec}");
            assert_eq!(whole.device_reads, 1200);
        }
    }

    #[test]
    fn writing_twice_the_bytes_takes_longer() {
        for spec in ["fast24", "hdd"] {
            let d = DeviceModel::parse(spec).unwrap();
            let one = d.write_ns(1 << 30, 8 << 20, 128 * K).unwrap();
            let two = d.write_ns(1 << 30, 16 << 20, 128 * K).unwrap();
            assert!(one > 0 && two > one, "{spec}: {one} {two}");
        }
    }
}
