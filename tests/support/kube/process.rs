//! A child process with its output in a log file, killed by its pid when dropped (a test that
//! panics still stops what it started).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

pub struct Process {
    name: String,
    command: Vec<String>,
    envs: Vec<(String, String)>,
    log: PathBuf,
    child: Option<Child>,
}

impl Process {
    /// Starts `program args...` with stdout and stderr appended to `log`.
    pub fn spawn(
        name: &str,
        program: &Path,
        args: &[String],
        envs: &[(String, String)],
        log: PathBuf,
    ) -> Process {
        let mut command = vec![program.display().to_string()];
        command.extend(args.iter().cloned());
        let mut process = Process {
            name: name.to_string(),
            command,
            envs: envs.to_vec(),
            log,
            child: None,
        };
        process.start();
        process
    }

    /// Starts it again with the same command line (after [`Process::stop`]).
    pub fn start(&mut self) {
        assert!(self.child.is_none(), "{} is running already", self.name);
        let out = File::options()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap_or_else(|e| panic!("log file {}: {e}", self.log.display()));
        let err = out.try_clone().expect("log file handle");
        let child = Command::new(&self.command[0])
            .args(&self.command[1..])
            .envs(self.envs.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("start {} ({}): {e}", self.name, self.command[0]));
        self.child = Some(child);
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| c.try_wait().ok().flatten().is_none())
    }

    /// Panics with the end of its log when it has exited.
    pub fn assert_running(&mut self) {
        if let Some(status) = self
            .child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
        {
            panic!("{} exited ({status}):\n{}", self.name, self.log_tail(60));
        }
    }

    /// Kills it (SIGKILL) and waits for it.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Asks it to stop (SIGTERM) and waits for it to exit.
    pub fn terminate(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let _ = child.wait();
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn log_tail(&self, lines: usize) -> String {
        let log = self.log();
        let all: Vec<&str> = log.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The resident memory of process `pid`, in MiB (Linux).
pub fn rss_mib(pid: Option<u32>) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{}/status", pid?)).ok()?;
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib / 1024.0)
}

/// The CPU time process `pid` has used, user and system, in seconds (Linux, 100 ticks a
/// second as every Linux build the tests run on has).
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command (which may hold spaces) start after its closing parenthesis.
    let after = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after the command.
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}
