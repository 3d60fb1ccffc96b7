# placement-webhook container image.
#
#   docker build -t placement-webhook:0.1.0 .
#
# Build stage: the toolchain named by rust-version in Cargo.toml, dependencies exactly as in
# Cargo.lock (--locked).
FROM docker.io/library/rust:1.89-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
# The library embeds examples/cluster.json; Cargo.toml declares the bench target.
COPY examples ./examples
COPY benches ./benches
RUN cargo build --release --locked --bin placement-webhook \
    && install -D -m 0755 target/release/placement-webhook /out/placement-webhook

# Runtime: glibc, libgcc and CA certificates only; no shell, no package manager.
# The nonroot tag runs as uid/gid 65532, which the Deployment also requires.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/placement-webhook /usr/local/bin/placement-webhook
USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["/usr/local/bin/placement-webhook"]
CMD ["serve"]
