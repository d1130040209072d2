//! `labd` over the wire: each suite a module, all in one test binary, so
//! that the support code is compiled and linked once and every suite's
//! tests share the test threads. One suite alone:
//! `cargo test -p labd --test black_box -- bytes::`.

mod support;

#[path = "support/crash.rs"]
mod crash;
#[path = "support/swap.rs"]
mod swap;

mod backup;
mod bytes;
mod coord;
mod coord_apply;
mod coord_authority;
mod coord_declare;
mod coord_large;
mod coord_subscribe;
mod coord_tools;
mod coord_views;
mod coord_ws;
mod events;
mod events_shared;
mod journal;
mod overload;
mod platform;
mod reproduce;
mod s3;
mod shared_store;
mod storage;
mod tools;
