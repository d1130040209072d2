//! The S3 rows' setup: an S3 server over a scratch directory
//! (`lab-s3server`, in a thread of the bench) and labd keeping blobs in
//! its bucket.

use crate::labd::Labd;
use anyhow::{Context, Result};
use lab_s3server::S3Server;
use std::path::Path;

const BUCKET: &str = "lab-bench";

/// Serves `root` (created, with the bench's bucket) on a free loopback port.
pub fn start(root: &Path) -> Result<S3Server> {
    S3Server::start(root, BUCKET, ([127, 0, 0, 1], 0).into()).context("the bench's S3 server")
}

/// A labd whose blobs are in `server`'s bucket.
pub fn labd(server: &S3Server, binary: &Path, scratch: &Path) -> Result<Labd> {
    Labd::start_with_env(
        binary,
        scratch,
        &["--blobs".into(), server.blobs_setting().into()],
        &server.env(),
    )
}
