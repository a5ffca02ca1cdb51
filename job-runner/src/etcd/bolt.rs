//! Just enough of bbolt's file format to read what a snapshot holds without opening it as a
//! database: the meta pages (is this a bbolt file at all?) and the highest revision in etcd's
//! `key` bucket, which is the revision `etcdutl snapshot status` reports.
//!
//! Pages are read one at a time at their offsets (no mmap, no whole-file read), so a snapshot of
//! several GiB costs a few pages of memory. The layout is bbolt's on 64-bit little-endian
//! machines, the only ones etcd ships for: a page is a 16-byte header (id u64, flags u16,
//! count u16, overflow u32) then its elements.

use std::fs::File;
use std::os::unix::fs::FileExt;

pub(crate) const MAGIC: u32 = 0xED0C_DAED;
pub(crate) const PAGE_HEADER: usize = 16;
pub(crate) const BRANCH: u16 = 0x01;
pub(crate) const LEAF: u16 = 0x02;
pub(crate) const META: u16 = 0x04;
/// A leaf element whose value is a bucket.
pub(crate) const BUCKET_LEAF: u32 = 0x01;
/// A bucket's header in its parent's leaf: root page id u64, sequence u64.
pub(crate) const BUCKET_HEADER: usize = 16;
/// Pages visited before a walk gives up: a loop in a corrupt file must not spin forever.
pub(crate) const MAX_DEPTH: usize = 64;

/// A bbolt file's valid meta page, the one with the higher transaction id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    pub page_size: u64,
    pub root: u64,
    pub txid: u64,
}

/// A bbolt file of `len` bytes (a snapshot's trailer excluded).
pub struct Db<'a> {
    file: &'a File,
    len: u64,
    meta: Meta,
}

impl<'a> Db<'a> {
    /// Reads and checks the meta pages: a file neither of whose meta pages is valid (magic,
    /// version, FNV-1a checksum) is not a bbolt database.
    pub fn open(file: &'a File, len: u64) -> Result<Self, String> {
        let first = read_meta(file, 0, len);
        let page_size = match &first {
            Ok(meta) => meta.page_size,
            // The first meta page is damaged: bbolt's own fallback is the OS page size.
            Err(_) => 4096,
        };
        let second = read_meta(file, page_size, len);
        let meta = match (first, second) {
            (Ok(a), Ok(b)) => {
                if a.txid >= b.txid {
                    a
                } else {
                    b
                }
            }
            (Ok(m), Err(_)) | (Err(_), Ok(m)) => m,
            (Err(why), Err(_)) => return Err(why),
        };
        Ok(Self { file, len, meta })
    }

    pub fn meta(&self) -> Meta {
        self.meta
    }

