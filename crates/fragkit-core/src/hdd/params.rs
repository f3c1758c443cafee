//! Device parameters of the rotational model, the preset and its sources.
//!
//! Every number is physical and comes from a named source:
//! - `[SAS]`  Seagate, *Constellation ES.3 SAS Product Manual*, 100671510 (Rev. B–F),
//!   §4.1 "Internal drive characteristics" and §4.1.2 "General performance
//!   characteristics", 4 TB column (ST4000NM0023). The SATA ST4000NM0033 of the issue is
//!   the same head-disk assembly behind another interface (same product family, same
//!   capacity points); the pages of its SATA manual (100671511) that could be read give
//!   no performance rows, so the geometry and rates are taken from the SAS manual, read
//!   as its Rev. B and Rev. C page 9 (§4.1 and §4.1.2 of both say the same).
//! - `[IDEMA]` IDEMA LBA1-03, the LBA count of a drive of a given decimal capacity:
//!   97,696,368 + 1,953,504 × (GB − 50); 4000 GB → 7,814,037,168 sectors of 512 bytes.
//! - `[RW]`   C. Ruemmler and J. Wilkes, "An Introduction to Disk Drive Modeling", IEEE
//!   Computer 27(3), 1994, §"Seek time": the seek curve's form (a + b·√d for short seeks,
//!   c + e·d for long ones) and its constants for the HP 97560 (1962 cylinders;
//!   3.24 + 0.400·√d ms below 383 cylinders, 8.00 + 0.008·d ms above). NOT this drive's
//!   curve: the ES.3 manuals give no seek curve, so the HP 97560's shape, with distance
//!   taken as a fraction of the full stroke, is scaled to the ES.3's average seek.
//! - `[UNVERIFIED]` the average seek (read 8.5 ms, write 9.5 ms) and cache (128 MB): the
//!   values Seagate's ES.3 data sheet is known for. Neither the SAS manual's §4.1 nor the
//!   SATA manual's pages that could be read (covers, revision history, §2.4–2.6 headings,
//!   the DC power table) nor the data sheet's first page state them. Flagged as such in
//!   docs/hdd.md.

use std::fmt;

use serde::Serialize;

pub use crate::ssd::params::ParamError;

