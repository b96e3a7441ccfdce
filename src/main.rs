//! The `memq` command: [`memq::cli::main`].

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(memq::cli::main(std::env::args_os()))
}
