//! The tests' S3 server (`lab-s3server`): the S3 API over a directory, on
//! a free loopback port, served from a thread of the test process.

pub use lab_s3server::S3Server;
use std::path::Path;

/// The bucket of every test's server.
pub const BUCKET: &str = "lab-blobs";

/// A server over `root` (created) with an empty bucket [`BUCKET`].
pub fn start(root: &Path) -> S3Server {
    S3Server::start(root, BUCKET, ([127, 0, 0, 1], 0).into()).expect("the test's S3 server")
}
