//! The Hugging Face cache layout (`huggingface_hub`'s `~/.cache/huggingface/hub`), as relative
//! path strings, so that tools reading that cache find what this cache stored:
//!
//! ```text
//! models--<org>--<name>/blobs/<hash>                 the content, named by its hash
//! models--<org>--<name>/blobs/<hash>.incomplete      while downloading (renamed on Verified)
//! models--<org>--<name>/refs/<revision>              a file holding the commit hash
//! models--<org>--<name>/snapshots/<commit>/<path>    a symlink to ../../blobs/<hash>
//! .locks/models--<org>--<name>/<hash>.lock           the per-node download lock
//! ```
//!
//! (`datasets--` and `spaces--` for the other repo types.) A blob's hash is the LFS sha256
//! (64 hex digits) or, for small files kept in git, the git blob sha1 (40). Repo ids are checked
//! as `huggingface_hub`'s `validate_repo_id`; revisions and file paths must be relative, with no
//! empty, `.` or `..` segment. Errors name the field.
//!
//! This module builds strings only: it creates no directory, link or lock, and does not resolve
//! a revision to a commit.

use thiserror::Error;

use crate::is_lower_hex;

/// A field refused, and why.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid {field} {value:?}: {reason}")]
pub struct LayoutError {
    pub field: &'static str,
    pub value: String,
    pub reason: &'static str,
}

fn refuse(field: &'static str, value: &str, reason: &'static str) -> LayoutError {
    LayoutError {
        field,
        value: value.to_owned(),
        reason,
    }
}

/// The kind of Hugging Face repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RepoType {
    Model,
    Dataset,
    Space,
}

impl RepoType {
    fn plural(self) -> &'static str {
        match self {
            Self::Model => "models",
            Self::Dataset => "datasets",
            Self::Space => "spaces",
        }
    }
}

/// A validated repository: its type and id (`org/name` or `name`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    repo_type: RepoType,
    id: String,
}

/// `validate_repo_id`'s messages, as `huggingface_hub` words them.
const FORM: &str = "Repo id must be in the form 'repo_name' or 'namespace/repo_name'";
const CHARS: &str = "Repo id must use alphanumeric chars, '-', '_' or '.'. The name cannot start or end with '-' or '.' and the maximum length is 96";
const DASH: &str = "Cannot have -- or .. in repo_id";
const GIT: &str = "Repo_id cannot end by '.git'";

/// The longest name `validate_repo_id` accepts.
const MAX_REPO_NAME: usize = 96;

impl Repo {
    /// Checks `id` as `huggingface_hub`'s `validate_repo_id`: at most one `/`, each part of
    /// letters, digits, `-`, `_`, `.`, starting and ending with a letter, digit or `_`, the name at
    /// most 96 characters, no `--` or `..`, not ending in `.git`.
    pub fn new(repo_type: RepoType, id: &str) -> Result<Self, LayoutError> {
        let bad = |reason| Err(refuse("repo id", id, reason));
        let parts: Vec<&str> = id.split('/').collect();
        if parts.len() > 2 {
            return bad(FORM);
        }
        for part in &parts {
            if part.is_empty() {
                return bad(CHARS);
            }
            if !part
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            {
                return bad(CHARS);
            }
            let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
            if !part.starts_with(word) || !part.ends_with(word) {
                return bad(CHARS);
            }
        }
        if parts.last().is_some_and(|name| name.len() > MAX_REPO_NAME) {
            return bad(CHARS);
        }
        if id.contains("--") || id.contains("..") {
            return bad(DASH);
        }
        if id.ends_with(".git") {
            return bad(GIT);
        }
        Ok(Self {
            repo_type,
            id: id.to_owned(),
        })
    }

    pub fn model(id: &str) -> Result<Self, LayoutError> {
        Self::new(RepoType::Model, id)
    }

    /// `models--<org>--<name>` (`huggingface_hub`'s `repo_folder_name`).
    pub fn folder(&self) -> String {
        let mut parts = vec![self.repo_type.plural()];
        parts.extend(self.id.split('/'));
        parts.join("--")
    }

