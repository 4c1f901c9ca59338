//! Quota amounts as Kueue does its quota arithmetic (`pkg/resources/amount.go`,
//! `pkg/util/math`): an `i64` in the resource's canonical unit (CPU in milli-cores, everything
//! else in whole units: bytes, devices, pods), with `i64::MAX` as the Unlimited sentinel and
//! saturating arithmetic so that cohort sums never wrap. Also the conversion of Kubernetes
//! quantities into those units, for quotas (`Amount::from_quantity`, overflow is Unlimited) and
//! for workload requests (`resource_value`, clamped).
//!
//! Knows nothing about flavors, queues or the cohort tree.

use std::cmp::Ordering;
use std::fmt;
use std::ops::{Add, Sub};

use tessera_model::quantity::Quantity;

/// The resource name whose canonical unit is the milli-unit (`corev1.ResourceCPU`).
pub const CPU: &str = "cpu";

/// Nano-units per unit, as `tessera_model::quantity::Quantity` counts them.
const NANOS_PER_UNIT: i128 = 1_000_000_000;

/// A quota amount: bounded, or the Unlimited sentinel (`i64::MAX`). The default is bounded zero,
/// what a missing map entry reads as in Kueue.
///
/// Ordering is Kueue's `Cmp`: Unlimited equals Unlimited and is greater than every bounded
/// amount, which is plain `i64` order because the sentinel is `i64::MAX`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Amount(i64);

impl Amount {
    /// The effectively infinite amount; arithmetic with it stays Unlimited.
    pub const UNLIMITED: Amount = Amount(i64::MAX);

    /// Bounded zero.
    pub const ZERO: Amount = Amount(0);

    /// A bounded amount (`NewAmount`). `i64::MAX` reads as Unlimited, as in Kueue.
    pub const fn new(value: i64) -> Amount {
        Amount(value)
    }

    /// The amount of a quota quantity (`AmountFromQuantity`): milli-cores for `cpu`, whole units
    /// (rounded up) otherwise; Unlimited when the value does not fit below `i64::MAX`.
    pub fn from_quantity(resource: &str, quantity: &Quantity) -> Amount {
        let nanos = quantity.nanos();
        if resource == CPU {
            // maxCPUQuantityForAmount: MaxInt64 / 1000 whole cores.
            if nanos >= i128::from(i64::MAX / 1000) * NANOS_PER_UNIT {
                return Amount::UNLIMITED;
            }
            return Amount(clamp_i64(quantity.milli_value()));
        }
        if nanos >= i128::from(i64::MAX) * NANOS_PER_UNIT {
            return Amount::UNLIMITED;
        }
        Amount(clamp_i64(quantity.value()))
    }

    /// Whether this is the Unlimited sentinel.
    pub const fn is_unlimited(self) -> bool {
        self.0 == i64::MAX
    }

    /// The raw value; Unlimited reads as `i64::MAX`. For boundaries (formatting, ratios), not
    /// for quota arithmetic.
    pub const fn int64(self) -> i64 {
        self.0
    }

    /// The amount in the resource's standard unit (cores for `cpu`); Unlimited is `+inf`
    /// (`AsApproximateFloat64`).
    pub fn as_approximate_f64(self, resource: &str) -> f64 {
        if self.is_unlimited() {
            return f64::INFINITY;
        }
        // Precision loss above 2^53 is what Kueue's float64 conversion does too.
        let value = self.0 as f64;
        if resource == CPU {
            value / 1000.0
        } else {
            value
        }
    }

    /// `self + value` for a bounded usage value.
    #[must_use]
    pub fn add_i64(self, value: i64) -> Amount {
        if self.is_unlimited() {
            return self;
        }
        Amount(self.0.saturating_add(value))
    }

    /// `self - value` for a bounded usage value.
    #[must_use]
    pub fn sub_i64(self, value: i64) -> Amount {
        if self.is_unlimited() {
            return self;
        }
        Amount(self.0.saturating_sub(value))
    }

    /// Compares with a bounded value (`CmpInt64`): Unlimited is greater than every `i64`,
    /// `i64::MAX` included.
    pub fn cmp_i64(self, value: i64) -> Ordering {
        if self.is_unlimited() {
            return Ordering::Greater;
        }
        self.0.cmp(&value)
    }
}

/// `a + b`: Unlimited if either is, saturating at `i64::MAX` (which is Unlimited).
impl Add for Amount {
    type Output = Amount;

    fn add(self, other: Amount) -> Amount {
        if self.is_unlimited() || other.is_unlimited() {
            return Amount::UNLIMITED;
        }
        Amount(self.0.saturating_add(other.0))
    }
}

