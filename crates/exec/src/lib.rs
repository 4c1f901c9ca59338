//! Simulated containers: the small command set `kubectl exec` reaches in a node twin's
//! container (agnhost's `connect`, `nslookup`, `getent hosts`, `env`, `hostname`, `cat`,
//! `echo`, `sh -c`, `nvidia-smi`, `curl` through Gateways and Services ([`curl`])), and the
//! simulated network path their probes travel ([`network`]), with network policy behind a
//! seam ([`policy`]).
//!
//! A command runs to completion on its whole standard input and answers its output and exit
//! code; [`reads_stdin`] says whether to wait for the client's input first. Knows nothing of
//! streaming protocols, the API server or how the caller gathered the objects.

pub mod commands;
pub mod curl;
pub mod env;
pub mod gpus;
pub mod network;
pub mod policy;
mod shell;

pub use commands::{reads_stdin, run};
pub use network::{Cluster, Outcome, Resolved};
pub use policy::{AllowAll, Peer, PolicyVerdict, Protocol};
pub use tessera_node::gpu_assignments::VisibleGpu;

use serde_json::Value;

/// The container a command runs in, and the world around it.
pub struct Session<'a> {
    /// The cluster the container's network reaches.
    pub cluster: &'a Cluster,
    /// The container's pod.
    pub pod: &'a Value,
    /// The container's name.
    pub container: &'a str,
    /// The devices the container got.
    pub gpus: &'a [VisibleGpu],
    /// Network policy.
    pub policy: &'a dyn PolicyVerdict,
    /// The model servers pods run, and the InferencePools' endpoint pickers.
    pub model_servers: &'a dyn tessera_inference::openai::ModelServers,
    /// Picks among a Service's endpoints (the caller's randomness).
    pub seed: u64,
}

impl Session<'_> {
    /// `name` looked up through the cluster DNS from this container; `None` when no DNS
    /// server answers.
    pub fn lookup(&self, name: &str) -> Option<tessera_dns::Answer> {
        self.cluster.lookup(self.pod, name, self.policy, self.seed)
    }
}

/// What a command wrote and how it ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Output {
    /// Standard output.
    pub stdout: Vec<u8>,
    /// Standard error.
    pub stderr: Vec<u8>,
    /// Exit code.
    pub code: i32,
}

impl Output {
    /// Exit 0 with `stdout`.
    pub fn ok(stdout: impl Into<Vec<u8>>) -> Output {
        Output {
            stdout: stdout.into(),
            ..Output::default()
        }
    }

    /// Exit `code` with `stderr`.
    pub fn fail(code: i32, stderr: impl Into<Vec<u8>>) -> Output {
        Output {
            stderr: stderr.into(),
            code,
            ..Output::default()
        }
    }

    /// Appends another command's output, taking its exit code.
    pub(crate) fn then(&mut self, next: Output) {
        self.stdout.extend(next.stdout);
        self.stderr.extend(next.stderr);
        self.code = next.code;
    }
}

#[cfg(test)]
mod tests;
