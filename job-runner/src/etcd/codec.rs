//! How snapshots and deltas are stored: as they are, compressed with zstd, encrypted, or both
//! (compressed first). Every writer pushes the plain bytes through an [`Encoder`] and stores what
//! comes out; every reader pushes what it read through a [`Decoder`], which tells the encoding
//! from the object's first bytes, so a store may hold plain, compressed and encrypted objects side
//! by side and copies carry them as they are.
//!
//! * **Compressed only**: one standard zstd frame with its content checksum (`zstd -d` restores
//!   the plain file by hand). Levels 1–19 only: their window is at most 8 MiB, and the decoder
//!   refuses larger windows, so a hostile object cannot make a reader allocate more.
//! * **Encrypted** (the sealed format, version 1): `GKSEAL1\n`, a u32 big-endian length and a JSON
//!   header (`format`, `version`, `cipher` `aes-256-gcm`, `keyId`, `compression`, `chunkBytes`,
//!   `noncePrefix`), then chunks of at most 64 KiB of (compressed) plain bytes, each a u32 length
//!   and its AES-256-GCM ciphertext with tag. The nonce of chunk *i* is the header's random 7-byte
//!   prefix, *i* as a u32 and a last-chunk flag byte (the STREAM construction), and every chunk
//!   authenticates the whole header: a chunk changed, dropped, reordered or moved from another
//!   object, a header edited, or an object cut short fails to open. Nothing may follow the last
//!   chunk.
//!
//! The key is 32 bytes from a file (a mounted Secret): raw, 64 hex digits or base64. Its id (the
//! first 16 hex digits of a SHA-256 of the key under a label of its own) is recorded in the header,
//! the object's metadata and the result, so a wrong key is named before any chunk is tried; the
//! key itself is never written anywhere.

use std::borrow::Cow;
use std::io::Read;
use std::path::{Path, PathBuf};

use ring::aead::{AES_256_GCM, Aad, LessSafeKey, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use zstd::stream::raw::{InBuffer, Operation, OutBuffer};

use crate::run::Failure;
use groundskeeper_protocol::result::ErrorReason;

/// The first bytes of a sealed (encrypted) object.
pub(crate) const SEAL_MAGIC: &[u8; 8] = b"GKSEAL1\n";
/// The first bytes of a zstd frame.
pub(crate) const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
/// The sealed format's name and version, in its header.
const SEAL_FORMAT: &str = "groundskeeper.dev/sealed";
const SEAL_VERSION: u16 = 1;
const CIPHER: &str = "aes-256-gcm";
/// Plain bytes per sealed chunk.
const CHUNK_BYTES: usize = 64 * 1024;
/// AES-GCM's tag, after each chunk's ciphertext.
const TAG_BYTES: usize = 16;
/// The longest header a reader takes.
const MAX_HEADER_BYTES: usize = 4096;
/// The default and the range of zstd levels.
pub(crate) const DEFAULT_ZSTD_LEVEL: i32 = 3;
pub(crate) const ZSTD_LEVELS: std::ops::RangeInclusive<i32> = 1..=19;
/// The largest zstd window a reader accepts (level 19's: 8 MiB).
const ZSTD_WINDOW_LOG_MAX: u32 = 23;
/// A key file is a few dozen bytes; more is not a key.
const MAX_KEY_FILE_BYTES: u64 = 1024;

/// An encryption key, read from its file.
#[derive(Clone)]
pub struct Key {
    bytes: [u8; 32],
    /// See [`key_id`].
    pub id: String,
    /// Where it was read: what messages name (never its bytes).
    pub file: PathBuf,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Key").field("id", &self.id).field("file", &self.file).finish_non_exhaustive()
    }
}

impl Key {
    /// Reads the key in `file`: 32 bytes as they are, as 64 hex digits or as base64 (a line end
    /// after the text is allowed). Bad input naming the file (never its content) otherwise.
    pub(crate) fn read(flag: &str, file: &Path) -> Result<Self, Failure> {
        let bad = |why: String| Failure::bad_input(format!("{flag} {}: {why}", file.display()));
        let opened = std::fs::File::open(file).map_err(|e| bad(format!("cannot read the key: {e}")))?;
        if !opened.metadata().is_ok_and(|m| m.is_file()) {
            return Err(bad("is not a regular file".into()));
        }
        let mut content = Vec::new();
        opened
            .take(MAX_KEY_FILE_BYTES + 1)
            .read_to_end(&mut content)
            .map_err(|e| bad(format!("cannot read the key: {e}")))?;
        if content.len() as u64 > MAX_KEY_FILE_BYTES {
            return Err(bad(format!("holds more than {MAX_KEY_FILE_BYTES} bytes: that is not a key")));
        }
        let bytes = parse_key(&content).map_err(bad)?;
        Ok(Self { id: key_id(&bytes), bytes, file: file.to_owned() })
    }

    #[cfg(test)]
    pub(crate) fn from_bytes(bytes: [u8; 32]) -> Self {
        Self { id: key_id(&bytes), bytes, file: PathBuf::from("/test/key") }
    }

    fn aead(&self) -> LessSafeKey {
        LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &self.bytes).expect("32 bytes is AES-256's key"))
    }

    /// How messages name it: its file and id.
    pub(crate) fn describe(&self) -> String {
        format!("{} (key id {})", self.file.display(), self.id)
    }
}

