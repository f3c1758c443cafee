//! Device parameters of the SSD model, the presets and their sources.
//!
//! Every number is physical and comes from a named source:
//! - `[DA]`  yuhun-Jun/nvmevirt_DA `ssd_config.h` (commit bcbdfab), the `SAMSUNG_970PRO`
//!   block the FAST'24 artifact builds (`Makefile`: `CONFIG_NVMEVIRT_SSD` →
//!   `BASE_SSD=SAMSUNG_970PRO`); `ssd.c` for the 4 KiB mapping unit (`secs_per_pg = 8` × 512 B).
//! - `[AE]`  yuhun-Jun/fast24_ae `evaluation/` scripts (stripe 256 KiB, 32 KiB chunks).
//! - `[P]`   the FAST'24 paper (Jun et al., "We Ain't Afraid of No File Fragmentation"), §3
//!   alignment probe: die allocation granularity g and stripe S of NVMe-A/B, SATA-A/B.
//!
//! Devices the paper only probed (NVMe-A/B, SATA-A/B) take g and S from [P] and every timing
//! from the fast24 preset: the paper did not publish their latencies, so their MB/s are the
//! fast24 device re-striped, not those drives' own figures.

use std::fmt;

use serde::Serialize;

/// NVMeVirt maps in 4 KiB units (`ssd.c`: `secsz = 512`, `secs_per_pg = 8`) [DA].
pub(crate) const MAP_UNIT: u64 = 4096;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Params {
    /// Preset name, or "custom".
    pub name: String,
    /// NAND channels (`NAND_CHANNELS`).
    pub channels: u32,
    /// Dies (LUNs) per channel (`LUNS_PER_NAND_CH`).
    pub dies_per_channel: u32,
    /// Flash page: the unit one NAND read senses (`FLASH_PAGE_SIZE`).
    pub page_bytes: u64,
    /// Die allocation granularity g: bytes the write pointer puts on one die before moving
    /// to the next (`ONESHOT_PAGE_SIZE` in NVMeVirt's `advance_write_pointer`).
    pub g_bytes: u64,
    /// NAND read of a whole page (`NAND_READ_LATENCY`, mean of LSB/MSB).
    pub read_ns: u64,
    /// NAND read of a lone 4 KiB (`NAND_4KB_READ_LATENCY`, mean of LSB/MSB).
    pub read_4k_ns: u64,
    /// NAND program of one oneshot page (`NAND_PROG_LATENCY`).
    pub program_ns: u64,
    /// Block erase (`NAND_ERASE_LATENCY`; never paid here: GC is not modelled).
    pub erase_ns: u64,
    /// NAND channel bandwidth in MB/s (`NAND_CHANNEL_BANDWIDTH`).
    pub channel_mb_s: u64,
    /// Largest piece one channel transfer carries (`MAX_CH_XFER_SIZE`).
    pub channel_xfer_bytes: u64,
    /// Host interface bandwidth in MB/s (`PCIE_BANDWIDTH`).
    pub host_mb_s: u64,
    /// Firmware time per read command larger than 4 KiB (`FW_READ_LATENCY`).
    pub fw_read_ns: u64,
    /// Firmware time per 4 KiB read command (`FW_4KB_READ_LATENCY`).
    pub fw_read_4k_ns: u64,
    /// Write-buffer firmware time per command (`FW_WBUF_LATENCY0`).
    pub fw_write_ns: u64,
    /// Write-buffer firmware time per 4 KiB written (`FW_WBUF_LATENCY1`).
    pub fw_write_4k_ns: u64,
    /// Largest command the device takes; bigger requests are split (`MDTS`).
    pub max_transfer_bytes: u64,
    /// Device commands in flight at most.
    pub queue_depth: u32,
    /// Host time per device request from the device's completion to the waiter seeing
    /// it (interrupt, block-layer completion, wake-up): the request holds no device
    /// resource meanwhile, but whatever waits for it starts that much later.
    pub host_ns: u64,
    /// The host's readahead window for the device (its `read_ahead_kb`): what buffered
    /// reads become on that device; recordings for the model are made with it.
    pub readahead_bytes: u64,
}

/// Errors in model parameters: one line naming the parameter and what was expected.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct ParamError(pub String);

fn bad(msg: String) -> ParamError {
    ParamError(msg)
}

