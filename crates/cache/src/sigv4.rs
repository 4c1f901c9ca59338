//! AWS Signature Version 4 for S3, as the S3 documentation's "Authenticating Requests (AWS
//! Signature Version 4)" defines it: the canonical request, the string to sign, the derived
//! signing key and the signature — for a request signed in its headers ([`sign_headers`], what
//! `tessera model push` sends) and for a presigned URL ([`presign`], the query form with
//! `X-Amz-Algorithm`, `X-Amz-Credential`, `X-Amz-Date`, `X-Amz-Expires`,
//! `X-Amz-SignedHeaders=host` and `X-Amz-Signature`, through which node caches fetch model
//! bytes).
//!
//! Time is an input (`SystemTime`), so a signature is a pure function of its request. The
//! module does not send, verify or parse requests and knows no endpoint: the host, the path
//! (`/<bucket>/<key>`, path-style) and the region are given.

use std::time::{SystemTime, UNIX_EPOCH};

use sha2::{Digest, Sha256};
use thiserror::Error;

use crate::hex;

/// The algorithm name in the credential and the `Authorization` header.
pub const ALGORITHM: &str = "AWS4-HMAC-SHA256";
/// The payload hash of a presigned URL and of a request whose body is not hashed.
pub const UNSIGNED_PAYLOAD: &str = "UNSIGNED-PAYLOAD";
/// The longest validity S3 accepts for a presigned URL: seven days.
pub const MAX_EXPIRES_SECS: u64 = 7 * 24 * 60 * 60;

/// A request that cannot be signed, naming the field.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SigV4Error {
    #[error("invalid {field}: {reason}")]
    Invalid {
        field: &'static str,
        reason: &'static str,
    },
    #[error("X-Amz-Expires {0} is outside 1..={MAX_EXPIRES_SECS} seconds")]
    Expires(u64),
}

fn invalid(field: &'static str, reason: &'static str) -> SigV4Error {
    SigV4Error::Invalid { field, reason }
}

/// Who signs and for which scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signer<'a> {
    pub access_key: &'a str,
    pub secret_key: &'a str,
    pub region: &'a str,
    /// `s3` for S3.
    pub service: &'a str,
}

