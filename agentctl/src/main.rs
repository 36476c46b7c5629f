fn main() -> std::process::ExitCode {
    agentctl::main()
}
