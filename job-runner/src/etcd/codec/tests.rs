use super::*;
use groundskeeper_protocol::result::ErrorKind;

fn key(byte: u8) -> Key {
    Key::from_bytes([byte; 32])
}

/// Bytes shaped like a snapshot: pages of zeros and of varied content.
fn content(len: usize) -> Vec<u8> {
    let mut state = 0x9e37_79b9_u32;
    (0..len)
        .map(|i| {
            if (i / 4096) % 3 == 0 {
                return 0;
            }
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            (state % 40) as u8 + b'a'
        })
        .collect()
}

fn encode(encoding: &Encoding, plain: &[u8], piece: usize) -> (Vec<u8>, Encoded) {
    let mut encoder = encoding.encoder().unwrap();
    let mut stored = Vec::new();
    for part in plain.chunks(piece.max(1)) {
        stored.extend_from_slice(&encoder.push(part).unwrap());
    }
    let (last, encoded) = encoder.finish().unwrap();
    stored.extend(last);
    (stored, encoded)
}

fn decode(stored: &[u8], key: Option<&Key>, piece: usize) -> Result<(Vec<u8>, Encoded), Failure> {
    let mut decoder = Decoder::new("s3://b/main.db", key);
    let mut plain = Vec::new();
    for part in stored.chunks(piece.max(1)) {
        decoder.push(part, &mut |bytes| {
            plain.extend_from_slice(bytes);
            Ok(())
        })?;
    }
    let encoded = decoder.finish(&mut |bytes| {
        plain.extend_from_slice(bytes);
        Ok(())
    })?;
    Ok((plain, encoded))
}

fn encodings() -> Vec<Encoding> {
    vec![
        Encoding::default(),
        Encoding { zstd_level: Some(3), key: None },
        Encoding { zstd_level: None, key: Some(key(7)) },
        Encoding { zstd_level: Some(1), key: Some(key(7)) },
    ]
}

#[test]
fn every_encoding_round_trips_whatever_the_pieces() {
    for len in [0, 1, 7, 8, CHUNK_BYTES - 1, CHUNK_BYTES, CHUNK_BYTES + 1, 3 * CHUNK_BYTES, 1_000_003] {
        let plain = content(len);
        for encoding in encodings() {
            for (write_piece, read_piece) in [(1 << 20, 1 << 20), (4096, 13), (CHUNK_BYTES, 100_000)] {
                if len > 100_000 && read_piece == 13 {
                    continue;
                }
                let (stored, written) = encode(&encoding, &plain, write_piece);
                let name = encoding.name();
                let (back, read) = decode(&stored, Some(&key(7)), read_piece)
                    .unwrap_or_else(|f| panic!("{name:?} len {len}: {}", f.message));
                assert_eq!(back, plain, "{name:?} len {len}");
                assert_eq!(read, written, "{name:?} len {len}: what the reader saw is what was written");
                assert_eq!(written.content_bytes, len as u64);
                assert_eq!(written.content_sha256, super::super::snapshot::hex(&Sha256::digest(&plain)));
                assert_eq!(written.stored_sha256, super::super::snapshot::hex(&Sha256::digest(&stored)));
                assert_eq!(written.encoding, name);
            }
        }
    }
}

#[test]
fn compressed_objects_are_standard_zstd_frames_with_a_checksum() {
    let plain = content(300_000);
    let (stored, encoded) = encode(&Encoding { zstd_level: Some(3), key: None }, &plain, 65536);
    assert!(stored.starts_with(&ZSTD_MAGIC));
    assert!(encoded.stored_bytes < encoded.content_bytes / 2, "{encoded:?}");
    // Anyone's zstd reads it: the library's one-shot decoder, with no knowledge of this module.
    assert_eq!(zstd::stream::decode_all(stored.as_slice()).unwrap(), plain);
    // A flipped byte inside: the frame's checksum (or its structure) refuses it.
    let mut damaged = stored.clone();
    let middle = damaged.len() / 2;
    damaged[middle] ^= 0x40;
    let failure = decode(&damaged, None, 4096).unwrap_err();
    assert_eq!(failure.kind, ErrorKind::BadInput, "{}", failure.message);
    assert!(failure.message.contains("s3://b/main.db"), "{}", failure.message);
}