/// 32 bytes from a key file's content.
fn parse_key(content: &[u8]) -> Result<[u8; 32], String> {
    const HOW: &str = "give 32 random bytes, as they are, as 64 hex digits or as base64 \
                       (`openssl rand -base64 32`)";
    if let Ok(raw) = <[u8; 32]>::try_from(content) {
        return Ok(raw);
    }
    let text = std::str::from_utf8(content)
        .map_err(|_| format!("is neither 32 bytes nor text: {HOW}"))?
        .trim_end_matches(['\n', '\r']);
    let decoded = if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
        (0..32).map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16).expect("hex digits")).collect()
    } else {
        decode_base64(text).ok_or_else(|| format!("is not 32 bytes, 64 hex digits nor base64: {HOW}"))?
    };
    <[u8; 32]>::try_from(decoded.as_slice())
        .map_err(|_| format!("decodes to {} bytes, not the 32 of an AES-256 key: {HOW}", decoded.len()))
}

/// Standard base64 (padding optional); `None` on any other character.
fn decode_base64(text: &str) -> Option<Vec<u8>> {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let text = text.trim_end_matches('=');
    let mut bits = 0u32;
    let mut count = 0;
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    for byte in text.bytes() {
        let value = ALPHABET.iter().position(|&a| a == byte)? as u32;
        bits = (bits << 6) | value;
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
        }
    }
    Some(out)
}

/// A key's id: the first 16 hex digits of SHA-256 over a label and the key. It tells keys apart
/// and says nothing of the key.
fn key_id(key: &[u8; 32]) -> String {
    let digest = Sha256::new().chain_update(b"groundskeeper.dev/key-id/v1\0").chain_update(key).finalize();
    super::snapshot::hex(&digest[..8])
}

/// How a writer stores what it writes.
#[derive(Debug, Clone, Default)]
pub struct Encoding {
    /// zstd's level; `None`: not compressed.
    pub zstd_level: Option<i32>,
    /// Encrypt with this key; `None`: not encrypted.
    pub key: Option<Key>,
}

impl Encoding {
    /// The flags' encoding, checked: `--compression none|zstd`, `--compression-level`, and the key
    /// file of `--encryption-key`.
    pub(crate) fn from_flags(
        compression: Option<&str>,
        level: Option<i32>,
        key_file: Option<&Path>,
    ) -> Result<Self, Failure> {
        let zstd_level = match (compression.unwrap_or("none"), level) {
            ("none", None) => None,
            ("none", Some(_)) => {
                return Err(Failure::bad_input("--compression-level needs --compression zstd"));
            }
            ("zstd", level) => {
                let level = level.unwrap_or(DEFAULT_ZSTD_LEVEL);
                if !ZSTD_LEVELS.contains(&level) {
                    return Err(Failure::bad_input(format!(
                        "--compression-level {level}: zstd's levels {}–{} only (higher ones need \
                         windows readers refuse)",
                        ZSTD_LEVELS.start(),
                        ZSTD_LEVELS.end()
                    )));
                }
                Some(level)
            }
            (other, _) => {
                return Err(Failure::bad_input(format!("--compression {other:?}: none or zstd")));
            }
        };
        let key = key_file.map(|file| Key::read("--encryption-key", file)).transpose()?;
        Ok(Self { zstd_level, key })
    }

    /// Its name as results and metadata record it: `zstd`, `aes-256-gcm`, `zstd+aes-256-gcm`;
    /// `None` when objects are stored as they are.
    pub(crate) fn name(&self) -> Option<String> {
        name_of(self.zstd_level.is_some(), self.key.is_some())
    }

    pub(crate) fn encoder(&self) -> Result<Encoder, Failure> {
        Encoder::new(self)
    }
}

fn name_of(compressed: bool, encrypted: bool) -> Option<String> {
    match (compressed, encrypted) {
        (false, false) => None,
        (true, false) => Some("zstd".into()),
        (false, true) => Some(CIPHER.into()),
        (true, true) => Some(format!("zstd+{CIPHER}")),
    }
}

/// What an encoder or a decoder saw pass: the plain content and the stored bytes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Encoded {
    /// `zstd`, `aes-256-gcm`, `zstd+aes-256-gcm`; `None`: stored as it is.
    pub encoding: Option<String>,
    /// The id of the key it is encrypted with.
    pub key_id: Option<String>,
    pub content_bytes: u64,
    /// SHA-256 of the plain content (the snapshot or delta as etcd's tools read it), hex.
    pub content_sha256: String,
    pub stored_bytes: u64,
    /// SHA-256 of the bytes stored (what `sha256sum` of the object prints), hex.
    pub stored_sha256: String,
}

impl Encoded {
    /// What a result says of how the object is stored: nothing when it is stored as it is.
    pub(crate) fn stored_as(&self) -> groundskeeper_protocol::result::StoredAs {
        if self.encoding.is_none() {
            return Default::default();
        }
        groundskeeper_protocol::result::StoredAs {
            encoding: self.encoding.clone(),
            key_id: self.key_id.clone(),
            content_bytes: Some(self.content_bytes),
            content_sha256: Some(self.content_sha256.clone()),
        }
    }