/// HMAC-SHA256 (RFC 2104) of `data` under `key`.
pub fn hmac_sha256(key: &[u8], data: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(block.map(|b| b ^ 0x36));
    inner.update(data);
    let mut outer = Sha256::new();
    outer.update(block.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

/// `YYYYMMDDTHHMMSSZ` (the `X-Amz-Date` form) of a time at or after the Unix epoch.
pub fn amz_date(time: SystemTime) -> Result<String, SigV4Error> {
    let secs = time
        .duration_since(UNIX_EPOCH)
        .map_err(|_| invalid("time", "before the Unix epoch"))?
        .as_secs();
    let days = i64::try_from(secs / 86_400).map_err(|_| invalid("time", "out of range"))?;
    let (year, month, day) = civil_from_days(days);
    let rest = secs % 86_400;
    Ok(format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    ))
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (H. Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (
        year,
        u32::try_from(month).unwrap_or(1),
        u32::try_from(day).unwrap_or(1),
    )
}

/// SigV4's URI encoding: every byte but `A-Z a-z 0-9 - _ . ~` as `%XX` (upper-case hex);
/// `/` kept when `keep_slash` (object key paths).
pub fn uri_encode(input: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(input.len());
    for byte in input.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(char::from(byte));
            }
            b'/' if keep_slash => out.push('/'),
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// The canonical query string: names and values encoded, sorted by name then value, joined
/// with `&`.
pub fn canonical_query(params: &[(String, String)]) -> String {
    let mut encoded: Vec<(String, String)> = params
        .iter()
        .map(|(k, v)| (uri_encode(k, false), uri_encode(v, false)))
        .collect();
    encoded.sort();
    encoded
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

/// A request to sign: method, `Host` header value (`host[:port]`), the unencoded path (`/`
/// then `<bucket>/<key>`), query parameters and the time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request<'a> {
    pub method: &'a str,
    pub host: &'a str,
    pub path: &'a str,
    pub query: Vec<(String, String)>,
    pub time: SystemTime,
}

fn check_request(signer: &Signer<'_>, request: &Request<'_>) -> Result<(), SigV4Error> {
    for (field, value) in [
        ("access key", signer.access_key),
        ("secret key", signer.secret_key),
        ("region", signer.region),
        ("service", signer.service),
        ("method", request.method),
        ("host", request.host),
    ] {
        if value.is_empty() {
            return Err(invalid(field, "empty"));
        }
        if value.chars().any(|c| c.is_control() || c == ' ') && field != "secret key" {
            return Err(invalid(field, "holds a space or control character"));
        }
    }
    if signer.access_key.contains('/')
        || signer.region.contains('/')
        || signer.service.contains('/')
    {
        return Err(invalid("credential scope", "a part holds '/'"));
    }
    if !request.path.starts_with('/') {
        return Err(invalid("path", "does not start with '/'"));
    }
    Ok(())
}

/// The derived key: HMAC chain over date, region, service and `aws4_request`.
fn signing_key(signer: &Signer<'_>, date: &str) -> [u8; 32] {
    let k_date = hmac_sha256(
        format!("AWS4{}", signer.secret_key).as_bytes(),
        date.as_bytes(),
    );
    let k_region = hmac_sha256(&k_date, signer.region.as_bytes());
    let k_service = hmac_sha256(&k_region, signer.service.as_bytes());
    hmac_sha256(&k_service, b"aws4_request")
}

/// Signs a canonical request: returns (credential scope, signature hex).
fn signature(signer: &Signer<'_>, amz_date: &str, canonical_request: &str) -> (String, String) {
    let date = &amz_date[..8];
    let scope = format!("{date}/{}/{}/aws4_request", signer.region, signer.service);
    let string_to_sign = format!(
        "{ALGORITHM}\n{amz_date}\n{scope}\n{}",
        hex(&Sha256::digest(canonical_request.as_bytes()))
    );
    let signature = hex(&hmac_sha256(
        &signing_key(signer, date),
        string_to_sign.as_bytes(),
    ));
    (scope, signature)
}

/// The presigned URL's query string for `request` valid `expires_secs` from its time: the
/// request's own parameters, then `X-Amz-Algorithm`, `X-Amz-Credential`, `X-Amz-Date`,
/// `X-Amz-Expires`, `X-Amz-SignedHeaders=host` in canonical order, and `X-Amz-Signature`
/// last. The URL is `<scheme>://<host><uri_encode(path, true)>?<this>`.
pub fn presign(
    signer: &Signer<'_>,
    request: &Request<'_>,
    expires_secs: u64,
) -> Result<String, SigV4Error> {
    check_request(signer, request)?;
    if !(1..=MAX_EXPIRES_SECS).contains(&expires_secs) {
        return Err(SigV4Error::Expires(expires_secs));
    }
    let amz_date = amz_date(request.time)?;
    let mut params = request.query.clone();
    params.extend([
        ("X-Amz-Algorithm".to_owned(), ALGORITHM.to_owned()),
        (
            "X-Amz-Credential".to_owned(),
            format!(
                "{}/{}/{}/{}/aws4_request",
                signer.access_key,
                &amz_date[..8],
                signer.region,
                signer.service
            ),
        ),
        ("X-Amz-Date".to_owned(), amz_date.clone()),
        ("X-Amz-Expires".to_owned(), expires_secs.to_string()),
        ("X-Amz-SignedHeaders".to_owned(), "host".to_owned()),
    ]);
    let query = canonical_query(&params);
    let canonical_request = format!(
        "{}\n{}\n{query}\nhost:{}\n\nhost\n{UNSIGNED_PAYLOAD}",
        request.method,
        uri_encode(request.path, true),
        request.host
    );
    let (_, signature) = signature(signer, &amz_date, &canonical_request);
    Ok(format!("{query}&X-Amz-Signature={signature}"))
}

/// The headers that sign `request` in its headers: `x-amz-date`, `x-amz-content-sha256`
/// (`payload_sha256`: the body's hex sha256, or [`UNSIGNED_PAYLOAD`]) and `authorization`.
/// `headers` are further headers the request sends and signs (e.g. `range`); names are
/// compared case-insensitively and values trimmed. `host` is always signed.
pub fn sign_headers(
    signer: &Signer<'_>,
    request: &Request<'_>,
    payload_sha256: &str,
    headers: &[(&str, &str)],
) -> Result<Vec<(String, String)>, SigV4Error> {
    check_request(signer, request)?;
    if payload_sha256 != UNSIGNED_PAYLOAD && !crate::is_lower_hex(payload_sha256, 64) {
        return Err(invalid(
            "x-amz-content-sha256",
            "neither a lower-case sha256 nor UNSIGNED-PAYLOAD",
        ));
    }
    let amz_date = amz_date(request.time)?;
    let mut signed: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v.trim().to_owned()))
        .filter(|(k, _)| !matches!(k.as_str(), "host" | "x-amz-date" | "x-amz-content-sha256"))
        .collect();
    signed.extend([
        ("host".to_owned(), request.host.to_owned()),
        ("x-amz-content-sha256".to_owned(), payload_sha256.to_owned()),
        ("x-amz-date".to_owned(), amz_date.clone()),
    ]);
    signed.sort();
    let canonical_headers: String = signed.iter().map(|(k, v)| format!("{k}:{v}\n")).collect();
    let signed_names = signed
        .iter()
        .map(|(k, _)| k.as_str())
        .collect::<Vec<_>>()
        .join(";");
    let canonical_request = format!(
        "{}\n{}\n{}\n{canonical_headers}\n{signed_names}\n{payload_sha256}",
        request.method,
        uri_encode(request.path, true),
        canonical_query(&request.query),
    );
    let (scope, signature) = signature(signer, &amz_date, &canonical_request);
    Ok(vec![
        ("x-amz-date".to_owned(), amz_date),
        ("x-amz-content-sha256".to_owned(), payload_sha256.to_owned()),
        (
            "authorization".to_owned(),
            format!(
                "{ALGORITHM} Credential={}/{scope}, SignedHeaders={signed_names}, Signature={signature}",
                signer.access_key
            ),
        ),
    ])
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// The S3 documentation's example credentials.
    const EXAMPLE: Signer<'static> = Signer {
        access_key: "AKIAIOSFODNN7EXAMPLE",
        secret_key: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        region: "us-east-1",
        service: "s3",
    };

    /// 2013-05-24T00:00:00Z, the examples' time.
    fn example_time() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_369_353_600)
    }

    #[test]
    fn hmac_matches_rfc_4231() {
        // Test case 2 (a short key) and 6 (a key longer than the block).
        assert_eq!(
            hex(&hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_eq!(
            hex(&hmac_sha256(
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First"
            )),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn amz_dates() {
        for (secs, want) in [
            (0, "19700101T000000Z"),
            (1_369_353_600, "20130524T000000Z"),
            (951_782_400, "20000229T000000Z"),
            (1_798_761_599, "20261231T235959Z"),
            (4_107_542_400, "21000301T000000Z"),
        ] {
            assert_eq!(
                amz_date(UNIX_EPOCH + Duration::from_secs(secs)).unwrap(),
                want,
                "{secs}"
            );
        }
        assert!(amz_date(UNIX_EPOCH - Duration::from_secs(1)).is_err());
    }

    #[test]
    fn uri_encoding() {
        for (input, keep, want) in [
            (
                "/models/org/name/main/a b.txt",
                true,
                "/models/org/name/main/a%20b.txt",
            ),
            ("a/b", false, "a%2Fb"),
            (
                "AKIA/20130524/us-east-1/s3/aws4_request",
                false,
                "AKIA%2F20130524%2Fus-east-1%2Fs3%2Faws4_request",
            ),
            ("~-_.", false, "~-_."),
            ("é+=", true, "%C3%A9%2B%3D"),
        ] {
            assert_eq!(uri_encode(input, keep), want, "{input}");
        }
    }

    /// "Authenticating Requests: Using Query Parameters (AWS Signature Version 4)": GET
    /// `test.txt` of `examplebucket`, 86400 s, the published signature.
    #[test]
    fn presign_matches_the_s3_documentation_example() {
        let query = presign(
            &EXAMPLE,
            &Request {
                method: "GET",
                host: "examplebucket.s3.amazonaws.com",
                path: "/test.txt",
                query: vec![],
                time: example_time(),
            },
            86_400,
        )
        .unwrap();
        assert_eq!(
            query,
            "X-Amz-Algorithm=AWS4-HMAC-SHA256\
             &X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request\
             &X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host\
             &X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"
        );
    }

    /// "Authenticating Requests: Using the Authorization Header": the GET Object example with
    /// a `Range` header.
    #[test]
    fn header_signature_matches_the_s3_documentation_example() {
        let headers = sign_headers(
            &EXAMPLE,
            &Request {
                method: "GET",
                host: "examplebucket.s3.amazonaws.com",
                path: "/test.txt",
                query: vec![],
                time: example_time(),
            },
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            &[("Range", "bytes=0-9")],
        )
        .unwrap();
        let authorization = &headers
            .iter()
            .find(|(k, _)| k == "authorization")
            .unwrap()
            .1;
        assert_eq!(
            authorization,
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, \
             SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, \
             Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
        );
        assert!(headers.contains(&("x-amz-date".to_owned(), "20130524T000000Z".to_owned())));
    }

    #[test]
    fn presign_refuses_bad_input_naming_the_field() {
        let request = Request {
            method: "GET",
            host: "127.0.0.1:9000",
            path: "/models/a/b/main/config.json",
            query: vec![],
            time: example_time(),
        };
        for (expires, signer, path, want) in [
            (0, EXAMPLE, "/x", "X-Amz-Expires 0 is outside"),
            (MAX_EXPIRES_SECS + 1, EXAMPLE, "/x", "X-Amz-Expires 604801"),
            (
                60,
                Signer {
                    access_key: "",
                    ..EXAMPLE
                },
                "/x",
                "invalid access key: empty",
            ),
            (
                60,
                Signer {
                    region: "us/east",
                    ..EXAMPLE
                },
                "/x",
                "invalid credential scope",
            ),
            (60, EXAMPLE, "x", "invalid path"),
        ] {
            let error = presign(
                &signer,
                &Request {
                    path,
                    ..request.clone()
                },
                expires,
            )
            .unwrap_err()
            .to_string();
            assert!(error.contains(want), "{error} lacks {want}");
        }
        assert!(presign(&EXAMPLE, &request, MAX_EXPIRES_SECS).is_ok());
    }

    #[test]
    fn a_signature_changes_with_every_signed_input() {
        let request = Request {
            method: "GET",
            host: "127.0.0.1:9000",
            path: "/models/a/b/main/config.json",
            query: vec![],
            time: example_time(),
        };
        let base = presign(&EXAMPLE, &request, 3600).unwrap();
        let variants = [
            presign(
                &EXAMPLE,
                &Request {
                    host: "127.0.0.1:9001",
                    ..request.clone()
                },
                3600,
            ),
            presign(
                &EXAMPLE,
                &Request {
                    path: "/models/a/b/main/other.json",
                    ..request.clone()
                },
                3600,
            ),
            presign(
                &EXAMPLE,
                &Request {
                    time: example_time() + Duration::from_secs(1),
                    ..request.clone()
                },
                3600,
            ),
            presign(
                &Signer {
                    secret_key: "other",
                    ..EXAMPLE
                },
                &request,
                3600,
            ),
            presign(&EXAMPLE, &request, 3601),
        ];
        let signature = |q: &str| q.rsplit_once("X-Amz-Signature=").unwrap().1.to_owned();
        for variant in variants {
            assert_ne!(signature(&variant.unwrap()), signature(&base));
        }
    }
}
