//! `agentctl` built into the test package, so its tests can run the real command line.

fn main() -> std::process::ExitCode {
    agentctl::main()
}
