//! F2FS for real, in a qemu guest (scripts/f2fs-guest): this kernel has no f2fs. One boot
//! runs every check: scan vs `filefrag -v`, S(128K) vs the guest disk's read count, and
//! bypass defrag with F2FS_IOC_DEFRAGMENT keeping every byte.

mod common;

use std::process::Command;

use common::require_root;
use serde_json::Value;

/// Text between `BEGIN name` and `END name` lines in the guest's output.
fn section<'a>(out: &'a str, name: &str) -> &'a str {
    let begin = format!("BEGIN {name}\n");
    let a = out
        .find(&begin)
        .unwrap_or_else(|| panic!("no section {name} in:\n{out}"))
        + begin.len();
    let b = out[a..].find(&format!("END {name}")).expect("section end") + a;
    &out[a..b]
}

#[test]
fn f2fs_scan_requests_and_defrag_in_guest() {
    require_root();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/f2fs-guest");
    let fk = env!("CARGO_BIN_EXE_fragkit");
    // Two files written in interleaved 16 KiB O_DIRECT appends: f2fs's log hands out
    // blocks in write order, so both fragment.
    let cmd = format!(
        r#"set -e
cd /mnt/f2fs
for i in $(seq 0 127); do
  dd if=/dev/urandom of=a bs=16k count=1 seek=$i conv=notrunc oflag=direct 2>/dev/null
  dd if=/dev/urandom of=b bs=16k count=1 seek=$i conv=notrunc oflag=direct 2>/dev/null
done
sync
echo BEGIN ours; {fk} scan --format filefrag /mnt/f2fs/a /mnt/f2fs/b; echo END ours
echo BEGIN theirs; filefrag -v /mnt/f2fs/a /mnt/f2fs/b; echo END theirs
echo BEGIN before; {fk} scan --format json /mnt/f2fs/a; echo END before
r0=$(awk '{{print $1}}' /sys/block/vda/stat)
dd if=/mnt/f2fs/a of=/dev/null bs=128k iflag=direct 2>/dev/null
r1=$(awk '{{print $1}}' /sys/block/vda/stat)
echo BEGIN reads; echo $((r1 - r0)); echo END reads
sum0=$(md5sum < /mnt/f2fs/a)
echo BEGIN defrag; {fk} defrag --mode bypass --io-size 128K --format json /mnt/f2fs/a; echo END defrag
sync; echo 3 > /proc/sys/vm/drop_caches
sum1=$(md5sum < /mnt/f2fs/a)
echo BEGIN same; [ "$sum0" = "$sum1" ] && echo yes || echo no; echo END same
echo BEGIN after; {fk} scan --format json /mnt/f2fs/a; echo END after
"#
    );
    let out = Command::new(script)
        .args(["run", "--bin", fk, "--", "sh", "-c", &cmd])
        .output()
        .expect("run scripts/f2fs-guest (installed by scripts/install-deps)");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "guest run failed ({:?}): {}\n{text}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        section(&text, "ours"),
        section(&text, "theirs"),
        "--format filefrag differs from filefrag -v on f2fs"
    );

    let before: Value = serde_json::from_str(section(&text, "before")).unwrap();
    let req = &before["files"][0]["requests"][0];
    let split = req["split"].as_u64().unwrap();
    assert!(
        split > req["ideal"].as_u64().unwrap(),
        "f2fs file not fragmented: {req}"
    );
    let reads: u64 = section(&text, "reads").trim().parse().unwrap();
    assert!(
        (reads as f64 - split as f64).abs() <= (split as f64 * 0.02).max(2.0),
        "guest disk completed {reads} reads for S(128K) = {split}"
    );

    let defrag: Value = serde_json::from_str(section(&text, "defrag")).unwrap();
    assert_eq!(defrag["summary"]["verify_failures"], 0, "{defrag}");
    assert_eq!(defrag["files"][0]["primitive"], "F2FS_IOC_DEFRAGMENT");
    assert_eq!(
        section(&text, "same").trim(),
        "yes",
        "contents changed by defrag"
    );
    let after: Value = serde_json::from_str(section(&text, "after")).unwrap();
    let r = &after["files"][0]["requests"][0];
    assert!(
        r["split"].as_u64() < req["split"].as_u64(),
        "F2FS_IOC_DEFRAGMENT removed no split requests: before {req}, after {r}"
    );
}
