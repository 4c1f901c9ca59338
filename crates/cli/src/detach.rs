//! `tessera up --detach` and `tessera down`: the platform as a background process of its own
//! (its own process group, so a terminal's Ctrl-C does not reach it), started and stopped by
//! data directory. The started process is the same binary running `tessera up` in the
//! foreground; readiness is its banner on stdout, which `up` prints only once every node twin
//! has registered, so a detached start returns when `kubectl get nodes` shows the whole lab.
//!
//! Knows nothing of what the platform runs; the data directory's lock file says who holds it.

use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;

use crate::data_dir;
use crate::up::BANNER_END;

/// The log file of a detached platform, inside its data directory.
pub const LOG_FILE: &str = "tessera.log";

/// How long `down` waits for the platform to release its data directory.
const STOP_WAIT: Duration = Duration::from_secs(30);

/// The arguments of this `tessera up --detach` for the foreground child: the same, less
/// `--detach`.
fn child_arguments(arguments: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    arguments
        .into_iter()
        .skip(1)
        .filter(|a| a != "--detach")
        .collect()
}

/// Starts `tessera up` in the background on `data_dir` and returns once it serves, echoing
/// its banner; fails with the log's last lines when it stops first.
pub fn start(data_dir: &Path) -> anyhow::Result<()> {
    let data_dir =
        std::path::absolute(data_dir).with_context(|| format!("resolve {}", data_dir.display()))?;
    if let Some(pid) = data_dir::holder(&data_dir)? {
        anyhow::bail!(
            "a tessera is already running on {} (PID {pid}); stop it with `tessera down --data-dir {}`",
            data_dir.display(),
            data_dir.display()
        );
    }
    data_dir::create_private(&data_dir)?;
    let log_path = data_dir.join(LOG_FILE);
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .with_context(|| format!("open {}", log_path.display()))?;
    let program = std::env::current_exe().context("find the tessera binary")?;
    let mut child = {
        use std::os::unix::process::CommandExt;
        Command::new(&program)
            .args(child_arguments(std::env::args_os()))
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .process_group(0)
            .spawn()
            .with_context(|| format!("start {}", program.display()))?
    };
    let stdout = child.stdout.take().context("the platform's stdout")?;
    for line in BufReader::new(stdout).lines() {
        let line = line.context("read the platform's banner")?;
        if line.starts_with(BANNER_END) {
            println!(
                "Running in the background (PID {}); logs in {}.\nStop it with: tessera down --data-dir {}",
                child.id(),
                log_path.display(),
                data_dir.display()
            );
            return Ok(());
        }
        println!("{line}");
    }
    let status = child.wait().context("wait for the platform")?;
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    let tail: Vec<&str> = log.lines().rev().take(10).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    anyhow::bail!(
        "tessera up stopped before it was ready ({status}); the end of {}:\n{}",
        log_path.display(),
        tail.join("\n")
    )
}

/// Stops the platform running on `data_dir` (SIGTERM, as Ctrl-C) and waits until it has
/// released the directory; a directory nobody runs on is already stopped.
pub fn stop(data_dir: &Path) -> anyhow::Result<()> {
    let data_dir =
        std::path::absolute(data_dir).with_context(|| format!("resolve {}", data_dir.display()))?;
    let Some(pid) = data_dir::holder(&data_dir)? else {
        println!("No tessera is running on {}.", data_dir.display());
        return Ok(());
    };
    let process = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .with_context(|| format!("PID {pid} in {}", data_dir.display()))?;
    rustix::process::kill_process(process, rustix::process::Signal::TERM)
        .with_context(|| format!("stop tessera (PID {pid})"))?;
    let deadline = Instant::now() + STOP_WAIT;
    while data_dir::holder(&data_dir)?.is_some() {
        if Instant::now() > deadline {
            anyhow::bail!(
                "tessera (PID {pid}) did not stop within {} s; its log: {}",
                STOP_WAIT.as_secs(),
                data_dir.join(LOG_FILE).display()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    println!(
        "Stopped tessera (PID {pid}); its state stays in {} (`rm -rf` it to start afresh).",
        data_dir.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_child_runs_the_same_command_in_the_foreground() {
        let given = [
            "tessera",
            "up",
            "--detach",
            "--data-dir",
            "./lab",
            "--reset",
        ];
        let child = child_arguments(given.iter().map(OsString::from));
        assert_eq!(child, ["up", "--data-dir", "./lab", "--reset"]);
    }
}