    /// The object metadata that says it (none when stored as it is); `sha256` stays the stored
    /// bytes' hash, which every read checks first.
    pub(crate) fn metadata(&self) -> Vec<(String, String)> {
        let Some(encoding) = &self.encoding else { return Vec::new() };
        let mut metadata = vec![
            (META_ENCODING.to_owned(), encoding.clone()),
            (META_CONTENT_SHA256.to_owned(), self.content_sha256.clone()),
            (META_CONTENT_BYTES.to_owned(), self.content_bytes.to_string()),
        ];
        if let Some(id) = &self.key_id {
            metadata.push((META_KEY_ID.to_owned(), id.clone()));
        }
        metadata
    }
}

/// Object metadata of an encoded object: its encoding, its key's id, and its content's SHA-256
/// and size.
pub(crate) const META_ENCODING: &str = "encoding";
pub(crate) const META_KEY_ID: &str = "key-id";
pub(crate) const META_CONTENT_SHA256: &str = "content-sha256";
pub(crate) const META_CONTENT_BYTES: &str = "content-bytes";

/// How an object is stored, as its metadata says (a copy carries it along).
pub(crate) fn stored_as_in(
    metadata: &std::collections::BTreeMap<String, String>,
) -> groundskeeper_protocol::result::StoredAs {
    groundskeeper_protocol::result::StoredAs {
        encoding: metadata.get(META_ENCODING).cloned(),
        key_id: metadata.get(META_KEY_ID).cloned(),
        content_bytes: metadata.get(META_CONTENT_BYTES).and_then(|b| b.parse().ok()),
        content_sha256: metadata.get(META_CONTENT_SHA256).cloned(),
    }
}

/// Plain bytes in, stored bytes out.
pub(crate) struct Encoder {
    zstd: Option<zstd::stream::raw::Encoder<'static>>,
    seal: Option<Sealer>,
    content: Sha256,
    content_bytes: u64,
    stored: Sha256,
    stored_bytes: u64,
    encoding: Option<String>,
}

impl Encoder {
    fn new(encoding: &Encoding) -> Result<Self, Failure> {
        let zstd = match encoding.zstd_level {
            Some(level) => {
                let mut encoder = zstd::stream::raw::Encoder::new(level)
                    .map_err(|e| Failure::retryable(format!("cannot start zstd: {e}")))?;
                encoder
                    .set_parameter(zstd::stream::raw::CParameter::ChecksumFlag(true))
                    .map_err(|e| Failure::retryable(format!("cannot start zstd: {e}")))?;
                Some(encoder)
            }
            None => None,
        };
        let compression = if zstd.is_some() { "zstd" } else { "none" };
        let seal = encoding.key.as_ref().map(|key| Sealer::new(key, compression)).transpose()?;
        Ok(Self {
            zstd,
            seal,
            content: Sha256::new(),
            content_bytes: 0,
            stored: Sha256::new(),
            stored_bytes: 0,
            encoding: encoding.name(),
        })
    }

    /// The stored bytes for `plain` (maybe none yet: compression and sealing buffer); `plain`
    /// itself, uncopied, when objects are stored as they are.
    pub(crate) fn push<'a>(&mut self, plain: &'a [u8]) -> Result<Cow<'a, [u8]>, Failure> {
        self.content.update(plain);
        self.content_bytes += plain.len() as u64;
        let compressed = match &mut self.zstd {
            Some(zstd) => Cow::Owned(compress(zstd, plain)?),
            None => Cow::Borrowed(plain),
        };
        let stored = match &mut self.seal {
            Some(seal) => Cow::Owned(seal.push(&compressed)),
            None => compressed,
        };
        self.stored.update(&stored);
        self.stored_bytes += stored.len() as u64;
        Ok(stored)
    }

    /// The last stored bytes, and what passed.
    pub(crate) fn finish(mut self) -> Result<(Vec<u8>, Encoded), Failure> {
        let compressed = match &mut self.zstd {
            Some(zstd) => end_frame(zstd)?,
            None => Vec::new(),
        };
        let key_id = self.seal.as_ref().map(|s| s.key_id.clone());
        let stored = match self.seal.take() {
            Some(mut seal) => {
                let mut out = seal.push(&compressed);
                out.extend(seal.finish());
                out
            }
            None => compressed,
        };
        let stored = self.count(stored);
        let encoded = Encoded {
            encoding: self.encoding,
            key_id,
            content_bytes: self.content_bytes,
            content_sha256: super::snapshot::hex(&self.content.finalize()),
            stored_bytes: self.stored_bytes,
            stored_sha256: super::snapshot::hex(&self.stored.finalize()),
        };
        Ok((stored, encoded))
    }

    fn count(&mut self, stored: Vec<u8>) -> Vec<u8> {
        self.stored.update(&stored);
        self.stored_bytes += stored.len() as u64;
        stored
    }
}

fn compress(zstd: &mut zstd::stream::raw::Encoder<'static>, plain: &[u8]) -> Result<Vec<u8>, Failure> {
    let mut out = Vec::with_capacity(plain.len() / 2 + OUT_STEP);
    let mut input = InBuffer::around(plain);
    while input.pos() < plain.len() {
        out.reserve(OUT_STEP);
        let at = out.len();
        let mut output = OutBuffer::around_pos(&mut out, at);
        zstd.run(&mut input, &mut output).map_err(|e| Failure::retryable(format!("zstd failed: {e}")))?;
    }
    Ok(out)
}