#[test]
fn a_sealed_object_says_its_key_and_opens_only_with_it() {
    let plain = content(200_000);
    let (stored, encoded) = encode(&Encoding { zstd_level: Some(3), key: Some(key(1)) }, &plain, 65536);
    assert_eq!(encoded.key_id.as_deref(), Some(key(1).id.as_str()));
    assert_eq!(describe_stored(&stored[..256]), (Some("zstd+aes-256-gcm".into()), Some(key(1).id.clone())));

    let none = decode(&stored, None, 65536).unwrap_err();
    assert_eq!((none.kind, none.reason), (ErrorKind::BadInput, Some(ErrorReason::KeyMissing)));
    assert!(
        none.message.contains(&key(1).id) && none.message.contains("--encryption-key"),
        "{}",
        none.message
    );

    let wrong = decode(&stored, Some(&key(2)), 65536).unwrap_err();
    assert_eq!((wrong.kind, wrong.reason), (ErrorKind::BadInput, Some(ErrorReason::KeyMismatch)));
    assert!(wrong.message.contains(&key(1).id), "names the key it needs: {}", wrong.message);
    assert!(wrong.message.contains(&key(2).id) && wrong.message.contains("/test/key"), "{}", wrong.message);

    // A key whose id was forged into the header (the id is not the key): the chunks do not open.
    let forged = stored_with_key_id(&stored, &key(2).id);
    let failure = decode(&forged, Some(&key(2)), 65536).unwrap_err();
    assert!(failure.message.contains("does not authenticate"), "{}", failure.message);
    assert_eq!(failure.reason, None, "damage, not a key given wrong");
}

/// Before a reader whose errors are only text takes a file: none or another key is refused with
/// its reason, the right key, a plain or compressed file, and damage (left to that reader) pass;
/// through a file decoded whole, the failure keeps its reason.
#[test]
fn a_key_that_does_not_open_a_file_is_told_by_its_reason() {
    let dir = tempfile::tempdir().unwrap();
    let plain = content(300_000);
    let write = |name: &str, encoding: &Encoding| {
        let path = dir.path().join(name);
        std::fs::write(&path, encode(encoding, &plain, 65536).0).unwrap();
        path
    };
    let sealed = write("sealed", &Encoding { zstd_level: None, key: Some(key(1)) });
    let zstd = write("zstd", &Encoding { zstd_level: Some(3), key: None });
    let reason = |path: &Path, key: Option<&Key>| check_key(path, "delta d", key).map_err(|f| f.reason);
    assert_eq!(reason(&sealed, None), Err(Some(ErrorReason::KeyMissing)));
    assert_eq!(reason(&sealed, Some(&key(2))), Err(Some(ErrorReason::KeyMismatch)));
    assert_eq!(reason(&sealed, Some(&key(1))), Ok(()));
    assert_eq!(reason(&zstd, None), Ok(()));
    let cut = dir.path().join("cut");
    std::fs::write(&cut, &std::fs::read(&sealed).unwrap()[..SEAL_MAGIC.len() + 2]).unwrap();
    assert_eq!(reason(&cut, Some(&key(1))), Ok(()), "damage is the reader's to name");

    let out = dir.path().join("out");
    let failure = decode_file(&sealed, &out, Some(&key(2))).unwrap_err();
    assert_eq!(failure.reason, Some(ErrorReason::KeyMismatch), "{}", failure.message);
    assert!(!out.exists());
    assert!(decode_file(&sealed, &out, Some(&key(1))).is_ok());
}

/// `stored` with its header's key id replaced.
fn stored_with_key_id(stored: &[u8], id: &str) -> Vec<u8> {
    let end = header_end(stored).unwrap().unwrap();
    let mut header: SealHeader = serde_json::from_slice(&stored[12..end]).unwrap();
    header.key_id = id.to_owned();
    let json = serde_json::to_vec(&header).unwrap();
    let mut out = SEAL_MAGIC.to_vec();
    out.extend_from_slice(&(json.len() as u32).to_be_bytes());
    out.extend_from_slice(&json);
    out.extend_from_slice(&stored[end..]);
    out
}

