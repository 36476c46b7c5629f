//! `agentd` built into the test package, so its tests can run, kill and restart real server
//! processes (only a package's own binaries are visible to its tests).

fn main() -> std::process::ExitCode {
    agentd::cli::main()
}