fn end_frame(zstd: &mut zstd::stream::raw::Encoder<'static>) -> Result<Vec<u8>, Failure> {
    let mut out = Vec::new();
    loop {
        out.reserve(OUT_STEP);
        let at = out.len();
        let mut output = OutBuffer::around_pos(&mut out, at);
        let left =
            zstd.finish(&mut output, true).map_err(|e| Failure::retryable(format!("zstd failed: {e}")))?;
        if left == 0 {
            return Ok(out);
        }
    }
}

/// How much room compressed output is given at a time.
const OUT_STEP: usize = 128 * 1024;

/// Seals chunks of plain bytes: STREAM over AES-256-GCM.
struct Sealer {
    key: LessSafeKey,
    key_id: String,
    header: Vec<u8>,
    prefix: [u8; 7],
    counter: u32,
    pending: Vec<u8>,
    header_sent: bool,
}

#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
struct SealHeader {
    format: String,
    version: u16,
    cipher: String,
    key_id: String,
    compression: String,
    chunk_bytes: u32,
    nonce_prefix: String,
}

impl Sealer {
    fn new(key: &Key, compression: &str) -> Result<Self, Failure> {
        let mut prefix = [0u8; 7];
        SystemRandom::new()
            .fill(&mut prefix)
            .map_err(|_| Failure::retryable("the system's random number generator failed"))?;
        let header = SealHeader {
            format: SEAL_FORMAT.into(),
            version: SEAL_VERSION,
            cipher: CIPHER.into(),
            key_id: key.id.clone(),
            compression: compression.into(),
            chunk_bytes: CHUNK_BYTES as u32,
            nonce_prefix: super::snapshot::hex(&prefix),
        };
        let json = serde_json::to_vec(&header).expect("a header always serialises");
        let mut bytes = SEAL_MAGIC.to_vec();
        bytes.extend_from_slice(&(json.len() as u32).to_be_bytes());
        bytes.extend_from_slice(&json);
        Ok(Self {
            key: key.aead(),
            key_id: key.id.clone(),
            header: bytes,
            prefix,
            counter: 0,
            pending: Vec::with_capacity(CHUNK_BYTES),
            header_sent: false,
        })
    }

    fn push(&mut self, mut plain: &[u8]) -> Vec<u8> {
        let mut out = self.take_header();
        while !plain.is_empty() {
            let room = CHUNK_BYTES - self.pending.len();
            let (now, later) = plain.split_at(room.min(plain.len()));
            self.pending.extend_from_slice(now);
            plain = later;
            // A full chunk is sealed only once more follows: the last chunk must carry the flag.
            if self.pending.len() == CHUNK_BYTES && !plain.is_empty() {
                self.seal_pending(false, &mut out);
            }
        }
        out
    }

    fn finish(mut self) -> Vec<u8> {
        let mut out = self.take_header();
        self.seal_pending(true, &mut out);
        out
    }

    fn take_header(&mut self) -> Vec<u8> {
        if std::mem::replace(&mut self.header_sent, true) { Vec::new() } else { self.header.clone() }
    }

    fn seal_pending(&mut self, last: bool, out: &mut Vec<u8>) {
        let mut chunk = std::mem::take(&mut self.pending);
        let nonce = nonce(&self.prefix, self.counter, last);
        self.key
            .seal_in_place_append_tag(nonce, Aad::from(self.header.as_slice()), &mut chunk)
            .expect("AES-GCM seals any chunk below its length limit");
        self.counter += 1;
        out.extend_from_slice(&(chunk.len() as u32).to_be_bytes());
        out.extend_from_slice(&chunk);
        self.pending = Vec::with_capacity(CHUNK_BYTES);
    }
}

fn nonce(prefix: &[u8; 7], counter: u32, last: bool) -> Nonce {
    let mut bytes = [0u8; 12];
    bytes[..7].copy_from_slice(prefix);
    bytes[7..11].copy_from_slice(&counter.to_be_bytes());
    bytes[11] = u8::from(last);
    Nonce::assume_unique_for_key(bytes)
}

/// Stored bytes in, plain bytes out, in pieces no larger than the caller's buffer: a small
/// object that decompresses to gigabytes (free pages are zeros) never sits in memory whole. The
/// encoding is told from the first bytes: a sealed object, a zstd frame, or anything else, passed
/// through as it is (a plain snapshot or delta, which its own checks then judge).
pub(crate) struct Decoder {
    key: Option<Key>,
    /// The object, for messages.
    subject: String,
    state: State,
    /// Stored bytes not taken yet (from `input_at` on).
    input: Vec<u8>,
    input_at: usize,
    /// No more stored bytes will come.
    input_ended: bool,
    /// Opened bytes of a sealed object not taken yet (compressed ones when it is compressed).
    opened: Vec<u8>,
    opened_at: usize,
    zstd: Option<zstd::stream::raw::Decoder<'static>>,
    /// The zstd frame ended (decoded and flushed whole).
    frame_done: bool,
    opener: Option<Opener>,
    content: Sha256,
    content_bytes: u64,
    stored: Sha256,
    stored_bytes: u64,
    encoding: Option<String>,
    key_id: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Not enough bytes yet to tell the encoding.
    Sniffing,
    Plain,
    Zstd,
    Sealed,
}

/// The largest piece [`Decoder::drain`] hands on.
const PIECE_BYTES: usize = 1 << 20;

