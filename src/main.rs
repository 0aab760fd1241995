//! `bw`: parse, dispatch, map errors to exit codes. Nothing else lives here.
fn main() -> std::process::ExitCode {
    bw::cli::main()
}
