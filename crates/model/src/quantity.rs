//! Exact Kubernetes resource quantities: parsing, canonical formatting and arithmetic.
//!
//! Matches `k8s.io/apimachinery/pkg/api/resource.Quantity`: the same grammar (every decimal SI,
//! binary SI and exponent suffix), the same rounding (values finer than nano are rounded up),
//! and the same canonical form (`1.5Gi` prints as `1536Mi`, `0.1` as `100m`). Values are held as
//! an `i128` count of nano-units, which covers every suffix up to `E`/`Ei` exactly; magnitudes
//! beyond that are rejected instead of being rounded silently. Knows nothing about which
//! resources a quantity measures.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Nano-units per unit: the finest precision a quantity keeps.
const NANO: i128 = 1_000_000_000;

/// The largest magnitude (in nano-units) accepted: 10^36 nano-units, 10^27 units (a thousand
/// `Ei`-scale values of headroom). Larger quantities do not occur in resource accounting;
/// rejecting them keeps every arithmetic step exact.
const MAX_NANOS: i128 = 1_000_000_000_000_000_000_000_000_000_000_000_000;

/// How a quantity was written, which decides how it is printed back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// Powers of ten with SI suffixes (`m`, `k`, `M`, …) or none.
    DecimalSi,
    /// Powers of 1024 (`Ki`, `Mi`, …).
    BinarySi,
    /// Scientific notation (`1e3`, `5E-3`).
    DecimalExponent,
}

/// Why a string is not a quantity.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// The text does not match `<signed number><suffix>`.
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )]
    Syntax,
    /// The suffix is none of the known SI, binary or exponent suffixes.
    #[error("unable to parse quantity's suffix")]
    Suffix,
    /// The value is too large to represent exactly.
    #[error("quantity is too large")]
    TooLarge,
}

/// An exact resource quantity such as `500m`, `2Gi` or `1e3`.
#[derive(Debug, Clone, Copy)]
pub struct Quantity {
    nanos: i128,
    format: Format,
}

impl Quantity {
    /// Zero, printed as `0`.
    pub const ZERO: Quantity = Quantity {
        nanos: 0,
        format: Format::DecimalSi,
    };

    /// A whole number of units in the given format.
    pub fn from_units(units: i64, format: Format) -> Quantity {
        Quantity {
            nanos: i128::from(units) * NANO,
            format,
        }
    }

    /// A number of thousandths of a unit (`250` milli is `250m`).
    pub fn from_milli(milli: i64) -> Quantity {
        Quantity {
            nanos: i128::from(milli) * 1_000_000,
            format: Format::DecimalSi,
        }
    }

    /// The value in nano-units.
    pub fn nanos(&self) -> i128 {
        self.nanos
    }

    /// The format the quantity prints in.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Whether the value is zero.
    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    /// The value in whole units, rounded up (away from zero for positive values), as upstream's
    /// `Value()`.
    pub fn value(&self) -> i128 {
        ceil_div(self.nanos, NANO)
    }

    /// The value in thousandths, rounded up, as upstream's `MilliValue()`.
    pub fn milli_value(&self) -> i128 {
        ceil_div(self.nanos, 1_000_000)
    }

    /// The sum, keeping this quantity's format; `None` when it would be too large.
    pub fn checked_add(&self, other: &Quantity) -> Option<Quantity> {
        self.with_nanos(self.nanos.checked_add(other.nanos)?)
    }

    /// The difference, keeping this quantity's format; `None` when it would be too large.
    pub fn checked_sub(&self, other: &Quantity) -> Option<Quantity> {
        self.with_nanos(self.nanos.checked_sub(other.nanos)?)
    }

    /// The quantity multiplied by an integer factor; `None` when it would be too large.
    pub fn checked_mul(&self, factor: i64) -> Option<Quantity> {
        self.with_nanos(self.nanos.checked_mul(i128::from(factor))?)
    }

