//! Host bindings of `wit/`: the one place the host runs `bindgen!`.

mod generated {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "lab:platform/service",
        imports: { default: async | trappable },
        exports: { default: async },
        with: {
            "lab:platform/body.incoming-body": crate::body::IncomingBody,
            "lab:platform/blobs.blob-reader": crate::blobstore::BlobReader,
            "lab:platform/blobs.blob-writer": crate::capabilities::PendingBlob,
            "lab:platform/blobs.staged-body": crate::blobstore::StagedBlob,
            "lab:platform/kv.read-txn": crate::kv::ReadTxn,
            "lab:platform/kv.write-txn": crate::kv::WriteTxn,
            "lab:platform/services.response-body": crate::body::PeerBody,
        },
    });
}

pub use generated::exports::lab::platform::handler::{
    BodyPart, Request as WitRequest, Response as WitResponse, ServiceIdentity,
};
pub use generated::lab::platform::{
    advances, blobs, body, clock, config, crypto, ids, kv, log, replay, runtime, services,
    subscriptions, tools, types,
};
pub use generated::{Service, ServiceIndices, ServicePre};
