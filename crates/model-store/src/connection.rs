//! How clients find the store: the endpoint, region, credentials and bucket, under the names
//! the AWS CLI and SDKs read from the environment (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_DEFAULT_REGION`) and the bucket as object bucket claims name
//! it (`BUCKET_NAME`). `tessera up` publishes them as the data of Secret
//! `kube-system/tessera-model-store` and as an env file in the data directory
//! (`model-store.env`, 0600); `tessera model` reads either.
//!
//! Knows nothing of Kubernetes clients or of how the values are used.

use std::collections::BTreeMap;

use thiserror::Error;

/// The Secret's namespace and name.
pub const SECRET_NAMESPACE: &str = "kube-system";
pub const SECRET_NAME: &str = "tessera-model-store";
/// The env file's name in the data directory.
pub const ENV_FILE: &str = "model-store.env";

pub const ENDPOINT_KEY: &str = "AWS_ENDPOINT_URL";
pub const ACCESS_KEY_KEY: &str = "AWS_ACCESS_KEY_ID";
pub const SECRET_KEY_KEY: &str = "AWS_SECRET_ACCESS_KEY";
pub const REGION_KEY: &str = "AWS_DEFAULT_REGION";
pub const BUCKET_KEY: &str = "BUCKET_NAME";

/// The region the embedded store signs and checks requests for.
pub const DEFAULT_REGION: &str = "us-east-1";

/// A value missing or wrong, naming the key.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConnectionError {
    #[error("{source_name} has no {key}")]
    Missing {
        source_name: String,
        key: &'static str,
    },
    #[error("{source_name}: line {line} is not KEY=value")]
    Line { source_name: String, line: usize },
    #[error("{key} {value:?} is not an http:// or https:// URL with a host")]
    Endpoint { key: &'static str, value: String },
}

/// Where the store is and how to sign for it.
#[derive(Clone, PartialEq, Eq)]
pub struct Connection {
    /// `http://host:port` (no trailing slash).
    pub endpoint: String,
    pub region: String,
    pub access_key_id: String,
    pub secret_access_key: String,
    pub bucket: String,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id)
            .field("bucket", &self.bucket)
            .finish_non_exhaustive()
    }
}

/// Checks an endpoint URL and drops a trailing `/`.
pub fn check_endpoint(value: &str) -> Result<String, ConnectionError> {
    let bad = || ConnectionError::Endpoint {
        key: ENDPOINT_KEY,
        value: value.to_owned(),
    };
    let trimmed = value.trim().trim_end_matches('/');
    let rest = trimmed
        .strip_prefix("http://")
        .or_else(|| trimmed.strip_prefix("https://"))
        .ok_or_else(bad)?;
    if rest.is_empty() || rest.contains(['/', '?', '#', ' ']) {
        return Err(bad());
    }
    Ok(trimmed.to_owned())
}

impl Connection {
    /// The key/value pairs, in the order written.
    pub fn pairs(&self) -> [(&'static str, &str); 5] {
        [
            (ENDPOINT_KEY, self.endpoint.as_str()),
            (REGION_KEY, self.region.as_str()),
            (ACCESS_KEY_KEY, self.access_key_id.as_str()),
            (SECRET_KEY_KEY, self.secret_access_key.as_str()),
            (BUCKET_KEY, self.bucket.as_str()),
        ]
    }

    /// Reads the values from a map (a Secret's decoded data, an env file); `source_name` names
    /// it in errors.
    pub fn from_map(
        source_name: &str,
        map: &BTreeMap<String, String>,
    ) -> Result<Self, ConnectionError> {
        let get = |key: &'static str| {
            map.get(key)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
                .ok_or_else(|| ConnectionError::Missing {
                    source_name: source_name.to_owned(),
                    key,
                })
        };
        Ok(Self {
            endpoint: check_endpoint(&get(ENDPOINT_KEY)?)?,
            region: get(REGION_KEY).unwrap_or_else(|_| DEFAULT_REGION.to_owned()),
            access_key_id: get(ACCESS_KEY_KEY)?,
            secret_access_key: get(SECRET_KEY_KEY)?,
            bucket: get(BUCKET_KEY).unwrap_or_else(|_| tessera_cache::modelpack::BUCKET.to_owned()),
        })
    }

    /// The env file: one `KEY=value` a line, shell-sourceable (values hold no quotes or
    /// spaces: URLs, regions, keys and bucket names).
    pub fn env_file(&self) -> String {
        self.pairs()
            .iter()
            .map(|(k, v)| format!("{k}={v}\n"))
            .collect()
    }

    /// Reads an env file; blank lines and `#` comments are skipped, `export ` is allowed.
    pub fn parse_env_file(source_name: &str, text: &str) -> Result<Self, ConnectionError> {
        let mut map = BTreeMap::new();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let line = line.strip_prefix("export ").unwrap_or(line);
            let Some((key, value)) = line.split_once('=') else {
                return Err(ConnectionError::Line {
                    source_name: source_name.to_owned(),
                    line: number + 1,
                });
            };
            map.insert(
                key.trim().to_owned(),
                value.trim().trim_matches('"').to_owned(),
            );
        }
        Self::from_map(source_name, &map)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connection() -> Connection {
        Connection {
            endpoint: "http://127.0.0.1:9000".into(),
            region: "us-east-1".into(),
            access_key_id: "TSRAAAAAAAAAAAAAAAAA".into(),
            secret_access_key: "secret/with+chars".into(),
            bucket: "models".into(),
        }
    }

    #[test]
    fn the_env_file_round_trips() {
        let text = connection().env_file();
        assert!(text.starts_with("AWS_ENDPOINT_URL=http://127.0.0.1:9000\n"));
        assert_eq!(
            Connection::parse_env_file("f", &text).unwrap(),
            connection()
        );
        let exported = format!("# store\nexport {}", text.replace('\n', "\nexport "));
        assert_eq!(
            Connection::parse_env_file("f", exported.trim_end_matches("export ")).unwrap(),
            connection()
        );
        assert!(!format!("{:?}", connection()).contains("secret/with"));
    }

    #[test]
    fn bad_values_are_named() {
        for (text, want) in [
            (
                "AWS_ACCESS_KEY_ID=a\nAWS_SECRET_ACCESS_KEY=b\n",
                "f has no AWS_ENDPOINT_URL",
            ),
            (
                "AWS_ENDPOINT_URL=http://h:1\nAWS_SECRET_ACCESS_KEY=b\n",
                "f has no AWS_ACCESS_KEY_ID",
            ),
            (
                "AWS_ENDPOINT_URL=ftp://h\nAWS_ACCESS_KEY_ID=a\nAWS_SECRET_ACCESS_KEY=b\n",
                "AWS_ENDPOINT_URL \"ftp://h\"",
            ),
            (
                "AWS_ENDPOINT_URL=http://h/x\nAWS_ACCESS_KEY_ID=a\nAWS_SECRET_ACCESS_KEY=b\n",
                "not an http",
            ),
            ("junk\n", "line 1 is not KEY=value"),
        ] {
            let error = Connection::parse_env_file("f", text)
                .unwrap_err()
                .to_string();
            assert!(error.contains(want), "{error} lacks {want}");
        }
        let defaults = Connection::parse_env_file(
            "f",
            "AWS_ENDPOINT_URL=https://s3.example.com/\nAWS_ACCESS_KEY_ID=a\nAWS_SECRET_ACCESS_KEY=b\n",
        )
        .unwrap();
        assert_eq!(defaults.endpoint, "https://s3.example.com");
        assert_eq!(defaults.region, "us-east-1");
        assert_eq!(defaults.bucket, "models");
    }
}
