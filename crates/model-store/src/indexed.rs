//! s3s-fs's S3 implementation with the sha256 index kept beside it: every completed object
//! write (PutObject, CompleteMultipartUpload, CopyObject) hashes the object's bytes as they
//! landed on disk and records sha256 and size; DeleteObject, DeleteObjects and DeleteBucket drop
//! the entries. HeadObject answers the indexed sha256 as the object's `x-amz-meta-sha256`
//! metadata, the same place `tessera model push` puts it on a store without an index.
//!
//! A missing bucket is `NoSuchBucket` for GetObject, PutObject, CopyObject and
//! CreateMultipartUpload (s3s-fs would answer `NoSuchKey`, or make the bucket). Every other
//! operation is s3s-fs's own. This module knows nothing of models, layouts or the
//! OCI view.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use s3s::dto::*;
use s3s::{S3, S3Request, S3Response, S3Result, s3_error};
use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;

use crate::index::{Entry, Index};

/// The metadata name (`x-amz-meta-sha256`) carrying a file's sha256.
pub const SHA256_METADATA: &str = "sha256";

/// s3s-fs plus the index.
pub struct IndexedFs {
    inner: s3s_fs::FileSystem,
    root: PathBuf,
    index: Arc<Index>,
    /// One lock per key being written: a write and its hashing happen together, so two
    /// writers of one key cannot leave the index holding the loser's hash.
    writing: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl IndexedFs {
    pub fn new(inner: s3s_fs::FileSystem, root: PathBuf, index: Arc<Index>) -> Self {
        Self {
            inner,
            root,
            index,
            writing: Default::default(),
        }
    }

    /// Holds `bucket/key` against other writes of it until the guard drops.
    async fn lock_key(&self, bucket: &str, key: &str) -> KeyGuard<'_> {
        let name = format!("{bucket}/{key}");
        let lock = self
            .writing
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(name.clone())
            .or_default()
            .clone();
        let guard = lock.clone().lock_owned().await;
        KeyGuard {
            owner: self,
            name,
            _guard: guard,
        }
    }

    /// Hashes the object as stored and records it; a key naming a directory (a "folder"
    /// placeholder ending in `/`) is not content and is skipped.
    async fn record(&self, bucket: &str, key: &str) -> S3Result<()> {
        let path = self.root.join(bucket).join(key);
        let entry = match hash_file(&path).await {
            Ok(Some(entry)) => entry,
            Ok(None) => return Ok(()),
            Err(error) => {
                tracing::error!(%bucket, %key, %error, "hash a written object");
                return Err(s3_error!(
                    InternalError,
                    "the object was written but could not be hashed"
                ));
            }
        };
        self.index.record(bucket, key, entry).map_err(|error| {
            tracing::error!(%bucket, %key, %error, "record an object in the index");
            s3_error!(
                InternalError,
                "the object was written but the index could not be updated"
            )
        })
    }

    /// s3s-fs answers a missing bucket as a missing key on reads and makes it on writes;
    /// S3 answers `NoSuchBucket`.
    fn require_bucket(&self, bucket: &str) -> S3Result<()> {
        if self.root.join(bucket).is_dir() {
            Ok(())
        } else {
            Err(s3_error!(
                NoSuchBucket,
                "The specified bucket does not exist"
            ))
        }
    }

    fn forget(&self, bucket: &str, key: &str) -> S3Result<()> {
        self.index.remove(bucket, key).map_err(|error| {
            tracing::error!(%bucket, %key, %error, "drop an object from the index");
            s3_error!(InternalError, "the index could not be updated")
        })
    }
}

/// A held key; the last holder removes the key's lock from the table.
struct KeyGuard<'a> {
    owner: &'a IndexedFs,
    name: String,
    _guard: tokio::sync::OwnedMutexGuard<()>,
}

impl Drop for KeyGuard<'_> {
    fn drop(&mut self) {
        let mut writing = self.owner.writing.lock().unwrap_or_else(|e| e.into_inner());
        // Held by the table and by this guard's mutex only: nobody else waits for it.
        if writing
            .get(&self.name)
            .is_some_and(|lock| Arc::strong_count(lock) <= 2)
        {
            writing.remove(&self.name);
        }
    }
}

impl std::fmt::Debug for IndexedFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexedFs")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

/// The sha256 and size of the file at `path`, read in 1 MiB chunks; `None` when it is not a
/// regular file.
pub async fn hash_file(path: &std::path::Path) -> std::io::Result<Option<Entry>> {
    let mut file = match tokio::fs::File::open(path).await {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error),
    };
    if !file.metadata().await?.is_file() {
        return Ok(None);
    }
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let read = file.read(&mut buffer).await?;
        if read == 0 {
            break;
        }
        hasher.update(&buffer[..read]);
        size += read as u64;
    }
    Ok(Some(Entry {
        sha256: tessera_cache::hex(&hasher.finalize()),
        size,
    }))
}

#[async_trait::async_trait]
impl S3 for IndexedFs {
    async fn put_object(
        &self,
        req: S3Request<PutObjectInput>,
    ) -> S3Result<S3Response<PutObjectOutput>> {
        let (bucket, key) = (req.input.bucket.clone(), req.input.key.clone());
        let _held = self.lock_key(&bucket, &key).await;
        self.require_bucket(&bucket)?;
        let answer = self.inner.put_object(req).await?;
        self.record(&bucket, &key).await?;
        Ok(answer)
    }