    /// The quantity scaled by `numerator / denominator`, rounded up to the nano-unit as
    /// upstream rounds; `None` for a zero denominator or a result that is too large.
    pub fn checked_scale(&self, numerator: i64, denominator: i64) -> Option<Quantity> {
        if denominator == 0 {
            return None;
        }
        let product = self.nanos.checked_mul(i128::from(numerator))?;
        self.with_nanos(ceil_div(product, i128::from(denominator)))
    }

    /// The negated quantity.
    pub fn neg(&self) -> Quantity {
        Quantity {
            nanos: -self.nanos,
            format: self.format,
        }
    }

    fn with_nanos(&self, nanos: i128) -> Option<Quantity> {
        (nanos.abs() <= MAX_NANOS).then_some(Quantity {
            nanos,
            format: self.format,
        })
    }

    /// The canonical text, as upstream's `String()` prints it.
    pub fn to_canonical(&self) -> String {
        if self.nanos == 0 {
            return "0".to_string();
        }
        let mut format = self.format;
        if format == Format::BinarySi {
            let small = self.nanos.abs() < 1024 * NANO;
            if small || self.nanos % NANO != 0 {
                format = Format::DecimalSi;
            }
        }
        match format {
            Format::BinarySi => {
                let (mantissa, exponent) = remove_factors(self.nanos / NANO, 1024);
                match binary_suffix(exponent * 10) {
                    Some(suffix) => format!("{mantissa}{suffix}"),
                    None => decimal_text(self.nanos, Format::DecimalSi),
                }
            }
            other => decimal_text(self.nanos, other),
        }
    }
}

/// Prints nano-units in a base-10 format: the mantissa has no trailing factors of ten beyond
/// what makes the exponent a multiple of three.
fn decimal_text(nanos: i128, format: Format) -> String {
    let (mut mantissa, removed) = remove_factors(nanos, 10);
    let mut exponent = removed as i32 - 9;
    match exponent.rem_euclid(3) {
        1 => {
            mantissa *= 10;
            exponent -= 1;
        }
        2 => {
            mantissa *= 100;
            exponent -= 2;
        }
        _ => {}
    }
    let suffix = match format {
        Format::DecimalExponent => exponent_suffix(exponent),
        _ => decimal_suffix(exponent)
            .map(str::to_string)
            .unwrap_or_else(|| exponent_suffix(exponent)),
    };
    format!("{mantissa}{suffix}")
}

fn exponent_suffix(exponent: i32) -> String {
    if exponent == 0 {
        String::new()
    } else {
        format!("e{exponent}")
    }
}

fn decimal_suffix(exponent: i32) -> Option<&'static str> {
    Some(match exponent {
        -9 => "n",
        -6 => "u",
        -3 => "m",
        0 => "",
        3 => "k",
        6 => "M",
        9 => "G",
        12 => "T",
        15 => "P",
        18 => "E",
        _ => return None,
    })
}

fn binary_suffix(power_of_two: u32) -> Option<&'static str> {
    Some(match power_of_two {
        0 => "",
        10 => "Ki",
        20 => "Mi",
        30 => "Gi",
        40 => "Ti",
        50 => "Pi",
        60 => "Ei",
        _ => return None,
    })
}

/// Divides out `factor` as often as it goes; returns what is left and how many times it went.
fn remove_factors(mut value: i128, factor: i128) -> (i128, u32) {
    let mut times = 0;
    while value != 0 && value % factor == 0 {
        value /= factor;
        times += 1;
    }
    (value, times)
}

/// Division rounding toward positive infinity.
fn ceil_div(numerator: i128, denominator: i128) -> i128 {
    let quotient = numerator / denominator;
    let remainder = numerator % denominator;
    if remainder != 0 && ((remainder > 0) == (denominator > 0)) {
        quotient + 1
    } else {
        quotient
    }
}

