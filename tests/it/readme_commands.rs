//! Every command of the README and of `docs/*.md` that needs no cluster and no network still
//! works as written: the fenced `sh`/`bash` blocks are read, and each line that runs this
//! binary (`cargo run --release -- ...` or `placement-webhook ...`) or a repository script
//! (`python3 benches/...`) is run with the same arguments. Lines that need a cluster, Prometheus,
//! docker, or that build and test (`kubectl`, `curl`, `promtool`, `docker`, `kustomize`,
//! `cargo test`, `cargo bench`, `bash .ci/...`) are skipped. Files a command writes (`--svg`,
//! `--out`, a `>` redirect, a generator's output) go to a temporary directory, never into the
//! repository.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_placement-webhook");

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The documents whose commands are checked: the README and every `docs/*.md`.
fn documents() -> Vec<PathBuf> {
    let mut docs = vec![repo().join("README.md")];
    let mut more: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .expect("docs/")
        .map(|e| e.expect("docs entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    more.sort();
    docs.extend(more);
    docs
}

/// The command lines of the fenced `sh`/`bash` blocks, continuation lines joined, comments and
/// blank lines dropped.
fn shell_lines(text: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut in_block = false;
    let mut pending = String::new();
    for line in text.lines() {
        let fence = line.trim_start();
        if let Some(info) = fence.strip_prefix("```") {
            if in_block {
                in_block = false;
            } else {
                in_block = matches!(info.trim(), "sh" | "bash" | "shell" | "console");
            }
            continue;
        }
        if !in_block {
            continue;
        }
        let line = line.trim();
        if let Some(head) = line.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
            continue;
        }
        pending.push_str(line);
        let full = std::mem::take(&mut pending);
        let full = strip_comment(&full).trim().to_string();
        if !full.is_empty() {
            lines.push(full);
        }
    }
    lines
}

/// Drops a trailing `# comment` (a `#` at the start of a word, outside quotes).
fn strip_comment(line: &str) -> &str {
    let mut quote = None;
    let mut prev = ' ';
    for (i, c) in line.char_indices() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => quote = Some(c),
            None if c == '#' && prev.is_whitespace() => return &line[..i],
            None => {}
        }
        prev = c;
    }
    line
}

#[derive(Debug)]
enum Program {
    /// This binary, with these arguments.
    Webhook(Vec<String>),
    /// `python3` with a script of the repository.
    Python(Vec<String>),
}

/// What a line runs, or `None` for a line that needs a cluster, Prometheus, docker, or is a
/// build or test command.
fn runnable(line: &str) -> Option<Program> {
    let words: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    match words.first().map(String::as_str) {
        Some("cargo") => {
            let dash = words.iter().position(|w| w == "--")?;
            (words.get(1).map(String::as_str) == Some("run"))
                .then(|| Program::Webhook(words[dash + 1..].to_vec()))
        }
        Some("placement-webhook") => Some(Program::Webhook(words[1..].to_vec())),
        Some("python3") if words.get(1).is_some_and(|s| s.starts_with("benches/")) => {
            Some(Program::Python(words[1..].to_vec()))
        }
        _ => None,
    }
    .filter(|program| match program {
        // `serve` runs until stopped; it is tested elsewhere.
        Program::Webhook(args) => args.first().is_some_and(|c| c != "serve"),
        Program::Python(_) => true,
    })
}

/// Runs the documented commands in order, in a scratch directory for what they write.
struct Runner {
    scratch: tempfile::TempDir,
    /// Paths the commands wrote, as written in the docs → where they really are.
    written: HashMap<String, PathBuf>,
}

