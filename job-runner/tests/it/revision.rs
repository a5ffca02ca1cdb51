//! `groundskeeper-job revision encode|decode`, the binary run end to end: stdout, stderr, exit
//! codes, and no result file.

use std::process::Command;

use groundskeeper_protocol::exit;

/// Runs the binary: its exit code, stdout and stderr.
fn run(args: &[&str]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_groundskeeper-job"))
        .args(args)
        .output()
        .expect("run groundskeeper-job");
    (
        output.status.code().expect("exited, not killed"),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

fn encode(timestamp_ms: &str, cluster_id: &str, event: &str) -> (i32, String, String) {
    run(&["revision", "encode", "--timestamp-ms", timestamp_ms, "--cluster-id", cluster_id, "--event", event])
}

#[test]
fn encode_prints_the_decimal_revision() {
    // (timestamp ms, cluster id, event, revision)
    for (timestamp_ms, cluster_id, event, revision) in [
        ("0", "0", "0", "0"),
        ("0", "0", "8191", "8191"),
        ("0", "63", "0", "516096"),
        ("1", "0", "0", "524288"),
        ("1735689600000", "5", "42", "910001229004841002"),
        ("17592186044415", "63", "8191", "9223372036854775807"),
    ] {
        let (code, stdout, stderr) = encode(timestamp_ms, cluster_id, event);
        assert_eq!(code, exit::SUCCESS, "{timestamp_ms} {cluster_id} {event}: {stderr}");
        assert_eq!(stdout, format!("{revision}\n"));
    }
}

#[test]
fn decode_prints_the_parts_as_json() {
    for (revision, json) in [
        (
            "910001229004841002",
            r#"{"timestampMs":1735689600000,"clusterId":5,"event":42,"time":"2025-01-01T00:00:00.000Z"}"#,
        ),
        ("0", r#"{"timestampMs":0,"clusterId":0,"event":0,"time":"1970-01-01T00:00:00.000Z"}"#),
        (
            "9223372036854775807",
            r#"{"timestampMs":17592186044415,"clusterId":63,"event":8191,"time":"2527-06-23T06:20:44.415Z"}"#,
        ),
    ] {
        let (code, stdout, stderr) = run(&["revision", "decode", revision]);
        assert_eq!(code, exit::SUCCESS, "{revision}: {stderr}");
        assert_eq!(stdout, format!("{json}\n"));
        let value: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        // And back.
        let (code, stdout, _) = encode(
            &value["timestampMs"].to_string(),
            &value["clusterId"].to_string(),
            &value["event"].to_string(),
        );
        assert_eq!((code, stdout.trim()), (exit::SUCCESS, revision));
    }
}

#[test]
fn out_of_range_and_non_numeric_input_exit_2_naming_the_field_and_its_range() {
    let result_dir = tempfile::tempdir().unwrap();
    let result_file = result_dir.path().join("result.json");
    let result_file = result_file.to_str().unwrap();
    for (args, expected) in [
        (
            vec!["encode", "--timestamp-ms", "0", "--cluster-id", "64", "--event", "0"],
            "cluster id 64 is out of range: it must be from 0 to 63",
        ),
        (
            vec!["encode", "--timestamp-ms", "0", "--cluster-id", "-1", "--event", "0"],
            "cluster id -1 is out of range: it must be from 0 to 63",
        ),
        (
            vec!["encode", "--timestamp-ms", "0", "--cluster-id", "0", "--event", "8192"],
            "event number 8192 is out of range: it must be from 0 to 8191",
        ),
        (
            vec!["encode", "--timestamp-ms", "17592186044416", "--cluster-id", "0", "--event", "0"],
            "timestamp in ms 17592186044416 is out of range: it must be from 0 to 17592186044415",
        ),
        (
            vec!["encode", "--timestamp-ms", "-1", "--cluster-id", "0", "--event", "0"],
            "timestamp in ms -1 is out of range",
        ),
        (
            vec!["encode", "--timestamp-ms", "now", "--cluster-id", "0", "--event", "0"],
            "timestamp in ms \"now\" is not a whole number",
        ),
        (vec!["encode", "--timestamp-ms", "0", "--cluster-id", "0"], "--event"),
        (vec!["decode", "-1"], "revision -1 is out of range: it must be from 0 to 9223372036854775807"),
        (vec!["decode", "9223372036854775808"], "revision 9223372036854775808 is out of range"),
        (
            vec!["decode", "12abc"],
            "revision \"12abc\" is not a whole number: it must be from 0 to 9223372036854775807",
        ),
        (vec!["decode"], "<REVISION>"),
    ] {
        let mut line = vec!["revision"];
        line.extend(&args);
        let (code, stdout, stderr) = run(&line);
        assert_eq!(code, exit::BAD_INPUT, "{line:?}: {stdout} {stderr}");
        assert!(stdout.is_empty(), "{line:?}: {stdout}");
        assert!(stderr.contains(expected), "{line:?}: {stderr}");
        // A print-only command writes no result, even when a result file is named.
        line.extend(["--result-file", result_file]);
        let (code, _, _) = run(&line);
        assert_eq!(code, exit::BAD_INPUT, "{line:?}");
        assert!(!std::path::Path::new(result_file).exists(), "{line:?}");
    }
}

#[test]
fn help_exits_0() {
    let (code, stdout, _) = run(&["revision", "--help"]);
    assert_eq!(code, exit::SUCCESS);
    assert!(stdout.contains("encode") && stdout.contains("decode"), "{stdout}");
}
