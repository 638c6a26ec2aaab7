//! The generated protocol types and service trait (`proto/acts.proto`,
//! compiled by `build.rs`).

#![allow(missing_docs, clippy::all)]

tonic::include_proto!("acts.grpc");
