//! The value transforms of kube-apiserver's encryption at rest, byte for byte as it writes
//! them to etcd: `k8s:enc:aesgcm:v1:<key>:` + 12-byte nonce + AES-GCM sealed data (the
//! authenticated data is the storage key), `k8s:enc:aescbc:v1:<key>:` + 16-byte IV + AES-CBC
//! with PKCS#7 padding, `k8s:enc:secretbox:v1:<key>:` + 24-byte nonce + NaCl secretbox
//! (tag first), and identity (the value itself; it refuses to read `k8s:enc:` data).
//!
//! A [`Transformer`] is one resource's ordered list of providers, each with its ordered keys
//! (upstream's nested `prefixTransformers`): the first provider's first key writes; a value is
//! read by the first provider and key whose prefix it carries and that opens it, and is
//! *stale* — to be rewritten — when that is not the first provider or not its first key.
//!
//! Pure: the nonce or IV is an input ([`Random`]); the shell draws it from the OS. Knows
//! nothing of where values are stored or what they mean.

use aes_gcm::aead::consts::U12;
use aes_gcm::aead::generic_array::GenericArray;
use aes_gcm::aead::{Aead, AeadInPlace, KeyInit, Payload};
use aes_gcm::{Aes128Gcm, Aes256Gcm, AesGcm};
use cbc::cipher::{BlockCipher, BlockDecryptMut, BlockEncryptMut, KeyIvInit};
use crypto_secretbox::XSalsa20Poly1305;

/// The prefix of values written by the `aesgcm` provider.
pub const AESGCM_PREFIX: &str = "k8s:enc:aesgcm:v1:";
/// The prefix of values written by the `aescbc` provider.
pub const AESCBC_PREFIX: &str = "k8s:enc:aescbc:v1:";
/// The prefix of values written by the `secretbox` provider.
pub const SECRETBOX_PREFIX: &str = "k8s:enc:secretbox:v1:";
/// The prefix reserved for encrypted data; identity refuses to read it.
pub const ENCRYPTED_PREFIX: &str = "k8s:enc:";

const GCM_NONCE: usize = 12;
const BLOCK: usize = 16;
const SECRETBOX_NONCE: usize = 24;
const SECRETBOX_TAG: usize = 16;

/// Fresh random bytes for one write: AES-GCM uses the first 12 as its nonce, AES-CBC the
/// first 16 as its IV, secretbox all 24 as its nonce. Never reuse one.
pub type Random = [u8; 24];

/// Why a stored value could not be read (upstream's messages).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransformError {
    /// Too short to hold a nonce or IV (and tag).
    #[error("the stored data was shorter than the required size")]
    Short,
    /// AES-CBC data that is not whole blocks.
    #[error("the stored data is not a multiple of the block size")]
    BlockSize,
    /// AES-CBC padding byte out of range.
    #[error("invalid PKCS7 data (empty or not padded)")]
    Pkcs7Data,
    /// AES-CBC padding bytes that differ.
    #[error("invalid padding on input")]
    Pkcs7Padding,
    /// AES-GCM: wrong key, tampered data or another storage key.
    #[error("cipher: message authentication failed")]
    Authentication,
    /// secretbox: wrong key or tampered data (upstream's message).
    #[error("output array was not large enough for encryption")]
    SecretboxOpen,
    /// Identity met a `k8s:enc:` value.
    #[error("identity transformer tried to read encrypted data")]
    IdentityEncrypted,
    /// An `aesgcm`/`aescbc` value naming a key the provider does not hold.
    #[error("no matching key was found for the provided AES transformer")]
    NoAesKey,
    /// A `secretbox` value naming a key the provider does not hold.
    #[error("no matching key was found for the provided Secretbox transformer")]
    NoSecretboxKey,
    /// No provider of the resource reads values of this form.
    #[error("no matching prefix found")]
    NoMatchingPrefix,
    /// Several providers or keys matched and none could read the value.
    #[error("{}", several(.0))]
    Several(Vec<TransformError>),
}

/// Upstream's aggregate error text: `[first, second]`.
fn several(errors: &[TransformError]) -> String {
    let parts: Vec<String> = errors.iter().map(ToString::to_string).collect();
    format!("[{}]", parts.join(", "))
}

/// One error stands alone; several are aggregated (upstream's `errors.Reduce`).
fn reduce(mut errors: Vec<TransformError>) -> Option<TransformError> {
    match errors.len() {
        0 => None,
        1 => errors.pop(),
        _ => Some(TransformError::Several(errors)),
    }
}

