//! The decision annotation: one line saying what was decided, read back by every replica.
//!
//! `id=3f2a9c01b7de mode=affinity cpu=2 net=0 est=request land=node-0{7:62,3:38} avoid=3 age=4s`
//! `land` says where the pod is predicted to land, with probabilities in percent; it and
//! `cpu`/`net` (the charged load; `est` says whether it is the request or `siblings:N`, the
//! measured load of N running pods of its job) let any replica that watches pods rebuild the
//! in-flight ledger entry of a pod another replica steered.
//!
//! Under sampling a decision names tens of nodes, and the note travels in every answer (in the
//! patch and as the audit annotation) and in every pod the watch reports: the part the names
//! share in front and behind is written once, around braces (`land=worker-0{3837:6,3863:6}`); a
//! single node is written whole (`land=worker-07:100`). `land=none`: no node can take the pod, so
//! it is predicted to stay Pending (versions before it wrote an empty value). Notes of the first format
//! (`nodes=node-07:0.62,node-03:0.38`, probabilities as fractions), written by older replicas,
//! are read too.
//!
//! In observe mode (`mode=observe`) `nodes` are where the scheduler is predicted to put the pod
//! on its own, and `would=node-02:0.41` names the node the webhook would have put first, with
//! the utilisation the pod would have left there. Readers ignore keys they do not know, so a
//! replica of an older version still reads the rest.

use std::fmt;

use super::ledger::PodLoad;

pub(crate) const ANNOTATION: &str = "placement-webhook.io/decision";

#[derive(Debug, Clone, PartialEq)]
pub struct DecisionNote {
    /// Ledger key: unique per steered pod (taken from the admission request uid).
    pub id: String,
    pub mode: String,
    pub(crate) load: PodLoad,
    /// Where `load` came from: `request`, or `siblings:N` running pods of the same job.
    pub(crate) estimate: String,
    /// First-tier nodes and their heat.
    pub nodes: Vec<(String, f64)>,
    /// Hot nodes named in the avoid term.
    pub(crate) avoided: usize,
    pub(crate) snapshot_age_secs: u64,
    /// Observe mode: the webhook's first choice, and the utilisation the pod would leave there.
    pub would: Option<(String, f64)>,
}

impl fmt::Display for DecisionNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "id={} mode={} cpu={} net={} est={} land=",
            self.id,
            self.mode,
            trim_float(self.load.cpu_cores),
            trim_float(self.load.network_bytes_per_second),
            self.estimate
        )?;
        write_landing(f, &self.nodes)?;
        write!(f, " avoid={} age={}s", self.avoided, self.snapshot_age_secs)?;
        if let Some((node, heat)) = &self.would {
            write!(f, " would={node}:{heat:.2}")?;
        }
        Ok(())
    }
}

/// `land=`'s value: each node with its probability in percent, the names' shared front and back
/// written once around braces when there are several.
fn write_landing(f: &mut fmt::Formatter<'_>, nodes: &[(String, f64)]) -> fmt::Result {
    match nodes {
        // No node can take it: said, not left blank.
        [] => return f.write_str(NO_LANDING),
        [(node, p)] => return write!(f, "{node}:{}", percent(*p)),
        _ => {}
    }
    let (front, back) = shared_ends(nodes.iter().map(|(n, _)| n.as_str()));
    f.write_str(front)?;
    f.write_str("{")?;
    for (i, (node, p)) in nodes.iter().enumerate() {
        if i > 0 {
            f.write_str(",")?;
        }
        let middle = &node[front.len()..node.len() - back.len()];
        write!(f, "{middle}:{}", percent(*p))?;
    }
    f.write_str("}")?;
    f.write_str(back)
}

/// A probability in whole percent, rounded as `{:.2}` rounds it (the exact binary value, ties
/// to even), so that it reads back as the same `f64` as the first format's fraction did and every
/// replica charges what it charged before.
fn percent(p: f64) -> u64 {
    use std::io::Write;
    let mut buf = [0u8; 24];
    let mut text = std::io::Cursor::new(&mut buf[..]);
    // A sum of shares may pass 1 by a rounding error; clamped, any value fits the buffer.
    if write!(text, "{:.2}", p.clamp(0.0, 1.0)).is_err() {
        return 0;
    }
    let len = text.position() as usize;
    buf[..len]
        .iter()
        .copied()
        .filter(u8::is_ascii_digit)
        .fold(0, |n, d| n * 10 + u64::from(d - b'0'))
}

