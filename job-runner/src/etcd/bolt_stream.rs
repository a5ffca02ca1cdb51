//! The revision a snapshot holds, read from its bytes as they stream past, without a copy on
//! disk: what [`super::bolt::Db::max_revision`] reads from a file, for a snapshot streamed
//! straight into a bucket.
//!
//! etcd's snapshot is bbolt's `Tx.WriteTo`: the transaction's meta page (as pages 0 and 1), then
//! the database file's pages in page order. The meta page, first, names the root bucket's page;
//! that page, when it passes, names the `key` bucket's root; the highest revision is the last key
//! down the right edge of that bucket's tree. The pages on that path may come before or after
//! the pages pointing to them, so each page that passes leaves a summary of 8 bytes (a branch
//! page: its last child; a leaf page: the revision in its last key), kept in a table by page id
//! (2 MiB for a 1 GiB database), and the path is followed through the table at the end. Only
//! pages that say they are the page at their own position are summarised; free pages' stale
//! bytes are never reached from the root anyway. A page longer than one page (overflow) is
//! gathered whole before it is read, up to [`MAX_GATHERED`].

// bbolt's layout, as the file reader reads it.
use super::bolt::{BRANCH, BUCKET_HEADER, BUCKET_LEAF, LEAF, MAGIC, MAX_DEPTH, META, PAGE_HEADER};
/// Largest multi-page page gathered (a leaf holding a value of several MiB); larger ones are
/// not read, and the revision is then unknown if the path goes through one.
const MAX_GATHERED: usize = 64 * 1024 * 1024;
/// At most this many multi-page pages are gathered at once (a page's stale copy may claim to
/// be one too).
const MAX_GATHERING: usize = 4;

/// A page's summary, packed: a branch page's last child, a leaf page's last revision.
const SUMMARY_BRANCH: u64 = 1 << 63;
const SUMMARY_LEAF: u64 = 1 << 62;
const SUMMARY_VALUE: u64 = (1 << 62) - 1;

/// Where the `key` bucket's tree starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyBucket {
    Page(u64),
    /// An inline bucket (few keys): its highest revision, read from the root bucket's page.
    Inline(Option<i64>),
}

/// Reads the revision from a snapshot's bytes, fed in chunks of any size (trailer included: it
/// is never taken for a page).
#[derive(Default)]
pub(crate) struct RevisionScan {
    /// Bytes of the page being filled.
    page: Vec<u8>,
    page_size: usize,
    /// Id of the page being filled.
    next_id: u64,
    /// The root bucket's page, from the meta page.
    root: Option<u64>,
    key_bucket: Option<KeyBucket>,
    summaries: Vec<u64>,
    /// Multi-page pages being gathered: their id, the bytes they need, and what came so far.
    gathering: Vec<(u64, usize, Vec<u8>)>,
    /// Why the revision cannot be read, once that is known.
    broken: Option<String>,
}

impl RevisionScan {
    pub(crate) fn update(&mut self, mut chunk: &[u8]) {
        if self.broken.is_some() {
            return;
        }
        while !chunk.is_empty() {
            let want = if self.page_size == 0 { PAGE_HEADER + 64 } else { self.page_size };
            let take = (want - self.page.len()).min(chunk.len());
            self.page.extend_from_slice(&chunk[..take]);
            self.feed_gathering(&chunk[..take]);
            chunk = &chunk[take..];
            if self.page.len() == want {
                self.page_done();
            }
        }
    }

    /// The highest revision in the `key` bucket; `Ok(None)` when the bucket is empty; `Err`
    /// says why it could not be read.
    pub(crate) fn finish(self) -> Result<Option<i64>, String> {
        if let Some(why) = self.broken {
            return Err(why);
        }
        let mut id = match self.key_bucket {
            None => return Err("the snapshot holds no `key` bucket that could be found".into()),
            Some(KeyBucket::Inline(revision)) => return Ok(revision),
            Some(KeyBucket::Page(id)) => id,
        };
        for _ in 0..MAX_DEPTH {
            let summary = self.summaries.get(id as usize).copied().unwrap_or(0);
            if summary & SUMMARY_BRANCH != 0 {
                id = summary & !SUMMARY_BRANCH;
            } else if summary & SUMMARY_LEAF != 0 {
                let value = summary & SUMMARY_VALUE;
                return Ok((value != 0).then_some(value as i64));
            } else {
                return Err(format!("page {id} of the `key` bucket's tree could not be read"));
            }
        }
        Err("the `key` bucket's tree is deeper than any bbolt file makes it".into())
    }