fn bad(msg: String) -> ParamError {
    ParamError(msg)
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Params {
    /// Preset name (with its `@offset` when placed away from LBA 0).
    pub name: String,
    /// User capacity in bytes (LBA count × 512).
    pub capacity_bytes: u64,
    /// Spindle speed.
    pub rpm: u64,
    /// Sustained media rate at the outer diameter, bytes per second.
    pub outer_bytes_s: u64,
    /// Sustained media rate at the inner diameter, bytes per second.
    pub inner_bytes_s: u64,
    /// Data tracks per surface (the actuator's stroke in tracks).
    pub tracks: u64,
    /// Average read seek, ns (seek of one third of the stroke, see [`Params::seek_ns`]).
    pub avg_seek_read_ns: u64,
    /// Average write seek, ns; the excess over the read seek is the write settle.
    pub avg_seek_write_ns: u64,
    /// Drive buffer: the most read look-ahead can hold.
    pub cache_bytes: u64,
    /// Write-back cache (WCE). Off in the preset (see docs/hdd.md); on is not modelled.
    pub write_cache: bool,
    /// Byte offset on the disk of the modeled device's address 0 (a partition's start).
    pub start_bytes: u64,
}

/// [RW] HP 97560 seek curve, in ns, at `milli` thousandths of a cylinder of its 1962.
fn hp97560_seek_ns(milli: u64) -> u64 {
    if milli < 383_000 {
        // 3.24 ms + 0.400 ms × √d; √(milli / 1000) = √(milli × 1000) / 1000.
        3_240_000 + 400 * (milli * 1000).isqrt()
    } else {
        // 8.00 ms + 0.008 ms × d.
        8_000_000 + 8 * milli
    }
}

/// HP 97560 cylinders (1962, [RW]) per full stroke, in thousandths.
const HP_STROKE_MILLI: u64 = 1_962_000;
/// Stroke positions are in parts per billion of the full stroke.
pub(crate) const PPB: u64 = 1_000_000_000;

impl Params {
    /// Seagate Constellation ES.3 4 TB, 7200 rpm nearline (ST4000NM0033 class).
    pub fn hdd() -> Params {
        Params {
            name: "hdd".into(),
            capacity_bytes: 7_814_037_168 * 512, // [IDEMA] 4000 GB
            rpm: 7200,                           // [SAS] §4.1 disk rotation speed
            outer_bytes_s: 175_000_000,          // [SAS] §4.1.2 sustained 83 to 175 MB/s
            inner_bytes_s: 83_000_000,           // [SAS] §4.1.2 sustained 83 to 175 MB/s
            tracks: 320_800,                     // [SAS] §4.1 tracks/surface (user accessible)
            avg_seek_read_ns: 8_500_000,         // [UNVERIFIED] data sheet, read
            avg_seek_write_ns: 9_500_000,        // [UNVERIFIED] data sheet, write
            cache_bytes: 128_000_000,            // [UNVERIFIED] data sheet, 128 MB
            // Off: a drive behind a RAID layer that cannot flush it on power loss runs
            // write-through (see docs/hdd.md for why, and that no ClusterStor document
            // stating it was found).
            write_cache: false,
            start_bytes: 0,
        }
    }

    /// `hdd`, or `hdd@OFFSET` with the device placed OFFSET into the disk: a size (`2T`)
    /// or a percentage of the capacity (`50%`).
    pub fn parse(spec: &str) -> Result<Params, ParamError> {
        let s = spec.trim().to_ascii_lowercase();
        let (name, at) = match s.split_once('@') {
            Some((n, a)) => (n, Some(a)),
            None => (s.as_str(), None),
        };
        if name != "hdd" {
            return Err(bad(format!(
                "model {spec:?}: expected hdd or hdd@OFFSET (e.g. hdd@2T or hdd@50%)"
            )));
        }
        let mut p = Params::hdd();
        if let Some(a) = at {
            p.start_bytes = match a.strip_suffix('%') {
                Some(pct) => {
                    let want = || {
                        let what = "expected a percentage from 0 to 99";
                        bad(format!("model {spec:?}: offset {a:?}: {what}"))
                    };
                    let pct: u64 = pct.trim().parse().map_err(|_| want())?;
                    if pct >= 100 {
                        return Err(want());
                    }
                    p.capacity_bytes / 100 * pct
                }
                None => crate::units::parse_size(a)
                    .map_err(|e| bad(format!("model {spec:?}: offset: {e}")))?,
            };
            p.name = format!("hdd@{a}");
        }
        p.validate()?;
        Ok(p)
    }

    /// The one-line check every entry point runs.
    pub fn validate(&self) -> Result<(), ParamError> {
        let n = &self.name;
        if self.capacity_bytes < 512 {
            return Err(bad(format!(
                "model {n}: capacity must be at least one sector"
            )));
        }
        if self.rpm == 0 {
            return Err(bad(format!("model {n}: spindle speed must be > 0 rpm")));
        }
        if self.inner_bytes_s == 0 || self.inner_bytes_s > self.outer_bytes_s {
            return Err(bad(format!(
                "model {n}: media rates must satisfy 0 < inner ({}) <= outer ({}) bytes/s",
                self.inner_bytes_s, self.outer_bytes_s
            )));
        }
        if self.outer_bytes_s > 100_000_000_000 {
            return Err(bad(format!(
                "model {n}: outer media rate {} bytes/s is not a disk's (at most 100 GB/s)",
                self.outer_bytes_s
            )));
        }
        if self.tracks == 0 {
            return Err(bad(format!("model {n}: tracks per surface must be > 0")));
        }
        if self.avg_seek_write_ns < self.avg_seek_read_ns {
            return Err(bad(format!(
                "model {n}: the write seek ({} ns) is shorter than the read seek ({} ns); expected write >= read (writes settle longer)",
                self.avg_seek_write_ns, self.avg_seek_read_ns
            )));
        }
        if self.avg_seek_read_ns > 1_000_000_000 {
            return Err(bad(format!("model {n}: average seek above 1 s")));
        }
        if self.write_cache {
            return Err(bad(format!(
                "model {n}: a write-back cache is not modelled (the hdd preset runs write-through)"
            )));
        }
        if self.start_bytes >= self.capacity_bytes {
            return Err(bad(format!(
                "model {n}: offset {} is beyond the disk's {} bytes",
                self.start_bytes, self.capacity_bytes
            )));
        }
        Ok(())
    }

    /// One revolution, ns (60 s / rpm, rounded down).
    pub fn rotation_ns(&self) -> u64 {
        60_000_000_000 / self.rpm
    }

    /// The disk address of device address `a`, at most the last byte of the disk.
    pub(crate) fn disk_address(&self, a: u64) -> u64 {
        self.start_bytes
            .saturating_add(a)
            .min(self.capacity_bytes - 1)
    }

    /// Media rate at disk address `d`, bytes/s. Zoned recording at constant linear density
    /// puts bytes per track in proportion to the radius, so the bytes outside radius r grow
    /// as r_o² − r²: r(d)² = r_o² − (d / C)(r_o² − r_i²), and the rate (∝ r) is
    /// √(R_o² − (d / C)(R_o² − R_i²)). Continuous: the zone table itself is not published.
    pub fn rate_at(&self, d: u64) -> u64 {
        let ro = self.outer_bytes_s as u128;
        let ri = self.inner_bytes_s as u128;
        let d = d.min(self.capacity_bytes) as u128;
        let sq = ro * ro - d * (ro * ro - ri * ri) / self.capacity_bytes as u128;
        (sq.isqrt() as u64).max(1)
    }

    /// Radial position of disk address `d`: parts per billion of the stroke from the outer
    /// edge (radius ∝ rate, so (R_o − R(d)) / (R_o − R_i)).
    pub(crate) fn stroke_ppb(&self, d: u64) -> u64 {
        let span = self.outer_bytes_s - self.inner_bytes_s;
        if span == 0 {
            return 0;
        }
        let r = self
            .rate_at(d)
            .clamp(self.inner_bytes_s, self.outer_bytes_s);
        ((self.outer_bytes_s - r) as u128 * PPB as u128 / span as u128) as u64
    }

    /// Track (cylinder) index of disk address `d`.
    pub(crate) fn track(&self, d: u64) -> u64 {
        ((self.stroke_ppb(d) as u128 * self.tracks as u128 / PPB as u128) as u64)
            .min(self.tracks - 1)
    }

    /// Read seek over `ppb` parts per billion of the stroke: [RW]'s HP 97560 curve with
    /// distance as a share of its 1962 cylinders, scaled so that a third of the stroke
    /// (the mean distance between two uniformly random positions) takes the average seek.
    /// 0 for no distance.
    pub fn seek_ns(&self, ppb: u64) -> u64 {
        if ppb == 0 {
            return 0;
        }
        let milli = |p: u64| (p.min(PPB) as u128 * HP_STROKE_MILLI as u128 / PPB as u128) as u64;
        let third = hp97560_seek_ns(milli(PPB / 3));
        (hp97560_seek_ns(milli(ppb)) as u128 * self.avg_seek_read_ns as u128 / third as u128) as u64
    }

    /// Write seek: the read seek plus the write settle (the data sheet's write − read).
    pub fn write_seek_ns(&self, ppb: u64) -> u64 {
        if ppb == 0 {
            return 0;
        }
        self.seek_ns(ppb) + (self.avg_seek_write_ns - self.avg_seek_read_ns)
    }

    /// Bytes on one track at disk address `d` (rate × one revolution).
    pub(crate) fn track_bytes(&self, d: u64) -> u64 {
        (self.rate_at(d) as u128 * self.rotation_ns() as u128 / 1_000_000_000) as u64
    }

    /// Angular position of disk address `d`, as the ns into a revolution at which it passes
    /// under the head (track and cylinder skew not modelled: the address modulo its
    /// track's bytes).
    pub(crate) fn angle_ns(&self, d: u64) -> u64 {
        let tb = self.track_bytes(d).max(1);
        ((d % tb) as u128 * self.rotation_ns() as u128 / tb as u128) as u64
    }

    /// Media transfer of `bytes` at disk address `d`, ns, rounded up.
    pub fn transfer_ns(&self, d: u64, bytes: u64) -> u64 {
        u64::try_from((bytes as u128 * 1_000_000_000).div_ceil(self.rate_at(d) as u128))
            .unwrap_or(u64::MAX)
    }
}

impl fmt::Display for Params {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {:.2} TB, {} rpm, {}..{} MB/s (outer..inner), {} tracks/surface, seek {:.1}/{:.1} ms read/write, cache {} MB, write cache {}, starts at byte {}",
            self.name,
            self.capacity_bytes as f64 / 1e12,
            self.rpm,
            self.outer_bytes_s / 1_000_000,
            self.inner_bytes_s / 1_000_000,
            self.tracks,
            self.avg_seek_read_ns as f64 / 1e6,
            self.avg_seek_write_ns as f64 / 1e6,
            self.cache_bytes / 1_000_000,
            if self.write_cache { "on" } else { "off" },
            self.start_bytes
        )
    }
}