impl Decoder {
    /// A decoder for the object `subject` (its URL or path, for messages), with the key to open
    /// it when it is encrypted.
    pub(crate) fn new(subject: impl Into<String>, key: Option<&Key>) -> Self {
        Self {
            key: key.cloned(),
            subject: subject.into(),
            state: State::Sniffing,
            input: Vec::new(),
            input_at: 0,
            input_ended: false,
            opened: Vec::new(),
            opened_at: 0,
            zstd: None,
            frame_done: false,
            opener: None,
            content: Sha256::new(),
            content_bytes: 0,
            stored: Sha256::new(),
            stored_bytes: 0,
            encoding: None,
            key_id: None,
        }
    }

    /// More stored bytes.
    pub(crate) fn feed(&mut self, stored: &[u8]) {
        self.stored.update(stored);
        self.stored_bytes += stored.len() as u64;
        if self.input_at > 0 {
            self.input.drain(..self.input_at);
            self.input_at = 0;
        }
        self.input.extend_from_slice(stored);
    }

    /// Feeds `stored` and hands every plain byte it gives to `sink`, piece by piece. Bad input
    /// when the object is damaged, or encrypted with another key or with none given.
    pub(crate) fn push(
        &mut self,
        stored: &[u8],
        sink: &mut dyn FnMut(&[u8]) -> Result<(), Failure>,
    ) -> Result<(), Failure> {
        self.feed(stored);
        self.drain(sink)
    }

    /// Hands every plain byte the stored ones fed so far give to `sink`.
    fn drain(&mut self, sink: &mut dyn FnMut(&[u8]) -> Result<(), Failure>) -> Result<(), Failure> {
        let mut piece = vec![0u8; PIECE_BYTES];
        loop {
            let n = self.read_plain(&mut piece)?;
            if n == 0 {
                return Ok(());
            }
            sink(&piece[..n])?;
        }
    }

    /// The end of the stored bytes: the last plain ones go to `sink`, and what passed is
    /// returned. Bad input when the object ended early or has bytes after its end.
    pub(crate) fn finish(
        mut self,
        sink: &mut dyn FnMut(&[u8]) -> Result<(), Failure>,
    ) -> Result<Encoded, Failure> {
        self.input_ended = true;
        self.drain(sink)?;
        self.check_end()?;
        Ok(self.encoded_so_far())
    }

    fn encoded_so_far(self) -> Encoded {
        Encoded {
            encoding: self.encoding,
            key_id: self.key_id,
            content_bytes: self.content_bytes,
            content_sha256: super::snapshot::hex(&self.content.finalize()),
            stored_bytes: self.stored_bytes,
            stored_sha256: super::snapshot::hex(&self.stored.finalize()),
        }
    }

    fn check_end(&self) -> Result<(), Failure> {
        let left = self.input.len() - self.input_at;
        match self.state {
            State::Sealed if self.opener.as_ref().is_none_or(|o| !o.ended) => {
                Err(self.damaged("it ends before its last chunk: cut short".into()))
            }
            State::Sealed if left > 0 => Err(self.damaged("bytes follow its last chunk".into())),
            State::Zstd | State::Sealed if self.zstd.is_some() && !self.frame_done => {
                Err(self.damaged("its zstd frame ends early: cut short".into()))
            }
            State::Zstd if left > 0 => Err(self.damaged("bytes follow its zstd frame".into())),
            _ => Ok(()),
        }
    }

    /// Up to `out.len()` plain bytes; 0 when more stored bytes are needed (or none are left).
    pub(crate) fn read_plain(&mut self, out: &mut [u8]) -> Result<usize, Failure> {
        if self.state == State::Sniffing && !self.sniff() {
            return Ok(0);
        }
        let n = match self.state {
            State::Sniffing => unreachable!("sniffed above"),
            State::Plain => {
                let n = out.len().min(self.input.len() - self.input_at);
                out[..n].copy_from_slice(&self.input[self.input_at..self.input_at + n]);
                self.input_at += n;
                n
            }
            State::Zstd => self.decompress_input(out)?,
            State::Sealed => self.read_sealed(out)?,
        };
        self.content.update(&out[..n]);
        self.content_bytes += n as u64;
        Ok(n)
    }

    /// Tells the encoding once there are enough bytes (or no more will come).
    fn sniff(&mut self) -> bool {
        let head = &self.input[self.input_at..];
        if head.len() < SEAL_MAGIC.len() && !self.input_ended {
            return false;
        }
        self.state = if head.starts_with(SEAL_MAGIC) {
            State::Sealed
        } else if head.starts_with(&ZSTD_MAGIC) {
            self.start_zstd();
            self.encoding = name_of(true, false);
            State::Zstd
        } else {
            State::Plain
        };
        true
    }

    fn start_zstd(&mut self) {
        let mut decoder = zstd::stream::raw::Decoder::new().expect("zstd's decoder starts");
        decoder
            .set_parameter(zstd::stream::raw::DParameter::WindowLogMax(ZSTD_WINDOW_LOG_MAX))
            .expect("a window limit within zstd's range");
        self.zstd = Some(decoder);
    }

    fn decompress_input(&mut self, out: &mut [u8]) -> Result<usize, Failure> {
        let (input, at) = (std::mem::take(&mut self.input), self.input_at);
        let result = self.decompress(&input[at..], out);
        self.input = input;
        let (taken, written) = result?;
        self.input_at += taken;
        Ok(written)
    }

