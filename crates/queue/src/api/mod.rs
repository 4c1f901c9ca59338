//! Kueue's objects in and out of the core: reading stored ResourceFlavors, ClusterQueues,
//! Cohorts, LocalQueues, Workloads and namespaces into the cycle's inputs (`objects`), one
//! pass of scheduling cycles over them with the statuses to write (`pass`), the statuses
//! Kueue writes (`status`), the workload controller's evictions and restarts (`evictions`), and
//! the job framework (`framework`) with its batch/v1 Job (`job`) and JobSet (`jobset`)
//! integrations, the Workloads StatefulSets and LeaderWorkerSets own for their pod groups
//! (`parent`), the Workloads a pass has read, remembered by resourceVersion (`parsed`), and
//! where the last pass queued each pending one (`offered`), membership tests for walks in key
//! order (`sorted_keys`), the
//! visibility API's pending-workload lists (`visibility`) and why a Workload waits
//! (`explain`), waitForPodsReady (`pods_ready`), and admission fair sharing's ledger
//! kept across passes (`admission_fair_sharing`), the admission-check framework
//! (`admission_checks`), the DRA devices pending Workloads' claims count as (`dra`), and
//! Topology-Aware Scheduling's snapshots, conditions and topology ungater (`tas`), and which
//! pods a node's maintenance moves through their Workload's eviction (`maintenance_eviction`).
//!
//! Everything here is pure: objects are JSON values handed in, writes are values handed back,
//! time is an argument. The queue manager's shell (`tessera-controllers`) watches and writes.

pub mod admission_checks;
pub mod admission_fair_sharing;
pub mod dra;
pub mod evictions;
pub mod explain;
pub mod framework;
pub mod job;
pub mod jobset;
pub mod maintenance_eviction;
pub mod multikueue;
pub mod objects;
mod offered;
pub mod parent;
pub mod parsed;
pub mod pass;
pub mod pod;
pub mod pods_ready;
pub mod provisioning;
pub mod quiet;
mod sorted_keys;
pub mod status;
pub mod tas;
pub mod visibility;
