//! `fragkit age layout|fragpicker-synthetic|hypothetical|paf|profile`: thin wrappers over
//! the generators in `crate::age`; `report::age` prints their summaries.

use anyhow::Result;

use crate::age;
use crate::cli::{AgeAction, InfoFormat};
use crate::report::{self, age as out};

pub fn run(action: AgeAction) -> Result<i32> {
    match action {
        AgeAction::Layout(a) => {
            let spec = age::layout::LayoutSpec {
                path: a.file,
                size: a.size,
                frag_size: a.frag_size,
                frag_distance: a.frag_distance,
                seed: a.seed,
                force: a.force,
                progress: true,
            };
            let r = age::layout::build(&spec)?;
            report::to_stdout(|w| match a.format {
                InfoFormat::Json => report::write_json_pretty(w, &r),
                InfoFormat::Table => out::layout(w, &r),
            })?;
            Ok(0)
        }
        AgeAction::Paf(a) => {
            let spec = age::paf::PafSpec::parse(&a.spec)?;
            let mut opts = age::paf::PafOptions {
                seed: a.seed,
                force: a.force,
                dry_run: a.dry_run,
                progress: true,
                ..Default::default()
            };
            if let Some(t) = a.threads {
                opts.threads = t;
            }
            let r = age::paf::run(&spec, &a.target, &opts)?;
            report::to_stdout(|w| match a.format {
                InfoFormat::Json => report::write_json_pretty(w, &r),
                InfoFormat::Table => out::paf(w, &r),
            })?;
            Ok(0)
        }
        AgeAction::Hypothetical(a) => {
            let spec = age::hypothetical::HypotheticalSpec {
                path: a.file,
                mode: a.mode,
                pattern: a.pattern,
                chunk: a.chunk,
                stripe: a.stripe,
                size: a.size,
                direct: a.direct,
                tune: !a.no_tune,
                keep_dummies: a.keep_dummies,
                seed: a.seed,
            };
            let r = age::hypothetical::build(&spec)?;
            report::to_stdout(|w| match a.format {
                InfoFormat::Json => report::write_json_pretty(w, &r),
                InfoFormat::Table => out::hypothetical(w, &r),
            })?;
            Ok(0)
        }
        AgeAction::FragpickerSynthetic(a) => {
            let r = age::fragpicker::synthetic(&a.dir, a.files, a.size, a.seed)?;
            report::to_stdout(|w| match a.format {
                InfoFormat::Json => report::write_json_pretty(w, &r),
                InfoFormat::Table => out::fragpicker_synthetic(w, &r),
            })?;
            Ok(0)
        }
        AgeAction::Profile(a) => {
            let spec = age::profile::ProfileSpec {
                target: a.target,
                fullness_pct: a.fullness,
                sizes: age::profile::SizeProfile::load(&a.sizes)?,
                churn: a.churn,
                steps: a.steps,
                seed: a.seed,
                force: a.force,
                progress: true,
            };
            let r = age::profile::run(&spec)?;
            report::to_stdout(|w| match a.format {
                InfoFormat::Json => report::write_json_pretty(w, &r),
                InfoFormat::Table => out::profile(w, &r),
            })?;
            Ok(0)
        }
    }
}
