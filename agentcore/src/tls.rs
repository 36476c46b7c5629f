//! The process-wide TLS crypto provider (ring) that every HTTP and database client of the
//! library uses: a leaf, so each client's module installs it without reaching into the crate
//! root.

/// Installs the provider. `Core::open` calls it; call it yourself before building other rustls
/// clients first. Installing twice is harmless.
pub fn install_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
