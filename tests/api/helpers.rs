//! The harness, from the test package's library (`tests/support`), under the name the tests
//! use.

pub(crate) use support::*;
