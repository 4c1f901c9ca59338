//! The driver-upgrade policy (`DriverUpgradePolicySpec` of k8s-operator-libs
//! `api/upgrade/v1alpha1`, served as ClusterPolicy `spec.driver.upgradePolicy` / NVIDIADriver
//! `spec.upgradePolicy`) with upstream's kubebuilder defaults and minimums, and
//! `maxUnavailable` scaling as apimachinery's `GetScaledValueFromIntOrPercent(…, true)`.
//! Knows nothing of how the policy is read (YAML, a CRD) or of nodes.

/// `maxUnavailable`: an int or a percent string (`intstr.IntOrString`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntOrPercent {
    Int(i32),
    Percent(i32),
}

/// A policy field that fails upstream's validation; `field` is the JSON path inside the policy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct PolicyError {
    pub field: String,
    pub message: String,
}

impl IntOrPercent {
    /// Parses the string form as apimachinery does: only `<int>%` is accepted.
    pub fn parse_str(s: &str) -> Result<IntOrPercent, PolicyError> {
        let err = |message: String| PolicyError {
            field: "maxUnavailable".to_string(),
            message,
        };
        let Some(number) = s.strip_suffix('%') else {
            return Err(err(
                "invalid value for IntOrString: invalid type: string is not a percentage"
                    .to_string(),
            ));
        };
        number.parse::<i32>().map(IntOrPercent::Percent).map_err(|e| {
            let why = match e.kind() {
                std::num::IntErrorKind::PosOverflow | std::num::IntErrorKind::NegOverflow => {
                    "value out of range"
                }
                _ => "invalid syntax",
            };
            err(format!(
                "invalid value for IntOrString: invalid value {s:?}: strconv.Atoi: parsing {number:?}: {why}"
            ))
        })
    }

    /// `GetScaledValueFromIntOrPercent(v, total, roundUp=true)`: a percent of `total`, rounded up.
    pub fn scaled_round_up(self, total: i64) -> i64 {
        match self {
            IntOrPercent::Int(v) => i64::from(v),
            IntOrPercent::Percent(p) => {
                let product = i64::from(p) * total;
                product.div_euclid(100) + i64::from(product.rem_euclid(100) != 0)
            }
        }
    }
}

/// `waitForCompletion`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WaitForCompletionSpec {
    /// Label selector of the workload pods to wait for; empty waits for nothing.
    pub pod_selector: String,
    /// 0 waits forever (default 0, minimum 0).
    pub timeout_seconds: i64,
}

/// `podDeletion` (`gpuPodDeletion` in ClusterPolicy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodDeletionSpec {
    pub force: bool,
    /// Default 300, minimum 0.
    pub timeout_seconds: i64,
    pub delete_empty_dir: bool,
    /// Extra selector of pods to delete besides the operator's GPU-pod filter (the shell applies
    /// it). Not a field of k8s-operator-libs' `PodDeletionSpec` (which has only force,
    /// timeoutSeconds, deleteEmptyDir); kept for the policy, empty by default.
    pub pod_selector: String,
}

impl Default for PodDeletionSpec {
    fn default() -> Self {
        PodDeletionSpec {
            force: false,
            timeout_seconds: 300,
            delete_empty_dir: false,
            pod_selector: String::new(),
        }
    }
}

/// `drain`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrainSpec {
    pub enable: bool,
    pub force: bool,
    pub pod_selector: String,
    /// Default 300, minimum 0.
    pub timeout_seconds: i64,
    pub delete_empty_dir: bool,
}

impl Default for DrainSpec {
    fn default() -> Self {
        DrainSpec {
            enable: false,
            force: false,
            pod_selector: String::new(),
            timeout_seconds: 300,
            delete_empty_dir: false,
        }
    }
}

/// `DriverUpgradePolicySpec`. `Default` gives the CRD defaults (`autoUpgrade: false`,
/// `maxParallelUpgrades: 1`, `maxUnavailable: "25%"`, no sub-specs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpgradePolicy {
    pub auto_upgrade: bool,
    /// 0 means unlimited (minimum 0).
    pub max_parallel_upgrades: i64,
    /// `None` means every managed node may be unavailable (upstream's nil handling).
    pub max_unavailable: Option<IntOrPercent>,
    pub pod_deletion: Option<PodDeletionSpec>,
    pub wait_for_completion: Option<WaitForCompletionSpec>,
    pub drain: Option<DrainSpec>,
}

impl Default for UpgradePolicy {
    fn default() -> Self {
        UpgradePolicy {
            auto_upgrade: false,
            max_parallel_upgrades: 1,
            max_unavailable: Some(IntOrPercent::Percent(25)),
            pod_deletion: None,
            wait_for_completion: None,
            drain: None,
        }
    }
}