/// Names `Params::parse` knows (besides `hdd@OFFSET`).
pub const PRESETS: [&str; 1] = ["hdd"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preset_rates_and_rotation_are_the_manuals() {
        let p = Params::hdd();
        assert_eq!(p.capacity_bytes, 4_000_787_030_016);
        // 60 s / 7200 = 8.333 ms; half of it is the manual's 4.16 ms average latency.
        assert_eq!(p.rotation_ns(), 8_333_333);
        assert_eq!(p.rotation_ns() / 2 / 10_000, 416);
        assert_eq!(p.rate_at(0), 175_000_000);
        // Last byte: √(R_o² − (C−1)/C (R_o² − R_i²)) rounds down to just under 83 MB/s.
        let inner = p.rate_at(p.capacity_bytes - 1);
        assert!((82_999_000..=83_000_000).contains(&inner), "{inner}");
        // Half the bytes lie outside r = √((r_o² + r_i²) / 2): √((175² + 83²) / 2) MB/s.
        let mid = p.rate_at(p.capacity_bytes / 2);
        assert!((136_955_000..=136_960_000).contains(&mid), "{mid}");
        assert_eq!(p.track(0), 0);
        assert_eq!(p.track(p.capacity_bytes - 1), p.tracks - 1);
    }

    #[test]
    fn seek_curve_hits_the_average_at_a_third_and_grows() {
        let p = Params::hdd();
        assert_eq!(p.seek_ns(0), 0);
        let third = p.seek_ns(PPB / 3);
        assert!((8_499_000..=8_500_000).contains(&third), "{third}");
        assert_eq!(p.write_seek_ns(PPB / 3), third + 1_000_000);
        // One track: 3.24 + 0.4·√(1962/320800) ms, × 8.5 / 13.232 (the HP curve at 1/3).
        let one = p.seek_ns(PPB / p.tracks);
        let hand = (3.24 + 0.4 * (1962.0f64 / 320_800.0).sqrt()) * 8.5 / 13.232 * 1e6;
        assert!((one as f64 - hand).abs() < 2_000.0, "{one} vs {hand}");
        // Full stroke: (8 + 0.008·1962) × 8.5 / 13.232 = 15.22 ms.
        let full = p.seek_ns(PPB);
        assert!(
            (full as f64 - 23.696 * 8.5 / 13.232 * 1e6).abs() < 2_000.0,
            "{full}"
        );
        let mut last = 0;
        for k in 1..=100 {
            let s = p.seek_ns(PPB / 100 * k);
            assert!(s >= last, "seek not monotone at {k}%");
            last = s;
        }
    }

    #[test]
    fn specs_parse_or_fail_in_one_line() {
        assert_eq!(Params::parse("HDD").unwrap(), Params::hdd());
        let half = Params::parse("hdd@50%").unwrap();
        assert_eq!(half.start_bytes, Params::hdd().capacity_bytes / 100 * 50);
        assert_eq!(Params::parse("hdd@1T").unwrap().start_bytes, 1 << 40);
        for spec in [
            "ssd", "hdd@", "hdd@100%", "hdd@x%", "hdd@4T", "hdd@-1", "hd",
        ] {
            let e = Params::parse(spec).unwrap_err().0;
            assert!(!e.contains('\n') && e.contains("model"), "{spec}: {e}");
        }
        let mut p = Params::hdd();
        p.write_cache = true;
        assert!(p.validate().unwrap_err().0.contains("write-back"));
        let mut p = Params::hdd();
        p.inner_bytes_s = 0;
        assert!(p.validate().is_err());
        let mut p = Params::hdd();
        p.rpm = 0;
        assert!(p.validate().is_err());
        for n in PRESETS {
            Params::parse(n).unwrap();
        }
    }
}