#[test]
fn a_sealed_object_changed_anywhere_does_not_open() {
    let plain = content(4 * CHUNK_BYTES + 100);
    let encoding = Encoding { zstd_level: None, key: Some(key(1)) };
    let (stored, _) = encode(&encoding, &plain, 65536);
    let end = header_end(&stored).unwrap().unwrap();
    let chunk = 4 + CHUNK_BYTES + TAG_BYTES;
    let refused = |bytes: &[u8], why: &str| {
        let failure = decode(bytes, Some(&key(1)), 65536).unwrap_err();
        assert_eq!(failure.kind, ErrorKind::BadInput, "{why}: {}", failure.message);
        failure.message
    };
    // A flipped byte in a chunk, in a tag, in the header's nonce prefix.
    for at in [end + 10, end + chunk - 3, end + 2 * chunk + 500] {
        let mut damaged = stored.clone();
        damaged[at] ^= 1;
        assert!(refused(&damaged, "flipped").contains("does not authenticate"));
    }
    let mut prefix = stored.clone();
    let header_text = String::from_utf8_lossy(&stored[12..end]).into_owned();
    let at = 12 + header_text.find("noncePrefix").unwrap() + 15;
    prefix[at] = if prefix[at] == b'0' { b'1' } else { b'0' };
    refused(&prefix, "nonce prefix");
    // Two chunks swapped; a chunk dropped; the last chunk dropped (cut short at a boundary);
    // cut inside a chunk; bytes after the end; the header alone.
    let mut swapped = stored[..end].to_vec();
    swapped.extend_from_slice(&stored[end + chunk..end + 2 * chunk]);
    swapped.extend_from_slice(&stored[end..end + chunk]);
    swapped.extend_from_slice(&stored[end + 2 * chunk..]);
    assert!(refused(&swapped, "swapped").contains("chunk 0"));
    let mut dropped = stored[..end + chunk].to_vec();
    dropped.extend_from_slice(&stored[end + 2 * chunk..]);
    refused(&dropped, "dropped");
    let before_last = end + 4 * chunk;
    assert!(refused(&stored[..before_last], "no last chunk").contains("cut short"));
    assert!(refused(&stored[..stored.len() - 5], "cut").contains("cut short"));
    let mut longer = stored.clone();
    longer.extend_from_slice(b"more");
    assert!(refused(&longer, "after the end").contains("follow"));
    assert!(refused(&stored[..end], "header alone").contains("cut short"));
    assert!(refused(&stored[..end - 3], "inside the header").contains("cut short"));
    // The same content sealed twice: other nonces, so a chunk of one does not fit the other.
    let (again, _) = encode(&encoding, &plain, 65536);
    let mut mixed = stored[..end + chunk].to_vec();
    mixed.extend_from_slice(&again[end + chunk..end + 2 * chunk]);
    mixed.extend_from_slice(&stored[end + 2 * chunk..]);
    assert!(refused(&mixed, "a chunk of another object").contains("chunk 1"));
}

#[test]
fn a_zstd_frame_cut_short_or_followed_by_bytes_is_refused() {
    let plain = content(500_000);
    let (stored, _) = encode(&Encoding { zstd_level: Some(3), key: None }, &plain, 65536);
    for cut in [stored.len() - 1, stored.len() - 4, stored.len() / 2, 9] {
        let failure = decode(&stored[..cut], None, 4096).unwrap_err();
        assert!(failure.message.contains("cut short"), "cut at {cut}: {}", failure.message);
    }
    let mut longer = stored.clone();
    longer.extend_from_slice(&stored);
    let failure = decode(&longer, None, 4096).unwrap_err();
    assert!(failure.message.contains("follow"), "{}", failure.message);
}

#[test]
fn a_small_object_that_decompresses_to_much_is_handed_on_in_bounded_pieces() {
    // 64 MiB of zeros compress to a few KiB; the reader never holds more than a piece.
    let plain = vec![0u8; 64 << 20];
    let (stored, _) = encode(&Encoding { zstd_level: Some(3), key: Some(key(1)) }, &plain, 1 << 20);
    assert!(stored.len() < 64 * 1024, "{}", stored.len());
    let mut decoder = Decoder::new("x", Some(&key(1)));
    let (mut largest, mut total) = (0, 0);
    let mut sink = |bytes: &[u8]| {
        largest = largest.max(bytes.len());
        total += bytes.len();
        Ok(())
    };
    decoder.push(&stored, &mut sink).unwrap();
    decoder.finish(&mut sink).unwrap();
    assert_eq!(total, 64 << 20);
    assert!(largest <= PIECE_BYTES, "{largest}");
}

