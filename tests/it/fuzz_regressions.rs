//! The fuzz targets' oracles (`fuzz/oracle/`) in the plain test run, so the gate needs no
//! second, instrumented build: every committed input of each target (seeds and the regressions
//! fuzzing found) replayed, then a fixed number of seeded mutations of them (as bytes, and as
//! JSON so that most still parse). The mutations are blind (no coverage feedback); libFuzzer's guided search stays `bash .ci/fuzz.sh`, and what it
//! finds is committed to `fuzz/corpus/<target>/` and replayed here from then on.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::rng::Rng;

#[path = "../../fuzz/oracle/prometheus_response.rs"]
mod prometheus_response;
#[path = "../../fuzz/oracle/review.rs"]
mod review;

/// Mutations per committed input, and their seed: the same inputs on every run.
const MUTATIONS_PER_INPUT: usize = 2000;
const SEED: u64 = 20_261_124;

fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: the corpus is committed: {e}", dir.display()))
        .map(|e| e.expect("a corpus entry").path())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let bytes = std::fs::read(&path).expect("a corpus file reads");
            (path, bytes)
        })
        .collect()
}

/// The quoted tokens of `fuzz/<target>.dict`, as libFuzzer reads them (no escapes used there).
fn dictionary(target: &str) -> Vec<Vec<u8>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("fuzz/{target}.dict"));
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| {
            let line = line.trim();
            let inner = line.strip_prefix('"')?.strip_suffix('"')?;
            Some(inner.replace("\\\"", "\"").into_bytes())
        })
        .collect()
}

/// Values that have broken JSON readers: beyond f64, beyond i64, negative, empty, null.
const EDGE_VALUES: &[&[u8]] = &[
    b"1e309",
    b"-1",
    b"18446744073709551616",
    b"0.0000000000000000000001",
    b"\"\"",
    b"null",
    b"[]",
    b"{}",
    b"\"\\u0000\"",
];

/// A JSON input edited as JSON (half the time), else as bytes: an input that still parses
/// reaches the code past the parse.
fn mutate(rng: &mut Rng, input: &[u8], others: &[&[u8]], dict: &[Vec<u8>]) -> Vec<u8> {
    match serde_json::from_slice::<Value>(input) {
        Ok(mut value) if rng.chance(50) => {
            for _ in 0..1 + rng.below(3) {
                mutate_json(rng, &mut value, dict);
            }
            serde_json::to_vec(&value).expect("a Value serializes")
        }
        _ => mutate_bytes(rng, input, others, dict),
    }
}

/// JSON values that have broken readers of a field: the wrong type, out of range, empty.
fn edge_value(rng: &mut Rng) -> Value {
    let values = [
        Value::Null,
        Value::Bool(true),
        serde_json::json!(-1),
        serde_json::json!(0),
        serde_json::json!(1e300),
        serde_json::json!(u64::MAX),
        serde_json::json!(0.5),
        serde_json::json!(""),
        serde_json::json!("taskmanager"),
        serde_json::json!("x".repeat(300)),
        serde_json::json!([]),
        serde_json::json!({}),
        serde_json::json!([{}]),
    ];
    rng.pick(&values).clone()
}

