//! The compatibility checker: applies the matrix's rows to [`ClusterFacts`] (and, for a planned
//! [`Change`], to the facts as they would be after it) and returns every [`Conflict`].
//!
//! Pure: no I/O, no clock. It does not gather facts or decide what to do about a conflict; the
//! shell prints them (and may refuse a plan).

use std::fmt;

use crate::facts::{Change, ClusterFacts, NodeFacts};
use crate::matrix::{Matrix, ReleaseRow, Source};

/// A matrix lookup of a component's release row.
type RowOf = for<'m> fn(&'m Matrix, &Version) -> Option<&'m ReleaseRow>;
use crate::version::Version;

/// Which rule a conflict breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Rule {
    /// A kubelet newer than the API server.
    KubeletNewerThanApiServer,
    /// A kubelet more minors behind the API server than the skew policy allows.
    KubeletTooOld,
    /// kubectl more than one minor away from the API server.
    KubectlSkew,
    /// The node's driver branch is below the GPU architecture's minimum.
    DriverTooOldForArchitecture,
    /// The node's driver is not one the GPU Operator release lists.
    DriverNotInOperatorRelease,
    /// A container's CUDA is above the driver's and minor-version compatibility does not cover it.
    CudaAboveDriver,
    /// The API server's Kubernetes is outside the GPU Operator release's range.
    KubernetesOutsideOperatorRange,
    /// The API server's Kubernetes is outside what the Kueue release supports.
    KubernetesOutsideKueueRange,
    /// The API server's Kubernetes is outside what the DRA driver release supports.
    KubernetesOutsideDraDriverRange,
    /// A DRA API version in use is not served by this Kubernetes version.
    DraApiNotServed,
    /// A version the matrix has no row for (so nothing about it could be checked).
    NotInMatrix,
}

impl Rule {
    /// A stable kebab-case name for output and filtering.
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::KubeletNewerThanApiServer => "kubelet-newer-than-apiserver",
            Rule::KubeletTooOld => "kubelet-too-old",
            Rule::KubectlSkew => "kubectl-skew",
            Rule::DriverTooOldForArchitecture => "driver-too-old-for-architecture",
            Rule::DriverNotInOperatorRelease => "driver-not-in-operator-release",
            Rule::CudaAboveDriver => "cuda-above-driver",
            Rule::KubernetesOutsideOperatorRange => "kubernetes-outside-operator-range",
            Rule::KubernetesOutsideKueueRange => "kubernetes-outside-kueue-range",
            Rule::KubernetesOutsideDraDriverRange => "kubernetes-outside-dra-driver-range",
            Rule::DraApiNotServed => "dra-api-not-served",
            Rule::NotInMatrix => "not-in-matrix",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One incompatibility: who, which two versions, which rule, and the matrix row's source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// `node/<name>`, `gpu-operator`, `kueue`, `kubectl`, `container/<name>`, or a DRA user.
    pub subject: String,
    pub rule: Rule,
    /// The subject's version, e.g. `kubelet v1.35.0`.
    pub found: String,
    /// What it was checked against, e.g. `apiserver v1.34.2` or `supported 1.30-1.34`.
    pub against: String,
    /// The matrix row's source; `None` only for [`Rule::NotInMatrix`].
    pub source: Option<Source>,
    /// True when the conflict appears only after the planned change.
    pub planned: bool,
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.planned {
            f.write_str("after the planned change: ")?;
        }
        write!(
            f,
            "{}: {} vs {} ({})",
            self.subject, self.found, self.against, self.rule
        )?;
        if let Some(source) = &self.source {
            write!(f, "; source {source}")?;
        }
        Ok(())
    }
}

/// Checks the facts against the bundled matrix; with a plan, checks the state after it and marks
/// conflicts the plan would introduce as `planned`.
pub fn check(cluster: &ClusterFacts, plan: Option<&Change>) -> Vec<Conflict> {
    check_with(Matrix::bundled(), cluster, plan)
}

/// [`check`] against a given matrix.
pub fn check_with(matrix: &Matrix, cluster: &ClusterFacts, plan: Option<&Change>) -> Vec<Conflict> {
    let now = conflicts(matrix, cluster);
    let Some(plan) = plan else { return now };
    let after = conflicts(matrix, &plan.apply(cluster));
    after
        .into_iter()
        .map(|mut c| {
            c.planned = !now.contains(&c);
            c
        })
        .collect()
}