/// A value read from storage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Read {
    /// The plain value.
    pub value: Vec<u8>,
    /// Read by a provider or key other than the one that writes: rewrite it.
    pub stale: bool,
}

/// An AES-GCM key of one of AES's three sizes.
#[derive(Clone)]
pub(crate) enum GcmKey {
    Aes128(Aes128Gcm),
    Aes192(AesGcm<aes::Aes192, U12>),
    Aes256(Aes256Gcm),
}

/// The cipher of one named key.
#[derive(Clone)]
pub(crate) enum Cipher {
    AesGcm(Box<GcmKey>),
    AesCbc(Vec<u8>),
    Secretbox(Box<XSalsa20Poly1305>),
}

/// Why a key cannot be used (checked by the configuration before it gets here).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("secret is not of the expected length, got {got}, expected one of {expected}")]
pub struct KeyLengthError {
    /// The key's length in bytes.
    pub got: usize,
    /// The lengths allowed, as upstream prints them (`[16 24 32]`).
    pub expected: &'static str,
}

/// The key lengths AES allows.
pub(crate) const AES_KEY_SIZES: &str = "[16 24 32]";
/// The key length secretbox allows.
pub(crate) const SECRETBOX_KEY_SIZES: &str = "[32]";

impl Cipher {
    pub(crate) fn aes_gcm(key: &[u8]) -> Result<Cipher, KeyLengthError> {
        let bad = || KeyLengthError {
            got: key.len(),
            expected: AES_KEY_SIZES,
        };
        let key = match key.len() {
            16 => GcmKey::Aes128(Aes128Gcm::new_from_slice(key).map_err(|_| bad())?),
            24 => GcmKey::Aes192(AesGcm::new_from_slice(key).map_err(|_| bad())?),
            32 => GcmKey::Aes256(Aes256Gcm::new_from_slice(key).map_err(|_| bad())?),
            _ => return Err(bad()),
        };
        Ok(Cipher::AesGcm(Box::new(key)))
    }

    pub(crate) fn aes_cbc(key: &[u8]) -> Result<Cipher, KeyLengthError> {
        match key.len() {
            16 | 24 | 32 => Ok(Cipher::AesCbc(key.to_vec())),
            got => Err(KeyLengthError {
                got,
                expected: AES_KEY_SIZES,
            }),
        }
    }

    pub(crate) fn secretbox(key: &[u8]) -> Result<Cipher, KeyLengthError> {
        XSalsa20Poly1305::new_from_slice(key)
            .map(|cipher| Cipher::Secretbox(Box::new(cipher)))
            .map_err(|_| KeyLengthError {
                got: key.len(),
                expected: SECRETBOX_KEY_SIZES,
            })
    }

    /// Seals `data`: nonce or IV, then the sealed bytes.
    fn seal(&self, data: &[u8], context: &[u8], random: &Random) -> Vec<u8> {
        match self {
            Cipher::AesGcm(key) => {
                let nonce = GenericArray::from_slice(&random[..GCM_NONCE]);
                let payload = Payload {
                    msg: data,
                    aad: context,
                };
                let sealed = match key.as_ref() {
                    GcmKey::Aes128(c) => c.encrypt(nonce, payload),
                    GcmKey::Aes192(c) => c.encrypt(nonce, payload),
                    GcmKey::Aes256(c) => c.encrypt(nonce, payload),
                };
                // Sealing fails only for inputs of more than 64 GiB.
                let sealed = sealed.unwrap_or_default();
                [&random[..GCM_NONCE], &sealed[..]].concat()
            }
            Cipher::AesCbc(key) => {
                let iv = &random[..BLOCK];
                let padding = BLOCK - data.len() % BLOCK;
                let mut out = Vec::with_capacity(BLOCK + data.len() + padding);
                out.extend_from_slice(iv);
                out.extend_from_slice(data);
                out.resize(BLOCK + data.len() + padding, padding as u8);
                cbc_encrypt(key, iv, &mut out[BLOCK..]);
                out
            }
            Cipher::Secretbox(cipher) => {
                let nonce = GenericArray::from_slice(&random[..SECRETBOX_NONCE]);
                let mut sealed = data.to_vec();
                // NaCl's layout: the tag precedes the ciphertext.
                let tag = cipher
                    .encrypt_in_place_detached(nonce, b"", &mut sealed)
                    .unwrap_or_default();
                [&random[..SECRETBOX_NONCE], &tag[..], &sealed[..]].concat()
            }
        }
    }