#[test]
fn a_plain_object_passes_through_with_or_without_a_key() {
    for plain in [b"".to_vec(), b"etcd".to_vec(), content(10_000)] {
        for key in [None, Some(key(3))] {
            let (back, encoded) = decode(&plain, key.as_ref(), 3).unwrap();
            assert_eq!(back, plain);
            assert_eq!((encoded.encoding, encoded.key_id), (None, None));
            assert_eq!(encoded.content_sha256, encoded.stored_sha256);
        }
    }
    assert!(!is_encoded(&content(100)));
}

#[test]
fn the_reader_decodes_a_file_as_it_reads() {
    let plain = content(700_000);
    for encoding in encodings() {
        let (stored, written) = encode(&encoding, &plain, 65536);
        let mut reader = DecodingReader::new(stored.as_slice(), Decoder::new("f", Some(&key(7))));
        let mut back = Vec::new();
        let mut buf = [0u8; 3000];
        loop {
            let n = reader.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            back.extend_from_slice(&buf[..n]);
        }
        assert_eq!(back, plain);
        assert_eq!(reader.encoded(), Some(&written));
        let mut cut =
            DecodingReader::new(&stored[..stored.len().saturating_sub(2)], Decoder::new("f", Some(&key(7))));
        if encoding.name().is_some() {
            let error = std::io::copy(&mut cut, &mut std::io::sink()).unwrap_err();
            assert!(error.to_string().contains("cut short"), "{error}");
        }
    }
}

#[test]
fn keys_are_read_raw_hex_or_base64_and_never_shown() {
    let dir = tempfile::tempdir().unwrap();
    let bytes: [u8; 32] = std::array::from_fn(|i| (i * 7 + 1) as u8);
    let hex = super::super::snapshot::hex(&bytes);
    let base64 = "AQgPFh0kKzI5QEdOVVxjanF4f4aNlJuiqbC3vsXM0+A=";
    assert_eq!(decode_base64(base64).unwrap().len(), 32);
    let expected = key_id(&bytes);
    for (name, content) in [
        ("raw", bytes.to_vec()),
        ("hex", format!("{hex}\n").into_bytes()),
        ("base64", format!("{base64}\r\n").into_bytes()),
    ] {
        let file = dir.path().join(name);
        std::fs::write(&file, &content).unwrap();
        let key = Key::read("--encryption-key", &file).unwrap();
        if name != "base64" {
            assert_eq!(key.id, expected, "{name}");
        }
        assert_eq!(key.id.len(), 16);
        assert!(!format!("{key:?}").contains(&hex[..8]), "Debug shows no key bytes");
    }
    for (name, content, why) in [
        ("short", b"c2hvcnQ=".to_vec(), "decodes to 5 bytes"),
        ("text", b"not a key at all!".to_vec(), "not 32 bytes, 64 hex digits nor base64"),
        ("long", vec![b'a'; 2000], "more than 1024 bytes"),
        ("binary", vec![0xff; 31], "neither 32 bytes nor text"),
    ] {
        let file = dir.path().join(name);
        std::fs::write(&file, &content).unwrap();
        let failure = Key::read("--encryption-key", &file).unwrap_err();
        assert_eq!(failure.kind, ErrorKind::BadInput);
        assert!(failure.message.contains(why) && failure.message.contains(name), "{}", failure.message);
        assert!(!failure.message.contains("not a key at all"), "never the content: {}", failure.message);
    }
    let missing = Key::read("--encryption-key", &dir.path().join("missing")).unwrap_err();
    assert!(missing.message.starts_with("--encryption-key "), "{}", missing.message);
    assert_eq!(Key::read("--encryption-key", dir.path()).unwrap_err().kind, ErrorKind::BadInput);
}

#[test]
fn the_flags_are_checked() {
    assert!(Encoding::from_flags(None, None, None).unwrap().name().is_none());
    assert_eq!(Encoding::from_flags(Some("zstd"), None, None).unwrap().zstd_level, Some(3));
    assert_eq!(Encoding::from_flags(Some("zstd"), Some(19), None).unwrap().zstd_level, Some(19));
    for (compression, level, why) in [
        (Some("zstd"), Some(20), "levels 1–19"),
        (Some("zstd"), Some(0), "levels 1–19"),
        (Some("gzip"), None, "none or zstd"),
        (None, Some(3), "needs --compression zstd"),
    ] {
        let failure = Encoding::from_flags(compression, level, None).unwrap_err();
        assert!(failure.message.contains(why), "{compression:?} {level:?}: {}", failure.message);
    }
}