/// The multiplier a suffix stands for, as (base, exponent), and the format it implies.
fn parse_suffix(suffix: &str) -> Result<(i128, i32, Format), QuantityError> {
    let decimal = |exp| Ok((10, exp, Format::DecimalSi));
    let binary = |exp| Ok((2, exp, Format::BinarySi));
    match suffix {
        "" => decimal(0),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => binary(10),
        "Mi" => binary(20),
        "Gi" => binary(30),
        "Ti" => binary(40),
        "Pi" => binary(50),
        "Ei" => binary(60),
        _ => {
            let rest = suffix
                .strip_prefix('e')
                .or_else(|| suffix.strip_prefix('E'))
                .ok_or(QuantityError::Suffix)?;
            let digits = rest.strip_prefix(['+', '-']).unwrap_or(rest);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || digits.len() > 4
            {
                return Err(QuantityError::Suffix);
            }
            let exponent: i32 = rest.parse().map_err(|_| QuantityError::Suffix)?;
            Ok((10, exponent, Format::DecimalExponent))
        }
    }
}

impl FromStr for Quantity {
    type Err = QuantityError;

    fn from_str(text: &str) -> Result<Quantity, QuantityError> {
        let text = text.trim();
        let (negative, unsigned) = match text.as_bytes().first() {
            Some(b'-') => (true, &text[1..]),
            Some(b'+') => (false, &text[1..]),
            _ => (false, text),
        };
        let number_len = unsigned
            .bytes()
            .take_while(|b| b.is_ascii_digit() || *b == b'.')
            .count();
        let (number, suffix) = unsigned.split_at(number_len);
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
            return Err(QuantityError::Syntax);
        }
        if !suffix
            .bytes()
            .all(|b| b"eEinumkKMGTP+-0123456789".contains(&b))
        {
            return Err(QuantityError::Syntax);
        }
        let (base, exponent, format) = parse_suffix(suffix)?;

        // Exact value = digits * 10^(-fraction.len()) * base^exponent, kept as a fraction
        // numerator/denominator and then rounded up to whole nano-units.
        let digits = format!("{whole}{fraction}");
        let digits = digits.trim_start_matches('0');
        if digits.len() > 36 {
            return Err(QuantityError::TooLarge);
        }
        let mantissa: i128 = if digits.is_empty() {
            0
        } else {
            digits.parse().map_err(|_| QuantityError::TooLarge)?
        };
        let mut numerator = mantissa.checked_mul(NANO).ok_or(QuantityError::TooLarge)?;
        let mut denominator: i128 = 1;
        let mut scale_by = |power: i32, base: i128| -> Result<(), QuantityError> {
            let factor = base
                .checked_pow(power.unsigned_abs())
                .ok_or(QuantityError::TooLarge)?;
            if power >= 0 {
                numerator = numerator
                    .checked_mul(factor)
                    .ok_or(QuantityError::TooLarge)?;
            } else {
                denominator = denominator
                    .checked_mul(factor)
                    .ok_or(QuantityError::TooLarge)?;
            }
            Ok(())
        };
        let fraction_len = i32::try_from(fraction.len()).map_err(|_| QuantityError::TooLarge)?;
        scale_by(-fraction_len, 10)?;
        if mantissa != 0 {
            scale_by(exponent, base)?;
        }
        let mut nanos = ceil_div(numerator, denominator);
        if nanos > MAX_NANOS {
            return Err(QuantityError::TooLarge);
        }
        if negative {
            // Upstream rounds the magnitude up, then applies the sign.
            nanos = -nanos;
        }
        Ok(Quantity { nanos, format })
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_canonical())
    }
}

impl PartialEq for Quantity {
    fn eq(&self, other: &Quantity) -> bool {
        self.nanos == other.nanos
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Quantity) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Quantity) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

impl std::hash::Hash for Quantity {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.nanos.hash(state);
    }
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_canonical())
    }
}

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Quantity, D::Error> {
        // Upstream accepts both `"1Gi"` and a bare JSON number.
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Text(String),
            Integer(i64),
            Float(f64),
        }
        let text = match Raw::deserialize(deserializer)? {
            Raw::Text(text) => text,
            Raw::Integer(value) => value.to_string(),
            Raw::Float(value) => value.to_string(),
        };
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl TryFrom<&k8s_openapi::apimachinery::pkg::api::resource::Quantity> for Quantity {
    type Error = QuantityError;

    fn try_from(
        value: &k8s_openapi::apimachinery::pkg::api::resource::Quantity,
    ) -> Result<Quantity, QuantityError> {
        value.0.parse()
    }
}