/// The longest front and back every name shares, not overlapping in the shortest name and cut
/// at character boundaries.
fn shared_ends<'a>(mut names: impl Iterator<Item = &'a str> + Clone) -> (&'a str, &'a str) {
    let Some(first) = names.next() else {
        return ("", "");
    };
    let mut front = first.len();
    let mut back = first.len();
    let mut shortest = first.len();
    for name in names {
        front = common_len(first.bytes(), name.bytes()).min(front);
        back = common_len(first.bytes().rev(), name.bytes().rev()).min(back);
        shortest = shortest.min(name.len());
    }
    let front = floor_boundary(first, front.min(shortest));
    let back = back.min(shortest - front);
    let back_start = ceil_boundary(first, first.len() - back);
    (&first[..front], &first[back_start..])
}

fn common_len(a: impl Iterator<Item = u8>, b: impl Iterator<Item = u8>) -> usize {
    a.zip(b).take_while(|(x, y)| x == y).count()
}

fn floor_boundary(s: &str, mut at: usize) -> usize {
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn ceil_boundary(s: &str, mut at: usize) -> usize {
    while !s.is_char_boundary(at) {
        at += 1;
    }
    at
}

/// `land=`'s value when the scheduler is predicted to place the pod nowhere (it stays Pending).
/// No node name can be mistaken for it: a single node is always written with `:` and its share.
const NO_LANDING: &str = "none";

/// Reads `land=`'s value back.
fn parse_landing(value: &str) -> Option<Vec<(String, f64)>> {
    if value == NO_LANDING || value.is_empty() {
        return Some(Vec::new());
    }
    let (front, entries, back) = match value.split_once('{') {
        Some((front, rest)) => {
            let (entries, back) = rest.rsplit_once('}')?;
            (front, entries, back)
        }
        None => ("", value, ""),
    };
    entries
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|entry| {
            let (middle, percent) = entry.rsplit_once(':')?;
            let p = finite(percent)? / 100.0;
            Some((format!("{front}{middle}{back}"), p))
        })
        .collect()
}

fn trim_float(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

impl DecisionNote {
    /// Reads an annotation written by `Display`; `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        let mut note = DecisionNote {
            id: String::new(),
            mode: String::new(),
            load: PodLoad::default(),
            estimate: String::new(),
            nodes: Vec::new(),
            avoided: 0,
            snapshot_age_secs: 0,
            would: None,
        };
        for field in text.split_whitespace() {
            let (key, value) = field.split_once('=')?;
            match key {
                "id" => note.id = value.to_string(),
                "mode" => note.mode = value.to_string(),
                "cpu" => note.load.cpu_cores = finite(value)?,
                "net" => note.load.network_bytes_per_second = finite(value)?,
                "est" => note.estimate = value.to_string(),
                "land" => note.nodes = parse_landing(value)?,
                // The first format, written by older replicas.
                "nodes" => {
                    note.nodes = value
                        .split(',')
                        .filter(|s| !s.is_empty())
                        .map(|pair| {
                            let (node, heat) = pair.rsplit_once(':')?;
                            Some((node.to_string(), finite(heat)?))
                        })
                        .collect::<Option<_>>()?;
                }
                "avoid" => note.avoided = value.parse().ok()?,
                "age" => note.snapshot_age_secs = value.strip_suffix('s')?.parse().ok()?,
                "would" => {
                    let (node, heat) = value.rsplit_once(':')?;
                    note.would = Some((node.to_string(), finite(heat)?));
                }
                _ => {}
            }
        }
        (!note.id.is_empty()).then_some(note)
    }
}

