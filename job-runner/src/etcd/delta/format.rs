//! The delta file format, version 1: self-describing, written and read as a stream.
//!
//! ```text
//! magic    8 bytes   "GKDELTA\n"
//! version  u16       1
//! header   u32 length, then that many bytes of JSON (Header: cluster and member ids, the
//!          start and end revisions, when, by which etcd)
//! records  one per transaction (revision), in revision order:
//!          u8 'T', u32 length, then: i64 revision, u32 events, and per event:
//!            u8 kind (0 put, 1 delete), u32 + key, u32 + value,
//!            i64 create revision, i64 mod revision, i64 version, i64 lease
//! trailer  u8 'E', u64 transactions, u64 events, 32 bytes: SHA-256 of every byte before 'E'
//! ```
//!
//! Integers are big-endian. A delete carries its key and its revision (the other fields are
//! zero, as etcd's watch gives them). Nothing may follow the trailer. A reader checks each record
//! as it goes (revisions rising, within the header's range, every event of a record at its
//! revision) and the trailer at the end; any byte changed, missing or added is refused.

use std::io::Read;

use sha2::{Digest, Sha256};

/// The first bytes of every delta.
pub(crate) const MAGIC: &[u8; 8] = b"GKDELTA\n";
/// The format version this runner writes and reads.
pub(crate) const VERSION: u16 = 1;
/// `format` in the header.
pub(crate) const FORMAT: &str = "groundskeeper.dev/etcd-delta";
const RECORD: u8 = b'T';
const END: u8 = b'E';
/// The largest record or header a reader takes: far above what one etcd transaction can hold
/// (etcd's request limit is 1.5 MiB by default), and a bound on what a damaged length makes a
/// reader allocate.
const MAX_RECORD: u32 = 256 * 1024 * 1024;

/// What a delta says about itself, before its records.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Header {
    pub format: String,
    pub version: u16,
    /// The cluster's and the member's ids, hex, as etcdctl prints them.
    pub cluster_id: String,
    pub member_id: String,
    pub member: String,
    /// The changes after this revision, up to and including `end_revision`.
    pub start_revision: i64,
    pub end_revision: i64,
    /// When the run started, RFC 3339.
    pub created_at: String,
    #[serde(default)]
    pub etcd_version: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Put,
    Delete,
}

/// One change, as etcd's watch gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Event {
    pub kind: Kind,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
    pub create_revision: i64,
    pub mod_revision: i64,
    pub version: i64,
    pub lease: i64,
}

/// The changes etcd made in one transaction: all at one revision.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Txn {
    pub revision: i64,
    pub events: Vec<Event>,
}

impl Txn {
    /// Bytes this record takes in a delta.
    pub(crate) fn encoded_len(&self) -> usize {
        1 + 4
            + 8
            + 4
            + self.events.iter().map(|e| 1 + 4 + e.key.len() + 4 + e.value.len() + 32).sum::<usize>()
    }
}

/// Writes a delta as bytes, piece by piece, hashing as it goes; the caller sends each piece on.
#[derive(Default)]
pub(crate) struct Encoder {
    /// Every byte before the trailer.
    content: Sha256,
    /// Every byte.
    whole: Sha256,
    bytes: u64,
    transactions: u64,
    events: u64,
    last_revision: i64,
}

/// What a finished delta is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Summary {
    pub bytes: u64,
    pub transactions: u64,
    pub events: u64,
    /// SHA-256 of the whole file, hex.
    pub sha256: String,
}

impl Encoder {
    fn take(&mut self, bytes: Vec<u8>, content: bool) -> Vec<u8> {
        if content {
            self.content.update(&bytes);
        }
        self.whole.update(&bytes);
        self.bytes += bytes.len() as u64;
        bytes
    }

    /// The magic, the version and the header.
    pub(crate) fn header(&mut self, header: &Header) -> Vec<u8> {
        let json = serde_json::to_vec(header).expect("a header always serialises");
        let mut out = Vec::with_capacity(8 + 2 + 4 + json.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_be_bytes());
        out.extend_from_slice(&(json.len() as u32).to_be_bytes());
        out.extend_from_slice(&json);
        self.last_revision = header.start_revision;
        self.take(out, true)
    }

