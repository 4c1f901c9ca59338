//! Authentication semantics: who a request comes from, as far as it can be told without
//! I/O.
//!
//! - Client certificates: the subject's CN is the user, each O a group (as upstream's x509
//!   authenticator), read from the DER the TLS listener verified.
//! - ServiceAccount tokens: the claims this server writes into its JWTs and the checks of
//!   expiry, not-before and audience on verified claims. Signing and verifying signatures
//!   (HMAC-SHA256) is the shell's: it holds the key.
//! - Static tokens parsed from the CSV text of `--token-auth-file` (`token,user,uid,"g1,g2"`).
//!
//! Every authenticated user is in `system:authenticated`. Knows no transport, file or key.

use std::collections::BTreeMap;
use tessera_model::json::Pointer as _;

use serde_json::{Value, json};

use crate::error::ApiError;

/// The audience of tokens meant for this API server.
pub const API_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";
/// The issuer written into ServiceAccount tokens.
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// An authenticated user, as upstream's `user.Info`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserInfo {
    /// User name.
    pub name: String,
    /// Stable identifier, if known.
    pub uid: String,
    /// Groups.
    pub groups: Vec<String>,
    /// Extra attributes.
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// A user with groups; `system:authenticated` is added.
    pub fn new(name: impl Into<String>, groups: &[&str]) -> UserInfo {
        let mut user = UserInfo {
            name: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            ..UserInfo::default()
        };
        user.authenticated();
        user
    }

    fn authenticated(&mut self) {
        if !self.groups.iter().any(|g| g == "system:authenticated") {
            self.groups.push("system:authenticated".into());
        }
    }

    /// The identity of a ServiceAccount.
    pub fn service_account(namespace: &str, name: &str, uid: &str) -> UserInfo {
        let mut user = UserInfo::new(
            format!("system:serviceaccount:{namespace}:{name}"),
            &[
                "system:serviceaccounts",
                &format!("system:serviceaccounts:{namespace}"),
            ],
        );
        user.uid = uid.to_string();
        user
    }

    /// The JSON `UserInfo` of reviews.
    pub fn to_json(&self) -> Value {
        let mut info = json!({"username": self.name, "groups": self.groups});
        if !self.uid.is_empty() {
            info["uid"] = json!(self.uid);
        }
        if !self.extra.is_empty() {
            info["extra"] = json!(self.extra);
        }
        info
    }
}

/// The identity of a client certificate: (CN, [O…]) from its DER encoding.
pub fn certificate_identity(der: &[u8]) -> Option<UserInfo> {
    let (common_name, organizations) = subject(der)?;
    let groups: Vec<&str> = organizations.iter().map(String::as_str).collect();
    Some(UserInfo::new(common_name, &groups))
}

/// A DER element: (tag, contents, rest).
fn element(bytes: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let tag = *bytes.first()?;
    let first = *bytes.get(1)?;
    let (length, header) = if first & 0x80 == 0 {
        (usize::from(first), 2)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 {
            return None;
        }
        let mut length = 0usize;
        for i in 0..count {
            length = (length << 8) | usize::from(*bytes.get(2 + i)?);
        }
        (length, 2 + count)
    };
    let end = header.checked_add(length)?;
    Some((tag, bytes.get(header..end)?, bytes.get(end..)?))
}

/// The subject CN and O values of an X.509 certificate.
fn subject(der: &[u8]) -> Option<(String, Vec<String>)> {
    let (_, certificate, _) = element(der)?;
    let (_, tbs, _) = element(certificate)?;
    let mut rest = tbs;
    // Optional explicit version [0].
    if rest.first() == Some(&0xa0) {
        rest = element(rest)?.2;
    }
    // serialNumber, signature, issuer, validity — then subject.
    for _ in 0..4 {
        rest = element(rest)?.2;
    }
    let (_, name, _) = element(rest)?;
    let mut common_name = None;
    let mut organizations = Vec::new();
    let mut sets = name;
    while !sets.is_empty() {
        let (_, set, next) = element(sets)?;
        sets = next;
        let mut attributes = set;
        while !attributes.is_empty() {
            let (_, attribute, next) = element(attributes)?;
            attributes = next;
            let (_, oid, value_rest) = element(attribute)?;
            let (_, value, _) = element(value_rest)?;
            let text = String::from_utf8_lossy(value).into_owned();
            match oid {
                [0x55, 0x04, 0x03] => common_name = Some(text),
                [0x55, 0x04, 0x0a] => organizations.push(text),
                _ => {}
            }
        }
    }
    Some((common_name?, organizations))
}