    /// Opens what [`Cipher::seal`] wrote.
    fn open(&self, data: &[u8], context: &[u8]) -> Result<Vec<u8>, TransformError> {
        match self {
            Cipher::AesGcm(key) => {
                if data.len() < GCM_NONCE {
                    return Err(TransformError::Short);
                }
                let (nonce, sealed) = data.split_at(GCM_NONCE);
                let nonce = GenericArray::from_slice(nonce);
                let payload = Payload {
                    msg: sealed,
                    aad: context,
                };
                let opened = match key.as_ref() {
                    GcmKey::Aes128(c) => c.decrypt(nonce, payload),
                    GcmKey::Aes192(c) => c.decrypt(nonce, payload),
                    GcmKey::Aes256(c) => c.decrypt(nonce, payload),
                };
                opened.map_err(|_| TransformError::Authentication)
            }
            Cipher::AesCbc(key) => {
                if data.len() < BLOCK {
                    return Err(TransformError::Short);
                }
                let (iv, sealed) = data.split_at(BLOCK);
                if sealed.len() % BLOCK != 0 {
                    return Err(TransformError::BlockSize);
                }
                let mut out = sealed.to_vec();
                cbc_decrypt(key, iv, &mut out);
                let Some(&last) = out.last() else {
                    return Err(TransformError::Pkcs7Data);
                };
                let padding = usize::from(last);
                if padding == 0 || padding > out.len() {
                    return Err(TransformError::Pkcs7Data);
                }
                let size = out.len() - padding;
                if out[size..].iter().any(|&b| b != last) {
                    return Err(TransformError::Pkcs7Padding);
                }
                out.truncate(size);
                Ok(out)
            }
            Cipher::Secretbox(cipher) => {
                if data.len() < SECRETBOX_NONCE + SECRETBOX_TAG {
                    return Err(TransformError::Short);
                }
                let (nonce, rest) = data.split_at(SECRETBOX_NONCE);
                let (tag, sealed) = rest.split_at(SECRETBOX_TAG);
                let mut out = sealed.to_vec();
                cipher
                    .decrypt_in_place_detached(
                        GenericArray::from_slice(nonce),
                        b"",
                        &mut out,
                        GenericArray::from_slice(tag),
                    )
                    .map_err(|_| TransformError::SecretboxOpen)?;
                Ok(out)
            }
        }
    }
}

type Block16 = cbc::cipher::consts::U16;

/// Runs `$run::<Aes…>(args)` with the AES of the key's size (lengths were checked when the
/// key was made).
macro_rules! with_aes {
    ($key:expr, $run:ident($($arg:expr),*)) => {
        match $key.len() {
            16 => $run::<aes::Aes128>($($arg),*),
            24 => $run::<aes::Aes192>($($arg),*),
            _ => $run::<aes::Aes256>($($arg),*),
        }
    };
}

/// AES-CBC encryption over whole blocks in place.
fn cbc_encrypt(key: &[u8], iv: &[u8], buf: &mut [u8]) {
    fn run<C>(key: &[u8], iv: &[u8], buf: &mut [u8])
    where
        C: BlockEncryptMut + BlockCipher<BlockSize = Block16> + KeyInit,
    {
        if let Ok(mut mode) = cbc::Encryptor::<C>::new_from_slices(key, iv) {
            for chunk in buf.chunks_exact_mut(BLOCK) {
                mode.encrypt_block_mut(GenericArray::from_mut_slice(chunk));
            }
        }
    }
    with_aes!(key, run(key, iv, buf))
}

/// AES-CBC decryption over whole blocks in place.
fn cbc_decrypt(key: &[u8], iv: &[u8], buf: &mut [u8]) {
    fn run<C>(key: &[u8], iv: &[u8], buf: &mut [u8])
    where
        C: BlockDecryptMut + BlockCipher<BlockSize = Block16> + KeyInit,
    {
        if let Ok(mut mode) = cbc::Decryptor::<C>::new_from_slices(key, iv) {
            for chunk in buf.chunks_exact_mut(BLOCK) {
                mode.decrypt_block_mut(GenericArray::from_mut_slice(chunk));
            }
        }
    }
    with_aes!(key, run(key, iv, buf))
}

