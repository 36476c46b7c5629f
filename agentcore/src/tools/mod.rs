//! The built-in tools agents call while they work. `builtin/` says what each tool is to the
//! model (description, argument schema), one file per tool, and reads a call's arguments into
//! what it does; the runtime runs it: effects through the store, with their step; reads here
//! (`http_fetch.rs`, which refuses private addresses after DNS resolution) or through the
//! facade.

pub mod builtin;
mod html;
pub mod http_fetch;
