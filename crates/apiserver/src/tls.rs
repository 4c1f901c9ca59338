//! Certificates, kubeconfig and the HTTPS listener.
//!
//! On first start a CA, a serving certificate for loopback and an admin client certificate
//! (`CN=tessera-admin`, `O=system:masters`) are generated into the data directory and reused
//! afterwards; the kubeconfig written beside them authenticates kubectl with the client
//! certificate. The listener speaks HTTP/1.1 and HTTP/2 (ALPN) and requests, but does not
//! require, client certificates so health endpoints stay reachable. Private keys are written
//! 0600 in a 0700 directory, and a key that others can read refuses to load.

use std::fs::Permissions;
use std::io::Write;
use std::net::SocketAddr;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::Router;
use base64::Engine;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt;

/// Errors setting up TLS.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A certificate or key file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A private key is readable or writable by users other than its owner.
    #[error(
        "{path} is accessible to other users (mode {mode:o}): anyone on this machine could act as \
         the cluster's admin; run `chmod 600 {path}` and `chmod 700` on its directory, then start again"
    )]
    Exposed {
        /// The key file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// Certificate generation failed.
    #[error("generating certificates: {0}")]
    Generate(#[from] rcgen::Error),
    /// A stored certificate or key is not valid PEM.
    #[error("{path}: not a valid PEM certificate or key")]
    Pem {
        /// The file.
        path: PathBuf,
    },
    /// rustls refused the configuration.
    #[error("TLS configuration: {0}")]
    Config(#[from] rustls::Error),
}

/// The PEM files of a Tessera cluster's PKI.
#[derive(Debug, Clone)]
pub struct Pki {
    /// CA certificate.
    pub ca_cert: String,
    /// CA key (signs client certificates for users).
    pub ca_key: String,
    /// The secret ServiceAccount tokens are signed with.
    pub token_key: String,
    /// Serving certificate.
    pub server_cert: String,
    /// Serving key.
    pub server_key: String,
    /// Admin client certificate.
    pub admin_cert: String,
    /// Admin client key.
    pub admin_key: String,
}

fn read(path: &Path) -> Result<String, TlsError> {
    std::fs::read_to_string(path).map_err(|source| TlsError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Writes a PKI file readable by its owner only (0600), also when it already existed.
pub fn write_private(path: &Path, contents: &str) -> Result<(), TlsError> {
    let io = |source| TlsError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(io)?;
    file.set_permissions(Permissions::from_mode(0o600))
        .map_err(io)?;
    file.write_all(contents.as_bytes()).map_err(io)
}

/// Refuses a private key that users other than its owner may read or write.
fn check_private(path: &Path) -> Result<(), TlsError> {
    let mode = std::fs::metadata(path)
        .map_err(|source| TlsError::Io {
            path: path.to_path_buf(),
            source,
        })?
        .permissions()
        .mode()
        & 0o777;
    if mode & 0o077 != 0 {
        return Err(TlsError::Exposed {
            path: path.to_path_buf(),
            mode,
        });
    }
    Ok(())
}

/// The PKI files, in `<data-dir>/pki`.
const FILES: [&str; 7] = [
    "ca.crt",
    "ca.key",
    "token.key",
    "server.crt",
    "server.key",
    "admin.crt",
    "admin.key",
];

impl Pki {
    /// Loads the PKI from `<dir>/pki`, generating it on first use (or when incomplete).
    pub fn load_or_create(dir: &Path) -> Result<Pki, TlsError> {
        let pki = dir.join("pki");
        if FILES.iter().all(|f| pki.join(f).exists()) {
            for key in FILES.iter().filter(|f| f.ends_with(".key")) {
                check_private(&pki.join(key))?;
            }
            let [
                ca_cert,
                ca_key,
                token_key,
                server_cert,
                server_key,
                admin_cert,
                admin_key,
            ] = FILES.map(|f| read(&pki.join(f)));
            return Ok(Pki {
                ca_cert: ca_cert?,
                ca_key: ca_key?,
                token_key: token_key?,
                server_cert: server_cert?,
                server_key: server_key?,
                admin_cert: admin_cert?,
                admin_key: admin_key?,
            });
        }
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&pki)
            .map_err(|source| TlsError::Io {
                path: pki.clone(),
                source,
            })?;
        let generated = Pki::generate()?;
        let contents = [
            &generated.ca_cert,
            &generated.ca_key,
            &generated.token_key,
            &generated.server_cert,
            &generated.server_key,
            &generated.admin_cert,
            &generated.admin_key,
        ];
        for (file, content) in FILES.iter().zip(contents) {
            write_private(&pki.join(file), content)?;
        }
        Ok(generated)
    }

    /// Generates a fresh CA, serving certificate, admin client certificate and token key.
    pub fn generate() -> Result<Pki, TlsError> {
        let ca_key = KeyPair::generate()?;
        let mut ca_params = CertificateParams::default();
        ca_params.distinguished_name = name("tessera-ca", None);
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        set_validity(&mut ca_params, 10);
        let ca_cert = ca_params.self_signed(&ca_key)?;
        let issuer = Issuer::from_params(&ca_params, &ca_key);

        let server_key = KeyPair::generate()?;
        let mut server_params = CertificateParams::new(vec![
            "localhost".to_string(),
            "kubernetes".to_string(),
            "kubernetes.default".to_string(),
            "kubernetes.default.svc".to_string(),
        ])?;
        for ip in [
            std::net::Ipv4Addr::LOCALHOST.into(),
            std::net::Ipv6Addr::LOCALHOST.into(),
        ] {
            server_params.subject_alt_names.push(SanType::IpAddress(ip));
        }
        server_params.distinguished_name = name("tessera-apiserver", None);
        server_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        set_validity(&mut server_params, 2);
        let server_cert = server_params.signed_by(&server_key, &issuer)?;

        let admin_key = KeyPair::generate()?;
        let mut admin_params = CertificateParams::default();
        admin_params.distinguished_name = name("tessera-admin", Some("system:masters"));
        admin_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        set_validity(&mut admin_params, 2);
        let admin_cert = admin_params.signed_by(&admin_key, &issuer)?;
        let token_key = (0..4)
            .map(|_| format!("{:016x}", fastrand::u64(..)))
            .collect::<String>();

        Ok(Pki {
            ca_cert: ca_cert.pem(),
            ca_key: ca_key.serialize_pem(),
            token_key,
            server_cert: server_cert.pem(),
            server_key: server_key.serialize_pem(),
            admin_cert: admin_cert.pem(),
            admin_key: admin_key.serialize_pem(),
        })
    }

    /// A client certificate and key (PEM) for a user and groups, signed by the cluster CA.
    pub fn client_certificate(
        &self,
        user: &str,
        groups: &[String],
    ) -> Result<(String, String), TlsError> {
        let ca_key = KeyPair::from_pem(&self.ca_key)?;
        // The CA's name and key are all an issuer needs (the key identifier derives from the key).
        let mut ca_params = CertificateParams::default();
        ca_params.distinguished_name = name("tessera-ca", None);
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let issuer = Issuer::from_params(&ca_params, &ca_key);
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::default();
        params.distinguished_name = user_subject(user, groups)?;
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        set_validity(&mut params, 1);
        let certificate = params.signed_by(&key, &issuer)?;
        Ok((certificate.pem(), key.serialize_pem()))
    }

    /// A kubeconfig for a user with its own certificate (CN the user, O the groups).
    pub fn user_kubeconfig(
        &self,
        server: &str,
        user: &str,
        groups: &[String],
    ) -> Result<String, TlsError> {
        let (cert, key) = self.client_certificate(user, groups)?;
        Ok(self.kubeconfig_with(server, user, &cert, &key))
    }

    /// A kubeconfig for the admin user against a server URL.
    pub fn kubeconfig(&self, server: &str) -> String {
        self.kubeconfig_with(server, "tessera-admin", &self.admin_cert, &self.admin_key)
    }

    fn kubeconfig_with(&self, server: &str, user: &str, cert: &str, key: &str) -> String {
        let b64 = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem);
        format!(
            "apiVersion: v1
kind: Config
clusters:
- name: tessera
  cluster:
    server: {server}
    certificate-authority-data: {ca}
users:
- name: {user}
  user:
    client-certificate-data: {cert}
    client-key-data: {key}
contexts:
- name: tessera
  context:
    cluster: tessera
    user: {user}
    namespace: default
current-context: tessera
",
            ca = b64(&self.ca_cert),
            cert = b64(cert),
            key = b64(key),
        )
    }

    /// The rustls server configuration: serving certificate, optional client certificates
    /// signed by the CA, ALPN for HTTP/2 and HTTP/1.1.
    pub fn server_config(&self) -> Result<rustls::ServerConfig, TlsError> {
        let pem_error = |what: &str| TlsError::Pem {
            path: PathBuf::from(what),
        };
        let certs: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(self.server_cert.as_bytes())
                .collect::<Result<_, _>>()
                .map_err(|_| pem_error("pki/server.crt"))?;
        let key = PrivateKeyDer::from_pem_slice(self.server_key.as_bytes())
            .map_err(|_| pem_error("pki/server.key"))?;
        let mut roots = rustls::RootCertStore::empty();
        for ca in CertificateDer::pem_slice_iter(self.ca_cert.as_bytes()) {
            roots
                .add(ca.map_err(|_| pem_error("pki/ca.crt"))?)
                .map_err(TlsError::Config)?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .allow_unauthenticated()
        .build()
        .map_err(|e| TlsError::Config(rustls::Error::General(e.to_string())))?;
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_client_cert_verifier(verifier)
            .with_single_cert(certs, key)?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(config)
    }
}

/// The subject of a user certificate: CN the user, one O per group. rcgen keeps one value per
/// attribute type, so a second group is written under the same OID as a custom type; more
/// than two groups do not fit in one certificate here.
pub fn user_subject(user: &str, groups: &[String]) -> Result<DistinguishedName, TlsError> {
    if groups.len() > 2 {
        return Err(TlsError::Config(rustls::Error::General(
            "a user certificate can carry at most two groups; bind further groups' roles to the user instead".into(),
        )));
    }
    let mut subject = DistinguishedName::new();
    subject.push(DnType::CommonName, user);
    if let Some(first) = groups.first() {
        subject.push(DnType::OrganizationName, first.as_str());
    }
    if let Some(second) = groups.get(1) {
        subject.push(DnType::CustomDnType(vec![2, 5, 4, 10]), second.as_str());
    }
    Ok(subject)
}

fn name(common_name: &str, organization: Option<&str>) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, common_name);
    if let Some(organization) = organization {
        name.push(DnType::OrganizationName, organization);
    }
    name
}

/// Valid from a day ago until `years` from now (whole years, so the dates stay simple).
fn set_validity(params: &mut CertificateParams, years: i32) {
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    let (year, month, day) = tessera_model::time::civil_from_days(seconds / 86_400 - 1);
    let (year, month, day) = (year as i32, month as u8, day.min(28) as u8);
    params.not_before = rcgen::date_time_ymd(year, month, day);
    params.not_after = rcgen::date_time_ymd(year + years, month, day);
}

/// Serves a router over TLS until the shutdown future completes.
pub async fn serve(
    listener: TcpListener,
    config: rustls::ServerConfig,
    router: Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) {
    let acceptor = TlsAcceptor::from(Arc::new(config));
    tokio::pin!(shutdown);
    loop {
        let (stream, peer): (tokio::net::TcpStream, SocketAddr) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(%error, "accept failed");
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let acceptor = acceptor.clone();
        let router = router.clone();
        tokio::spawn(async move {
            let tls = match acceptor.accept(stream).await {
                Ok(tls) => tls,
                Err(error) => {
                    tracing::debug!(%peer, %error, "TLS handshake failed");
                    return;
                }
            };
            // The verified client certificate, if any, is the connection's identity.
            let identity = tls
                .get_ref()
                .1
                .peer_certificates()
                .and_then(|certs| certs.first())
                .and_then(|cert| tessera_api::authn::certificate_identity(cert.as_ref()));
            let service = hyper::service::service_fn(
                move |request: hyper::Request<hyper::body::Incoming>| {
                    let mut request = request.map(axum::body::Body::new);
                    request
                        .extensions_mut()
                        .insert(crate::audit::RemoteAddr(peer.ip()));
                    if let Some(user) = &identity {
                        request
                            .extensions_mut()
                            .insert(crate::authn::Authenticated(user.clone()));
                    }
                    router.clone().oneshot(request)
                },
            );
            if let Err(error) = auto::Builder::new(TokioExecutor::new())
                .serve_connection_with_upgrades(TokioIo::new(tls), service)
                .await
            {
                tracing::debug!(%peer, %error, "connection ended with an error");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path)
            .map(|m| m.permissions().mode() & 0o777)
            .unwrap_or(0)
    }

    #[test]
    fn keys_are_private_and_an_exposed_key_refuses_to_load() {
        let dir = tempfile::tempdir().expect("tempdir");
        Pki::load_or_create(dir.path()).expect("generate");
        let pki = dir.path().join("pki");
        assert_eq!(mode(&pki), 0o700);
        for file in FILES {
            assert_eq!(mode(&pki.join(file)), 0o600, "{file}");
        }
        Pki::load_or_create(dir.path()).expect("load again");

        for (file, exposed) in [
            ("ca.key", 0o644),
            ("token.key", 0o640),
            ("admin.key", 0o602),
        ] {
            let path = pki.join(file);
            std::fs::set_permissions(&path, Permissions::from_mode(exposed)).expect("chmod");
            match Pki::load_or_create(dir.path()) {
                Err(error @ TlsError::Exposed { .. }) => {
                    let message = error.to_string();
                    assert!(message.contains(&path.display().to_string()), "{message}");
                    assert!(message.contains(&format!("{exposed:o}")), "{message}");
                }
                other => panic!("{file} at {exposed:o}: {other:?}"),
            }
            std::fs::set_permissions(&path, Permissions::from_mode(0o600)).expect("chmod");
        }
        // Certificates are public: their modes do not matter.
        std::fs::set_permissions(pki.join("ca.crt"), Permissions::from_mode(0o644)).expect("chmod");
        Pki::load_or_create(dir.path()).expect("load with a readable certificate");
    }

    #[test]
    fn rewriting_an_existing_file_makes_it_private() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("kubeconfig");
        std::fs::write(&path, "old").expect("write");
        std::fs::set_permissions(&path, Permissions::from_mode(0o644)).expect("chmod");
        write_private(&path, "new").expect("rewrite");
        assert_eq!(mode(&path), 0o600);
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "new");
    }
}