    /// One transaction's record.
    pub(crate) fn txn(&mut self, txn: &Txn) -> Vec<u8> {
        debug_assert!(txn.revision > self.last_revision, "records in revision order");
        self.last_revision = txn.revision;
        let mut out = Vec::with_capacity(txn.encoded_len());
        out.push(RECORD);
        out.extend_from_slice(&((txn.encoded_len() - 5) as u32).to_be_bytes());
        out.extend_from_slice(&txn.revision.to_be_bytes());
        out.extend_from_slice(&(txn.events.len() as u32).to_be_bytes());
        for event in &txn.events {
            out.push(match event.kind {
                Kind::Put => 0,
                Kind::Delete => 1,
            });
            out.extend_from_slice(&(event.key.len() as u32).to_be_bytes());
            out.extend_from_slice(&event.key);
            out.extend_from_slice(&(event.value.len() as u32).to_be_bytes());
            out.extend_from_slice(&event.value);
            for n in [event.create_revision, event.mod_revision, event.version, event.lease] {
                out.extend_from_slice(&n.to_be_bytes());
            }
        }
        self.transactions += 1;
        self.events += txn.events.len() as u64;
        self.take(out, true)
    }

    /// The trailer, and what the whole delta is.
    pub(crate) fn trailer(mut self) -> (Vec<u8>, Summary) {
        let content = std::mem::take(&mut self.content).finalize();
        let mut out = Vec::with_capacity(1 + 16 + 32);
        out.push(END);
        out.extend_from_slice(&self.transactions.to_be_bytes());
        out.extend_from_slice(&self.events.to_be_bytes());
        out.extend_from_slice(&content);
        let out = self.take(out, false);
        let summary = Summary {
            bytes: self.bytes,
            transactions: self.transactions,
            events: self.events,
            sha256: super::super::snapshot::hex(&self.whole.finalize()),
        };
        (out, summary)
    }
}

/// Reads a delta from a byte stream, checking it as it goes: [`Decoder::header`] first, then
/// [`Decoder::next`] until `None` (the trailer, checked), then [`Decoder::summary`].
pub(crate) struct Decoder<R> {
    input: R,
    content: Sha256,
    whole: Sha256,
    bytes: u64,
    header: Option<Header>,
    transactions: u64,
    events: u64,
    last_revision: i64,
    done: bool,
}

impl<R: Read> Decoder<R> {
    pub(crate) fn new(input: R) -> Self {
        Self {
            input,
            content: Sha256::new(),
            whole: Sha256::new(),
            bytes: 0,
            header: None,
            transactions: 0,
            events: 0,
            last_revision: 0,
            done: false,
        }
    }