/// `a - b`: Unlimited − bounded stays Unlimited, bounded − Unlimited is `i64::MIN` (read as
/// "nothing available"), Unlimited − Unlimited is bounded zero.
impl Sub for Amount {
    type Output = Amount;

    fn sub(self, other: Amount) -> Amount {
        match (self.is_unlimited(), other.is_unlimited()) {
            (true, true) => Amount::ZERO,
            (true, false) => Amount::UNLIMITED,
            (false, true) => Amount(i64::MIN),
            (false, false) => Amount(self.0.saturating_sub(other.0)),
        }
    }
}

impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_unlimited() {
            f.write_str("<unlimited>")
        } else {
            write!(f, "{}", self.0)
        }
    }
}

/// The canonical value of a workload request (`ResourceValue`): milli-units for `cpu`, whole
/// units otherwise, clamped to the `i64` range instead of wrapping.
pub fn resource_value(resource: &str, quantity: &Quantity) -> i64 {
    if resource == CPU {
        clamp_i64(quantity.milli_value())
    } else {
        clamp_i64(quantity.value())
    }
}

fn clamp_i64(value: i128) -> i64 {
    i64::try_from(value).unwrap_or(if value < 0 { i64::MIN } else { i64::MAX })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quantity(text: &str) -> Quantity {
        text.parse().expect("test quantity")
    }

    // Upstream: pkg/resources/amount_test.go, TestAmountFromQuantity.
    // (name, resource, quantity, expected; None = Unlimited)
    const FROM_QUANTITY: &[(&str, &str, &str, Option<i64>)] = &[
        ("cpu small value preserved", "cpu", "2", Some(2_000)),
        ("cpu sub-cpu preserved", "cpu", "500m", Some(500)),
        (
            "cpu 1P preserved (no overflow)",
            "cpu",
            "1P",
            Some(1_000_000_000_000_000_000),
        ),
        ("cpu 1E becomes Unlimited", "cpu", "1E", None),
        ("cpu 10P becomes Unlimited", "cpu", "10P", None),
        (
            "memory small value preserved",
            "memory",
            "512Mi",
            Some(512 * 1024 * 1024),
        ),
        (
            "memory 1E preserved (fits in int64)",
            "memory",
            "1E",
            Some(1_000_000_000_000_000_000),
        ),
        ("memory past int64 becomes Unlimited", "memory", "10E", None),
        (
            "extended resource preserved",
            "example.com/gpu",
            "8",
            Some(8),
        ),
    ];

    #[test]
    fn amount_from_quantity() {
        for (name, resource, text, want) in FROM_QUANTITY {
            let got = Amount::from_quantity(resource, &quantity(text));
            match want {
                None => assert!(got.is_unlimited(), "{name}: got {got}"),
                Some(value) => {
                    assert!(!got.is_unlimited(), "{name}: got Unlimited");
                    assert_eq!(got.int64(), *value, "{name}");
                }
            }
        }
    }

    // Upstream: pkg/resources/amount_test.go, TestAmountAsApproximateFloat64.
    #[test]
    fn amount_as_approximate_float64() {
        let cases: &[(&str, &str, Amount, f64)] = &[
            (
                "bounded memory",
                "memory",
                Amount::new(1_000_000_000_000_000_000),
                1e18,
            ),
            ("bounded CPU", "cpu", Amount::new(5_500), 5.5),
            (
                "unlimited memory",
                "memory",
                Amount::UNLIMITED,
                f64::INFINITY,
            ),
            ("unlimited CPU", "cpu", Amount::UNLIMITED, f64::INFINITY),
        ];
        for (name, resource, amount, want) in cases {
            let got = amount.as_approximate_f64(resource);
            assert!(got == *want, "{name}: got {got}, want {want}");
        }
    }

    // Upstream: pkg/resources/amount_test.go, TestAmountArithmetic (8 cases).
    #[test]
    fn amount_arithmetic() {
        assert!(
            (Amount::new(5) + Amount::UNLIMITED).is_unlimited(),
            "Add propagates Unlimited"
        );
        assert!(
            (Amount::new(i64::MAX - 5) + Amount::new(100)).is_unlimited(),
            "Add saturates on bounded overflow becomes Unlimited"
        );
        assert!(
            Amount::UNLIMITED.sub_i64(1000).is_unlimited(),
            "Sub of Unlimited stays Unlimited"
        );
        assert_eq!(
            Amount::UNLIMITED.cmp_i64(i64::MAX - 1),
            Ordering::Greater,
            "Unlimited greater than any bounded"
        );
        assert_eq!(
            Amount::new(i64::MAX - 1).cmp(&Amount::UNLIMITED),
            Ordering::Less,
            "MaxInt64-1 less than Unlimited"
        );
        assert_eq!(
            Amount::UNLIMITED.cmp(&Amount::UNLIMITED),
            Ordering::Equal,
            "two Unlimited equal"
        );
        let zero = Amount::UNLIMITED - Amount::UNLIMITED;
        assert!(!zero.is_unlimited(), "Unlimited - Unlimited is bounded");
        assert_eq!(zero.int64(), 0, "Unlimited - Unlimited is zero");
        assert_eq!(
            (Amount::new(1000) - Amount::UNLIMITED).int64(),
            i64::MIN,
            "bounded - Unlimited is MinInt64"
        );
        assert_eq!(
            Amount::new(i64::MAX - 1).add_i64(100).int64(),
            i64::MAX,
            "AddInt64 saturates"
        );
    }

    // Upstream: pkg/resources/requests_test.go, TestResourceValueClampsOutsideInt64.
    const RESOURCE_VALUE: &[(&str, &str, &str, i64)] = &[
        (
            "an ordinary extended resource is unchanged",
            "example.com/gpu",
            "8",
            8,
        ),
        (
            "the largest representable value is kept",
            "example.com/gpu",
            "9223372036854775807",
            i64::MAX,
        ),
        (
            "one past it is clamped rather than wrapped",
            "example.com/gpu",
            "9223372036854775808",
            i64::MAX,
        ),
        (
            "far past it is clamped as well",
            "example.com/gpu",
            "100000000000000000000",
            i64::MAX,
        ),
        (
            "an ordinary negative value is unchanged",
            "example.com/gpu",
            "-3",
            -3,
        ),
        (
            "far below the range is clamped rather than wrapped",
            "example.com/gpu",
            "-100000000000000000000",
            i64::MIN,
        ),
        (
            "memory past the range is clamped too",
            "memory",
            "100Ei",
            i64::MAX,
        ),
        ("cpu is still read in milli-units", "cpu", "1500m", 1500),
        (
            "cpu past the milli range is clamped",
            "cpu",
            "10000000000000000",
            i64::MAX,
        ),
    ];

    #[test]
    fn resource_value_clamps_outside_int64() {
        for (name, resource, text, want) in RESOURCE_VALUE {
            assert_eq!(resource_value(resource, &quantity(text)), *want, "{name}");
        }
    }

    // Upstream: pkg/util/math/math_test.go, TestSaturatingSub (the Go helper is Rust's
    // `i64::saturating_sub`, which `Amount::sub` uses; the table pins that they agree).
    #[test]
    fn saturating_sub_matches_upstream() {
        let cases: &[(&str, i64, i64, i64)] = &[
            ("normal subtraction", 10, 3, 7),
            ("zero", 5, 5, 0),
            ("negative result", 3, 10, -7),
            ("underflow: MinInt64 - 1", i64::MIN, 1, i64::MIN),
            ("underflow: MinInt64 - large", i64::MIN, i64::MAX, i64::MIN),
            ("overflow: MaxInt64 - (-1)", i64::MAX, -1, i64::MAX),
            (
                "overflow: MaxInt64 - MinInt64",
                i64::MAX,
                i64::MIN,
                i64::MAX,
            ),
            ("subtract negative: 0 - MinInt64", 0, i64::MIN, i64::MAX),
        ];
        for (name, a, b, want) in cases {
            assert_eq!(Amount::new(*a).sub_i64(*b).int64(), *want, "{name}");
        }
    }

    // Upstream: pkg/util/math/math_test.go, TestSafeValue (through `resource_value` on a
    // non-CPU resource, which is SafeValue).
    #[test]
    fn safe_value_matches_upstream() {
        let cases: &[(&str, &str, i64)] = &[
            ("zero", "0", 0),
            ("small positive", "5", 5),
            ("negative", "-5", -5),
            ("max int64", "9223372036854775807", i64::MAX),
            ("above int64", "9223372036854775808", i64::MAX),
            ("far above int64", "1e19", i64::MAX),
            ("below min int64", "-9223372036854775809", i64::MIN),
        ];
        for (name, text, want) in cases {
            assert_eq!(resource_value("memory", &quantity(text)), *want, "{name}");
        }
    }

    #[test]
    fn display_names_unlimited() {
        assert_eq!(Amount::UNLIMITED.to_string(), "<unlimited>");
        assert_eq!(Amount::new(-4).to_string(), "-4");
    }
}