    /// zstd over `input` into `out`: (bytes taken, bytes written).
    fn decompress(&mut self, input: &[u8], out: &mut [u8]) -> Result<(usize, usize), Failure> {
        if self.frame_done {
            if !input.is_empty() {
                return Err(self.damaged("bytes follow its zstd frame".into()));
            }
            return Ok((0, 0));
        }
        let zstd = self.zstd.as_mut().expect("started when sniffed or when the header said so");
        let mut source = InBuffer::around(input);
        let mut target = OutBuffer::around(out);
        // A call may take input without writing (a frame header, a block's start): go on while
        // there is input and room.
        loop {
            let before = (source.pos(), target.pos());
            let hint = zstd
                .run(&mut source, &mut target)
                .map_err(|e| damaged(&self.subject, format!("its zstd data cannot be decompressed ({e})")))?;
            if hint == 0 {
                self.frame_done = true;
                break;
            }
            let stalled = (source.pos(), target.pos()) == before;
            if target.pos() > 0 || stalled || target.pos() == target.capacity() {
                break;
            }
        }
        Ok((source.pos(), target.pos()))
    }

    fn read_sealed(&mut self, out: &mut [u8]) -> Result<usize, Failure> {
        if self.opener.is_none() && !self.start_opener()? {
            return Ok(0);
        }
        loop {
            if self.opened_at < self.opened.len() || (self.zstd.is_some() && !self.frame_done) {
                let written = self.take_opened(out)?;
                if written > 0 {
                    return Ok(written);
                }
            }
            // Everything opened is taken: the next chunk, when it is whole.
            let (input, at) = (std::mem::take(&mut self.input), self.input_at);
            let opener = self.opener.as_mut().expect("started above");
            let next = opener.open_next(&input[at..]);
            self.input = input;
            match next.map_err(|why| damaged(&self.subject, why))? {
                Some((taken, plain)) => {
                    self.input_at += taken;
                    self.opened = plain;
                    self.opened_at = 0;
                }
                None => return Ok(0),
            }
        }
    }

    /// Opened bytes into `out`, through zstd when the object is compressed.
    fn take_opened(&mut self, out: &mut [u8]) -> Result<usize, Failure> {
        let (opened, at) = (std::mem::take(&mut self.opened), self.opened_at);
        let result = if self.zstd.is_some() {
            self.decompress(&opened[at..], out)
        } else {
            let n = out.len().min(opened.len() - at);
            out[..n].copy_from_slice(&opened[at..at + n]);
            Ok((n, n))
        };
        self.opened = opened;
        let (taken, written) = result?;
        self.opened_at += taken;
        Ok(written)
    }

    /// Reads the header once it is all there: the key checked against it, zstd started when it
    /// says so. `false` while bytes are missing.
    fn start_opener(&mut self) -> Result<bool, Failure> {
        let head = &self.input[self.input_at..];
        let Some(end) = header_end(head).map_err(|why| self.damaged(why))? else {
            if self.input_ended {
                return Err(self.damaged("it ends inside its header: cut short".into()));
            }
            return Ok(false);
        };
        let header = head[..end].to_vec();
        let parsed: SealHeader = serde_json::from_slice(&header[SEAL_MAGIC.len() + 4..])
            .map_err(|e| self.damaged(format!("its header cannot be read ({e})")))?;
        if parsed.format != SEAL_FORMAT || parsed.version != SEAL_VERSION || parsed.cipher != CIPHER {
            return Err(self.damaged(format!(
                "its header says {} version {} with {}; this runner reads {SEAL_FORMAT} version \
                 {SEAL_VERSION} with {CIPHER}",
                parsed.format, parsed.version, parsed.cipher
            )));
        }
        let compressed = match parsed.compression.as_str() {
            "zstd" => true,
            "none" => false,
            other => return Err(self.damaged(format!("its header names compression {other:?}"))),
        };
        self.encoding = name_of(compressed, true);
        self.key_id = Some(parsed.key_id.clone());
        let key = match &self.key {
            None => {
                return Err(Failure::bad_input(format!(
                    "{} is encrypted (key id {}) and no key was given: pass --encryption-key with the \
                     file of the key it was written with (the store's encryption Secret)",
                    self.subject, parsed.key_id
                ))
                .with_reason(ErrorReason::KeyMissing));
            }
            Some(key) if key.id != parsed.key_id => {
                return Err(Failure::bad_input(format!(
                    "{} is encrypted with key id {}, but the key given, {}, is another: give the key \
                     it was written with",
                    self.subject,
                    parsed.key_id,
                    key.describe()
                ))
                .with_reason(ErrorReason::KeyMismatch));
            }
            Some(key) => key.aead(),
        };
        let prefix = parse_prefix(&parsed.nonce_prefix)
            .ok_or_else(|| self.damaged("its header's nonce prefix is not 7 bytes of hex".into()))?;
        let chunk_bytes = parsed.chunk_bytes as usize;
        if chunk_bytes == 0 || chunk_bytes > CHUNK_BYTES {
            return Err(self.damaged(format!("its header claims chunks of {chunk_bytes} bytes")));
        }
        if compressed {
            self.start_zstd();
        }
        self.input_at += end;
        self.opener = Some(Opener { key, header, prefix, counter: 0, chunk_bytes, ended: false });
        Ok(true)
    }