    fn page_done(&mut self) {
        let page = std::mem::take(&mut self.page);
        if self.page_size == 0 {
            // The first meta page: it gives the page size; the rest of page 0 is then read too.
            match read_meta(&page) {
                Ok((page_size, root)) => {
                    self.page_size = page_size;
                    self.root = Some(root);
                    self.page = page;
                }
                Err(why) => self.broken = Some(why),
            }
            return;
        }
        let id = self.next_id;
        self.next_id += 1;
        if id < 2 {
            return;
        }
        let Some(header) = Header::parse(&page) else { return };
        if header.id != id || !matches!(header.flags, BRANCH | LEAF) {
            return;
        }
        if header.overflow == 0 {
            self.summarise(id, &page);
        } else {
            let bytes = (header.overflow as usize + 1).saturating_mul(self.page_size);
            if bytes <= MAX_GATHERED && self.gathering.len() < MAX_GATHERING {
                let mut gathered = Vec::with_capacity(bytes);
                gathered.extend_from_slice(&page);
                self.gathering.push((id, bytes, gathered));
            }
        }
    }

    /// Bytes that arrived after a multi-page page started count towards it.
    fn feed_gathering(&mut self, bytes: &[u8]) {
        if self.gathering.is_empty() {
            return;
        }
        let mut done = Vec::new();
        for (i, (_, want, gathered)) in self.gathering.iter_mut().enumerate() {
            // The page that opened the gathering is added whole when it ends (see `page_done`):
            // only later bytes are added here.
            let take = (*want - gathered.len()).min(bytes.len());
            gathered.extend_from_slice(&bytes[..take]);
            if gathered.len() == *want {
                done.push(i);
            }
        }
        for i in done.into_iter().rev() {
            let (id, _, page) = self.gathering.remove(i);
            self.summarise(id, &page);
        }
    }

    fn summarise(&mut self, id: u64, page: &[u8]) {
        let Some(header) = Header::parse(page) else { return };
        if Some(id) == self.root {
            self.key_bucket = find_key_bucket(page, &header);
        }
        let summary = match header.flags {
            BRANCH if header.count > 0 => {
                branch_child(page, header.count - 1).map(|child| SUMMARY_BRANCH | (child & !SUMMARY_BRANCH))
            }
            LEAF => Some(SUMMARY_LEAF | ((last_revision(page, &header).unwrap_or(0) as u64) & SUMMARY_VALUE)),
            _ => None,
        };
        if let Some(summary) = summary {
            let index = id as usize;
            if self.summaries.len() <= index {
                self.summaries.resize(index + 1, 0);
            }
            self.summaries[index] = summary;
        }
    }
}

struct Header {
    id: u64,
    flags: u16,
    count: usize,
    overflow: u32,
}

impl Header {
    fn parse(page: &[u8]) -> Option<Self> {
        Some(Self {
            id: u64::from_le_bytes(page.get(..8)?.try_into().ok()?),
            flags: u16::from_le_bytes(page.get(8..10)?.try_into().ok()?),
            count: u16::from_le_bytes(page.get(10..12)?.try_into().ok()?) as usize,
            overflow: u32::from_le_bytes(page.get(12..16)?.try_into().ok()?),
        })
    }
}

fn u32_at(page: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(page.get(at..at + 4)?.try_into().ok()?))
}

fn branch_child(page: &[u8], i: usize) -> Option<u64> {
    let at = PAGE_HEADER + i * 16;
    Some(u64::from_le_bytes(page.get(at + 8..at + 16)?.try_into().ok()?))
}

