//! Compiles `proto/acts.proto` (the acts 0.25 gRPC protocol) with protox,
//! a protobuf compiler in Rust, so a build needs no system `protoc`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/acts.proto");
    let descriptors = protox::compile(["acts.proto"], ["proto"])?;
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(true)
        .compile_fds(descriptors)?;
    Ok(())
}