    fn read(&mut self, n: usize, content: bool) -> Result<Vec<u8>, String> {
        let mut buf = vec![0u8; n];
        self.input.read_exact(&mut buf).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => {
                format!("it ends early, after {} bytes: truncated", self.bytes)
            }
            _ => format!("cannot read it: {e}"),
        })?;
        if content {
            self.content.update(&buf);
        }
        self.whole.update(&buf);
        self.bytes += n as u64;
        Ok(buf)
    }

    fn u32(&mut self, content: bool) -> Result<u32, String> {
        Ok(u32::from_be_bytes(self.read(4, content)?.try_into().expect("4 bytes")))
    }

    /// The magic, the version and the header.
    pub(crate) fn header(&mut self) -> Result<Header, String> {
        let magic = self.read(MAGIC.len(), true)?;
        if magic != MAGIC {
            return Err("it is no groundskeeper delta (its first bytes are not GKDELTA)".into());
        }
        let version = u16::from_be_bytes(self.read(2, true)?.try_into().expect("2 bytes"));
        if version != VERSION {
            return Err(format!(
                "it is a delta of format version {version}; this runner reads version {VERSION}"
            ));
        }
        let len = self.u32(true)?;
        if len > MAX_RECORD {
            return Err(format!("its header claims {len} bytes: damaged"));
        }
        let json = self.read(len as usize, true)?;
        let header: Header =
            serde_json::from_slice(&json).map_err(|e| format!("its header is not readable: {e}"))?;
        if header.format != FORMAT || header.version != VERSION {
            return Err(format!("its header says format {} version {}", header.format, header.version));
        }
        if header.start_revision < 0 || header.end_revision < header.start_revision {
            return Err(format!(
                "its header says revisions {} to {}: not a range",
                header.start_revision, header.end_revision
            ));
        }
        self.last_revision = header.start_revision;
        self.header = Some(header.clone());
        Ok(header)
    }

    /// The next transaction, or `None` after the trailer, checked.
    pub(crate) fn next(&mut self) -> Result<Option<Txn>, String> {
        let header = self.header.clone().ok_or("the header was not read")?;
        if self.done {
            return Ok(None);
        }
        let tag = self.read(1, false)?[0];
        match tag {
            RECORD => {
                self.content.update([tag]);
                let len = self.u32(true)?;
                if len > MAX_RECORD {
                    return Err(format!("a record claims {len} bytes: damaged"));
                }
                let body = self.read(len as usize, true)?;
                let txn =
                    parse_txn(&body).map_err(|why| format!("record {}: {why}", self.transactions + 1))?;
                if txn.revision <= self.last_revision || txn.revision > header.end_revision {
                    return Err(format!(
                        "record {} is at revision {}, after {} and within {}..={}? no: damaged or out of order",
                        self.transactions + 1,
                        txn.revision,
                        self.last_revision,
                        header.start_revision + 1,
                        header.end_revision
                    ));
                }
                self.last_revision = txn.revision;
                self.transactions += 1;
                self.events += txn.events.len() as u64;
                Ok(Some(txn))
            }
            END => {
                let content = std::mem::take(&mut self.content).finalize();
                let rest = self.read(16 + 32, false)?;
                let transactions = u64::from_be_bytes(rest[..8].try_into().expect("8 bytes"));
                let events = u64::from_be_bytes(rest[8..16].try_into().expect("8 bytes"));
                if (transactions, events) != (self.transactions, self.events) {
                    return Err(format!(
                        "its trailer counts {transactions} transactions and {events} events, but it \
                         holds {} and {}",
                        self.transactions, self.events
                    ));
                }
                if rest[16..] != content[..] {
                    return Err("its SHA-256 trailer does not match its bytes: damaged".into());
                }
                let mut extra = [0u8; 1];
                match self.input.read(&mut extra) {
                    Ok(0) => {}
                    Ok(_) => return Err("bytes follow its trailer: damaged or two files in one".into()),
                    Err(e) => return Err(format!("cannot read it: {e}")),
                }
                self.done = true;
                Ok(None)
            }
            other => Err(format!("a record starts with byte {other:#04x}, not 'T' or 'E': damaged")),
        }
    }

    /// What the delta held; only once [`Decoder::next`] returned `None`.
    pub(crate) fn summary(self) -> Summary {
        Summary {
            bytes: self.bytes,
            transactions: self.transactions,
            events: self.events,
            sha256: super::super::snapshot::hex(&self.whole.finalize()),
        }
    }
}