impl UpgradePolicy {
    /// The CRD's `Minimum:=0` checks; every violation is listed, named by field path.
    pub fn validate(&self) -> Result<(), Vec<PolicyError>> {
        let mut errors = Vec::new();
        let mut min0 = |field: &str, v: i64| {
            if v < 0 {
                errors.push(PolicyError {
                    field: field.to_string(),
                    message: format!("should be greater than or equal to 0, got {v}"),
                });
            }
        };
        min0("maxParallelUpgrades", self.max_parallel_upgrades);
        if let Some(w) = &self.wait_for_completion {
            min0("waitForCompletion.timeoutSeconds", w.timeout_seconds);
        }
        if let Some(p) = &self.pod_deletion {
            min0("podDeletion.timeoutSeconds", p.timeout_seconds);
        }
        if let Some(d) = &self.drain {
            min0("drain.timeoutSeconds", d.timeout_seconds);
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }

    /// `maxUnavailable` scaled against the managed node count (nil → `total`).
    pub fn max_unavailable_of(&self, total: i64) -> i64 {
        self.max_unavailable
            .map_or(total, |m| m.scaled_round_up(total))
    }

    /// Whether drain is enabled (`DrainSpec != nil && DrainSpec.Enable`).
    pub fn drain_enabled(&self) -> bool {
        self.drain.as_ref().is_some_and(|d| d.enable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// apimachinery's `TestGetScaledValueFromIntOrPercent` rows with roundUp = true, plus
    /// the GPU operator's 25% default.
    #[test]
    fn scaled_value_rounds_up() {
        let table = [
            (IntOrPercent::Int(123), 0, 123),
            (IntOrPercent::Percent(10), 100, 10),
            (IntOrPercent::Percent(11), 100, 11),
            (IntOrPercent::Percent(10), 99, 10), // 9.9 → 10
            (IntOrPercent::Percent(25), 5, 2),   // 1.25 → 2
            (IntOrPercent::Percent(50), 5, 3),   // 2.5 → 3
            (IntOrPercent::Percent(100), 5, 5),
            (IntOrPercent::Percent(0), 5, 0),
            (IntOrPercent::Percent(1), 1, 1),
            (IntOrPercent::Percent(25), 0, 0),
        ];
        for (v, total, want) in table {
            assert_eq!(v.scaled_round_up(total), want, "{v:?} of {total}");
        }
    }

    #[test]
    fn parse_str_accepts_only_percentages() {
        let table: [(&str, Result<IntOrPercent, &str>); 5] = [
            ("25%", Ok(IntOrPercent::Percent(25))),
            ("100%", Ok(IntOrPercent::Percent(100))),
            (
                "25",
                Err(
                    "maxUnavailable: invalid value for IntOrString: invalid type: string is not a percentage",
                ),
            ),
            (
                "x%",
                Err(
                    "maxUnavailable: invalid value for IntOrString: invalid value \"x%\": strconv.Atoi: parsing \"x\": invalid syntax",
                ),
            ),
            (
                "%",
                Err(
                    "maxUnavailable: invalid value for IntOrString: invalid value \"%\": strconv.Atoi: parsing \"\": invalid syntax",
                ),
            ),
        ];
        for (input, want) in table {
            let got = IntOrPercent::parse_str(input).map_err(|e| e.to_string());
            assert_eq!(got, want.map_err(str::to_string), "{input}");
        }
    }

    #[test]
    fn defaults_follow_the_crd() {
        let p = UpgradePolicy::default();
        assert!(!p.auto_upgrade);
        assert_eq!(p.max_parallel_upgrades, 1);
        assert_eq!(p.max_unavailable, Some(IntOrPercent::Percent(25)));
        assert_eq!(PodDeletionSpec::default().timeout_seconds, 300);
        assert_eq!(DrainSpec::default().timeout_seconds, 300);
        assert!(!DrainSpec::default().enable);
        assert_eq!(WaitForCompletionSpec::default().timeout_seconds, 0);
        assert_eq!(p.validate(), Ok(()));
    }

    #[test]
    fn validate_names_every_negative_field() {
        let p = UpgradePolicy {
            max_parallel_upgrades: -1,
            drain: Some(DrainSpec {
                timeout_seconds: -5,
                ..DrainSpec::default()
            }),
            ..UpgradePolicy::default()
        };
        let errs = p.validate().err().unwrap_or_default();
        let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["maxParallelUpgrades", "drain.timeoutSeconds"]);
    }
}