    /// `<folder>/blobs/<hash>`.
    pub fn blob(&self, hash: &str) -> Result<String, LayoutError> {
        Ok(format!("{}/blobs/{}", self.folder(), check_hash(hash)?))
    }

    /// `<folder>/blobs/<hash>.incomplete`: where a download is written before the rename
    /// (`huggingface_hub`'s suffix for partial blobs).
    pub fn incomplete_blob(&self, hash: &str) -> Result<String, LayoutError> {
        Ok(format!("{}.incomplete", self.blob(hash)?))
    }

    /// `<folder>/refs/<revision>`: the file holding the revision's commit hash.
    pub fn reference(&self, revision: &str) -> Result<String, LayoutError> {
        Ok(format!(
            "{}/refs/{}",
            self.folder(),
            check_relative("revision", revision)?
        ))
    }

    /// `<folder>/snapshots/<commit>/<path>`.
    pub fn snapshot(&self, commit: &str, path: &str) -> Result<String, LayoutError> {
        Ok(format!(
            "{}/snapshots/{}/{}",
            self.folder(),
            check_commit(commit)?,
            check_relative("file path", path)?
        ))
    }

    /// `.locks/<folder>/<hash>.lock`.
    pub fn lock(&self, hash: &str) -> Result<String, LayoutError> {
        Ok(format!(
            ".locks/{}/{}.lock",
            self.folder(),
            check_hash(hash)?
        ))
    }
}

/// The target of the snapshot symlink for `path`: `../../blobs/<hash>`, one more `..` per
/// directory the file is nested in.
pub fn symlink_target(path: &str, hash: &str) -> Result<String, LayoutError> {
    let path = check_relative("file path", path)?;
    let hash = check_hash(hash)?;
    let depth = path.split('/').count() + 1;
    Ok(format!("{}blobs/{hash}", "../".repeat(depth)))
}

fn check_hash(hash: &str) -> Result<&str, LayoutError> {
    if is_lower_hex(hash, 64) || is_lower_hex(hash, 40) {
        Ok(hash)
    } else {
        Err(refuse(
            "blob hash",
            hash,
            "not a lower-case sha256 (64 hex) or git sha1 (40 hex)",
        ))
    }
}

fn check_commit(commit: &str) -> Result<&str, LayoutError> {
    if is_lower_hex(commit, 40) {
        Ok(commit)
    } else {
        Err(refuse(
            "commit",
            commit,
            "not a 40-digit lower-case hex commit hash",
        ))
    }
}