    /// The highest revision in etcd's `key` bucket; `None` when the bucket is empty.
    pub fn max_revision(&self) -> Result<Option<i64>, String> {
        let bucket =
            self.bucket_root(self.meta.root, b"key")?.ok_or("no `key` bucket: not an etcd database")?;
        let Some(key) = self.last_key(bucket)? else {
            return Ok(None);
        };
        // etcd's key bucket keys: main revision (8 bytes, big-endian), '_', sub revision (8 bytes),
        // and a trailing 't' for a deletion.
        let main: [u8; 8] = key
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| format!("a key of {} bytes in the `key` bucket is no revision", key.len()))?;
        Ok(Some(i64::from_be_bytes(main)))
    }

    /// The root of a bucket named `name` in the bucket whose root page is `root`.
    fn bucket_root(&self, root: u64, name: &[u8]) -> Result<Option<Node>, String> {
        let mut page = self.page(root)?;
        for _ in 0..MAX_DEPTH {
            match page.flags {
                BRANCH => {
                    // The last element whose key is not after `name`.
                    let mut child = None;
                    for i in 0..page.count {
                        let (key, pgid) = page.branch_element(i)?;
                        if key > name && child.is_some() {
                            break;
                        }
                        child = Some(pgid);
                    }
                    let Some(child) = child else { return Ok(None) };
                    page = self.page(child)?;
                }
                LEAF => {
                    for i in 0..page.count {
                        let (flags, key, value) = page.leaf_element(i)?;
                        if key == name {
                            if flags & BUCKET_LEAF == 0 {
                                return Err(format!(
                                    "{:?} is a key, not a bucket",
                                    String::from_utf8_lossy(name)
                                ));
                            }
                            return self.bucket_node(value).map(Some);
                        }
                    }
                    return Ok(None);
                }
                other => return Err(format!("page {} has flags {other:#x} inside a tree", page.id)),
            }
        }
        Err("the tree is deeper than any bbolt file makes it".into())
    }

    /// A bucket from its value in the parent's leaf: a root page, or inline.
    fn bucket_node(&self, value: &[u8]) -> Result<Node, String> {
        let header = value.get(..BUCKET_HEADER).ok_or("a bucket value shorter than its header")?;
        let root = u64::from_le_bytes(header[..8].try_into().expect("8 bytes"));
        if root == 0 {
            return Page::parse(0, value[BUCKET_HEADER..].to_vec()).map(Node::Inline);
        }
        Ok(Node::Page(root))
    }

    /// The last key of a bucket: the last element of each page down the right edge.
    fn last_key(&self, node: Node) -> Result<Option<Vec<u8>>, String> {
        let mut page = match node {
            Node::Inline(page) => page,
            Node::Page(id) => self.page(id)?,
        };
        for _ in 0..MAX_DEPTH {
            if page.count == 0 {
                return Ok(None);
            }
            let last = page.count - 1;
            match page.flags {
                BRANCH => {
                    let (_, child) = page.branch_element(last)?;
                    page = self.page(child)?;
                }
                LEAF => {
                    let (_, key, _) = page.leaf_element(last)?;
                    return Ok(Some(key.to_vec()));
                }
                other => return Err(format!("page {} has flags {other:#x} inside a tree", page.id)),
            }
        }
        Err("the tree is deeper than any bbolt file makes it".into())
    }

    /// Page `id` with its overflow pages.
    fn page(&self, id: u64) -> Result<Page, String> {
        let size = self.meta.page_size;
        let offset = id
            .checked_mul(size)
            .filter(|o| o.checked_add(size).is_some_and(|end| end <= self.len))
            .ok_or_else(|| format!("page {id} lies beyond the end of the file"))?;
        let mut header = vec![0u8; PAGE_HEADER];
        read_at(self.file, &mut header, offset)?;
        let overflow = u32::from_le_bytes(header[12..16].try_into().expect("4 bytes")) as u64;
        let bytes = (overflow + 1)
            .checked_mul(size)
            .filter(|b| offset + b <= self.len && *b <= 1 << 32)
            .ok_or_else(|| format!("page {id} (+{overflow} overflow) lies beyond the end of the file"))?;
        let mut data = vec![0u8; bytes as usize];
        read_at(self.file, &mut data, offset)?;
        let page = Page::parse(id, data)?;
        if page.id != id {
            return Err(format!("page {id} says it is page {}", page.id));
        }
        Ok(page)
    }
}

enum Node {
    Page(u64),
    Inline(Page),
}

struct Page {
    id: u64,
    flags: u16,
    count: usize,
    data: Vec<u8>,
}

impl Page {
    fn parse(expected_id: u64, data: Vec<u8>) -> Result<Self, String> {
        if data.len() < PAGE_HEADER {
            return Err(format!("page {expected_id} is shorter than a page header"));
        }
        Ok(Self {
            id: u64::from_le_bytes(data[..8].try_into().expect("8 bytes")),
            flags: u16::from_le_bytes(data[8..10].try_into().expect("2 bytes")),
            count: u16::from_le_bytes(data[10..12].try_into().expect("2 bytes")) as usize,
            data,
        })
    }

