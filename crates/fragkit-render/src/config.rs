//! FragTracer's two configuration files: color.cnf (extension -> contiguous colour + two
//! alternating fragmented colours) and img.cnf (max_length and picture geometry).
//! Both are read in FragTracer's plain line format or, for a `.toml` file, in TOML.
//! The exact formats are in docs/map.md.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{anyhow, bail, Context, Result};
use serde::Deserialize;

use super::canvas::Rgb;

pub(crate) const DEFAULT_COLOR_CNF: &str = include_str!("../configs/color.cnf");
pub(crate) const DEFAULT_IMG_CNF: &str = include_str!("../configs/img.cnf");

/// Colours of one extension class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClassColors {
    pub contiguous: Rgb,
    pub fragmented: [Rgb; 2],
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColorConfig {
    /// Classes in file order; `default` is separate.
    pub classes: Vec<(Vec<String>, ClassColors)>,
    pub default: ClassColors,
    pub free: Rgb,
    pub metadata: Rgb,
    /// Blocks of files outside the drawn set (and inode-owned metadata such as directories).
    pub other: Rgb,
    /// Addresses nothing is known about (no GETFSMAP on this file system, or not root).
    pub unmapped: Rgb,
    by_ext: HashMap<String, usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImgConfig {
    #[serde(default)]
    pub max_length: u64,
    #[serde(default = "d_columns")]
    pub columns: u32,
    #[serde(default = "d_box")]
    pub box_size: u32,
    #[serde(default = "d_max_boxes")]
    pub max_boxes: u64,
}
/// The tallest image the map draws, in pixels (see [`ImgConfig::parse`]).
const MAX_IMAGE_SIDE: u64 = 32_767;

fn d_columns() -> u32 {
    256
}
fn d_box() -> u32 {
    4
}
fn d_max_boxes() -> u64 {
    65536
}

impl Default for ImgConfig {
    fn default() -> Self {
        ImgConfig::parse(DEFAULT_IMG_CNF, false).expect("shipped img.cnf parses")
    }
}

impl Default for ColorConfig {
    fn default() -> Self {
        ColorConfig::parse(DEFAULT_COLOR_CNF, false).expect("shipped color.cnf parses")
    }
}

/// Named colours accepted in both formats ("light-orange", "light_orange", "Light orange").
const NAMES: &[(&str, Rgb)] = &[
    ("white", [255, 255, 255]),
    ("black", [0, 0, 0]),
    ("gray", [128, 128, 128]),
    ("grey", [128, 128, 128]),
    ("light-gray", [200, 200, 200]),
    ("light-grey", [200, 200, 200]),
    ("pale-gray", [236, 236, 236]),
    ("dark-gray", [80, 80, 80]),
    ("dark-grey", [80, 80, 80]),
    ("red", [220, 40, 40]),
    ("light-red", [255, 110, 110]),
    ("dark-red", [150, 0, 20]),
    ("green", [40, 160, 60]),
    ("light-green", [140, 220, 120]),
    ("dark-green", [0, 100, 30]),
    ("blue", [40, 90, 220]),
    ("light-blue", [130, 170, 255]),
    ("dark-blue", [10, 30, 130]),
    ("orange", [255, 140, 0]),
    ("light-orange", [255, 185, 80]),
    ("dark-orange", [215, 95, 0]),
    ("teal", [0, 150, 150]),
    ("light-teal", [90, 215, 205]),
    ("dark-teal", [0, 95, 100]),
    ("purple", [130, 60, 170]),
    ("pink", [240, 100, 170]),
    ("light-pink", [255, 160, 210]),
    ("dark-pink", [190, 30, 110]),
    ("yellow", [240, 210, 0]),
    ("olive", [130, 130, 30]),
    ("brown", [130, 80, 30]),
    ("beige", [228, 216, 190]),
    ("slate", [70, 85, 120]),
    ("navy", [0, 0, 110]),
];

pub fn parse_color(text: &str) -> Result<Rgb> {
    let t = text.trim();
    if let Some(hex) = t.strip_prefix('#') {
        if hex.len() == 6 && hex.chars().all(|c| c.is_ascii_hexdigit()) {
            let v = u32::from_str_radix(hex, 16).unwrap();
            return Ok([(v >> 16) as u8, (v >> 8) as u8, v as u8]);
        }
        bail!("colour '{t}': expected #rrggbb");
    }
    let key = t.to_ascii_lowercase().replace(['_', ' '], "-");
    NAMES
        .iter()
        .find(|(n, _)| *n == key)
        .map(|(_, c)| *c)
        .ok_or_else(|| anyhow!("colour '{t}': expected #rrggbb or a colour name (docs/map.md)"))
}

pub fn hex(c: Rgb) -> String {
    format!("#{:02x}{:02x}{:02x}", c[0], c[1], c[2])
}

fn is_toml(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("toml"))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlClass {
    contiguous: String,
    fragmented: [String; 2],
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlColors {
    free: Option<String>,
    metadata: Option<String>,
    other: Option<String>,
    unmapped: Option<String>,
    default: Option<TomlClass>,
    #[serde(default)]
    extensions: toml::Table,
}

fn norm_ext(e: &str) -> String {
    e.trim().trim_start_matches('.').to_ascii_lowercase()
}

impl ColorConfig {
    pub fn load(path: &Path) -> Result<ColorConfig> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("colour config {}", path.display()))?;
        ColorConfig::parse(&text, is_toml(path))
            .with_context(|| format!("colour config {}", path.display()))
    }

    pub fn parse(text: &str, toml_form: bool) -> Result<ColorConfig> {
        // Start from the shipped special colours unless this is the shipped file itself.
        let mut c = ColorConfig {
            classes: Vec::new(),
            default: ClassColors {
                contiguous: [200, 200, 200],
                fragmented: [[0, 0, 0], [80, 80, 80]],
            },
            free: [255, 255, 255],
            metadata: [70, 85, 120],
            other: [228, 216, 190],
            unmapped: [236, 236, 236],
            by_ext: HashMap::new(),
        };
        let class = |cont: &str, a: &str, b: &str| -> Result<ClassColors> {
            Ok(ClassColors {
                contiguous: parse_color(cont)?,
                fragmented: [parse_color(a)?, parse_color(b)?],
            })
        };
        if toml_form {
            let t: TomlColors = toml::from_str(text).map_err(|e| anyhow!("{}", e.message()))?;
            for (field, slot) in [
                (&t.free, &mut c.free),
                (&t.metadata, &mut c.metadata),
                (&t.other, &mut c.other),
                (&t.unmapped, &mut c.unmapped),
            ] {
                if let Some(v) = field {
                    *slot = parse_color(v)?;
                }
            }
            if let Some(d) = &t.default {
                c.default = class(&d.contiguous, &d.fragmented[0], &d.fragmented[1])?;
            }
            for (ext, v) in &t.extensions {
                let k: TomlClass = v
                    .clone()
                    .try_into()
                    .map_err(|e: toml::de::Error| anyhow!("extensions.{ext}: {}", e.message()))?;
                let exts = ext.split(',').map(norm_ext).collect();
                c.classes.push((
                    exts,
                    class(&k.contiguous, &k.fragmented[0], &k.fragmented[1])?,
                ));
            }
        } else {
            for (n, raw) in text.lines().enumerate() {
                let line = strip_comment(raw);
                let words: Vec<&str> = line.split_whitespace().collect();
                if words.is_empty() {
                    continue;
                }
                let at = |m: &str| anyhow!("line {}: {m}", n + 1);
                if let Some(special) = words[0].strip_prefix('@') {
                    if words.len() != 2 {
                        return Err(at("expected '@NAME COLOUR'"));
                    }
                    let col = parse_color(words[1]).map_err(|e| at(&e.to_string()))?;
                    match special {
                        "free" => c.free = col,
                        "metadata" => c.metadata = col,
                        "other" => c.other = col,
                        "unmapped" => c.unmapped = col,
                        _ => return Err(at("expected @free, @metadata, @other or @unmapped")),
                    }
                    continue;
                }
                if words.len() != 4 {
                    return Err(at(
                        "expected 'EXTENSIONS CONTIGUOUS FRAGMENTED_1 FRAGMENTED_2'",
                    ));
                }
                let k = class(words[1], words[2], words[3]).map_err(|e| at(&e.to_string()))?;
                if words[0].eq_ignore_ascii_case("default") {
                    c.default = k;
                } else {
                    c.classes
                        .push((words[0].split(',').map(norm_ext).collect(), k));
                }
            }
        }
        for (i, (exts, _)) in c.classes.iter().enumerate() {
            for e in exts {
                c.by_ext.entry(e.clone()).or_insert(i);
            }
        }
        Ok(c)
    }

    /// Class index of a path: 0 = default, 1.. = `classes[i-1]`.
    pub(crate) fn class_of(&self, path: &Path) -> usize {
        path.extension()
            .and_then(|e| e.to_str())
            .and_then(|e| self.by_ext.get(&e.to_ascii_lowercase()))
            .map_or(0, |i| i + 1)
    }

    pub(crate) fn class_colors(&self, class: usize) -> ClassColors {
        if class == 0 {
            self.default
        } else {
            self.classes[class - 1].1
        }
    }

    pub(crate) fn class_label(&self, class: usize) -> String {
        if class == 0 {
            "other extensions".into()
        } else {
            self.classes[class - 1]
                .0
                .iter()
                .map(|e| format!(".{e}"))
                .collect::<Vec<_>>()
                .join(" ")
        }
    }
}