    fn damaged(&self, why: String) -> Failure {
        damaged(&self.subject, why)
    }
}

fn damaged(subject: &str, why: String) -> Failure {
    Failure::bad_input(format!(
        "{subject}: {why}; the object is damaged (or not written by groundskeeper): take a new \
         snapshot, or copy it again from a good copy"
    ))
}

/// Where the sealed header ends, once enough bytes are there.
fn header_end(head: &[u8]) -> Result<Option<usize>, String> {
    let start = SEAL_MAGIC.len() + 4;
    if head.len() < start {
        return Ok(None);
    }
    let len = u32::from_be_bytes(head[SEAL_MAGIC.len()..start].try_into().expect("4 bytes")) as usize;
    if len > MAX_HEADER_BYTES {
        return Err(format!("its header claims {len} bytes; at most {MAX_HEADER_BYTES}"));
    }
    Ok((head.len() >= start + len).then_some(start + len))
}

fn parse_prefix(hex: &str) -> Option<[u8; 7]> {
    if hex.len() != 14 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut prefix = [0u8; 7];
    for (i, byte) in prefix.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(prefix)
}

/// Opens the chunks of a sealed object.
struct Opener {
    key: LessSafeKey,
    header: Vec<u8>,
    prefix: [u8; 7],
    counter: u32,
    chunk_bytes: usize,
    ended: bool,
}

impl Opener {
    /// The next chunk of `input`, opened, with the bytes it took; `None` until it is whole.
    fn open_next(&mut self, input: &[u8]) -> Result<Option<(usize, Vec<u8>)>, String> {
        if input.is_empty() {
            return Ok(None);
        }
        if self.ended {
            return Err("bytes follow its last chunk".into());
        }
        if input.len() < 4 {
            return Ok(None);
        }
        let len = u32::from_be_bytes(input[..4].try_into().expect("4 bytes")) as usize;
        if len < TAG_BYTES || len > self.chunk_bytes + TAG_BYTES {
            return Err(format!("chunk {} claims {len} bytes", self.counter));
        }
        if input.len() < 4 + len {
            return Ok(None);
        }
        // A chunk shorter than a full one can only be the last; a full one is tried as a middle
        // one first. The flag is in the nonce: a last chunk passed off as a middle one (or the
        // other way round) does not open.
        let short = len < self.chunk_bytes + TAG_BYTES;
        for last in if short { [true, false] } else { [false, true] } {
            let mut chunk = input[4..4 + len].to_vec();
            let nonce = nonce(&self.prefix, self.counter, last);
            if let Ok(plain) = self.key.open_in_place(nonce, Aad::from(self.header.as_slice()), &mut chunk) {
                let plain = plain.to_vec();
                self.counter += 1;
                self.ended = last;
                return Ok(Some((4 + len, plain)));
            }
        }
        Err(format!(
            "chunk {} does not authenticate: changed, out of place, or from another object",
            self.counter
        ))
    }
}

/// A reader of plain bytes over a reader of stored ones (a file): decodes as it reads, never
/// more than the caller's buffer at a time.
pub(crate) struct DecodingReader<R> {
    inner: R,
    decoder: Option<Decoder>,
    encoded: Option<Encoded>,
}

impl<R: Read> DecodingReader<R> {
    pub(crate) fn new(inner: R, decoder: Decoder) -> Self {
        Self { inner, decoder: Some(decoder), encoded: None }
    }

    /// What passed, once the whole object was read.
    pub(crate) fn encoded(&self) -> Option<&Encoded> {
        self.encoded.as_ref()
    }
}

impl<R: Read> Read for DecodingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let failed = Failure::into_io;
        let mut stored = [0u8; 64 * 1024];
        loop {
            let Some(decoder) = self.decoder.as_mut() else { return Ok(0) };
            let n = decoder.read_plain(buf).map_err(failed)?;
            if n > 0 {
                return Ok(n);
            }
            let read = self.inner.read(&mut stored)?;
            if read > 0 {
                decoder.feed(&stored[..read]);
                continue;
            }
            decoder.input_ended = true;
            let n = decoder.read_plain(buf).map_err(failed)?;
            if n > 0 {
                return Ok(n);
            }
            let decoder = self.decoder.take().expect("checked above");
            decoder.check_end().map_err(failed)?;
            self.encoded = Some(decoder.encoded_so_far());
            return Ok(0);
        }
    }
}

/// Whether the first bytes of an object say it is encoded (compressed or sealed).
pub(crate) fn is_encoded(first: &[u8]) -> bool {
    first.starts_with(SEAL_MAGIC) || first.starts_with(&ZSTD_MAGIC)
}

/// The encoding and key id a stored object's first bytes say, without any key: for copies and
/// listings, which carry objects as they are.
pub(crate) fn describe_stored(first: &[u8]) -> (Option<String>, Option<String>) {
    if first.starts_with(&ZSTD_MAGIC) {
        return (name_of(true, false), None);
    }
    if !first.starts_with(SEAL_MAGIC) {
        return (None, None);
    }
    let header = match header_end(first) {
        Ok(Some(end)) => &first[SEAL_MAGIC.len() + 4..end],
        _ => return (name_of(false, true), None),
    };
    match serde_json::from_slice::<SealHeader>(header) {
        Ok(parsed) => (name_of(parsed.compression == "zstd", true), Some(parsed.key_id)),
        Err(_) => (name_of(false, true), None),
    }
}

