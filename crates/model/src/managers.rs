//! The programs upstream's components run as, which name the field managers of their writes
//! (client-go puts the program in the User-Agent; the API server takes a write's manager
//! from it when the request names none).
//!
//! Names only; which component is which program is the callers' business.

/// The built-in controllers (Deployment, Job, node lifecycle, disruption, ResourceClaim, …).
pub const KUBE_CONTROLLER_MANAGER: &str = "kube-controller-manager";
/// The scheduler.
pub const KUBE_SCHEDULER: &str = "kube-scheduler";
/// The node agent.
pub const KUBELET: &str = "kubelet";
/// controller-runtime binaries (the JobSet and LeaderWorkerSet controllers).
pub const CONTROLLER_RUNTIME: &str = "manager";
