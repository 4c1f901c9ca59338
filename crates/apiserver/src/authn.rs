//! Authentication transport: how a request's identity arrives and is checked with the
//! server's secrets and stored objects. What the identities mean (users, certificate
//! subjects, token claims, static token lines) is `tessera_api::authn`'s.
//!
//! - Client certificates: the TLS listener attaches the verified certificate's identity.
//! - Bearer tokens: ServiceAccount tokens this server issued (HMAC-SHA256 JWTs signed and
//!   verified here, valid only while their ServiceAccount exists with the same UID), and
//!   static tokens read from a CSV file.
//! - In-process clients (Tessera's own controllers and node twins) carry an identity set by
//!   [`IdentityLayer`]; it cannot arrive over the network.
//!
//! Anonymous requests are refused except for health checks.

use std::path::Path;
use std::task::{Context, Poll};

use base64::Engine;
use serde_json::Value;
use tessera_api::authn::{
    API_AUDIENCE, StaticTokens, TokenClaims, UserInfo, check_claims, token_claims, token_header,
    unauthorized,
};
use tessera_api::error::ApiError;
use tessera_api::meta::meta_str;
use tessera_api::resource::Resource;
use tessera_api::reviews::epoch_seconds;

/// Reads a static token file (`--token-auth-file`).
pub fn load_static_tokens(path: &Path) -> Result<StaticTokens, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    StaticTokens::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Signs and verifies ServiceAccount tokens.
#[derive(Clone)]
pub struct TokenSigner {
    key: ring::hmac::Key,
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
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
        let header = token_header();
        let claims = token_claims(namespace, name, uid, audiences, issued, expires);
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
        check_claims(&claims, now, audience)
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
        let now = epoch_seconds(objects.now());
        let claims = self
            .signer
            .verify(token, now, API_AUDIENCE)
            .ok_or_else(unauthorized)?;
        // The token is only good while its ServiceAccount exists with the same UID.
        let accounts = Resource::find("", "v1", "serviceaccounts").ok_or_else(unauthorized)?;
        let account = objects
            .get(accounts, Some(&claims.namespace), &claims.name)
            .map_err(|_| unauthorized())?;
        if meta_str(&account, "uid") != Some(claims.uid.as_str()) {
            return Err(unauthorized());
        }
        Ok(UserInfo::service_account(
            &claims.namespace,
            &claims.name,
            &claims.uid,
        ))
    }
}

/// Attaches a fixed identity (and the User-Agent a real component would send, which names
/// the field manager of its writes) to every request of an in-process client.
#[derive(Clone)]
pub struct IdentityLayer {
    user: UserInfo,
    user_agent: Option<http::HeaderValue>,
}

impl IdentityLayer {
    /// A layer for a user.
    pub fn new(user: UserInfo) -> IdentityLayer {
        IdentityLayer {
            user,
            user_agent: None,
        }
    }

    /// Requests without a User-Agent get this one (e.g.
    /// `kube-controller-manager/v1.34.1 (linux/amd64) tessera`).
    pub fn with_user_agent(mut self, user_agent: &str) -> IdentityLayer {
        self.user_agent = http::HeaderValue::from_str(user_agent).ok();
        self
    }
}

impl<S> tower::Layer<S> for IdentityLayer {
    type Service = Identified<S>;

    fn layer(&self, inner: S) -> Identified<S> {
        Identified {
            inner,
            user: self.user.clone(),
            user_agent: self.user_agent.clone(),
        }
    }
}

/// A service whose requests carry an identity.
#[derive(Clone)]
pub struct Identified<S> {
    inner: S,
    user: UserInfo,
    user_agent: Option<http::HeaderValue>,
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
        if let Some(agent) = &self.user_agent {
            request
                .headers_mut()
                .entry(http::header::USER_AGENT)
                .or_insert_with(|| agent.clone());
        }
        self.inner.call(request)
    }
}

/// A request extension: the identity established by the transport.
#[derive(Debug, Clone)]
pub struct Authenticated(pub UserInfo);

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_api::authn::certificate_identity;

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
}
