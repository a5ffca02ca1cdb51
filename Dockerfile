# Two images from one build:
#   docker build --target controller -t ghcr.io/groundskeeper-dev/groundskeeper-controller:0.1.0 .
#   docker build --target job        -t ghcr.io/groundskeeper-dev/groundskeeper-job:0.1.0 .
# Both are distroless, non-root (uid 65532), with no shell, and work on a read-only root
# filesystem. Maintenance Jobs run the `job` image's entrypoint with their arguments.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p groundskeeper-controller -p groundskeeper-job

# etcd's own binaries, for `snapshot-prove` (a throwaway member started on a restored copy of a
# snapshot) and `restore-member` (a member's data restored from a snapshot). Pinned to one 3.5
# release: both run on snapshots of 3.4 and 3.5 clusters alike. A snapshot is etcd's bbolt database
# followed by its SHA-256 in both versions; etcdutl 3.5 restores it by copying that database and
# writing new WAL and snap files with the given membership, and etcd 3.5 opens a 3.4 database as
# it does in a 3.4 -> 3.5 upgrade; etcd 3.4 starts on what etcdutl 3.5 restored from a 3.4
# snapshot too. (The runner's tests prove a 3.4 snapshot with these tools, and start a 3.4 member
# on data they restored.) Statically linked Go binaries: they run on the distroless base as is.
FROM gcr.io/etcd-development/etcd:v3.5.24 AS etcd

FROM gcr.io/distroless/cc-debian12:nonroot AS job
COPY --from=build /src/target/release/groundskeeper-job /usr/local/bin/groundskeeper-job
COPY --from=etcd /usr/local/bin/etcd /usr/local/bin/etcdutl /usr/local/bin/
# Where the runner finds them (its --etcd and --etcdutl flags override). The throwaway member and
# the restore write only under --scratch-dir (an emptyDir) or the member's data volume, so the
# image keeps working non-root on a read-only root file system.
ENV GROUNDSKEEPER_ETCD=/usr/local/bin/etcd \
    GROUNDSKEEPER_ETCDUTL=/usr/local/bin/etcdutl
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/groundskeeper-job"]

FROM gcr.io/distroless/cc-debian12:nonroot AS controller
COPY --from=build /src/target/release/groundskeeper-controller /usr/local/bin/groundskeeper-controller
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/groundskeeper-controller"]