/// Static bearer tokens from a CSV file, as `--token-auth-file`.
#[derive(Debug, Clone, Default)]
pub struct StaticTokens {
    tokens: BTreeMap<String, UserInfo>,
}

impl StaticTokens {
    /// Parses the CSV text; a malformed line is an error naming it.
    pub fn parse(text: &str) -> Result<StaticTokens, String> {
        let mut tokens = BTreeMap::new();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fields = split_csv(line);
            if fields.len() < 3 || fields[0].is_empty() || fields[1].is_empty() {
                return Err(format!(
                    "line {}: expected token,user,uid[,\"group1,group2\"]",
                    number + 1
                ));
            }
            let groups: Vec<&str> = fields
                .get(3)
                .map(|g| {
                    g.split(',')
                        .map(str::trim)
                        .filter(|g| !g.is_empty())
                        .collect()
                })
                .unwrap_or_default();
            let mut user = UserInfo::new(fields[1].clone(), &groups);
            user.uid = fields[2].clone();
            tokens.insert(fields[0].clone(), user);
        }
        Ok(StaticTokens { tokens })
    }

    /// The user a static token stands for.
    pub fn user(&self, token: &str) -> Option<UserInfo> {
        self.tokens.get(token).cloned()
    }
}

fn split_csv(line: &str) -> Vec<String> {
    let mut fields = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    for ch in line.chars() {
        match ch {
            '"' => quoted = !quoted,
            ',' if !quoted => fields.push(std::mem::take(&mut current).trim().to_string()),
            other => current.push(other),
        }
    }
    fields.push(current.trim().to_string());
    fields
}

/// The claims of a verified ServiceAccount token.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenClaims {
    /// Namespace of the ServiceAccount.
    pub namespace: String,
    /// Name of the ServiceAccount.
    pub name: String,
    /// UID of the ServiceAccount when the token was issued.
    pub uid: String,
}

/// The claims of a ServiceAccount token this server issues.
pub fn token_claims(
    namespace: &str,
    name: &str,
    uid: &str,
    audiences: &[String],
    issued: u64,
    expires: u64,
) -> Value {
    json!({
        "iss": ISSUER, "sub": format!("system:serviceaccount:{namespace}:{name}"),
        "aud": audiences, "iat": issued, "nbf": issued, "exp": expires,
        "kubernetes.io": {"namespace": namespace, "serviceaccount": {"name": name, "uid": uid}},
    })
}

/// The header of the tokens this server issues.
pub fn token_header() -> Value {
    json!({"alg": "HS256", "typ": "JWT"})
}

/// Checks the claims of a token whose signature was verified: expiry, not-before (with a
/// minute of leeway) and audience, at `now` (seconds since the epoch).
pub fn check_claims(claims: &Value, now: u64, audience: &str) -> Option<TokenClaims> {
    let expires = claims.get("exp")?.as_u64()?;
    let not_before = claims.get("nbf").and_then(Value::as_u64).unwrap_or(0);
    if now >= expires || now + 60 < not_before {
        return None;
    }
    let audiences = claims.get("aud")?.as_array()?;
    if !audiences.iter().any(|a| a == audience) {
        return None;
    }
    let account = claims.get("kubernetes.io")?;
    Some(TokenClaims {
        namespace: account.get("namespace")?.as_str()?.to_string(),
        name: account.at("/serviceaccount/name")?.as_str()?.to_string(),
        uid: account.at("/serviceaccount/uid")?.as_str()?.to_string(),
    })
}

/// 401 as upstream answers it.
pub fn unauthorized() -> ApiError {
    let mut error = ApiError::bad_request("Unauthorized");
    error.code = 401;
    error.reason = "Unauthorized";
    error
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_token_files_parse_like_upstream() {
        let tokens = StaticTokens::parse(
            "# comment\nabc123,bob,uid-bob,\"team-a,team-b\"\nxyz,carol,uid-c\n",
        )
        .unwrap();
        let bob = tokens.user("abc123").unwrap();
        assert_eq!(bob.groups, ["team-a", "team-b", "system:authenticated"]);
        assert_eq!(tokens.user("xyz").unwrap().name, "carol");
        assert_eq!(
            StaticTokens::parse("only-token\n").unwrap_err(),
            "line 1: expected token,user,uid[,\"group1,group2\"]"
        );
    }
}
