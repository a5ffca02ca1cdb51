//! `groundskeeper-job ring-hash`: the value cleanup Jobs and member Services are annotated with.

use std::io::Write;
use std::process::{Command, Stdio};

use groundskeeper_protocol::exit;

fn ring_hash(stdin: &str) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_groundskeeper-job"))
        .arg("ring-hash")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run groundskeeper-job");
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    (
        output.status.code().unwrap(),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

#[test]
fn prints_the_design_example_hash() {
    let (code, stdout, stderr) = ring_hash(r#"["-1","0","1"]"#);
    assert_eq!(code, exit::SUCCESS, "{stderr}");
    assert_eq!(
        stdout,
        "znqy/aBReVlJDtCopwdiTnIM/tKxDLyBD1vT1hPmz5EYmdT7+UkkYYNPRleGTwkiVwsMedQOnzz9VJGQYMEcNg==\n"
    );
}

#[test]
fn bad_input_exits_2() {
    for input in ["", "not json", r#"{"tokens":[]}"#, r#"[1,2,3]"#] {
        let (code, stdout, stderr) = ring_hash(input);
        assert_eq!(code, exit::BAD_INPUT, "{input:?}: {stdout} {stderr}");
        assert!(stdout.is_empty(), "{input:?}: {stdout}");
        assert!(stderr.contains("error"), "{input:?}: {stderr}");
    }
}
