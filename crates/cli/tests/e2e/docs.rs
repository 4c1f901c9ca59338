//! Documentation that is tested: every command block of README.md and docs/**/*.md runs, in
//! page order, as a newcomer would type it — a fresh home directory (so `~/.local/share/tessera`
//! is a new platform's), `tessera` and `kubectl` (bundled 1.33) on PATH, the repository's
//! `examples/` and `data/` beside the working directory — and the output each page promises
//! is checked. The conventions are in `doc_blocks.rs` and docs/README.md.
//!
//! A page starts its own platform (`tessera up --detach`) and says how to stop it; whatever
//! it leaves running is stopped when its test ends, pass or fail.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::doc_blocks::{Step, missing, steps};
use crate::support::kubectl_binary;

/// How long one block may run (debug build, two cores).
const BLOCK_LIMIT: Duration = Duration::from_secs(600);

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository root")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A newcomer's machine for one page.
struct Desk {
    home: tempfile::TempDir,
    work: PathBuf,
    bin: PathBuf,
    state: PathBuf,
    port: u16,
}

impl Desk {
    fn new() -> Desk {
        let home = tempfile::tempdir().expect("tempdir");
        let work = home.path().join("work");
        let bin = home.path().join("bin");
        let state = home.path().join("shell-state");
        for dir in [&work, &bin, &state] {
            std::fs::create_dir_all(dir).expect("create dir");
        }
        let link = |from: &Path, to: &Path| {
            std::os::unix::fs::symlink(from, to).expect("symlink");
        };
        link(
            Path::new(env!("CARGO_BIN_EXE_tessera")),
            &bin.join("tessera"),
        );
        link(&kubectl_binary("1.33"), &bin.join("kubectl"));
        for shared in ["examples", "data"] {
            link(&repository().join(shared), &work.join(shared));
        }
        std::fs::write(state.join("cwd"), work.to_string_lossy().as_bytes()).expect("cwd");
        std::fs::write(state.join("env"), "").expect("env");
        Desk {
            home,
            work,
            bin,
            state,
            port: free_port(),
        }
    }

    /// Runs one block as a bash script; the shell's exported variables and directory carry
    /// over to the next block, as in one terminal.
    fn run(&self, script: &str) -> (bool, String) {
        let state = self.state.display();
        let wrapped = format!(
            "set -e\nsource {state}/env\ncd \"$(cat {state}/cwd)\"\n{script}\n\
             export -p > {state}/env\npwd > {state}/cwd\n"
        );
        let path = std::env::var("PATH").unwrap_or_default();
        // One open file for both streams, so that their lines interleave as on a terminal.
        let output = tempfile::NamedTempFile::new().expect("output file");
        let stdout = output.reopen().expect("reopen");
        let stderr = stdout.try_clone().expect("clone");
        let mut child = Command::new("bash")
            .arg("-c")
            .arg(wrapped)
            .env_clear()
            .env("HOME", self.home.path())
            .env("PATH", format!("{}:{path}", self.bin.display()))
            .env("TESSERA_LISTEN", format!("127.0.0.1:{}", self.port))
            .env("NO_COLOR", "1")
            .env("LANG", "C.UTF-8")
            .env("TERM", "dumb")
            .current_dir(&self.work)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .expect("run bash");
        let deadline = Instant::now() + BLOCK_LIMIT;
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait for bash") {
                break Some(status);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let text = std::fs::read_to_string(output.path()).unwrap_or_default();
        match status {
            Some(status) => (status.success(), text),
            None => (false, format!("{text}\n[timed out after {BLOCK_LIMIT:?}]")),
        }
    }