/// Element `i` of a leaf page: flags, key, value.
fn leaf_element(page: &[u8], i: usize) -> Option<(u32, &[u8], &[u8])> {
    let at = PAGE_HEADER + i * 16;
    let flags = u32_at(page, at)?;
    let pos = u32_at(page, at + 4)? as usize;
    let ksize = u32_at(page, at + 8)? as usize;
    let vsize = u32_at(page, at + 12)? as usize;
    let key = page.get(at + pos..at + pos + ksize)?;
    let value = page.get(at + pos + ksize..at + pos + ksize + vsize)?;
    Some((flags, key, value))
}

/// The main revision in a leaf's last key when it is one of etcd's revision keys (8 bytes
/// big-endian, `_`, 8 bytes, and a `t` for a deletion).
fn last_revision(page: &[u8], header: &Header) -> Option<i64> {
    let (_, key, _) = leaf_element(page, header.count.checked_sub(1)?)?;
    if !(17..=18).contains(&key.len()) || key[8] != b'_' {
        return None;
    }
    Some(i64::from_be_bytes(key[..8].try_into().ok()?)).filter(|r| *r > 0)
}

/// In the root bucket's page (a leaf: etcd has a dozen buckets), the `key` bucket.
fn find_key_bucket(page: &[u8], header: &Header) -> Option<KeyBucket> {
    if header.flags != LEAF {
        return None;
    }
    (0..header.count).find_map(|i| {
        let (flags, key, value) = leaf_element(page, i)?;
        if key != b"key" || flags & BUCKET_LEAF == 0 || value.len() < BUCKET_HEADER {
            return None;
        }
        let root = u64::from_le_bytes(value[..8].try_into().ok()?);
        if root != 0 {
            return Some(KeyBucket::Page(root));
        }
        let inline = &value[BUCKET_HEADER..];
        let inline_header = Header::parse(inline)?;
        Some(KeyBucket::Inline(last_revision(inline, &inline_header)))
    })
}

/// The first meta page: its page size and the root bucket's page id.
fn read_meta(page: &[u8]) -> Result<(usize, u64), String> {
    let flags = u16::from_le_bytes([page[8], page[9]]);
    let meta = &page[PAGE_HEADER..];
    let u32_at = |at: usize| u32::from_le_bytes(meta[at..at + 4].try_into().expect("4 bytes"));
    let u64_at = |at: usize| u64::from_le_bytes(meta[at..at + 8].try_into().expect("8 bytes"));
    if flags & META == 0 || u32_at(0) != MAGIC || u32_at(4) != 2 {
        return Err("the stream does not start with a bbolt meta page: not an etcd database".into());
    }
    if fnv1a64(&meta[..56]) != u64_at(56) {
        return Err("the snapshot's first meta page does not match its checksum".into());
    }
    let page_size = u32_at(8) as usize;
    if !(512..=1 << 20).contains(&page_size) || !page_size.is_power_of_two() {
        return Err(format!("bbolt page size {page_size} is not one bbolt uses"));
    }
    Ok((page_size, u64_at(16)))
}

fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(0xcbf2_9ce4_8422_2325, |hash, byte| (hash ^ *byte as u64).wrapping_mul(0x0000_0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: usize = 4096;

    fn header(page: &mut [u8], id: u64, flags: u16, count: u16, overflow: u32) {
        page[..8].copy_from_slice(&id.to_le_bytes());
        page[8..10].copy_from_slice(&flags.to_le_bytes());
        page[10..12].copy_from_slice(&count.to_le_bytes());
        page[12..16].copy_from_slice(&overflow.to_le_bytes());
    }

    fn meta_page(root: u64) -> Vec<u8> {
        let mut page = vec![0u8; PAGE];
        header(&mut page, 0, META, 0, 0);
        let meta = &mut page[PAGE_HEADER..];
        meta[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        meta[4..8].copy_from_slice(&2u32.to_le_bytes());
        meta[8..12].copy_from_slice(&(PAGE as u32).to_le_bytes());
        meta[16..24].copy_from_slice(&root.to_le_bytes());
        let sum = fnv1a64(&meta[..56]);
        meta[56..64].copy_from_slice(&sum.to_le_bytes());
        page
    }

    /// A leaf page of `id` holding `elements` (flags, key, value), `pages` pages long.
    fn leaf(id: u64, elements: &[(u32, Vec<u8>, Vec<u8>)], pages: usize) -> Vec<u8> {
        let mut page = vec![0u8; PAGE * pages];
        header(&mut page, id, LEAF, elements.len() as u16, pages as u32 - 1);
        let mut data = PAGE_HEADER + elements.len() * 16;
        for (i, (flags, key, value)) in elements.iter().enumerate() {
            let at = PAGE_HEADER + i * 16;
            page[at..at + 4].copy_from_slice(&flags.to_le_bytes());
            page[at + 4..at + 8].copy_from_slice(&((data - at) as u32).to_le_bytes());
            page[at + 8..at + 12].copy_from_slice(&(key.len() as u32).to_le_bytes());
            page[at + 12..at + 16].copy_from_slice(&(value.len() as u32).to_le_bytes());
            page[data..data + key.len()].copy_from_slice(key);
            data += key.len();
            page[data..data + value.len()].copy_from_slice(value);
            data += value.len();
        }
        page
    }

    fn branch(id: u64, children: &[u64]) -> Vec<u8> {
        let mut page = vec![0u8; PAGE];
        header(&mut page, id, BRANCH, children.len() as u16, 0);
        for (i, child) in children.iter().enumerate() {
            let at = PAGE_HEADER + i * 16;
            page[at + 8..at + 16].copy_from_slice(&child.to_le_bytes());
        }
        page
    }

    fn revision_key(main: i64) -> Vec<u8> {
        let mut key = main.to_be_bytes().to_vec();
        key.push(b'_');
        key.extend_from_slice(&0i64.to_be_bytes());
        key
    }

    fn bucket_value(root: u64) -> Vec<u8> {
        let mut value = root.to_le_bytes().to_vec();
        value.extend_from_slice(&0u64.to_le_bytes());
        value
    }

    fn scan(stream: &[u8], chunk: usize) -> Result<Option<i64>, String> {
        let mut scan = RevisionScan::default();
        stream.chunks(chunk).for_each(|c| scan.update(c));
        scan.finish()
    }

    /// The key bucket's root (page 5, a branch) comes after its leaves; its last leaf (page 3)
    /// spans two pages; a free page (6) holds a stale copy claiming a higher revision, and a page
    /// whose header names another id is ignored.
    #[test]
    fn the_revision_is_found_down_the_right_edge_whatever_the_page_order_and_chunking() {
        let mut stream = meta_page(2);
        stream.extend_from_slice(&meta_page(2)[..]);
        stream.extend(leaf(
            2,
            &[(0, b"alarm".to_vec(), vec![]), (BUCKET_LEAF, b"key".to_vec(), bucket_value(5))],
            1,
        ));
        stream.extend(leaf(
            3,
            &[(0, revision_key(40), vec![1; 100]), (0, revision_key(41), vec![2; 5000])],
            2,
        ));
        stream.extend(branch(5, &[7, 3]));
        stream.extend(leaf(6, &[(0, revision_key(99), vec![])], 1));
        stream.extend(leaf(7, &[(0, revision_key(10), vec![])], 1));
        stream.extend(leaf(9, &[(0, revision_key(77), vec![])], 1));
        stream.extend_from_slice(&[0xAB; 32]);
        for chunk in [1, 7, 100, PAGE, PAGE + 1, 3 * PAGE, stream.len()] {
            assert_eq!(scan(&stream, chunk), Ok(Some(41)), "chunk {chunk}");
        }
    }

    #[test]
    fn an_inline_key_bucket_and_an_unreadable_stream() {
        let mut inline = bucket_value(0);
        inline.extend(leaf(0, &[(0, revision_key(3), b"v".to_vec())], 1));
        inline.truncate(BUCKET_HEADER + 200);
        let mut stream = meta_page(2);
        stream.extend(meta_page(2));
        stream.extend(leaf(2, &[(BUCKET_LEAF, b"key".to_vec(), inline)], 1));
        assert_eq!(scan(&stream, 1000), Ok(Some(3)));

        let err = scan(&[7u8; 3 * PAGE], 1000).unwrap_err();
        assert!(err.contains("not an etcd database"), "{err}");
        let mut stream = meta_page(2);
        stream.extend(meta_page(2));
        stream.extend(branch(2, &[3]));
        assert!(scan(&stream, PAGE).is_err());
    }
}