fn parse_txn(body: &[u8]) -> Result<Txn, String> {
    let mut at = 0usize;
    let mut take = |n: usize| -> Result<&[u8], String> {
        let piece = body.get(at..at + n).ok_or("it ends inside an event")?;
        at += n;
        Ok(piece)
    };
    let i64_of = |b: &[u8]| i64::from_be_bytes(b.try_into().expect("8 bytes"));
    let u32_of = |b: &[u8]| u32::from_be_bytes(b.try_into().expect("4 bytes"));
    let revision = i64_of(take(8)?);
    let count = u32_of(take(4)?);
    let mut events = Vec::with_capacity(count.min(1024) as usize);
    for _ in 0..count {
        let kind = match take(1)?[0] {
            0 => Kind::Put,
            1 => Kind::Delete,
            other => return Err(format!("an event of unknown kind {other}")),
        };
        let len = u32_of(take(4)?) as usize;
        let key = take(len)?.to_vec();
        let len = u32_of(take(4)?) as usize;
        let value = take(len)?.to_vec();
        let create_revision = i64_of(take(8)?);
        let mod_revision = i64_of(take(8)?);
        let version = i64_of(take(8)?);
        let lease = i64_of(take(8)?);
        if mod_revision != revision {
            return Err(format!("an event at revision {mod_revision} in the record of revision {revision}"));
        }
        events.push(Event { kind, key, value, create_revision, mod_revision, version, lease });
    }
    if at != body.len() {
        return Err("bytes after its last event".into());
    }
    if events.is_empty() {
        return Err("a transaction without a change".into());
    }
    Ok(Txn { revision, events })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(start: i64, end: i64) -> Header {
        Header {
            format: FORMAT.into(),
            version: VERSION,
            cluster_id: "c".into(),
            member_id: "m".into(),
            member: "etcd-0".into(),
            start_revision: start,
            end_revision: end,
            created_at: "2026-01-01T00:00:00Z".into(),
            etcd_version: "3.5.24".into(),
        }
    }

    fn put(key: &str, value: &str, revision: i64, lease: i64) -> Event {
        Event {
            kind: Kind::Put,
            key: key.into(),
            value: value.into(),
            create_revision: revision,
            mod_revision: revision,
            version: 1,
            lease,
        }
    }

    fn sample() -> (Vec<u8>, Summary, Vec<Txn>) {
        let txns = vec![
            Txn { revision: 11, events: vec![put("a", "1", 11, 0), put("b", "2", 11, 7)] },
            Txn {
                revision: 12,
                events: vec![Event { kind: Kind::Delete, value: vec![], ..put("a", "", 12, 0) }],
            },
            Txn { revision: 14, events: vec![put("c", &"x".repeat(5000), 14, 0)] },
        ];
        let mut encoder = Encoder::default();
        let mut bytes = encoder.header(&header(10, 14));
        for txn in &txns {
            bytes.extend(encoder.txn(txn));
        }
        let (trailer, summary) = encoder.trailer();
        bytes.extend(trailer);
        (bytes, summary, txns)
    }

    fn decode(bytes: &[u8]) -> Result<(Header, Vec<Txn>, Summary), String> {
        let mut decoder = Decoder::new(bytes);
        let header = decoder.header()?;
        let mut txns = Vec::new();
        while let Some(txn) = decoder.next()? {
            txns.push(txn);
        }
        Ok((header, txns, decoder.summary()))
    }

    #[test]
    fn a_delta_reads_back_as_written() {
        let (bytes, summary, txns) = sample();
        assert_eq!(summary.bytes, bytes.len() as u64);
        assert_eq!((summary.transactions, summary.events), (3, 4));
        let (read_header, read, read_summary) = decode(&bytes).unwrap();
        assert_eq!(read_header, header(10, 14));
        assert_eq!(read, txns);
        assert_eq!(read_summary, summary);
        assert_eq!(summary.sha256, super::super::super::snapshot::hex(&Sha256::digest(&bytes)));
    }

    #[test]
    fn any_damage_is_refused() {
        let (bytes, _, _) = sample();
        // Every byte flipped, one at a time, is found.
        for at in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x01;
            assert!(decode(&damaged).is_err(), "a flip at byte {at} was not found");
        }
        for cut in [0, 5, 20, bytes.len() - 1] {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(&longer).unwrap_err().contains("follow its trailer"));
    }

    #[test]
    fn records_out_of_their_range_are_refused() {
        let mut encoder = Encoder::default();
        let mut bytes = encoder.header(&header(10, 11));
        bytes.extend(encoder.txn(&Txn { revision: 12, events: vec![put("a", "1", 12, 0)] }));
        bytes.extend(encoder.trailer().0);
        assert!(decode(&bytes).unwrap_err().contains("revision 12"));
    }
}