    fn bytes(&self, at: usize, len: usize) -> Result<&[u8], String> {
        at.checked_add(len)
            .and_then(|end| self.data.get(at..end))
            .ok_or_else(|| format!("page {}: an element points outside the page", self.id))
    }

    fn u32_at(&self, at: usize) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.bytes(at, 4)?.try_into().expect("4 bytes")))
    }

    /// Element `i` of a branch page: its key and child page id.
    fn branch_element(&self, i: usize) -> Result<(&[u8], u64), String> {
        let at = PAGE_HEADER + i * 16;
        let pos = self.u32_at(at)? as usize;
        let ksize = self.u32_at(at + 4)? as usize;
        let pgid = u64::from_le_bytes(self.bytes(at + 8, 8)?.try_into().expect("8 bytes"));
        Ok((self.bytes(at + pos, ksize)?, pgid))
    }

    /// Element `i` of a leaf page: flags, key, value.
    fn leaf_element(&self, i: usize) -> Result<(u32, &[u8], &[u8]), String> {
        let at = PAGE_HEADER + i * 16;
        let flags = self.u32_at(at)?;
        let pos = self.u32_at(at + 4)? as usize;
        let ksize = self.u32_at(at + 8)? as usize;
        let vsize = self.u32_at(at + 12)? as usize;
        let key = self.bytes(at + pos, ksize)?;
        let value = self.bytes(at + pos + ksize, vsize)?;
        Ok((flags, key, value))
    }
}

fn read_at(file: &File, buf: &mut [u8], offset: u64) -> Result<(), String> {
    file.read_exact_at(buf, offset)
        .map_err(|e| format!("cannot read {} bytes at offset {offset}: {e}", buf.len()))
}

/// The meta page at `offset`, checked.
fn read_meta(file: &File, offset: u64, len: u64) -> Result<Meta, String> {
    // Header, then magic u32, version u32, pageSize u32, flags u32, root bucket (16), freelist
    // u64, pgid u64, txid u64, checksum u64: the checksum covers the 56 bytes before it.
    let mut page = [0u8; PAGE_HEADER + 64];
    if offset + page.len() as u64 > len {
        return Err("too short for bbolt's meta pages: not an etcd database".into());
    }
    read_at(file, &mut page, offset)?;
    let flags = u16::from_le_bytes([page[8], page[9]]);
    let meta = &page[PAGE_HEADER..];
    let u32_at = |at: usize| u32::from_le_bytes(meta[at..at + 4].try_into().expect("4 bytes"));
    let u64_at = |at: usize| u64::from_le_bytes(meta[at..at + 8].try_into().expect("8 bytes"));
    if flags & META == 0 || u32_at(0) != MAGIC {
        return Err("no bbolt meta page (wrong magic): not an etcd database".into());
    }
    if u32_at(4) != 2 {
        return Err(format!("bbolt file format version {} (2 expected)", u32_at(4)));
    }
    if fnv1a64(&meta[..56]) != u64_at(56) {
        return Err("a bbolt meta page's checksum does not match".into());
    }
    let page_size = u32_at(8) as u64;
    if !(512..=1 << 20).contains(&page_size) || !page_size.is_power_of_two() {
        return Err(format!("bbolt page size {page_size} is not one bbolt uses"));
    }
    Ok(Meta { page_size, root: u64_at(16), txid: u64_at(48) })
}

fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ *byte as u64).wrapping_mul(0x0000_0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a64_matches_the_reference_values() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn a_file_that_is_not_bbolt_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x");
        std::fs::write(&path, vec![7u8; 8192]).unwrap();
        let file = File::open(&path).unwrap();
        let err = Db::open(&file, 8192).err().unwrap();
        assert!(err.contains("not an etcd database"), "{err}");
        let err = Db::open(&file, 10).err().unwrap();
        assert!(err.contains("too short"), "{err}");
    }
}