impl From<Quantity> for k8s_openapi::apimachinery::pkg::api::resource::Quantity {
    fn from(value: Quantity) -> Self {
        k8s_openapi::apimachinery::pkg::api::resource::Quantity(value.to_canonical())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn q(text: &str) -> Quantity {
        text.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn canonical_forms_match_upstream() {
        // (input, canonical) pairs from apimachinery's quantity_test.go.
        let table = [
            ("0", "0"),
            ("0n", "0"),
            ("0Ki", "0"),
            ("1", "1"),
            ("+1", "1"),
            ("-1", "-1"),
            ("1000", "1k"),
            ("1024", "1024"),
            ("1500m", "1500m"),
            ("1.5", "1500m"),
            ("0.1", "100m"),
            (".5", "500m"),
            ("5.", "5"),
            ("100m", "100m"),
            ("1000m", "1"),
            ("1n", "1n"),
            ("1000n", "1u"),
            ("1000u", "1m"),
            ("1k", "1k"),
            ("1M", "1M"),
            ("1G", "1G"),
            ("1T", "1T"),
            ("1P", "1P"),
            ("1E", "1E"),
            ("1Ki", "1Ki"),
            ("1Mi", "1Mi"),
            ("1Gi", "1Gi"),
            ("1Ti", "1Ti"),
            ("1Pi", "1Pi"),
            ("1Ei", "1Ei"),
            ("1.5Gi", "1536Mi"),
            ("1024Mi", "1Gi"),
            ("1025Mi", "1025Mi"),
            ("0.5Ki", "512"),
            ("1.5Ki", "1536"),
            // Not in upstream's table; CanonicalizeBytes' rule: a binary quantity that is no
            // whole multiple of 1024 prints as a plain number, which reads back as decimal.
            ("49843.750Ki", "51040000"),
            ("51040000", "51040k"),
            ("-1.5Gi", "-1536Mi"),
            ("0.3Ki", "307200m"),
            ("1e3", "1e3"),
            ("1E3", "1e3"),
            ("1e-3", "1e-3"),
            ("1.5e3", "1500"),
            ("100e-3", "100e-3"),
            ("12e6", "12e6"),
            ("1e0", "1"),
            ("0.1n", "1n"),
            ("1.000000001", "1000000001n"),
            ("0.0000000001", "1n"),
            ("-0.0000000001", "-1n"),
            ("10000k", "10M"),
            ("1100k", "1100k"),
            ("129e6", "129e6"),
            ("1001e-3", "1001e-3"),
        ];
        for (input, want) in table {
            assert_eq!(q(input).to_canonical(), want, "canonical form of {input}");
        }
    }

    #[test]
    fn rejects_malformed_text() {
        for bad in [
            "", ".", "-", "1.2.3", "1Kb", "1i", "abc", "1 Gi", "1e", "1e+", "Gi", "1KiB",
            "1e99999", "--1", "1E3Ki",
        ] {
            assert!(bad.parse::<Quantity>().is_err(), "{bad:?} should not parse");
        }
    }

    #[test]
    fn rejects_values_too_large_to_hold_exactly() {
        assert_eq!(
            "1e30".parse::<Quantity>(),
            Err(QuantityError::TooLarge),
            "1e30"
        );
        assert_eq!(
            "100000000000000000000000000000000000000000".parse::<Quantity>(),
            Err(QuantityError::TooLarge)
        );
    }

    #[test]
    fn values_round_up_like_upstream() {
        let table = [
            ("1", 1, 1000),
            ("100m", 1, 100),
            ("1500m", 2, 1500),
            ("1n", 1, 1),
            ("-1500m", -1, -1500),
            ("1Ki", 1024, 1_024_000),
        ];
        for (input, value, milli) in table {
            assert_eq!(q(input).value(), value, "value of {input}");
            assert_eq!(q(input).milli_value(), milli, "milli value of {input}");
        }
    }

    #[test]
    fn arithmetic_keeps_the_receivers_format() {
        assert_eq!(
            q("1Gi").checked_add(&q("512Mi")).unwrap().to_canonical(),
            "1536Mi"
        );
        assert_eq!(
            q("1").checked_sub(&q("250m")).unwrap().to_canonical(),
            "750m"
        );
        assert_eq!(q("500m").checked_mul(4).unwrap().to_canonical(), "2");
        assert_eq!(
            q("1Gi").checked_scale(1, 2).unwrap().to_canonical(),
            "512Mi"
        );
        assert_eq!(
            q("1").checked_scale(1, 3).unwrap().to_canonical(),
            "333333334n"
        );
        assert!(q("1").checked_scale(1, 0).is_none());
        assert!(q("1E").checked_mul(i64::MAX).is_none());
        assert!(q("2") > q("1999m"));
        assert_eq!(q("1Ki"), q("1024"));
    }

    #[test]
    fn serde_accepts_strings_and_numbers() {
        let parsed: Vec<Quantity> = serde_json::from_str(r#"["2Gi", 3, 0.5]"#).unwrap();
        assert_eq!(parsed, vec![q("2Gi"), q("3"), q("500m")]);
        assert_eq!(serde_json::to_string(&q("1.5Gi")).unwrap(), r#""1536Mi""#);
        assert!(serde_json::from_str::<Quantity>(r#""1Kb""#).is_err());
    }

    fn suffix() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec![
            "", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei",
            "e3", "e-3", "E6", "e0", "e-9",
        ])
    }

    proptest! {
        /// Printing and parsing again yields the same value and the same text.
        #[test]
        fn canonical_text_round_trips(whole in 0u32..100_000, fraction in 0u32..1000,
                                      negative: bool, suffix in suffix()) {
            let sign = if negative { "-" } else { "" };
            let text = format!("{sign}{whole}.{fraction:03}{suffix}");
            let parsed: Quantity = text.parse().unwrap();
            let canonical = parsed.to_canonical();
            let reparsed: Quantity = canonical.parse().unwrap();
            prop_assert_eq!(parsed, reparsed, "{} -> {}", text, canonical);
            // The text is a fixed point unless a binary quantity printed as a plain number
            // (no whole multiple of 1024, as upstream's CanonicalizeBytes), which reads back
            // as decimal: "49843.750Ki" prints "51040000", which prints "51040k".
            let again = reparsed.to_canonical();
            let binary_read_back_as_decimal =
                parsed.format() == Format::BinarySi && reparsed.format() != Format::BinarySi;
            prop_assert!(again == canonical || binary_read_back_as_decimal, "{} -> {} -> {}", text, canonical, again);
            let third: Quantity = again.parse().unwrap();
            prop_assert_eq!(third.to_canonical(), again);
        }

        /// Addition and subtraction are exact inverses.
        #[test]
        fn add_then_subtract_is_identity(a in -1_000_000_000i64..1_000_000_000,
                                         b in -1_000_000_000i64..1_000_000_000) {
            let qa = Quantity::from_milli(a);
            let qb = Quantity::from_milli(b);
            let sum = qa.checked_add(&qb).unwrap();
            prop_assert_eq!(sum.milli_value(), i128::from(a) + i128::from(b));
            prop_assert_eq!(sum.checked_sub(&qb).unwrap(), qa);
        }

        /// Ordering agrees with the milli values.
        #[test]
        fn ordering_matches_milli_values(a in any::<i32>(), b in any::<i32>()) {
            let qa = Quantity::from_milli(a.into());
            let qb = Quantity::from_milli(b.into());
            prop_assert_eq!(qa.cmp(&qb), a.cmp(&b));
        }

        /// No text makes the parser panic.
        #[test]
        fn parsing_never_panics(text in "[-+0-9.eEinumkKMGTP]{0,24}") {
            let _ = text.parse::<Quantity>();
        }
    }
}