    /// Stops every platform the page started and left running (their data directories'
    /// lock files name them).
    fn stop_leftovers(&self) {
        let found = Command::new("find")
            .arg(self.home.path())
            .args(["-name", "tessera.lock"])
            .output()
            .expect("find");
        for lock in String::from_utf8_lossy(&found.stdout).lines() {
            let dir = Path::new(lock).parent().expect("lock file's directory");
            let _ = Command::new(env!("CARGO_BIN_EXE_tessera"))
                .arg("down")
                .arg("--data-dir")
                .arg(dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

impl Drop for Desk {
    fn drop(&mut self) {
        self.stop_leftovers();
    }
}

/// How many times a page is run again on another port when the one it was given was taken
/// before its platform bound it (the port is picked free, then released).
const PORT_ATTEMPTS: usize = 3;

/// Runs `page` (relative to the repository root) as its reader would.
fn run_page(page: &str) {
    let path = repository().join(page);
    let text = std::fs::read_to_string(&path).expect("read page");
    let steps = steps(&text).unwrap_or_else(|m| panic!("{page}:{}: {}", m.line, m.message));
    for attempt in 1..=PORT_ATTEMPTS {
        let Err(taken) = run_steps(page, &steps, &Desk::new()) else {
            return;
        };
        assert!(attempt < PORT_ATTEMPTS, "{taken}");
        eprintln!("{page}: the platform's port was taken; running the page again on another");
    }
}

/// Runs the steps of `page` on `desk`; a step that fails because the port picked for the
/// platform was taken meanwhile is an error (the failure), any other failure panics.
fn run_steps(page: &str, steps: &[Step], desk: &Desk) -> Result<(), String> {
    for step in steps {
        match step {
            Step::Skip { line, why } => eprintln!("{page}:{line}: not run: {why}"),
            Step::ShowsFile {
                line,
                path,
                content,
            } => {
                let shipped =
                    std::fs::read_to_string(repository().join(path)).unwrap_or_else(|e| {
                        panic!("{page}:{line}: shows {path}, which cannot be read: {e}")
                    });
                assert_eq!(
                    content.trim_end(),
                    shipped.trim_end(),
                    "{page}:{line}: the block differs from {path}"
                );
            }
            Step::Run {
                line,
                script,
                expected,
                must_fail,
            } => {
                let (succeeded, output) = desk.run(script);
                if !succeeded && !*must_fail && output.contains("Address already in use") {
                    return Err(format!(
                        "{page}:{line}: the block failed, its port taken:\n{script}\n--- output ---\n{output}"
                    ));
                }
                assert!(
                    succeeded != *must_fail,
                    "{page}:{line}: the block {} :\n{script}\n--- output ---\n{output}",
                    if *must_fail {
                        "succeeded but the page says it fails"
                    } else {
                        "failed"
                    }
                );
                if let Some(absent) = missing(expected, &output) {
                    panic!(
                        "{page}:{line}: the output lacks {absent:?} (the page promises, in order: {expected:#?})\n--- script ---\n{script}\n--- output ---\n{output}"
                    );
                }
            }
        }
    }
    Ok(())
}

/// Pages with command blocks, each tested below; a new page must be added here.
const PAGES: &[&str] = &[
    "README.md",
    "docs/benchmarks.md",
    "docs/lab/device-plugin-vs-dra.md",
    "docs/lab/maintenance.md",
    "docs/lab/models.md",
    "docs/lab/networks.md",
    "docs/lab/serving.md",
    "docs/lab/tenant.md",
    "docs/lab/two-teams.md",
    "docs/lab/worker-models.md",
    "docs/queueing.md",
    "docs/runbooks/device-loss.md",
    "docs/runbooks/node-notready.md",
    "docs/runbooks/operator.md",
    "docs/runbooks/pending.md",
    "docs/sim.md",
];

#[test]
fn every_page_with_commands_is_tested() {
    let found = Command::new("git")
        .args([
            "ls-files",
            "--cached",
            "--others",
            "--exclude-standard",
            "README.md",
            "docs",
        ])
        .current_dir(repository())
        .output()
        .expect("git ls-files");
    let mut with_commands: Vec<String> = String::from_utf8_lossy(&found.stdout)
        .lines()
        .filter(|p| p.ends_with(".md"))
        .filter(|p| {
            let text = std::fs::read_to_string(repository().join(p)).unwrap_or_default();
            steps(&text).is_ok_and(|s| !s.is_empty())
        })
        .map(str::to_string)
        .collect();
    with_commands.sort();
    with_commands.dedup();
    let mut tested: Vec<String> = PAGES.iter().map(|p| p.to_string()).collect();
    tested.sort();
    assert_eq!(
        with_commands, tested,
        "add the page to PAGES and a test for it"
    );
}

#[test]
fn docs_readme_runs_as_written() {
    run_page("README.md");
}

#[test]
fn docs_runbook_device_loss_runs_as_written() {
    run_page("docs/runbooks/device-loss.md");
}

#[test]
fn docs_runbook_node_notready_runs_as_written() {
    run_page("docs/runbooks/node-notready.md");
}

#[test]
fn docs_runbook_operator_runs_as_written() {
    run_page("docs/runbooks/operator.md");
}

#[test]
fn docs_runbook_pending_runs_as_written() {
    run_page("docs/runbooks/pending.md");
}

#[test]
fn docs_benchmarks_run_as_written() {
    run_page("docs/benchmarks.md");
}

#[test]
fn docs_lab_device_plugin_vs_dra_runs_as_written() {
    run_page("docs/lab/device-plugin-vs-dra.md");
}

#[test]
fn docs_lab_maintenance_runs_as_written() {
    run_page("docs/lab/maintenance.md");
}

#[test]
fn docs_lab_models_runs_as_written() {
    run_page("docs/lab/models.md");
}

#[test]
fn docs_lab_two_teams_runs_as_written() {
    run_page("docs/lab/two-teams.md");
}

#[test]
fn docs_lab_serving_runs_as_written() {
    run_page("docs/lab/serving.md");
}

#[test]
fn docs_lab_networks_runs_as_written() {
    run_page("docs/lab/networks.md");
}

#[test]
fn docs_lab_tenant_runs_as_written() {
    run_page("docs/lab/tenant.md");
}

#[test]
fn docs_lab_worker_models_runs_as_written() {
    run_page("docs/lab/worker-models.md");
}

#[test]
fn docs_queueing_runs_as_written() {
    run_page("docs/queueing.md");
}

#[test]
fn docs_sim_runs_as_written() {
    run_page("docs/sim.md");
}