    async fn complete_multipart_upload(
        &self,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        let (bucket, key) = (req.input.bucket.clone(), req.input.key.clone());
        let _held = self.lock_key(&bucket, &key).await;
        let answer = self.inner.complete_multipart_upload(req).await?;
        self.record(&bucket, &key).await?;
        Ok(answer)
    }

    async fn copy_object(
        &self,
        req: S3Request<CopyObjectInput>,
    ) -> S3Result<S3Response<CopyObjectOutput>> {
        let (bucket, key) = (req.input.bucket.clone(), req.input.key.clone());
        let _held = self.lock_key(&bucket, &key).await;
        self.require_bucket(&bucket)?;
        let answer = self.inner.copy_object(req).await?;
        self.record(&bucket, &key).await?;
        Ok(answer)
    }

    async fn delete_object(
        &self,
        req: S3Request<DeleteObjectInput>,
    ) -> S3Result<S3Response<DeleteObjectOutput>> {
        let (bucket, key) = (req.input.bucket.clone(), req.input.key.clone());
        let _held = self.lock_key(&bucket, &key).await;
        let answer = self.inner.delete_object(req).await?;
        self.forget(&bucket, &key)?;
        Ok(answer)
    }

    async fn delete_objects(
        &self,
        req: S3Request<DeleteObjectsInput>,
    ) -> S3Result<S3Response<DeleteObjectsOutput>> {
        let bucket = req.input.bucket.clone();
        let answer = self.inner.delete_objects(req).await?;
        for deleted in answer.output.deleted.iter().flatten() {
            if let Some(key) = &deleted.key {
                self.forget(&bucket, key)?;
            }
        }
        Ok(answer)
    }

    async fn delete_bucket(
        &self,
        req: S3Request<DeleteBucketInput>,
    ) -> S3Result<S3Response<DeleteBucketOutput>> {
        let bucket = req.input.bucket.clone();
        let answer = self.inner.delete_bucket(req).await?;
        self.index.remove_bucket(&bucket).map_err(|error| {
            tracing::error!(%bucket, %error, "drop a bucket from the index");
            s3_error!(InternalError, "the index could not be updated")
        })?;
        Ok(answer)
    }

    async fn head_object(
        &self,
        req: S3Request<HeadObjectInput>,
    ) -> S3Result<S3Response<HeadObjectOutput>> {
        let (bucket, key) = (req.input.bucket.clone(), req.input.key.clone());
        let mut answer = self.inner.head_object(req).await?;
        if let Some(entry) = self.index.get(&bucket, &key) {
            answer
                .output
                .metadata
                .get_or_insert_with(Default::default)
                .insert(SHA256_METADATA.to_owned(), entry.sha256);
        }
        Ok(answer)
    }

    async fn create_bucket(
        &self,
        req: S3Request<CreateBucketInput>,
    ) -> S3Result<S3Response<CreateBucketOutput>> {
        self.inner.create_bucket(req).await
    }

    async fn get_bucket_location(
        &self,
        req: S3Request<GetBucketLocationInput>,
    ) -> S3Result<S3Response<GetBucketLocationOutput>> {
        self.inner.get_bucket_location(req).await
    }

    async fn get_object(
        &self,
        req: S3Request<GetObjectInput>,
    ) -> S3Result<S3Response<GetObjectOutput>> {
        self.require_bucket(&req.input.bucket)?;
        self.inner.get_object(req).await
    }

    async fn head_bucket(
        &self,
        req: S3Request<HeadBucketInput>,
    ) -> S3Result<S3Response<HeadBucketOutput>> {
        self.inner.head_bucket(req).await
    }

    async fn list_buckets(
        &self,
        req: S3Request<ListBucketsInput>,
    ) -> S3Result<S3Response<ListBucketsOutput>> {
        self.inner.list_buckets(req).await
    }

    async fn list_objects(
        &self,
        req: S3Request<ListObjectsInput>,
    ) -> S3Result<S3Response<ListObjectsOutput>> {
        self.inner.list_objects(req).await
    }

    async fn list_objects_v2(
        &self,
        req: S3Request<ListObjectsV2Input>,
    ) -> S3Result<S3Response<ListObjectsV2Output>> {
        self.inner.list_objects_v2(req).await
    }

    async fn create_multipart_upload(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        self.require_bucket(&req.input.bucket)?;
        self.inner.create_multipart_upload(req).await
    }

    async fn upload_part(
        &self,
        req: S3Request<UploadPartInput>,
    ) -> S3Result<S3Response<UploadPartOutput>> {
        self.inner.upload_part(req).await
    }

    async fn upload_part_copy(
        &self,
        req: S3Request<UploadPartCopyInput>,
    ) -> S3Result<S3Response<UploadPartCopyOutput>> {
        self.inner.upload_part_copy(req).await
    }

    async fn list_parts(
        &self,
        req: S3Request<ListPartsInput>,
    ) -> S3Result<S3Response<ListPartsOutput>> {
        self.inner.list_parts(req).await
    }

    async fn abort_multipart_upload(
        &self,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        self.inner.abort_multipart_upload(req).await
    }
}