/// Every JSON pointer in `value`, the root included.
fn pointers(value: &Value, at: String, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let escaped = key.replace('~', "~0").replace('/', "~1");
                pointers(child, format!("{at}/{escaped}"), out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                pointers(child, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
    out.push(at);
}

/// One edit at a random place: the value replaced by an edge value, removed, duplicated (in a
/// list), or a dictionary key added beside it.
fn mutate_json(rng: &mut Rng, value: &mut Value, dict: &[Vec<u8>]) {
    let mut all = Vec::new();
    pointers(value, String::new(), &mut all);
    let at = rng.pick(&all).clone();
    let (parent, last) = match at.rfind('/') {
        Some(i) => (at[..i].to_string(), Some(at[i + 1..].to_string())),
        None => (String::new(), None),
    };
    let op = rng.below(4);
    let edge = edge_value(rng);
    let key = (!dict.is_empty()).then(|| {
        String::from_utf8_lossy(rng.pick(dict).as_slice())
            .trim_matches('"')
            .to_string()
    });
    let (Some(container), Some(last)) = (value.pointer_mut(&parent), last) else {
        *value = edge;
        return;
    };
    match (container, op) {
        (Value::Object(map), 0) => {
            map.remove(&last.replace("~1", "/").replace("~0", "~"));
        }
        (Value::Object(map), 1) => {
            if let Some(key) = key {
                map.insert(key, edge);
            }
        }
        (Value::Array(items), 0) => {
            if let Ok(i) = last.parse::<usize>()
                && i < items.len()
            {
                items.remove(i);
            }
        }
        (Value::Array(items), 1) => {
            if let Ok(i) = last.parse::<usize>()
                && let Some(item) = items.get(i).cloned()
            {
                items.insert(i, item);
            }
        }
        _ => {
            if let Some(target) = value.pointer_mut(&at) {
                *target = edge;
            }
        }
    }
}

/// One to four stacked edits of `input`: byte flips, deletions, duplications, dictionary and
/// edge-value insertions, and splices with another input of the corpus.
fn mutate_bytes(rng: &mut Rng, input: &[u8], others: &[&[u8]], dict: &[Vec<u8>]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = if out.is_empty() {
            0
        } else {
            rng.below(out.len())
        };
        match rng.below(7) {
            0 if !out.is_empty() => out[at] ^= 1 << rng.below(8),
            1 if !out.is_empty() => out[at] = rng.next() as u8,
            2 => {
                let end = (at + 1 + rng.below(32)).min(out.len());
                out.drain(at..end);
            }
            3 => {
                let end = (at + 1 + rng.below(64)).min(out.len());
                let copy = out[at..end].to_vec();
                let to = rng.below(out.len() + 1);
                out.splice(to..to, copy);
            }
            4 if !dict.is_empty() => {
                let token = rng.pick(dict).clone();
                out.splice(at..at, token);
            }
            5 => {
                // Over the next number or string, when there is one.
                let end = out[at..]
                    .iter()
                    .position(|b| matches!(b, b',' | b'}' | b']'))
                    .map_or(out.len(), |p| at + p);
                out.splice(at..end, rng.pick(EDGE_VALUES).iter().copied());
            }
            _ if !others.is_empty() => {
                let other = rng.pick(others);
                let from = rng.below(other.len().max(1));
                let end = (at + rng.below(out.len() - at + 1)).min(out.len());
                out.splice(at..end, other[from.min(other.len())..].iter().copied());
            }
            _ => out.push(rng.next() as u8),
        }
    }
    out
}

/// How many inputs ran, and how many of them went the whole way (patched, or a snapshot built).
struct Ran {
    inputs: usize,
    whole_way: usize,
}

impl Ran {
    /// Most edits stop an input early (at the parse, or as no TaskManager); one in ten must still
    /// go the whole way, or the oracle's later checks were hardly exercised.
    fn went_the_whole_way(&self, what: &str) {
        assert!(
            self.whole_way * 10 >= self.inputs,
            "only {} of {} inputs {what}",
            self.whole_way,
            self.inputs
        );
    }
}

/// Every committed input, then `MUTATIONS_PER_INPUT` mutations of each, through `check`.
fn replay_and_mutate(target: &str, check: fn(&[u8]) -> bool) -> Ran {
    let inputs = corpus(target);
    assert!(!inputs.is_empty(), "{target}: no committed inputs");
    let dict = dictionary(target);
    let all: Vec<&[u8]> = inputs.iter().map(|(_, b)| b.as_slice()).collect();
    let mut rng = Rng(SEED);
    let mut ran = Ran {
        inputs: 0,
        whole_way: 0,
    };
    for (path, bytes) in &inputs {
        ran.inputs += 1;
        ran.whole_way += usize::from(run_one(path, bytes, check));
        for n in 0..MUTATIONS_PER_INPUT {
            let mutated = mutate(&mut rng, bytes, &all, &dict);
            let label = PathBuf::from(format!("{} (mutation {n})", path.display()));
            ran.inputs += 1;
            ran.whole_way += usize::from(run_one(&label, &mutated, check));
        }
    }
    println!(
        "{target}: {} inputs, {} of them the whole way",
        ran.inputs, ran.whole_way
    );
    ran
}

/// One input; a failure names the input and prints it, to be committed as a regression.
fn run_one(label: &Path, bytes: &[u8], check: fn(&[u8]) -> bool) -> bool {
    std::panic::catch_unwind(|| check(bytes)).unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        panic!(
            "{}: the oracle failed: {what}\ninput (commit it to fuzz/corpus as regression-<what>): {}",
            label.display(),
            String::from_utf8_lossy(bytes)
        )
    })
}

#[test]
fn review_inputs_and_their_mutations_keep_the_oracle() {
    let regressions = corpus("review")
        .iter()
        .filter(|(p, _)| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("regression-"))
        })
        .count();
    assert!(regressions >= 1, "the regression inputs are committed");
    replay_and_mutate("review", review::check).went_the_whole_way("were patched");
}

#[test]
fn prometheus_response_inputs_and_their_mutations_keep_the_oracle() {
    replay_and_mutate("prometheus_response", prometheus_response::check)
        .went_the_whole_way("built a snapshot");
}
