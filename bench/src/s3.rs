//! The S3 rows' setup: an S3 server over a scratch directory
//! (`lab-s3server`, in a thread of the bench) and labd keeping blobs in
//! its bucket; and their ceiling, the server read straight by the S3
//! client labd uses.

use crate::labd::Labd;
use crate::measure::Bound;
use anyhow::{ensure, Context, Result};
use lab_s3server::S3Server;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as ObjectPath;
use object_store::{ClientOptions, ObjectStoreExt};
use std::path::Path;
use std::time::{Duration, Instant};

/// What labd reads a blob on S3 in: one ranged GET each
/// (`BlobReader::chunk_size`).
const LABD_CHUNK: u64 = 1 << 20;

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

/// Where the bench's S3 server is and how to reach it.
#[derive(Clone)]
pub struct Endpoint {
    env: Vec<(String, String)>,
    bucket: String,
}

impl Endpoint {
    pub fn of(server: &S3Server) -> Endpoint {
        Endpoint {
            env: server.env(),
            bucket: server.bucket.clone(),
        }
    }

    /// labd's S3 client (object_store) for the bucket.
    fn client(&self) -> Result<AmazonS3> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = AmazonS3Builder::new()
            .with_bucket_name(&self.bucket)
            .with_client_options(ClientOptions::new().with_allow_http(true));
        for (name, value) in &self.env {
            builder = match name.as_str() {
                "AWS_ENDPOINT_URL" => builder.with_endpoint(value),
                "AWS_REGION" => builder.with_region(value),
                "AWS_ACCESS_KEY_ID" => builder.with_access_key_id(value),
                "AWS_SECRET_ACCESS_KEY" => builder.with_secret_access_key(value),
                _ => builder,
            };
        }
        builder.build().context("the ceiling's S3 client")
    }

    /// Whole reads of the blob `name` (`sha256:<hex>`, `size` bytes) as
    /// labd makes them, one ranged GET per MiB in turn, but nothing else:
    /// the reads made and their time.
    pub async fn whole_reads(
        &self,
        name: &str,
        size: u64,
        bound: Bound,
    ) -> Result<(u64, Duration)> {
        let client = self.client()?;
        let hex = name.strip_prefix("sha256:").context("a blob name")?;
        let path = ObjectPath::from(format!("sha256/{hex}"));
        let mut count = 0;
        let started = Instant::now();
        while !bound.done(count, started) {
            let mut offset = 0;
            while offset < size {
                let end = (offset + LABD_CHUNK).min(size);
                let bytes = client.get_range(&path, offset..end).await?;
                ensure!(bytes.len() as u64 == end - offset, "a short range");
                offset = end;
            }
            count += 1;
        }
        Ok((count, started.elapsed()))
    }
}
