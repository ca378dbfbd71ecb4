use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = winadmit::cli::Cli::parse();
    match winadmit::commands::run(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("winadmit: {err:#}");
            ExitCode::from(2)
        }
    }
}