fn finite(v: &str) -> Option<f64> {
    v.parse::<f64>().ok().filter(|x| x.is_finite() && *x >= 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let note = DecisionNote {
            id: "3f2a9c01b7de".into(),
            mode: "affinity".into(),
            load: PodLoad {
                cpu_cores: 2.5,
                network_bytes_per_second: 0.0,
            },
            estimate: "siblings:4".into(),
            nodes: vec![("node-07".into(), 0.12), ("node-03".into(), 0.15)],
            avoided: 3,
            snapshot_age_secs: 4,
            would: None,
        };
        let text = note.to_string();
        assert_eq!(
            text,
            "id=3f2a9c01b7de mode=affinity cpu=2.5 net=0 est=siblings:4 land=node-0{7:12,3:15} avoid=3 age=4s"
        );
        assert!(!text.contains('\n'));
        assert_eq!(DecisionNote::parse(&text), Some(note));
    }

    fn with_landing(nodes: &[(&str, f64)]) -> DecisionNote {
        DecisionNote {
            id: "9c01".into(),
            mode: "affinity".into(),
            load: PodLoad {
                cpu_cores: 2.0,
                network_bytes_per_second: 0.0,
            },
            estimate: "request".into(),
            nodes: nodes.iter().map(|(n, p)| (n.to_string(), *p)).collect(),
            avoided: 0,
            snapshot_age_secs: 0,
            would: None,
        }
    }

    #[test]
    fn the_landing_writes_what_the_names_share_once() {
        for (nodes, written) in [
            (vec![], "land=none "),
            (vec![("none", 1.0)], "land=none:100 "),
            (vec![("worker-07", 1.0)], "land=worker-07:100 "),
            (
                vec![
                    ("worker-03837", 0.06),
                    ("worker-03863", 0.06),
                    ("worker-03229", 0.03),
                ],
                "land=worker-03{837:6,863:6,229:3} ",
            ),
            (
                vec![
                    ("ip-10-0-12-34.ec2.internal", 0.5),
                    ("ip-10-0-7-201.ec2.internal", 0.5),
                ],
                "land=ip-10-0-{12-34:50,7-201:50}.ec2.internal ",
            ),
            // Nothing shared; a name that is all front and back; fronts and backs that would
            // overlap in the shortest name.
            (vec![("a", 0.25), ("b", 0.75)], "land={a:25,b:75} "),
            (vec![("ab", 0.5), ("abab", 0.5)], "land=ab{:50,ab:50} "),
            (vec![("aa", 0.5), ("aaa", 0.5)], "land=aa{:50,a:50} "),
            (
                vec![("née-1", 0.5), ("née-2", 0.5)],
                "land=née-{1:50,2:50} ",
            ),
            // A shared first byte that is not a whole character stays inside the braces.
            (vec![("é1", 0.5), ("è1", 0.5)], "land={é:50,è:50}1 "),
        ] {
            let note = with_landing(&nodes);
            let text = note.to_string();
            assert!(text.contains(written), "{text}");
            assert_eq!(DecisionNote::parse(&text), Some(note), "{text}");
        }
    }

    #[test]
    fn the_landing_keeps_two_decimals_of_each_probability() {
        let shares = [0.004, 0.333, 0.663, 0.125, 0.375, 1.0 + 1e-12];
        let nodes: Vec<(String, f64)> = (0..shares.len())
            .map(|i| (format!("n-{i}"), shares[i]))
            .collect();
        let note = DecisionNote {
            nodes,
            ..with_landing(&[])
        };
        let parsed = DecisionNote::parse(&note.to_string()).expect("a note");
        let read: Vec<f64> = parsed.nodes.iter().map(|(_, p)| *p).collect();
        // As the first format wrote and read them, bit for bit: 0.125 is written 0.12.
        let first_format: Vec<f64> = shares
            .iter()
            .map(|p| format!("{p:.2}").parse::<f64>().expect("a number"))
            .collect();
        assert_eq!(read, first_format);
        assert_eq!(read, [0.0, 0.33, 0.66, 0.12, 0.38, 1.0]);
    }

    #[test]
    fn an_empty_landing_of_an_older_version_is_read() {
        let text = "id=9c01 mode=affinity cpu=2 net=0 est=request land= avoid=0 age=1s";
        let note = DecisionNote::parse(text).expect("a note");
        assert!(note.nodes.is_empty(), "{note:?}");
        assert!(note.to_string().contains(" land=none avoid=0 "), "{note}");
    }

    #[test]
    fn an_older_replicas_note_is_read() {
        let text = "id=3f2a9c01b7de mode=affinity cpu=2.5 net=0 est=siblings:4 nodes=node-07:0.12,node-03:0.15 avoid=3 age=4s";
        let note = DecisionNote::parse(text).expect("a note of the first format");
        assert_eq!(
            note.nodes,
            [("node-07".to_string(), 0.12), ("node-03".to_string(), 0.15)]
        );
        assert_eq!(note.avoided, 3);
    }

    #[test]
    fn an_observed_decision_names_the_webhooks_choice() {
        let note = DecisionNote {
            id: "9c01".into(),
            mode: "observe".into(),
            load: PodLoad {
                cpu_cores: 2.0,
                network_bytes_per_second: 0.0,
            },
            estimate: "request".into(),
            nodes: vec![("node-11".into(), 1.0)],
            avoided: 0,
            snapshot_age_secs: 1,
            would: Some(("node-02".into(), 0.41)),
        };
        let text = note.to_string();
        assert!(
            text.ends_with(" land=node-11:100 avoid=0 age=1s would=node-02:0.41"),
            "{text}"
        );
        assert_eq!(DecisionNote::parse(&text), Some(note));
        // A reader that predates `would` still takes the rest.
        let older = text.replace(" would=node-02:0.41", " later=key");
        assert_eq!(
            DecisionNote::parse(&older).map(|n| n.nodes),
            Some(vec![("node-11".into(), 1.0)])
        );
    }

    #[test]
    fn foreign_text_is_not_a_note() {
        for text in [
            "",
            "hello",
            "mode=affinity",
            "id=x cpu=NaN",
            "id=x nodes=a:b",
            "id=x land=a:b",
            "id=x land=a{b:1",
            "id=x land=a{b}",
        ] {
            assert_eq!(DecisionNote::parse(text), None, "{text}");
        }
    }
}