fn conflicts(m: &Matrix, facts: &ClusterFacts) -> Vec<Conflict> {
    let mut out = Vec::new();
    let api = &facts.api_server;
    let mut push =
        |subject: String, rule, found: String, against: String, source: Option<&Source>| {
            out.push(Conflict {
                subject,
                rule,
                found,
                against,
                source: source.cloned(),
                planned: false,
            });
        };
    let apiserver = format!("apiserver {api}");

    // Version skew: each kubelet is held to the row for its own version; kubectl to the
    // API server's row. Every Kubernetes 1.x version has a row (`kubelet_since: 1.0`).
    for node in &facts.nodes {
        let Some(skew) = m.skew(&node.kubelet) else {
            continue;
        };
        let behind = node.kubelet.minors_behind(api);
        let found = format!("kubelet {}", node.kubelet);
        if behind < 0 {
            push(
                node_subject(node),
                Rule::KubeletNewerThanApiServer,
                found,
                apiserver.clone(),
                Some(&skew.source),
            );
        } else if behind > i64::from(skew.kubelet_older) {
            let against = format!("{apiserver} (at most {} minors older)", skew.kubelet_older);
            push(
                node_subject(node),
                Rule::KubeletTooOld,
                found,
                against,
                Some(&skew.source),
            );
        }
    }
    if let Some(kubectl) = &facts.kubectl
        && let Some(skew) = m.skew(api)
        && kubectl.minors_behind(api).unsigned_abs() > u64::from(skew.kubectl_skew)
    {
        let against = format!("{apiserver} (±{} minor)", skew.kubectl_skew);
        push(
            "kubectl".into(),
            Rule::KubectlSkew,
            format!("kubectl {kubectl}"),
            against,
            Some(&skew.source),
        );
    }

    // GPU nodes: architecture minimum, operator driver list, container CUDA.
    let operator = facts.gpu_operator.as_ref().map(|v| (v, m.operator(v)));
    for node in facts.nodes.iter().filter(|n| n.is_gpu()) {
        let Some(driver) = &node.driver else { continue };
        let found = format!("driver {driver}");
        let product = node.gpu_product.as_deref();
        if let Some(arch) = m.architecture(node.gpu_family.as_deref(), product)
            && (driver.major < arch.min_branch
                || arch
                    .min_driver
                    .as_ref()
                    .is_some_and(|min| driver.major == min.major && driver_below(driver, min)))
        {
            let against = format!(
                "{} {} (driver {})",
                arch.architecture,
                product.unwrap_or_default(),
                Matrix::min_driver_text(arch)
            );
            push(
                node_subject(node),
                Rule::DriverTooOldForArchitecture,
                found.clone(),
                against,
                Some(&arch.source),
            );
        }
        if let Some((release, Some(row))) = operator
            && !row.drivers.iter().any(|d| same_driver(d, driver))
        {
            let against = format!("gpu-operator {release} drivers");
            push(
                node_subject(node),
                Rule::DriverNotInOperatorRelease,
                found.clone(),
                against,
                Some(&row.source),
            );
        }
        let branch_row = m.driver_branch(driver.major);
        // The node's own label is what its driver reports; the matrix covers planned drivers.
        let ceiling = node
            .cuda_driver
            .as_ref()
            .or(branch_row.map(|r| &r.max_cuda));
        let Some(ceiling) = ceiling else { continue };
        for container in facts
            .containers
            .iter()
            .filter(|c| c.node.as_ref().is_none_or(|n| *n == node.name))
        {
            let cuda = &container.cuda;
            if cuda.minor_pair() <= ceiling.minor_pair() {
                continue;
            }
            let compat = m
                .minor_compat(cuda.major)
                .filter(|r| driver.major >= r.min_branch);
            if compat.is_some() {
                continue;
            }
            let against = format!("{} {found} (CUDA <= {ceiling})", node_subject(node));
            let source = m
                .minor_compat(cuda.major)
                .map(|r| &r.source)
                .or(branch_row.map(|r| &r.source));
            push(
                format!("container/{}", container.name),
                Rule::CudaAboveDriver,
                format!("CUDA {cuda}"),
                against,
                source,
            );
        }
    }

    // GPU Operator release vs Kubernetes.
    match operator {
        Some((release, None)) => {
            push(
                "gpu-operator".into(),
                Rule::NotInMatrix,
                format!("gpu-operator {release}"),
                "gpu_operator rows".into(),
                None,
            );
        }
        Some((release, Some(row))) if !row.kubernetes.contains(api) => {
            let against = format!("{apiserver} (supported {})", row.kubernetes);
            push(
                "gpu-operator".into(),
                Rule::KubernetesOutsideOperatorRange,
                format!("gpu-operator {release}"),
                against,
                Some(&row.source),
            );
        }
        _ => {}
    }

    // Kueue and DRA driver releases vs Kubernetes.
    let components = [
        (
            "kueue",
            &facts.kueue,
            Rule::KubernetesOutsideKueueRange,
            Matrix::kueue as RowOf,
        ),
        (
            "dra-driver",
            &facts.dra_driver,
            Rule::KubernetesOutsideDraDriverRange,
            Matrix::dra_driver,
        ),
    ];
    for (name, version, rule, row_of) in components {
        let Some(version) = version else { continue };
        let found = format!("{name} {version}");
        match row_of(m, version) {
            None => push(
                name.into(),
                Rule::NotInMatrix,
                found,
                format!("{name} rows"),
                None,
            ),
            Some(row) if !row.kubernetes.contains(api) => {
                let against = format!("{apiserver} (supported {})", row.kubernetes);
                push(name.into(), rule, found, against, Some(&row.source));
            }
            Some(_) => {}
        }
    }

    // DRA API versions in use vs what this Kubernetes serves.
    for used in &facts.dra_apis {
        match m.dra_api(&used.api_version) {
            None => push(
                used.user.clone(),
                Rule::NotInMatrix,
                used.api_version.clone(),
                "dra_apis rows".into(),
                None,
            ),
            Some(row) if !row.served().contains(api) => {
                let against = format!("{apiserver} (served {})", row.served());
                push(
                    used.user.clone(),
                    Rule::DraApiNotServed,
                    used.api_version.clone(),
                    against,
                    Some(&row.source),
                );
            }
            Some(_) => {}
        }
    }
    out
}

fn node_subject(node: &NodeFacts) -> String {
    format!("node/{}", node.name)
}

/// Whether `found` is below `min` (a found driver without a patch compares on `major.minor`).
fn driver_below(found: &Version, min: &Version) -> bool {
    match found.patch {
        Some(_) => found < min,
        None => found.minor_pair() < min.minor_pair(),
    }
}

/// A listed driver matches a found one; a found driver without a patch matches on `major.minor`.
fn same_driver(listed: &Version, found: &Version) -> bool {
    match found.patch {
        Some(_) => listed == found,
        None => listed.minor_pair() == found.minor_pair(),
    }
}
