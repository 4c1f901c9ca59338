//! Starting `tessera up` in a temporary directory and running kubectl against it.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A running `tessera up`.
pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub port: u16,
    child: Option<Child>,
    /// Nodes the topology has: start-up waits until they are registered.
    nodes: usize,
    /// Environment variables the server process gets besides the test's own.
    env: Vec<(String, String)>,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The directory holding the bundled kubectl binaries (`kubectl.1.32`, …).
fn kubectl_dir() -> PathBuf {
    let output = Command::new("sh")
        .args(["-c", "readlink -f \"$(command -v kubectl)\""])
        .output()
        .expect("run sh");
    let path = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    path.parent().map(Path::to_path_buf).unwrap_or_default()
}

/// Two plain CPU nodes: enough for tests of the network, Gateways and model servers.
pub const TWO_CPU_NODES: &str = r#"apiVersion: tessera.dev/v1alpha1
kind: ClusterTopology
pools:
- name: cpu
  count: 2
  capacity: {cpu: "16", memory: 64Gi, pods: "110"}
"#;

/// A finished command as (succeeded, stdout, stderr).
pub fn outcome(output: Output) -> (bool, String, String) {
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Runs `python3` with `args` (a script, or `-c` and its code, then the script's arguments)
/// and returns its stdout, failing the test with its stderr — saying how to install the
/// official client when it is missing.
pub fn python<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Vec<u8> {
    let output = Command::new("python3")
        .args(args)
        .output()
        .expect("run python3");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains("No module named 'kubernetes'"),
        "the Python client is missing: run `python3 -m pip install -r requirements-test.txt`"
    );
    assert!(output.status.success(), "python3 failed:\n{stderr}");
    output.stdout
}

/// The path of a bundled kubectl version, e.g. `1.32`.
pub fn kubectl_binary(version: &str) -> PathBuf {
    let binary = kubectl_dir().join(format!("kubectl.{version}"));
    assert!(
        binary.exists(),
        "{} not found: these tests need the gcloud kubectl dispatcher with its bundled kubectl versions on PATH",
        binary.display()
    );
    binary
}

impl Cluster {
    /// Starts a fresh cluster.
    /// The platform on the built-in lab topology (eight nodes).
    pub fn start() -> Cluster {
        Cluster::start_on(None, 8)
    }

    /// The platform on a topology file with `nodes` nodes.
    pub fn start_with_topology(topology: &str, nodes: usize) -> Cluster {
        Cluster::start_on(Some(topology), nodes)
    }

    /// The platform on the built-in lab with extra `tessera up` flags.
    pub fn start_with_args(extra: &[&str]) -> Cluster {
        let mut cluster = Cluster::empty(8);
        cluster.launch(extra);
        cluster
    }

    /// The platform on the built-in lab with extra `tessera up` flags and environment.
    pub fn start_with_env(extra: &[&str], env: &[(&str, &str)]) -> Cluster {
        let mut cluster = Cluster::empty(8);
        cluster.env = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        cluster.launch(extra);
        cluster
    }

    fn empty(nodes: usize) -> Cluster {
        Cluster {
            dir: tempfile::tempdir().expect("tempdir"),
            port: free_port(),
            child: None,
            nodes,
            env: Vec::new(),
        }
    }

    fn start_on(topology: Option<&str>, nodes: usize) -> Cluster {
        let mut cluster = Cluster::empty(nodes);
        match topology {
            Some(text) => {
                let path = cluster.dir.path().join("topology.yaml");
                std::fs::write(&path, text).expect("write topology");
                let path = path.to_string_lossy().into_owned();
                cluster.launch(&["--topology", &path]);
            }
            None => cluster.launch(&[]),
        }
        cluster
    }

    /// Starts (or restarts) the server process on the cluster's directory and port. A port
    /// another process took between `free_port` and the server's bind is replaced by a new
    /// one (tests start many servers at once).
    pub fn launch(&mut self, extra: &[&str]) {
        for _ in 0..3 {
            if self.try_launch(extra) {
                return;
            }
            self.port = free_port();
        }
        panic!("tessera found no free port:\n{}", self.server_log());
    }

    /// One start; `false` when the port was taken.
    fn try_launch(&mut self, extra: &[&str]) -> bool {
        let kubeconfig = self.kubeconfig();
        let _ = std::fs::remove_file(&kubeconfig);
        let log_path = self.dir.path().join("server.log");
        let logged_before = std::fs::metadata(&log_path).map_or(0, |m| m.len());
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .expect("server log");
        let child = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .arg("up")
            .arg("--data-dir")
            .arg(self.dir.path())
            .arg("--listen")
            .arg(format!("127.0.0.1:{}", self.port))
            .args(extra)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .env("TESSERA_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start tessera");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(_)) = child.try_wait()
            {
                let log = std::fs::read(&log_path).unwrap_or_default();
                let this_run = String::from_utf8_lossy(
                    log.get(usize::try_from(logged_before).unwrap_or(0)..)
                        .unwrap_or_default(),
                );
                if this_run.contains("Address already in use") {
                    self.child = None;
                    return false;
                }
                panic!("tessera exited at start:\n{}", self.server_log());
            }
            if kubeconfig.exists() && std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok()
            {
                // Wait until the node twins have registered.
                let nodes = self.kubectl("1.32", &["get", "nodes", "-o", "name"]);
                if nodes.status.success()
                    && String::from_utf8_lossy(&nodes.stdout).lines().count() >= self.nodes
                {
                    return true;
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("tessera did not come up:\n{}", self.server_log());
    }

    /// The server process's PID.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    /// Runs `tessera ARGS --data-dir <this platform's> --kubeconfig <its kubeconfig>`, with no
    /// `KUBECONFIG` from the environment.
    pub fn tessera(&self, args: &[&str]) -> std::process::Output {
        std::process::Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(args)
            .arg("--data-dir")
            .arg(self.dir.path())
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .env_remove("KUBECONFIG")
            .output()
            .expect("run tessera")
    }

    pub fn server_log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    /// Runs a bundled kubectl with a fresh discovery cache.
    pub fn kubectl(&self, version: &str, args: &[&str]) -> Output {
        self.kubectl_with_stdin(version, args, None)
    }

    pub fn kubectl_with_stdin(&self, version: &str, args: &[&str], stdin: Option<&str>) -> Output {
        let home = self.dir.path().join(format!("home-{version}"));
        let mut command = Command::new(kubectl_binary(version));
        command
            .args(args)
            .env("KUBECONFIG", self.kubeconfig())
            .env("HOME", &home)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("run kubectl");
        if let Some(text) = stdin {
            use std::io::Write;
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(text.as_bytes())
                .expect("write stdin");
        }
        child.wait_with_output().expect("kubectl output")
    }

    /// Runs kubectl and returns stdout, failing the test with stderr if it fails.
    pub fn ok(&self, version: &str, args: &[&str]) -> String {
        let output = self.kubectl(version, args);
        assert!(
            output.status.success(),
            "kubectl {} failed: {}\n--- server log ---\n{}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr),
            self.server_log()
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Runs kubectl with a manifest on stdin (`-f -`).
    pub fn ok_stdin(&self, version: &str, args: &[&str], manifest: &str) -> String {
        let output = self.kubectl_with_stdin(version, args, Some(manifest));
        assert!(
            output.status.success(),
            "kubectl {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Runs kubectl expecting failure; returns stderr.
    pub fn fails(&self, version: &str, args: &[&str], stdin: Option<&str>) -> String {
        let output = self.kubectl_with_stdin(version, args, stdin);
        assert!(
            !output.status.success(),
            "kubectl {} should have failed",
            args.join(" ")
        );
        String::from_utf8_lossy(&output.stderr).into_owned()
    }

    /// Waits until a pod (in `namespace`, else the default one) is Running; returns its node.
    pub fn node_when_running(&self, version: &str, namespace: Option<&str>, pod: &str) -> String {
        let mut args = vec![
            "get",
            "pod",
            pod,
            "-o",
            "jsonpath={.spec.nodeName} {.status.phase}",
        ];
        if let Some(namespace) = namespace {
            args.extend(["-n", namespace]);
        }
        let placed = self.wait_for(version, &args, |out| out.ends_with("Running"));
        placed
            .split_whitespace()
            .next()
            .unwrap_or_default()
            .to_string()
    }

    /// Polls a kubectl query until its output satisfies a check.
    pub fn wait_for(&self, version: &str, args: &[&str], check: impl Fn(&str) -> bool) -> String {
        self.wait_for_within(version, args, Duration::from_secs(20), check)
    }

    /// Waits until a node's field (a kubectl jsonpath, bundled 1.33) reads `want`.
    pub fn wait_for_node(&self, node: &str, path: &str, want: &str) {
        let template = format!("jsonpath={path}");
        self.wait_for("1.33", &["get", "node", node, "-o", &template], |out| {
            out == want
        });
    }

    /// As [`Cluster::wait_for`], for up to `within`.
    pub fn wait_for_within(
        &self,
        version: &str,
        args: &[&str],
        within: Duration,
        check: impl Fn(&str) -> bool,
    ) -> String {
        let deadline = Instant::now() + within;
        let mut last = String::new();
        while Instant::now() < deadline {
            let output = self.kubectl(version, args);
            last = format!(
                "{}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
            if check(&last) {
                return last;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        panic!(
            "kubectl {} never satisfied the check; last output:\n{last}",
            args.join(" ")
        );
    }

    /// Stops the server with SIGTERM and waits for it to exit.
    pub fn stop(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("running");
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status();
        child.wait().expect("wait for tessera")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `tessera up` on the data directory `data_dir` with `args` (a bad configuration among them),
/// which must refuse to start; its standard error. The deadline only guards against a server
/// that does start.
pub fn up_refuses(data_dir: &Path, args: &[&str]) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["up", "--data-dir"])
        .arg(data_dir)
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tessera");
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().expect("poll").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("tessera up started despite {args:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!output.status.success(), "{stderr}");
    stderr
}

/// A kubectl table's lines split into their whitespace-separated cells, header first.
pub fn table_rows(table: &str) -> Vec<Vec<&str>> {
    table
        .lines()
        .map(|line| line.split_whitespace().collect())
        .collect()
}
