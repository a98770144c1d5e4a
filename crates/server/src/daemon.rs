//! `--fork` and `--pidfilepath`, as mongod has them.
//!
//! `--fork` starts the same binary again with the same arguments as a child in its own
//! process group (so a terminal's Ctrl-C does not reach it), with no standard input or
//! error and standard output a pipe back to the parent. The child says `ready` on that
//! pipe once it listens; the parent then prints the child's pid and exits 0, as mongod's
//! parent does. A child that stops before it is ready makes the parent exit with the
//! child's exit code (48 for an address in use). Re-running the binary instead of
//! calling fork(2) keeps the async runtime and the storage engine out of a forked
//! address space.

use anyhow::Context;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};

/// Set in the child's environment: it is the server, and reports readiness.
const CHILD_ENV: &str = "HOURGLASS_FORKED_CHILD";

/// What the child writes on its standard output once it listens.
const READY: &str = "ready";

/// Whether this process is the child of a `--fork`.
pub fn is_forked_child() -> bool {
    std::env::var_os(CHILD_ENV).is_some()
}

/// Runs the server as a background child and returns the parent's exit code.
pub fn fork() -> ExitCode {
    println!("about to fork child process, waiting until server is ready for connections.");
    let spawned = std::env::current_exe()
        .context("cannot find the server binary to fork")
        .and_then(|exe| {
            Command::new(exe)
                .args(std::env::args_os().skip(1))
                .env(CHILD_ENV, "1")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .process_group(0)
                .spawn()
                .context("cannot start the child process")
        });
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ERROR: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    println!("forked process: {}", child.id());
    let ready = child.stdout.take().is_some_and(|out| {
        BufReader::new(out)
            .lines()
            .map_while(Result::ok)
            .any(|line| line == READY)
    });
    if ready {
        println!("child process started successfully, parent exiting");
        return ExitCode::SUCCESS;
    }
    let code = child.wait().ok().and_then(|s| s.code()).unwrap_or(1);
    eprintln!("ERROR: child process failed, exited with {code}");
    eprintln!("To see additional information in this output, start without the \"--fork\" option.");
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// Tells the waiting parent of a `--fork` that the server listens.
pub fn report_ready() {
    if is_forked_child() {
        let mut out = std::io::stdout();
        // The parent may be gone already; nothing else is written to this pipe.
        let _ = writeln!(out, "{READY}").and_then(|()| out.flush());
    }
}

/// Writes this process's id to `path` (`--pidfilepath`).
pub fn write_pid_file(path: &Path) -> anyhow::Result<()> {
    std::fs::write(path, format!("{}\n", std::process::id()))
        .with_context(|| format!("cannot write the pid file {}", path.display()))
}
