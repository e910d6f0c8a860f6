//! `loop`: parses the command line and hands it to the library.

fn main() -> std::process::ExitCode {
    m1loop::cli::main()
}
