//! Authentication: who a request comes from.
//!
//! - Client certificates: the subject's CN is the user, each O a group (as upstream's x509
//!   authenticator); the TLS listener attaches the verified certificate's identity.
//! - Bearer tokens: ServiceAccount tokens this server issued (HMAC-SHA256 JWTs with
//!   audience and expiry, valid only while their ServiceAccount exists with the same UID),
//!   and static tokens from a CSV file (`token,user,uid,"group1,group2"`).
//! - In-process clients (Tessera's own controllers and node twins) carry an identity set by
//!   [`IdentityLayer`]; it cannot arrive over the network.
//!
//! Every authenticated user is in `system:authenticated`. Anonymous requests are refused
//! except for health checks.

use std::collections::BTreeMap;
use std::path::Path;
use std::task::{Context, Poll};

use base64::Engine;
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

    /// Reads a token file.
    pub fn load(path: &Path) -> Result<StaticTokens, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        StaticTokens::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    fn user(&self, token: &str) -> Option<UserInfo> {
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

/// Signs and verifies ServiceAccount tokens.
#[derive(Clone)]
pub struct TokenSigner {
    key: ring::hmac::Key,
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
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

impl TokenSigner {
    /// A signer with a secret key.
    pub fn new(secret: &[u8]) -> TokenSigner {
        TokenSigner {
            key: ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret),
        }
    }

    /// Issues a token for a ServiceAccount.
    pub fn issue(
        &self,
        namespace: &str,
        name: &str,
        uid: &str,
        audiences: &[String],
        issued: u64,
        expires: u64,
    ) -> String {
        let header = json!({"alg": "HS256", "typ": "JWT"});
        let claims = json!({
            "iss": ISSUER, "sub": format!("system:serviceaccount:{namespace}:{name}"),
            "aud": audiences, "iat": issued, "nbf": issued, "exp": expires,
            "kubernetes.io": {"namespace": namespace, "serviceaccount": {"name": name, "uid": uid}},
        });
        let unsigned = format!(
            "{}.{}",
            b64(header.to_string().as_bytes()),
            b64(claims.to_string().as_bytes())
        );
        let signature = ring::hmac::sign(&self.key, unsigned.as_bytes());
        format!("{unsigned}.{}", b64(signature.as_ref()))
    }

    /// Verifies a token's signature, expiry and audience.
    pub fn verify(&self, token: &str, now: u64, audience: &str) -> Option<TokenClaims> {
        let mut parts = token.split('.');
        let (header, claims, signature) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        let signature = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(signature)
            .ok()?;
        ring::hmac::verify(
            &self.key,
            format!("{header}.{claims}").as_bytes(),
            &signature,
        )
        .ok()?;
        let claims: Value = serde_json::from_slice(
            &base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(claims)
                .ok()?,
        )
        .ok()?;
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
            name: account
                .pointer("/serviceaccount/name")?
                .as_str()?
                .to_string(),
            uid: account
                .pointer("/serviceaccount/uid")?
                .as_str()?
                .to_string(),
        })
    }
}

/// How the server authenticates.
#[derive(Clone)]
pub struct Authenticator {
    /// ServiceAccount token signer.
    pub signer: TokenSigner,
    /// Static tokens.
    pub static_tokens: StaticTokens,
}

impl Authenticator {
    /// The user a bearer token stands for; `Err` for an invalid token.
    pub fn bearer(&self, objects: &crate::Objects, token: &str) -> Result<UserInfo, ApiError> {
        if let Some(user) = self.static_tokens.user(token) {
            return Ok(user);
        }
        let now = objects
            .now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let claims = self
            .signer
            .verify(token, now, API_AUDIENCE)
            .ok_or_else(unauthorized)?;
        // The token is only good while its ServiceAccount exists with the same UID.
        let accounts =
            crate::Resource::find("", "v1", "serviceaccounts").ok_or_else(unauthorized)?;
        let account = objects
            .get(accounts, Some(&claims.namespace), &claims.name)
            .map_err(|_| unauthorized())?;
        if crate::meta::meta_str(&account, "uid") != Some(claims.uid.as_str()) {
            return Err(unauthorized());
        }
        Ok(UserInfo::service_account(
            &claims.namespace,
            &claims.name,
            &claims.uid,
        ))
    }
}

/// 401 as upstream answers it.
pub fn unauthorized() -> ApiError {
    let mut error = ApiError::bad_request("Unauthorized");
    error.code = 401;
    error.reason = "Unauthorized";
    error
}

/// Attaches a fixed identity to every request of an in-process client.
#[derive(Clone)]
pub struct IdentityLayer {
    user: UserInfo,
}

impl IdentityLayer {
    /// A layer for a user.
    pub fn new(user: UserInfo) -> IdentityLayer {
        IdentityLayer { user }
    }
}

impl<S> tower::Layer<S> for IdentityLayer {
    type Service = Identified<S>;

    fn layer(&self, inner: S) -> Identified<S> {
        Identified {
            inner,
            user: self.user.clone(),
        }
    }
}

/// A service whose requests carry an identity.
#[derive(Clone)]
pub struct Identified<S> {
    inner: S,
    user: UserInfo,
}

impl<S, B> tower::Service<http::Request<B>> for Identified<S>
where
    S: tower::Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        request
            .extensions_mut()
            .insert(Authenticated(self.user.clone()));
        self.inner.call(request)
    }
}

/// A request extension: the identity established by the transport.
#[derive(Debug, Clone)]
pub struct Authenticated(pub UserInfo);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn certificates_name_user_and_groups() {
        let mut params = rcgen::CertificateParams::default();
        params.distinguished_name =
            crate::tls::user_subject("alice", &["team-a".into(), "gpu-users".into()]).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let certificate = params.self_signed(&key).unwrap();
        let user = certificate_identity(certificate.der()).unwrap();
        assert_eq!(user.name, "alice");
        assert_eq!(user.groups, ["team-a", "gpu-users", "system:authenticated"]);
        assert!(certificate_identity(b"not a certificate").is_none());
        assert!(certificate_identity(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]).is_none());
    }

    #[test]
    fn service_account_tokens_check_signature_expiry_and_audience() {
        let signer = TokenSigner::new(b"secret");
        let token = signer.issue(
            "ml",
            "trainer",
            "uid-1",
            &[API_AUDIENCE.to_string()],
            1000,
            2000,
        );
        let claims = signer.verify(&token, 1500, API_AUDIENCE).unwrap();
        assert_eq!(
            (
                claims.namespace.as_str(),
                claims.name.as_str(),
                claims.uid.as_str()
            ),
            ("ml", "trainer", "uid-1")
        );
        assert!(
            signer.verify(&token, 2000, API_AUDIENCE).is_none(),
            "expired"
        );
        assert!(
            signer.verify(&token, 1500, "vault").is_none(),
            "wrong audience"
        );
        assert!(
            TokenSigner::new(b"other")
                .verify(&token, 1500, API_AUDIENCE)
                .is_none(),
            "forged"
        );
        let mut tampered = token.clone();
        tampered.insert(token.len() / 2, 'x');
        assert!(signer.verify(&tampered, 1500, API_AUDIENCE).is_none());
    }

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