#[cfg(test)]
mod tests;

/// The flags of a subcommand that writes snapshots or deltas.
#[derive(clap::Args, Debug, Clone, Default, PartialEq)]
pub struct EncodingArgs {
    /// Compress what is written: `none` (the default) or `zstd` (a standard zstd frame;
    /// `zstd -d` reads it by hand).
    #[arg(long, value_name = "none|zstd")]
    pub compression: Option<String>,
    /// zstd's level, 1 to 19 (default 3: fast, most of the gain).
    #[arg(long, value_name = "LEVEL", requires = "compression")]
    pub compression_level: Option<i32>,
    /// A file holding a 32-byte key (raw, 64 hex digits or base64; a mounted Secret's file):
    /// what is written is encrypted with it (AES-256-GCM), and the store's encrypted objects that
    /// are read are opened with it.
    #[arg(long, value_name = "FILE")]
    pub encryption_key: Option<PathBuf>,
}

impl EncodingArgs {
    pub(crate) fn encoding(&self) -> Result<Encoding, Failure> {
        Encoding::from_flags(
            self.compression.as_deref(),
            self.compression_level,
            self.encryption_key.as_deref(),
        )
    }

    /// The flags as the protocol has them.
    pub(crate) fn operation(&self) -> groundskeeper_protocol::operation::ObjectEncoding {
        groundskeeper_protocol::operation::ObjectEncoding {
            zstd_level: match self.compression.as_deref() {
                Some("zstd") => Some(self.compression_level.unwrap_or(DEFAULT_ZSTD_LEVEL)),
                _ => None,
            },
            encryption_key_file: self.encryption_key.as_ref().map(|p| p.to_string_lossy().into_owned()),
        }
    }
}

/// The flag of a subcommand that reads snapshots.
#[derive(clap::Args, Debug, Clone, Default, PartialEq)]
pub struct KeyArgs {
    /// A file holding the 32-byte key (raw, 64 hex digits or base64; a mounted Secret's file)
    /// that encrypted snapshots are opened with. Plain and compressed ones need none.
    #[arg(long, value_name = "FILE")]
    pub encryption_key: Option<PathBuf>,
}

impl KeyArgs {
    pub(crate) fn key(&self) -> Result<Option<Key>, Failure> {
        self.encryption_key.as_deref().map(|file| Key::read("--encryption-key", file)).transpose()
    }

    pub(crate) fn file(&self) -> Option<String> {
        self.encryption_key.as_ref().map(|p| p.to_string_lossy().into_owned())
    }
}

/// Whether the file at `path` starts as a compressed or encrypted object does (a file that
/// cannot be read is left to the caller's own checks).
pub(crate) fn is_encoded_file(path: &Path) -> bool {
    let mut head = Vec::with_capacity(SEAL_MAGIC.len());
    std::fs::File::open(path)
        .and_then(|file| file.take(SEAL_MAGIC.len() as u64).read_to_end(&mut head))
        .is_ok_and(|_| is_encoded(&head))
}

/// Whether `key` opens the file at `path`: a sealed file's header names the key it was written
/// with, and none or another is refused here (with its [`ErrorReason`]) before a reader whose
/// errors are only text (the delta format's) takes the file. Anything else about the file is
/// left to that reader.
pub(crate) fn check_key(path: &Path, subject: &str, key: Option<&Key>) -> Result<(), Failure> {
    const HEAD: u64 = 64 * 1024;
    let mut head = Vec::new();
    let read = std::fs::File::open(path).and_then(|file| file.take(HEAD).read_to_end(&mut head));
    if read.is_err() || !head.starts_with(SEAL_MAGIC) {
        return Ok(());
    }
    let mut decoder = Decoder::new(subject, key);
    decoder.feed(&head);
    decoder.input_ended = (head.len() as u64) < HEAD;
    match decoder.read_plain(&mut [0u8; 1]) {
        Err(failure) if failure.reason.is_some_and(ErrorReason::is_key) => Err(failure),
        _ => Ok(()),
    }
}

/// Decodes the compressed or encrypted file `from` into a new plain file `to` (replaced if
/// there; removed again when anything fails), fsynced: what etcd's restore tools read.
pub(crate) fn decode_file(from: &Path, to: &Path, key: Option<&Key>) -> Result<Encoded, Failure> {
    let subject = format!("snapshot {}", from.display());
    let source = std::fs::File::open(from)
        .map_err(|e| Failure::bad_input(format!("{subject}: cannot open it: {e}")))?;
    let mut reader =
        DecodingReader::new(std::io::BufReader::with_capacity(1 << 20, source), Decoder::new(&subject, key));
    let written = (|| {
        let _ = std::fs::remove_file(to);
        let mut target = std::fs::OpenOptions::new().write(true).create_new(true).open(to)?;
        std::io::copy(&mut reader, &mut target)?;
        target.sync_all()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(to);
        // The decoder's own failure, naming the file.
        return Err(Failure::from_io(&e).unwrap_or_else(|| {
            Failure::retryable(format!("cannot decode {} into {}: {e}", from.display(), to.display()))
        }));
    }
    Ok(reader.encoded().cloned().expect("read to its end"))
}
