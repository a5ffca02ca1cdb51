# One image with both binaries: the controller Deployment and its maintenance Jobs run it.
FROM rust:1.95-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends protobuf-compiler && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p groundskeeper-controller -p groundskeeper-job \
 && cp target/release/groundskeeper-controller target/release/groundskeeper-job /usr/local/bin/

# Non-root (uid 65532), no shell, read-only root filesystem friendly.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /usr/local/bin/groundskeeper-controller /usr/local/bin/groundskeeper-job /usr/local/bin/
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/groundskeeper-controller"]
