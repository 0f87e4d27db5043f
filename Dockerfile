# capi_exporter container image.
#
#   docker build -t capi_exporter .
#   docker run --rm -p 10127:10127 capi_exporter --demo
#
# Two stages: the Rust toolchain builds a release binary; the runtime image holds only that binary
# on distroless "cc" (glibc, libgcc, CA data and a nonroot user, no shell, no package manager).
# The binary needs nothing else: TLS is rustls and the CA roots are compiled in (webpki-roots).

FROM rust:1-bookworm AS builder
WORKDIR /build

# Dependencies first, in a layer of their own: it is rebuilt only when Cargo.toml or Cargo.lock
# change, not at every source edit. Empty targets stand in for the workspace's own code (the
# exporter and the simulated exchange its --demo serves).
# .cargo/config.toml configures jemalloc when it is built: it must be there before.
COPY Cargo.toml Cargo.lock ./
COPY .cargo ./.cargo
COPY sim/Cargo.toml sim/
RUN mkdir -p src sim/src benches \
    && echo 'fn main() {}' > src/main.rs \
    && echo 'fn main() {}' > sim/src/main.rs \
    && echo 'fn main() {}' > benches/exporter.rs \
    && touch src/lib.rs sim/src/lib.rs \
    && cargo build --release --locked --package capi_exporter \
    && rm -rf src sim/src

# The crate itself. touch: COPY keeps the files' own times, which may be older than the stand-in
# build above; cargo must see the real sources as newer. (.git is not in the build context, so
# capi_exporter_build_info says revision="unknown".)
COPY build.rs ./
COPY src ./src
COPY sim/src ./sim/src
RUN touch src/main.rs src/lib.rs sim/src/main.rs sim/src/lib.rs \
    && cargo build --release --locked --package capi_exporter \
    && install -D -m 0755 target/release/capi_exporter /out/capi_exporter \
    && mkdir -p /out/state

FROM gcr.io/distroless/cc-debian12:nonroot

LABEL org.opencontainers.image.title="capi_exporter" \
      org.opencontainers.image.description="Prometheus exporter for a crypto exchange's futures (contract) account API" \
      org.opencontainers.image.licenses="Apache-2.0"

COPY --from=builder /out/capi_exporter /usr/local/bin/capi_exporter
# Writable, owned by nonroot (65532), for --state.file /var/lib/capi_exporter/state.json. A named
# volume mounted here starts with this ownership.
COPY --from=builder --chown=65532:65532 /out/state /var/lib/capi_exporter
VOLUME ["/var/lib/capi_exporter"]

# The distroless "nonroot" user, by number: Kubernetes can verify runAsNonRoot only for a
# numeric user.
USER 65532:65532
EXPOSE 10127
ENTRYPOINT ["/usr/local/bin/capi_exporter"]
