//! Rebuilds the crate when a migration is added: `sqlx::migrate!` embeds the files at compile
//! time, and a new file alone would not otherwise trigger a rebuild.

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
