//! The module layers docs/design.md states ("Module layers"), checked against the source: each
//! module imports only the rows below its own and, within its row, the modules to its right;
//! every module of `src/` is in the table; and no two sibling modules import each other. The
//! table is read from the doc, so the page and the code cannot drift apart.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The table's rows, top first: each module's (row, column).
fn layers() -> BTreeMap<String, (usize, usize)> {
    let doc = std::fs::read_to_string(Path::new(ROOT).join("docs/design.md")).expect("design.md");
    let section = doc
        .split("\n## Module layers\n")
        .nth(1)
        .expect("a \"Module layers\" section");
    let block = section
        .split("```")
        .nth(1)
        .expect("the layers in a code block");
    let mut at = BTreeMap::new();
    let rows = block
        .lines()
        .filter(|line| !line.is_empty() && !line.starts_with(' '));
    for (row, line) in rows.enumerate() {
        let modules = line.split("  ").next().unwrap_or_default();
        for (column, module) in modules.split(", ").enumerate() {
            let module = module.trim().trim_end_matches('/');
            assert!(
                at.insert(module.to_string(), (row, column)).is_none(),
                "{module} is in the table twice"
            );
        }
    }
    at
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// A source file's module path (`placement::eligible::pod_level`; `mod.rs` is its folder's).
fn module_of(file: &Path) -> Vec<String> {
    let relative = file
        .strip_prefix(Path::new(ROOT).join("src"))
        .expect("in src");
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// Test-only code, which may read any module: a `tests` folder or file, a `properties.rs`, the
/// test support.
fn test_only(module: &[String]) -> bool {
    module.first().is_some_and(|m| m == "test_support")
        || module.iter().any(|p| p == "tests" || p == "properties")
}

/// The `crate::` paths a file's code names outside comments and its `mod tests`.
fn paths_named(file: &Path) -> BTreeSet<Vec<String>> {
    let text = std::fs::read_to_string(file).expect("source");
    let code = text
        .split("#[cfg(test)]\nmod tests")
        .next()
        .unwrap_or_default();
    let mut paths = BTreeSet::new();
    for line in code.lines() {
        let line = line.split("//").next().unwrap_or_default();
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            let before = rest[..at].chars().last();
            rest = &rest[at + "crate::".len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
                continue;
            }
            let mut path = Vec::new();
            for segment in rest.split("::") {
                let name: String = segment
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if name.is_empty() || name.starts_with(char::is_uppercase) {
                    break;
                }
                let whole = name.len() == segment.len();
                path.push(name);
                if !whole {
                    break;
                }
            }
            if !path.is_empty() {
                paths.insert(path);
            }
        }
    }
    paths
}

#[test]
fn each_module_imports_only_what_the_layer_table_puts_below_it() {
    let layers = layers();
    let mut files = Vec::new();
    sources(&Path::new(ROOT).join("src"), &mut files);
    let tops: BTreeSet<String> = files
        .iter()
        .filter_map(|f| module_of(f).first().cloned())
        .filter(|m| !["lib", "main", "test_support"].contains(&m.as_str()))
        .collect();
    let listed: BTreeSet<String> = layers.keys().cloned().collect();
    assert_eq!(
        tops, listed,
        "the modules of src/ and those docs/design.md's layer table lists"
    );
    let mut upward = Vec::new();
    for file in &files {
        let module = module_of(file);
        let Some(top) = module.first().filter(|t| layers.contains_key(*t)) else {
            continue;
        };
        if test_only(&module) {
            continue;
        }
        for path in paths_named(file) {
            let named = &path[0];
            // The crate root's own items (lib.rs) are not a layer.
            let Some(&there) = layers.get(named) else {
                continue;
            };
            if named != top && there <= layers[top] {
                upward.push(format!(
                    "{} names crate::{}",
                    module.join("::"),
                    path.join("::")
                ));
            }
        }
    }
    assert!(upward.is_empty(), "imports against the layers: {upward:#?}");
}

#[test]
fn no_two_sibling_modules_import_each_other() {
    let mut files = Vec::new();
    sources(&Path::new(ROOT).join("src"), &mut files);
    // Each module, a file or a folder, and the paths its code names.
    let mut named: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = BTreeMap::new();
    for file in &files {
        let module = module_of(file);
        if test_only(&module) {
            continue;
        }
        let paths = paths_named(file);
        for depth in 1..=module.len() {
            named
                .entry(module[..depth].to_vec())
                .or_default()
                .extend(paths.iter().cloned());
        }
    }
    let names = |a: &Vec<String>, b: &Vec<String>| {
        named[a]
            .iter()
            .any(|p| p.len() >= b.len() && p[..b.len()] == b[..])
    };
    let mut circles = Vec::new();
    let modules: Vec<&Vec<String>> = named.keys().collect();
    for (i, a) in modules.iter().enumerate() {
        for b in &modules[i + 1..] {
            let siblings = a.len() == b.len() && a[..a.len() - 1] == b[..b.len() - 1];
            if siblings && names(a, b) && names(b, a) {
                circles.push(format!("{} <-> {}", a.join("::"), b.join("::")));
            }
        }
    }
    assert!(
        circles.is_empty(),
        "sibling modules importing each other: {circles:#?}"
    );
}
