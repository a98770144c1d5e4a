//! The client tools of the `hourglass` binary: `hourglass import` and `hourglass export`,
//! with mongoimport's and mongoexport's flags, talking to a running server over the wire
//! protocol (so they work against a remote one) through the `mongodb` driver.
//!
//! [`cli`] holds both command lines; [`import`] reads files into batches of documents,
//! [`export`] writes query results out; `hourglass_archive::columnar` converts documents to
//! and from Arrow batches for Parquet; [`progress`] draws the bar or the summary line.

mod cli;
mod connect;
mod export;
mod import;
mod progress;

use clap::Parser;
use std::ffi::OsString;
use std::process::ExitCode;

/// The tool named by the first argument (`import`, `export`), if it names one.
pub fn subcommand(args: &[OsString]) -> Option<&'static str> {
    match args.get(1)?.to_str()? {
        "import" => Some("import"),
        "export" => Some("export"),
        _ => None,
    }
}

/// Runs `hourglass import ...` or `hourglass export ...` (`args` includes the program and
/// the subcommand names) and returns the process's exit status.
pub fn run(args: Vec<OsString>) -> ExitCode {
    let Some(tool) = subcommand(&args) else {
        return ExitCode::FAILURE;
    };
    let rest = args.into_iter().skip(1);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error starting: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match tool {
        "import" => {
            let a = cli::ImportArgs::parse_from(rest);
            runtime.block_on(import::run(a)).map(|s| s.aborted)
        }
        _ => {
            let a = cli::ExportArgs::parse_from(rest);
            runtime.block_on(export::run(a)).map(|_| false)
        }
    };
    match result {
        Ok(false) => ExitCode::SUCCESS,
        Ok(true) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("Failed: {e:#}");
            ExitCode::FAILURE
        }
    }
}