impl Params {
    /// The FAST'24 artifact's emulated SSD (NVMeVirt `SAMSUNG_970PRO` block) [DA].
    pub fn fast24() -> Params {
        Params {
            name: "fast24".into(),
            channels: 4,                   // NAND_CHANNELS 4 [DA]
            dies_per_channel: 2,           // LUNS_PER_NAND_CH 2 → 8 dies [DA]
            page_bytes: 32 << 10,          // FLASH_PAGE_SIZE KB(32) [DA]
            g_bytes: 32 << 10, // ONESHOT_PAGE_SIZE = FLASH_PAGE_SIZE × 1 [DA]; [AE] stripe 256K
            read_ns: 36_013,   // NAND_READ_LATENCY_{LSB,MSB} 36013 ∓ 6000 [DA]
            read_4k_ns: 35_760, // NAND_4KB_READ_LATENCY_{LSB,MSB} 35760 ∓ 6000 [DA]
            program_ns: 185_000, // NAND_PROG_LATENCY [DA]
            erase_ns: 0,       // NAND_ERASE_LATENCY 0 [DA]
            channel_mb_s: 800, // NAND_CHANNEL_BANDWIDTH [DA]
            channel_xfer_bytes: 16 << 10, // MAX_CH_XFER_SIZE KB(16) [DA]
            host_mb_s: 3360,   // PCIE_BANDWIDTH [DA]
            fw_read_ns: 30_490, // FW_READ_LATENCY [DA]
            fw_read_4k_ns: 21_500, // FW_4KB_READ_LATENCY [DA]
            fw_write_ns: 4_000, // FW_WBUF_LATENCY0 [DA]
            fw_write_4k_ns: 460, // FW_WBUF_LATENCY1 [DA]
            max_transfer_bytes: 256 << 10, // MDTS 6: 2^6 × 4 KiB [DA]
            // NVMe queues are far deeper than what a sync reader keeps in flight; the
            // artifact's high-QD runs use 1023 (nr_requests in varyingdof_NVMe.sh) [AE].
            queue_depth: 1023,
            // Not in NVMeVirt (it models the device only). Derived from the paper's own
            // contiguous figure, the one number of the table the device alone does not
            // set: 8 MiB read in 1 MiB O_DIRECT requests at 2174.53 MiB/s (fast24_ae
            // printresult.sh: 8 / seconds) is 459.87 µs per request, the model's device
            // time for one is 413.69 µs (4 commands of 256 KiB on 8 idle dies), so the
            // host adds 46.18 µs. Test `fast24_host_time_gives_the_papers_contiguous_rate`.
            host_ns: 46_180,
            // Linux's default window (VM_READAHEAD_PAGES = SZ_128K / PAGE_SIZE,
            // include/linux/mm.h); NVMeVirt sets no optimal I/O size that would raise it.
            readahead_bytes: 128 << 10,
        }
    }

    /// A device known by its measured g and S (e.g. from `fragkit probe alignment`); all
    /// timings are fast24's. Dies = S / g; channels = fast24's 4 when the dies divide by
    /// 4, else one die per channel.
    pub(crate) fn from_g_s(name: &str, g: u64, s: u64) -> Result<Params, ParamError> {
        if g == 0 || s == 0 {
            return Err(bad(format!(
                "model {name}: g and S must be > 0 (got g={g}, S={s})"
            )));
        }
        if !s.is_multiple_of(g) {
            return Err(bad(format!(
                "model {name}: stripe S={s} is not a multiple of g={g}"
            )));
        }
        let dies = s / g;
        if dies > u16::MAX as u64 {
            return Err(bad(format!(
                "model {name}: S/g = {dies} dies, at most 65535"
            )));
        }
        let dies = dies as u32;
        let mut p = Params::fast24();
        p.name = name.to_string();
        // A flash page never spans dies, so it is at most g.
        p.page_bytes = g.min(p.page_bytes).max(MAP_UNIT.min(g));
        p.g_bytes = g;
        if dies.is_multiple_of(4) {
            p.channels = 4;
            p.dies_per_channel = dies / 4;
        } else {
            p.channels = dies;
            p.dies_per_channel = 1;
        }
        if name.starts_with("sata") {
            // SATA NCQ holds 32 commands (ATA8-ACS); the paper's SATA devices sit behind it.
            p.queue_depth = 32;
            // SATA 6 Gb/s after 8b/10b coding carries 600 MB/s.
            p.host_mb_s = 600;
        }
        p.validate()?;
        Ok(p)
    }

    /// `fast24`, `nvme-a`, `nvme-b`, `sata-a`, `sata-b`, or `g,S` (sizes like `32K,1M`).
    pub fn parse(spec: &str) -> Result<Params, ParamError> {
        let s = spec.trim().to_ascii_lowercase();
        let k = 1u64 << 10;
        // g and S as the paper measured them [P].
        match s.as_str() {
            "fast24" => return Ok(Params::fast24()),
            "nvme-a" => return Params::from_g_s("nvme-a", 32 * k, 1 << 20),
            "nvme-b" => return Params::from_g_s("nvme-b", 32 * k, 256 * k),
            "sata-a" => return Params::from_g_s("sata-a", 4 * k, 32 * k),
            "sata-b" => return Params::from_g_s("sata-b", 16 * k, 256 * k),
            _ => {}
        }
        let Some((g, st)) = s.split_once(',') else {
            return Err(bad(format!(
                "model {spec:?}: expected fast24, nvme-a, nvme-b, sata-a, sata-b or g,S (e.g. 32K,256K)"
            )));
        };
        let g = crate::units::parse_size(g).map_err(|e| bad(format!("model {spec:?}: g: {e}")))?;
        let st =
            crate::units::parse_size(st).map_err(|e| bad(format!("model {spec:?}: S: {e}")))?;
        let p = Params::from_g_s("custom", g, st)?;
        if g % MAP_UNIT != 0 {
            return Err(bad(format!(
                "model {spec:?}: g={g} is not a multiple of the 4096-byte mapping unit"
            )));
        }
        Ok(p)
    }

