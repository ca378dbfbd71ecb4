//! One way to run the `winadmit` binary: from the crate's root, with no
//! policy from the environment (`WINADMIT_POLICY`) and no colour
//! (`NO_COLOR`), so that every test reads the same output whatever shell
//! runs it.

#![allow(dead_code)] // each test target uses a part

use std::ffi::OsStr;
use std::io::Write as _;
use std::process::{Command, Output, Stdio};

pub const BIN: &str = env!("CARGO_BIN_EXE_winadmit");

/// `winadmit args`, set up as every test runs it, not started.
pub fn command(args: &[impl AsRef<OsStr>]) -> Command {
    let mut command = Command::new(BIN);
    command
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("WINADMIT_POLICY")
        .env("NO_COLOR", "1");
    command
}

/// Runs `winadmit args` to its end, with nothing on its standard input.
pub fn winadmit(args: &[impl AsRef<OsStr>]) -> Output {
    command(args)
        .stdin(Stdio::null())
        .output()
        .expect("runs winadmit")
}

/// Runs `winadmit args` with `input` on its standard input.
pub fn with_stdin(args: &[impl AsRef<OsStr>], input: impl AsRef<[u8]>) -> Output {
    let mut child = command(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts winadmit");
    let mut stdin = child.stdin.take().expect("a standard input");
    // A command that exits before reading all of it closes the pipe: not
    // an error of the test.
    let _ = stdin.write_all(input.as_ref());
    drop(stdin);
    child.wait_with_output().expect("runs winadmit")
}