/// A named key of a provider.
#[derive(Clone)]
pub(crate) struct Key {
    /// `<name>:`, the key's prefix after the provider's.
    pub(crate) prefix: String,
    pub(crate) cipher: Cipher,
}

/// One provider of a resource: identity, or a kind of cipher with its keys in order.
#[derive(Clone)]
pub(crate) enum Provider {
    Identity,
    Keyed {
        /// `k8s:enc:<kind>:v1:`.
        prefix: &'static str,
        keys: Vec<Key>,
        /// The error when no key's name matches.
        no_key: TransformError,
    },
}

impl Provider {
    fn prefix(&self) -> &str {
        match self {
            Provider::Identity => "",
            Provider::Keyed { prefix, .. } => prefix,
        }
    }

    /// Reads data with this provider's prefix removed: (value, stale within the provider).
    fn read(&self, data: &[u8], context: &[u8]) -> Result<(Vec<u8>, bool), TransformError> {
        match self {
            Provider::Identity => {
                if data.starts_with(ENCRYPTED_PREFIX.as_bytes()) {
                    return Err(TransformError::IdentityEncrypted);
                }
                Ok((data.to_vec(), false))
            }
            Provider::Keyed { keys, no_key, .. } => {
                let mut errors = Vec::new();
                for (index, key) in keys.iter().enumerate() {
                    let Some(rest) = data.strip_prefix(key.prefix.as_bytes()) else {
                        continue;
                    };
                    // Two keys may share a name across providers; never stop at a failure.
                    match key.cipher.open(rest, context) {
                        Ok(value) => return Ok((value, index != 0)),
                        Err(error) => errors.push(error),
                    }
                }
                Err(reduce(errors).unwrap_or_else(|| no_key.clone()))
            }
        }
    }

    fn write(&self, data: &[u8], context: &[u8], random: &Random) -> Vec<u8> {
        match self {
            Provider::Identity => data.to_vec(),
            Provider::Keyed { prefix, keys, .. } => {
                let Some(key) = keys.first() else {
                    // A provider has at least one key (validated); never written otherwise.
                    return data.to_vec();
                };
                let sealed = key.cipher.seal(data, context, random);
                [prefix.as_bytes(), key.prefix.as_bytes(), &sealed[..]].concat()
            }
        }
    }
}

/// One resource's providers in order: the first writes, every one reads.
#[derive(Clone)]
pub struct Transformer {
    pub(crate) providers: Vec<Provider>,
}

impl std::fmt::Debug for Transformer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print key material.
        f.debug_list()
            .entries(self.providers.iter().map(|p| match p {
                Provider::Identity => "identity".to_string(),
                Provider::Keyed { prefix, keys, .. } => format!(
                    "{prefix}[{}]",
                    keys.iter()
                        .map(|k| k.prefix.trim_end_matches(':'))
                        .collect::<Vec<_>>()
                        .join(",")
                ),
            }))
            .finish()
    }
}

impl Transformer {
    /// Upstream's default for a resource no rule names: identity only.
    pub fn identity() -> Transformer {
        Transformer {
            providers: vec![Provider::Identity],
        }
    }

    /// Whether values are written as they are (the first provider is identity).
    pub fn writes_plain(&self) -> bool {
        matches!(self.providers.first(), None | Some(Provider::Identity))
    }

    /// The stored form of `data`; `context` is the authenticated data (the storage key).
    pub fn to_storage(&self, data: &[u8], context: &[u8], random: &Random) -> Vec<u8> {
        match self.providers.first() {
            Some(provider) => provider.write(data, context, random),
            None => data.to_vec(),
        }
    }

    /// The plain value of stored `data`, and whether it is stale.
    pub fn from_storage(&self, data: &[u8], context: &[u8]) -> Result<Read, TransformError> {
        let mut errors = Vec::new();
        for (index, provider) in self.providers.iter().enumerate() {
            let Some(rest) = data.strip_prefix(provider.prefix().as_bytes()) else {
                continue;
            };
            match provider.read(rest, context) {
                Ok((value, stale)) => {
                    return Ok(Read {
                        value,
                        stale: stale || index != 0,
                    });
                }
                // Identity refusing encrypted data lets the later providers try.
                Err(_) if matches!(provider, Provider::Identity) => {}
                Err(error) => errors.push(error),
            }
        }
        Err(reduce(errors).unwrap_or(TransformError::NoMatchingPrefix))
    }
}