    pub fn dies(&self) -> u32 {
        self.channels * self.dies_per_channel
    }

    /// Stripe S = g × dies.
    pub(crate) fn stripe_bytes(&self) -> u64 {
        self.g_bytes * self.dies() as u64
    }

    /// The one-line check every entry point runs.
    pub fn validate(&self) -> Result<(), ParamError> {
        let n = &self.name;
        if self.channels == 0 {
            return Err(bad(format!("model {n}: channels must be > 0")));
        }
        if self.dies_per_channel == 0 {
            return Err(bad(format!(
                "model {n}: dies per channel must be > 0 (zero dies)"
            )));
        }
        if self.dies() > u16::MAX as u32 {
            return Err(bad(format!(
                "model {n}: {} dies, at most 65535",
                self.dies()
            )));
        }
        if !self.page_bytes.is_power_of_two() || self.page_bytes < MAP_UNIT {
            return Err(bad(format!(
                "model {n}: page size {} is not a power of two of at least 4096",
                self.page_bytes
            )));
        }
        if self.g_bytes == 0 || !self.g_bytes.is_multiple_of(self.page_bytes) {
            return Err(bad(format!(
                "model {n}: g={} is not a multiple of the page size {}",
                self.g_bytes, self.page_bytes
            )));
        }
        if self.channel_mb_s == 0 || self.host_mb_s == 0 {
            return Err(bad(format!(
                "model {n}: channel and host bandwidth must be > 0 MB/s"
            )));
        }
        if self.channel_xfer_bytes == 0 {
            return Err(bad(format!("model {n}: channel transfer size must be > 0")));
        }
        if self.max_transfer_bytes < MAP_UNIT || !self.max_transfer_bytes.is_multiple_of(MAP_UNIT) {
            return Err(bad(format!(
                "model {n}: largest command {} is not a positive multiple of 4096",
                self.max_transfer_bytes
            )));
        }
        if self.queue_depth == 0 {
            return Err(bad(format!("model {n}: queue depth must be > 0")));
        }
        Ok(())
    }

    /// Nanoseconds to move `bytes` at `mb_s` (MB = 10^6 bytes), rounded up.
    pub(crate) fn xfer_ns(bytes: u64, mb_s: u64) -> u64 {
        (bytes * 1000).div_ceil(mb_s)
    }
}

impl fmt::Display for Params {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} dies ({} ch x {}), page {} KiB, g {} KiB, S {} KiB, read {} us, program {} us, \
             channel {} MB/s, host {} MB/s, fw {} us/cmd, QD {}",
            self.name,
            self.dies(),
            self.channels,
            self.dies_per_channel,
            self.page_bytes >> 10,
            self.g_bytes >> 10,
            self.stripe_bytes() >> 10,
            self.read_ns as f64 / 1000.0,
            self.program_ns as f64 / 1000.0,
            self.channel_mb_s,
            self.host_mb_s,
            self.fw_read_ns as f64 / 1000.0,
            self.queue_depth
        )
    }
}

/// Names `Params::parse` knows besides `g,S`.
pub const PRESETS: [&str; 5] = ["fast24", "nvme-a", "nvme-b", "sata-a", "sata-b"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_have_the_papers_geometry() {
        let f = Params::fast24();
        assert_eq!(f.dies(), 8);
        assert_eq!(f.stripe_bytes(), 256 << 10);
        let a = Params::parse("nvme-a").unwrap();
        assert_eq!((a.g_bytes, a.stripe_bytes()), (32 << 10, 1 << 20));
        let s = Params::parse("SATA-A").unwrap();
        assert_eq!(
            (s.g_bytes, s.stripe_bytes(), s.page_bytes),
            (4096, 32 << 10, 4096)
        );
        let b = Params::parse("sata-b").unwrap();
        assert_eq!((b.g_bytes, b.stripe_bytes()), (16 << 10, 256 << 10));
        let c = Params::parse("64K,1M").unwrap();
        assert_eq!(c.dies(), 16);
        for p in PRESETS {
            Params::parse(p).unwrap().validate().unwrap();
        }
    }

    #[test]
    fn bad_parameters_get_one_line_errors() {
        let mut p = Params::fast24();
        p.dies_per_channel = 0;
        assert!(p.validate().unwrap_err().0.contains("zero dies"));
        let mut p = Params::fast24();
        p.page_bytes = 24 << 10;
        assert!(p.validate().unwrap_err().0.contains("power of two"));
        let mut p = Params::fast24();
        p.g_bytes = 48 << 10;
        assert!(p
            .validate()
            .unwrap_err()
            .0
            .contains("not a multiple of the page"));
        for spec in ["32K,100K", "0,1M", "nonsense", "6K,12K", "32K,x"] {
            let e = Params::parse(spec).unwrap_err().0;
            assert!(!e.contains('\n') && e.contains("model"), "{spec}: {e}");
        }
    }
}