/// A relative path: not empty, not absolute, no empty, `.` or `..` segment, no backslash or
/// control character.
pub(crate) fn check_relative<'a>(
    field: &'static str,
    path: &'a str,
) -> Result<&'a str, LayoutError> {
    let bad = |reason| Err(refuse(field, path, reason));
    if path.is_empty() {
        return bad("empty");
    }
    if path.starts_with('/') {
        return bad("absolute path");
    }
    if path.contains('\\') || path.chars().any(char::is_control) {
        return bad("backslash or control character");
    }
    for segment in path.split('/') {
        match segment {
            "" => return bad("empty segment"),
            "." | ".." => return bad("'.' or '..' segment"),
            _ => {}
        }
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "5d41402abc4b2a76b9719d911017c592ae2f2b6ab4e3c8e6a4e1d0a3c5b2e1f0";
    const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

    #[test]
    fn paths_of_a_model() {
        let repo = Repo::model("meta-llama/Llama-3.1-8B").unwrap();
        assert_eq!(repo.folder(), "models--meta-llama--Llama-3.1-8B");
        assert_eq!(
            repo.blob(SHA).unwrap(),
            format!("models--meta-llama--Llama-3.1-8B/blobs/{SHA}")
        );
        assert_eq!(
            repo.incomplete_blob(SHA).unwrap(),
            format!("models--meta-llama--Llama-3.1-8B/blobs/{SHA}.incomplete")
        );
        assert_eq!(
            repo.reference("main").unwrap(),
            "models--meta-llama--Llama-3.1-8B/refs/main"
        );
        assert_eq!(
            repo.reference("refs/pr/1").unwrap(),
            "models--meta-llama--Llama-3.1-8B/refs/refs/pr/1"
        );
        assert_eq!(
            repo.snapshot(COMMIT, "original/params.json").unwrap(),
            format!("models--meta-llama--Llama-3.1-8B/snapshots/{COMMIT}/original/params.json")
        );
        assert_eq!(
            repo.lock(SHA).unwrap(),
            format!(".locks/models--meta-llama--Llama-3.1-8B/{SHA}.lock")
        );
        assert_eq!(
            Repo::new(RepoType::Dataset, "squad").unwrap().folder(),
            "datasets--squad"
        );
        assert_eq!(
            Repo::new(RepoType::Space, "a/b").unwrap().folder(),
            "spaces--a--b"
        );
    }

    #[test]
    fn symlink_targets_climb_out_of_nested_paths() {
        for (path, want) in [
            ("config.json", format!("../../blobs/{SHA}")),
            ("original/params.json", format!("../../../blobs/{SHA}")),
            (
                "a/b/c/model.safetensors",
                format!("../../../../../blobs/{SHA}"),
            ),
        ] {
            assert_eq!(symlink_target(path, SHA).unwrap(), want, "{path}");
        }
        assert_eq!(
            symlink_target("f", COMMIT).unwrap(),
            format!("../../blobs/{COMMIT}")
        );
    }

    #[test]
    fn repo_ids_are_validated() {
        for id in [
            "gpt2",
            "org/name",
            "a_b/c.d-e",
            "x/Y_1",
            "org/_name_",
            &"n".repeat(96),
        ] {
            assert!(Repo::model(id).is_ok(), "{id}");
        }
        for (id, reason) in [
            ("", CHARS),
            ("a/b/c", FORM),
            ("/name", CHARS),
            ("org/", CHARS),
            ("org/na me", CHARS),
            ("-org/name", CHARS),
            ("org/name.", CHARS),
            ("org--x/name", DASH),
            ("org/a..b", DASH),
            ("org/name.git", GIT),
            (&"n".repeat(97), CHARS),
            ("café", CHARS),
        ] {
            assert_eq!(
                Repo::model(id),
                Err(LayoutError {
                    field: "repo id",
                    value: id.to_owned(),
                    reason
                }),
                "{id}"
            );
        }
    }

    #[test]
    fn paths_and_hashes_are_validated_naming_the_field() {
        let repo = Repo::model("org/name").unwrap();
        for (path, reason) in [
            ("", "empty"),
            ("/etc/passwd", "absolute path"),
            ("../x", "'.' or '..' segment"),
            ("a/../b", "'.' or '..' segment"),
            ("a/./b", "'.' or '..' segment"),
            ("a//b", "empty segment"),
            ("a/", "empty segment"),
            ("a\\b", "backslash or control character"),
        ] {
            let want = LayoutError {
                field: "file path",
                value: path.to_owned(),
                reason,
            };
            assert_eq!(repo.snapshot(COMMIT, path), Err(want.clone()), "{path}");
            assert_eq!(symlink_target(path, SHA), Err(want), "{path}");
        }
        assert_eq!(repo.reference("../main").unwrap_err().field, "revision");
        assert_eq!(repo.snapshot("main", "f").unwrap_err().field, "commit");
        assert_eq!(
            repo.snapshot(&COMMIT.to_uppercase(), "f")
                .unwrap_err()
                .field,
            "commit"
        );
        for hash in [
            "",
            "abc",
            &SHA.to_uppercase(),
            &format!("{SHA}0"),
            "../../etc",
        ] {
            assert_eq!(repo.blob(hash).unwrap_err().field, "blob hash", "{hash}");
            assert_eq!(repo.lock(hash).unwrap_err().field, "blob hash", "{hash}");
        }
    }
}
