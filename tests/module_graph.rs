//! The module import graph (what `scripts/check-modules` runs in CI): no cycle between
//! top-level modules of src/, and no clap type (`crate::cli`) below src/cmd.
//!
//! An edge X → Y is any `crate::Y` path (or `crate::{Y, ...}` group) in a file of module
//! X, comments excluded. main.rs is the binary's edge and takes part in neither rule.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Top-level module names, from lib.rs's `pub mod X;` lines.
fn top_modules(src: &Path) -> BTreeSet<String> {
    fs::read_to_string(src.join("lib.rs"))
        .unwrap()
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .filter_map(|l| l.strip_suffix(';'))
        .map(str::to_string)
        .collect()
}

fn ident_at(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// Modules a line of code names through `crate::`.
fn referenced(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().last();
        rest = &rest[i + "crate::".len()..];
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level names only: depth-0 entries of the group, up to its closing brace.
            let body = group;
            let mut depth = 0;
            let mut start = true;
            for (k, c) in body.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => start = true,
                    c if start && depth == 0 && !c.is_whitespace() => {
                        out.push(ident_at(&body[k..]).to_string());
                        start = false;
                    }
                    _ => {}
                }
            }
        } else {
            out.push(ident_at(rest).to_string());
        }
    }
    out
}

struct Graph {
    edges: BTreeMap<String, BTreeSet<String>>,
    /// One place each edge comes from, for the failure message.
    site: BTreeMap<(String, String), String>,
    cli_uses: Vec<String>,
}

fn graph() -> Graph {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let tops = top_modules(&src);
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut g = Graph {
        edges: BTreeMap::new(),
        site: BTreeMap::new(),
        cli_uses: Vec::new(),
    };
    for f in files {
        let rel = f.strip_prefix(&src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        let module = first.trim_end_matches(".rs").to_string();
        if module == "main" || module == "lib" {
            continue;
        }
        for (n, line) in fs::read_to_string(&f).unwrap().lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for to in referenced(code) {
                if to == "cli" && module != "cmd" && module != "cli" {
                    g.cli_uses.push(format!("src/{}:{}", rel.display(), n + 1));
                }
                if to == module || !tops.contains(&to) {
                    continue;
                }
                g.site
                    .entry((module.clone(), to.clone()))
                    .or_insert_with(|| format!("src/{}:{}", rel.display(), n + 1));
                g.edges.entry(module.clone()).or_default().insert(to);
            }
        }
    }
    g
}

/// Strongly connected components with more than one module (Tarjan).
fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let i = t.index.len();
        t.index.insert(v, i);
        t.low.insert(v, i);
        t.stack.push(v);
        t.on.insert(v);
        let edges = t.edges;
        for w in edges.get(v).into_iter().flatten() {
            if !t.index.contains_key(w.as_str()) {
                visit(t, w);
                let lw = t.low[w.as_str()];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.on.contains(w.as_str()) {
                let iw = t.index[w.as_str()];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

#[test]
fn no_cycle_between_top_level_modules() {
    let g = graph();
    let found = cycles(&g.edges);
    let mut msg = String::new();
    for comp in &found {
        msg += &format!("cycle among {comp:?}:\n");
        for a in comp {
            for b in g.edges[a].iter().filter(|b| comp.contains(b)) {
                msg += &format!("  {a} -> {b} ({})\n", g.site[&(a.clone(), b.clone())]);
            }
        }
    }
    assert!(found.is_empty(), "{msg}");
    // The graph is real: the edges the data flow is built on are seen.
    assert!(g.edges["cmd"].contains("cli"), "{:?}", g.edges);
    assert!(g.edges["layout"].contains("sys"), "{:?}", g.edges);
}

#[test]
fn no_cli_type_below_cmd() {
    let g = graph();
    assert!(
        g.cli_uses.is_empty(),
        "crate::cli used outside src/cmd and src/main.rs: {:?}",
        g.cli_uses
    );
}

#[test]
fn the_checker_sees_groups_and_cycles() {
    assert_eq!(
        referenced("use crate::{a::b, c::{d, e}, f};"),
        ["a", "c", "f"]
    );
    assert_eq!(referenced("x = crate::sys::dev::split(d);"), ["sys"]);
    assert!(referenced("$crate::x").is_empty());
    let mut e = BTreeMap::new();
    e.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    e.insert("b".to_string(), BTreeSet::from(["a".to_string()]));
    e.insert("c".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(cycles(&e), vec![vec!["a".to_string(), "b".to_string()]]);
}