/// Drop a trailing comment: '#' at the line start or after whitespace, unless it begins a
/// #rrggbb colour.
fn strip_comment(raw: &str) -> String {
    let mut out = Vec::new();
    for w in raw.split_whitespace() {
        if w.starts_with('#') && !(w.len() == 7 && w[1..].chars().all(|c| c.is_ascii_hexdigit())) {
            break;
        }
        out.push(w);
    }
    out.join(" ")
}

impl ImgConfig {
    pub fn load(path: &Path) -> Result<ImgConfig> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("image config {}", path.display()))?;
        ImgConfig::parse(&text, is_toml(path))
            .with_context(|| format!("image config {}", path.display()))
    }

    pub fn parse(text: &str, toml_form: bool) -> Result<ImgConfig> {
        let c: ImgConfig = if toml_form {
            toml::from_str(text).map_err(|e| anyhow!("{}", e.message()))?
        } else {
            let mut c = ImgConfig {
                max_length: 0,
                columns: d_columns(),
                box_size: d_box(),
                max_boxes: d_max_boxes(),
            };
            for (n, raw) in text.lines().enumerate() {
                let line = strip_comment(raw);
                if line.is_empty() {
                    continue;
                }
                // "KEY VALUE", "KEY=VALUE" or "KEY: VALUE".
                let norm = line.replace(['=', ':'], " ");
                let words: Vec<&str> = norm.split_whitespace().collect();
                let at = |m: &str| anyhow!("line {}: {m}", n + 1);
                // Never cut a number to fit (4294967297 columns is not 1).
                let small = |v: u64| {
                    u32::try_from(v)
                        .map_err(|_| at(&format!("{v} is too large (at most {})", u32::MAX)))
                };
                if words.len() != 2 {
                    return Err(at("expected 'KEY VALUE'"));
                }
                let v: u64 = words[1]
                    .parse()
                    .map_err(|_| at(&format!("'{}' is not a whole number", words[1])))?;
                match words[0].to_ascii_lowercase().as_str() {
                    "max_length" | "maxlength" | "max_len" => c.max_length = v,
                    "columns" => c.columns = small(v)?,
                    "box_size" => c.box_size = small(v)?,
                    "max_boxes" => c.max_boxes = v,
                    other => {
                        return Err(at(&format!(
                        "unknown key '{other}' (expected max_length, columns, box_size, max_boxes)"
                    )))
                    }
                }
            }
            c
        };
        if c.columns == 0 || c.columns > 4096 {
            bail!("columns {}: expected 1..4096", c.columns);
        }
        if c.box_size == 0 || c.box_size > 64 {
            bail!("box_size {}: expected 1..64 pixels", c.box_size);
        }
        if c.max_boxes < c.columns as u64 {
            bail!(
                "max_boxes {}: expected at least one row ({} boxes)",
                c.max_boxes,
                c.columns
            );
        }
        // The picture's height is rows × box_size pixels; browsers display no image taller
        // than 32,767 pixels (Chromium's and Firefox's largest image and canvas side), and
        // a larger one only costs memory and time to draw.
        let most = c.columns as u64 * (MAX_IMAGE_SIDE / c.box_size as u64);
        if c.max_boxes > most {
            bail!(
                "max_boxes {}: with columns {} and box_size {} the image would be {} pixels tall; expected at most {most} boxes ({MAX_IMAGE_SIDE} pixels a side)",
                c.max_boxes,
                c.columns,
                c.box_size,
                c.max_boxes.div_ceil(c.columns as u64).saturating_mul(c.box_size as u64)
            );
        }
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_sizes_are_checked_not_cut() {
        let e = ImgConfig::parse("columns 4294967297\n", false).unwrap_err();
        assert!(
            format!("{e:#}").contains("4294967297 is too large"),
            "{e:#}"
        );
        let e = ImgConfig::parse("max_boxes 100000000\n", false).unwrap_err();
        assert!(
            format!("{e:#}").contains("expected at most 2096896 boxes"),
            "{e:#}"
        );
        let e = ImgConfig::parse("max_boxes = 100000000\n", true).unwrap_err();
        assert!(format!("{e:#}").contains("max_boxes 100000000"), "{e:#}");
        let ok = ImgConfig::parse("max_boxes 2096896\n", false).unwrap();
        assert_eq!(ok.max_boxes, 2_096_896);
    }

    #[test]
    fn shipped_configs_parse() {
        let c = ColorConfig::default();
        assert_eq!(c.class_of(Path::new("a/000012.SST")), 1);
        assert_eq!(c.class_of(Path::new("x.bin")), 0);
        assert_eq!(c.default.fragmented[0], [0, 0, 0]);
        assert_eq!(ImgConfig::default().max_length, 0);
    }

    #[test]
    fn both_forms_agree() {
        let plain = ColorConfig::parse(
            ".sst green #ffb950 dark-orange # rocksdb\ndefault light-gray black dark-gray\n@free white\n",
            false,
        )
        .unwrap();
        let toml = ColorConfig::parse(
            "free = \"white\"\n[default]\ncontiguous = \"light-gray\"\nfragmented = [\"black\", \"dark-gray\"]\n[extensions.sst]\ncontiguous = \"green\"\nfragmented = [\"#ffb950\", \"dark-orange\"]\n",
            true,
        )
        .unwrap();
        assert_eq!(plain, toml);
        let a = ImgConfig::parse("max_length 64\ncolumns=128\n", false).unwrap();
        let b = ImgConfig::parse("max_length = 64\ncolumns = 128\n", true).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.max_length, 64);
    }

    #[test]
    fn bad_lines_name_the_line() {
        let e = ColorConfig::parse(".sst green\n", false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 1"), "{e}");
        let e = ImgConfig::parse("speed 3\n", false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown key 'speed'"), "{e}");
    }
}
