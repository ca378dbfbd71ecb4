use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = winadmit::cli::Cli::parse();
    match winadmit::commands::run(cli) {
        Ok(code) => code,
        // `winadmit ... | head`: the reader has gone; exit quietly.
        Err(err) if winadmit::commands::is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("winadmit: {err:#}");
            ExitCode::from(2)
        }
    }
}
