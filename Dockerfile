# Two images from one build:
#   docker build --target controller -t ghcr.io/groundskeeper-dev/groundskeeper-controller:0.1.0 .
#   docker build --target job        -t ghcr.io/groundskeeper-dev/groundskeeper-job:0.1.0 .
# Both are distroless, non-root (uid 65532), with no shell, and work on a read-only root
# filesystem. Maintenance Jobs run the `job` image's entrypoint with their arguments.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p groundskeeper-controller -p groundskeeper-job

FROM gcr.io/distroless/cc-debian12:nonroot AS job
COPY --from=build /src/target/release/groundskeeper-job /usr/local/bin/groundskeeper-job
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/groundskeeper-job"]

FROM gcr.io/distroless/cc-debian12:nonroot AS controller
COPY --from=build /src/target/release/groundskeeper-controller /usr/local/bin/groundskeeper-controller
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/groundskeeper-controller"]