impl Runner {
    fn output(&mut self, arg: &str) -> PathBuf {
        let path = self.scratch.path().join(arg.trim_start_matches('/'));
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("scratch dir");
        }
        self.written.insert(arg.to_string(), path.clone());
        path
    }

    fn input(&self, arg: &str) -> String {
        if let Some(path) = self.written.get(arg) {
            return path.display().to_string();
        }
        let in_repo = repo().join(arg);
        if !arg.starts_with('-') && Path::new(arg).is_relative() && in_repo.exists() {
            in_repo.display().to_string()
        } else {
            arg.to_string()
        }
    }

    /// Arguments with inputs resolved against the repository and outputs sent to the scratch
    /// directory; the redirect target of `> FILE`, if any.
    fn arguments(
        &mut self,
        words: &[String],
        outputs_last: bool,
    ) -> (Vec<String>, Option<PathBuf>) {
        let mut args = Vec::new();
        let mut stdout = None;
        let mut i = 0;
        while i < words.len() {
            let word = &words[i];
            if word == ">" {
                stdout = Some(self.output(&words[i + 1]));
                i += 2;
                continue;
            }
            if matches!(word.as_str(), "--svg" | "--out") && i + 1 < words.len() {
                let out = self.output(&words[i + 1]);
                if word == "--out" {
                    std::fs::create_dir_all(&out).expect("scratch out dir");
                }
                args.push(word.clone());
                args.push(out.display().to_string());
                i += 2;
                continue;
            }
            let last = i + 1 == words.len() || words[i + 1] == ">";
            if i == 0 && !outputs_last {
                // The subcommand: a word, not a path (there is a `certs/` directory).
                args.push(word.clone());
            } else if outputs_last && last && i > 0 {
                args.push(self.output(word).display().to_string());
            } else {
                args.push(self.input(word));
            }
            i += 1;
        }
        (args, stdout)
    }

    fn run(&mut self, doc: &Path, line: &str, program: Program) {
        let (mut command, args, stdout) = match program {
            Program::Webhook(words) => {
                let (args, stdout) = self.arguments(&words, false);
                (Command::new(BIN), args, stdout)
            }
            Program::Python(words) => {
                let (args, stdout) = self.arguments(&words, true);
                (Command::new("python3"), args, stdout)
            }
        };
        command
            .args(&args)
            .current_dir(self.scratch.path())
            .env("RUST_LOG", "off")
            .env("KUBECONFIG", "/nonexistent/kubeconfig")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("KUBERNETES_SERVICE_PORT");
        let output = command
            .output()
            .unwrap_or_else(|e| panic!("{}: cannot run `{line}`: {e}", doc.display()));
        assert!(
            output.status.success(),
            "{}: `{line}` (run as {args:?}) exited with {}\nstdout:\n{}\nstderr:\n{}",
            doc.display(),
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        if let Some(path) = stdout {
            std::fs::write(path, &output.stdout).expect("redirected output");
        }
    }
}

#[test]
fn documented_commands_run_as_written() {
    let mut ran = Vec::new();
    for doc in documents() {
        let text = std::fs::read_to_string(&doc).expect("document");
        // Each document starts from a clean scratch directory: its commands may build on each
        // other (a generated snapshot, then a simulation of it), not on another document's.
        let mut runner = Runner {
            scratch: tempfile::tempdir().expect("scratch"),
            written: HashMap::new(),
        };
        for line in shell_lines(&text) {
            if let Some(program) = runnable(&line) {
                runner.run(&doc, &line, program);
                ran.push(format!("{}: {line}", doc.display()));
            }
        }
    }
    let readme_review = ran
        .iter()
        .any(|l| l.contains("README.md") && l.contains("-- review "));
    let readme_simulate = ran
        .iter()
        .any(|l| l.contains("README.md") && l.contains("-- simulate "));
    assert!(
        readme_review && readme_simulate,
        "the README's review and simulate commands were not found among the runnable ones: {ran:#?}"
    );
    eprintln!("ran {} documented commands:\n{}", ran.len(), ran.join("\n"));
}

#[test]
fn shell_blocks_are_read() {
    let text = "text\n```bash\n# a comment\ncargo run --release -- review a.json --explain  # why\nkubectl apply -k deploy\nplacement-webhook certs --service s \\\n  --out certs/out > certs/out/b64\n```\n```\ncargo run -- not shell\n```\n";
    let lines = shell_lines(text);
    assert_eq!(
        lines,
        [
            "cargo run --release -- review a.json --explain",
            "kubectl apply -k deploy",
            "placement-webhook certs --service s  --out certs/out > certs/out/b64",
        ]
    );
    assert!(runnable(&lines[0]).is_some());
    assert!(runnable(&lines[1]).is_none());
    assert!(runnable("cargo test --test it closed_loop:: -- --nocapture").is_none());
    assert!(runnable("PROPTEST_EXPLORE=1 cargo test --test x").is_none());
}
