//! One function per lab step. Each runs a real `fragkit` (or tool) command through the
//! [`Runner`] and returns the command's output read into a typed result (see `child`).

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use super::child::{self, Bench, Defrag, Free, Paf, Scan, Synthetic, TraceSummary};
use super::figures::{self, State};
use super::runner::Runner;
use super::{DefragFigures, LabSpec, LayoutFigures};
use fragkit_core::scratch::ScratchInfo;
use fragkit_core::units::short_size;
use fragkit_sys::tunable::SysfsTunable;

fn s<T: ToString>(v: T) -> String {
    v.to_string()
}

fn p(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// Step 1: A scratch file system nobody else uses, its image under `images/base`; `extra`
/// goes to `scratch create` (mkfs arguments, mount options).
pub(crate) fn create_base(
    r: &mut Runner,
    spec: &LabSpec,
    images: &Path,
    extra: &[String],
) -> Result<ScratchInfo> {
    create_scratch(r, spec, images, "base", extra)
}

/// A scratch file system as `spec` asks, its image under `images`/`name`; its output in
/// data/scratch-`name`.json.
pub(crate) fn create_scratch(
    r: &mut Runner,
    spec: &LabSpec,
    images: &Path,
    name: &str,
    extra: &[String],
) -> Result<ScratchInfo> {
    let mut args = vec![
        s("scratch"),
        s("create"),
        s("--fs"),
        s(spec.fs.name()),
        s("--size"),
        short_size(spec.size),
        s("--format"),
        s("json"),
        s("--dir"),
        p(&images.join(name)),
    ];
    args.extend(extra.iter().cloned());
    let step = match name {
        "base" => "scratch create".to_string(),
        _ => format!("scratch create ({name})"),
    };
    let text = r.fragkit(&step, &args, Some(&format!("scratch-{name}.json")))?;
    child::parse("scratch create", &text)
}

/// Step 2a: Free space in small holes: the PaF structure.
pub(crate) fn age_paf(r: &mut Runner, spec: &LabSpec, base: &Path) -> Result<Paf> {
    let text = r.fragkit(
        "age paf",
        &[
            s("age"),
            s("paf"),
            spec.paf.clone(),
            s("--target"),
            p(base),
            s("--seed"),
            s(spec.seed),
            s("--format"),
            s("json"),
        ],
        Some("age-paf.json"),
    )?;
    child::parse("age paf", &text)
}

/// Step 2b: FragPicker's synthetic files grown side by side in that free space.
pub(crate) fn age_synthetic(r: &mut Runner, spec: &LabSpec, work: &Path) -> Result<Synthetic> {
    let text = r.fragkit(
        "age fragpicker-synthetic",
        &[
            s("age"),
            s("fragpicker-synthetic"),
            p(work),
            s("--files"),
            s(spec.files),
            s("--size"),
            short_size(spec.file_size()),
            s("--seed"),
            s(spec.seed),
            s("--format"),
            s("json"),
        ],
        Some("age-synthetic.json"),
    )?;
    let synthetic: Synthetic = child::parse("age fragpicker-synthetic", &text)?;
    if synthetic.names().is_empty() {
        bail!("age fragpicker-synthetic made no files");
    }
    Ok(synthetic)
}

/// Step 2c: The free space the defragmenters will have to work with.
pub(crate) fn free_before(r: &mut Runner, base: &Path) -> Result<Free> {
    let text = r.fragkit(
        "free (before)",
        &[s("free"), p(base), s("--format"), s("json")],
        Some("free-before.json"),
    )?;
    child::parse("free", &text)
}

/// What `look` saw of one state.
pub struct Look {
    pub layout: LayoutFigures,
    /// Block map, relative to the output directory.
    pub map: String,
    pub scan: Scan,
}

/// Step 3: Scan and map one file system's copy of the workload files.
pub fn look(r: &mut Runner, name: &str, mp: &Path, rs_arg: &str) -> Result<Look> {
    let work = mp.join("work");
    let step = format!("scan ({name})");
    let text = r.fragkit(
        &step,
        &[
            s("scan"),
            s("--format"),
            s("json"),
            s("-r"),
            s(rs_arg),
            p(&work),
        ],
        Some(&format!("scan-{name}.json")),
    )?;
    let scan: Scan = child::parse(&step, &text)?;
    let layout = figures::layout_figures(&step, &scan)?;
    let map = format!("maps/{name}.png");
    r.fragkit(
        &format!("map ({name})"),
        &[
            s("map"),
            p(&work),
            s("--out"),
            p(&r.out().join(&map)),
            s("--title"),
            format!(
                "{name}: {} files, {} fragments, {} extra requests at {rs_arg}",
                layout.files, layout.fragments, layout.extra
            ),
            s("--format"),
            s("json"),
        ],
        Some(&format!("map-{name}.json")),
    )?;
    Ok(Look { layout, map, scan })
}

/// Step 4: A block-for-block clone of `base` under `images/<var>`, shown as `$VAR` from now on.
pub(crate) fn clone_scratch(
    r: &mut Runner,
    base: &Path,
    images: &Path,
    var: &str,
) -> Result<ScratchInfo> {
    let lower = var.to_lowercase();
    let text = r.fragkit(
        &format!("scratch clone ({lower})"),
        &[
            s("scratch"),
            s("clone"),
            p(base),
            s("--format"),
            s("json"),
            s("--dir"),
            p(&images.join(&lower)),
        ],
        None,
    )?;
    let info: ScratchInfo = child::parse("scratch clone", &text)?;
    r.define(var, &info.mountpoint);
    Ok(info)
}

/// Step 5: Trace the workload on `mp`: the profile says which ranges are hot. The traced run
/// uses pread (psync): the tracer sees system calls, and io_uring's reads bypass them.
/// An empty profile is an error (nothing to pick from).
pub(crate) fn trace_workload(
    r: &mut Runner,
    spec: &LabSpec,
    mp: &Path,
    names: &[String],
    profile: &Path,
) -> Result<TraceSummary> {
    let mut args = vec![
        s("trace"),
        s("--mount"),
        p(mp),
        s("-o"),
        p(profile),
        s("--"),
        p(r.exe()),
    ];
    args.extend(spec.workload.bench_args(spec.file_size()));
    args.extend([
        s("--engine"),
        s("psync"),
        s("--iterations"),
        s("1"),
        s("--format"),
        s("json"),
    ]);
    args.extend(names.iter().map(|n| p(&mp.join("work").join(n))));
    // Its stdout is the traced bench's report after trace's own lines: kept, not JSON.
    r.fragkit("trace workload", &args, Some("trace-workload.out"))?;
    let summary = TraceSummary::of(&fragkit_trace::profile::Profile::load(profile)?);
    if summary.files == 0 {
        bail!("the trace saw no reads of the workload's files");
    }
    Ok(summary)
}

/// Step 6a: fragkit defrag in pick mode on the traced profile, or bypass mode without one.
/// `target` is what defrag is given (a directory under `mp`); `tag` names its outputs.
pub(crate) fn defrag_pick(
    r: &mut Runner,
    mp: &Path,
    target: &Path,
    profile: Option<&Path>,
    rs_arg: &str,
    tag: &str,
) -> Result<DefragFigures> {
    let mode = if profile.is_some() { "pick" } else { "bypass" };
    let mut args = vec![s("defrag"), s("--mode"), s(mode)];
    if let Some(profile) = profile {
        args.extend([s("--profile"), p(profile)]);
    }
    args.extend([
        s("--io-size"),
        s(rs_arg),
        s("--format"),
        s("json"),
        p(target),
    ]);
    fragkit_counted(r, &format!("defrag --mode {mode}"), mp, &args, tag)
}

/// Step 6b: fragkit defrag in full mode.
pub(crate) fn defrag_full(
    r: &mut Runner,
    mp: &Path,
    target: &Path,
    rs_arg: &str,
    tag: &str,
) -> Result<DefragFigures> {
    let args = vec![
        s("defrag"),
        s("--mode"),
        s("full"),
        s("--io-size"),
        s(rs_arg),
        s("--format"),
        s("json"),
        p(target),
    ];
    fragkit_counted(r, "defrag --mode full", mp, &args, tag)
}

/// Step 6c: The file system's own defragmenter on `targets` (under `mp`); what the lab set
/// up for it goes into `notes`; `tag` names its outputs.
pub(crate) fn defrag_tool(
    r: &mut Runner,
    (program, leading): (&str, &[String]),
    mp: &Path,
    targets: &[PathBuf],
    notes: &mut Vec<String>,
    tag: &str,
    ok: &[i32],
) -> Result<DefragFigures> {
    let mut args = leading.to_vec();
    args.extend(targets.iter().map(|t| p(t)));
    // e4defrag's donors come from the same allocator as full mode's: it gets the same
    // mb_max_to_scan, its best setup (with the default 200 it left 4,188-14,173 extents of
    // ~17,000 per file on the comparison image, with the raised value 223-596;
    // docs/defrag.md), set for its run and put back after.
    let knob = if program == "e4defrag" {
        let blocks = fragkit_sys::fsinfo::FsInfo::of_path(mp)?.blocks;
        let knob = SysfsTunable::ext4_scan_every_free_extent(mp, blocks)?;
        if let Some(k) = &knob {
            notes.push(format!(
                "e4defrag ran with {} at {} (was {}), as fragkit's full mode sets it for its own run: its best setup, since both get their donors from ext4's allocator (docs/defrag.md)",
                k.knob().display(),
                k.new_value(),
                k.old()
            ));
        }
        knob
    } else {
        None
    };
    let wargs = writes_args(r, mp, &format!("{tag}.out"), program, &args);
    let text = r.fragkit_tty(
        program,
        &wargs,
        &format!("writes-{tag}.json"),
        program == "xfs_fsr",
        ok,
    )?;
    if let Some(k) = &knob {
        let var = mp_var(&r.variables(), mp);
        if let Some(step) = r.steps.last_mut() {
            step.command = with_ext4_knob(&var, "mb_max_to_scan", k.new_value(), &step.command);
        }
    }
    let figures = figures::writes_figures(program, &child::parse(program, &text)?)?;
    let said = std::fs::read_to_string(r.out().join(format!("data/{tag}.out"))).unwrap_or_default();
    let log = r
        .steps
        .last()
        .map(|s| std::fs::read_to_string(r.out().join(&s.log)).unwrap_or_default())
        .unwrap_or_default();
    Ok(DefragFigures {
        declined: figures::tool_declined(&format!("{said}\n{log}")),
        ..figures
    })
}

/// `fragkit bench writes` around `program ARGS` on the device under `mp`: its report on
/// stdout, the program's stdout in data/`output`.
fn writes_args(r: &Runner, mp: &Path, output: &str, program: &str, args: &[String]) -> Vec<String> {
    let mut a = vec![
        s("bench"),
        s("writes"),
        s("--format"),
        s("json"),
        s("--path"),
        p(mp),
        s("--command-output"),
        p(&r.out().join("data").join(output)),
        s("--"),
        s(program),
    ];
    a.extend(args.iter().cloned());
    a
}

/// fragkit defrag (`which`: pick or full) under `bench writes`: the device's counts in
/// data/writes-`which`.json, defrag's own report in data/defrag-`which`.json.
fn fragkit_counted(
    r: &mut Runner,
    name: &str,
    mp: &Path,
    args: &[String],
    which: &str,
) -> Result<DefragFigures> {
    let exe = p(r.exe());
    let wargs = writes_args(r, mp, &format!("defrag-{which}.json"), &exe, args);
    // defrag's exit status 1: done, some ranges skipped (listed in its report).
    let text = r.fragkit_report(name, &wargs, Some(&format!("writes-{which}.json")))?;
    let counted = figures::writes_figures(name, &child::parse(name, &text)?)?;
    let defrag_text = std::fs::read_to_string(r.out().join(format!("data/defrag-{which}.json")))?;
    let report: Defrag = child::parse(name, &defrag_text)?;
    figures::fragkit_defrag(name, &report, counted)
}

/// `command` as a shell group that sets the ext4 tunable `name` of the file system mounted
/// at `${var}` to `value` and puts the old value back after, whatever the command's exit
/// status (which stays the group's), so reproduce.sh runs it as the lab did. The group's
/// own statements print nothing: a redirection after it still captures only the command.
fn with_ext4_knob(var: &str, name: &str, value: &str, command: &str) -> String {
    format!(
        "{{ K=/sys/fs/ext4/$(basename \"$(findmnt -no SOURCE \"${{{var}}}\")\")/{name}; \
         OLD=$(cat \"$K\"); echo {value} > \"$K\"; RC=0; {command} || RC=$?; \
         echo \"$OLD\" > \"$K\"; [ \"$RC\" = 0 ]; }}"
    )
}

fn mp_var(vars: &[(String, PathBuf)], mp: &Path) -> String {
    vars.iter()
        .find(|(_, p)| p == mp)
        .map(|(n, _)| n.clone())
        .unwrap_or_else(|| "MP".into())
}

/// Step 7: The workload over every state's copy of the files, `spec.iterations` rounds of one
/// pass each; round k starts with state k (rotating), so no state always runs first and
/// a change in the machine's speed hits all states alike.
pub(crate) fn bench_rounds(
    r: &mut Runner,
    spec: &LabSpec,
    states: &[State],
    names: &[String],
) -> Result<Vec<Bench>> {
    let mut rounds = Vec::new();
    for k in 0..spec.iterations as usize {
        let mut args = spec.workload.bench_args(spec.file_size());
        args.extend([
            s("--iterations"),
            s("1"),
            s("--model"),
            s(super::MODEL),
            s("--model"),
            s(super::DISK_MODEL),
            s("--format"),
            s("json"),
        ]);
        for i in 0..states.len() {
            let work = states[(k + i) % states.len()].mountpoint.join("work");
            args.extend(names.iter().map(|n| p(&work.join(n))));
        }
        let text = r.fragkit(
            &format!("bench workload, round {} of {}", k + 1, spec.iterations),
            &args,
            Some(&format!("bench-round-{}.json", k + 1)),
        )?;
        rounds.push(child::parse("bench read", &text)?);
    }
    Ok(rounds)
}

#[cfg(test)]
mod tests {
    use super::with_ext4_knob;

    /// The group parses, sets the knob before the command, puts the old value back after
    /// it and keeps its exit status; the sysfs path is swapped for a scratch file here.
    #[test]
    fn knob_group_restores_the_old_value_and_keeps_the_exit_status() {
        let dir = tempfile::tempdir().unwrap();
        let knob = dir.path().join("mb_max_to_scan");
        for (command, ok) in [
            ("cat \"$K\" > \"$D/seen\"", true),
            ("cat \"$K\" > \"$D/seen\"; false", false),
        ] {
            std::fs::write(&knob, "200\n").unwrap();
            let group = with_ext4_knob("TOOL", "mb_max_to_scan", "65536", command).replace(
                "K=/sys/fs/ext4/$(basename \"$(findmnt -no SOURCE \"${TOOL}\")\")/mb_max_to_scan",
                "K=\"$D/mb_max_to_scan\"",
            );
            assert!(group.contains("K=\"$D/mb_max_to_scan\""), "{group}");
            let status = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("set -e; {group}"))
                .env("D", dir.path())
                .status()
                .unwrap();
            assert_eq!(status.success(), ok, "{command}");
            let seen = std::fs::read_to_string(dir.path().join("seen")).unwrap();
            assert_eq!(seen.trim(), "65536", "the command saw the new value");
            let after = std::fs::read_to_string(&knob).unwrap();
            assert_eq!(after.trim(), "200", "the old value is back");
        }
    }
}
