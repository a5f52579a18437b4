# syntax=docker/dockerfile:1
# The dmkv image: the binaries a deployment runs (memnode, metadata, accel-p4, ycsb and
# the dmkv command-line client), on a slim base, as a non-root user.
#
#   docker build -t dmkv:0.1.0 .
#
# Built in your CI (no container engine runs where this repository is developed); the
# Helm chart in helm/dmkv expects the binaries on PATH.

ARG RUST_VERSION=1.95
ARG DEBIAN_RELEASE=trixie
# The base images are pinned by digest: a tag names whatever was pushed last, a digest names
# one image. The defaults below are the digests the two tags named in
# November 2026 (read from public pinned references; refresh them with
#   docker buildx imagetools inspect rust:1.95-slim-trixie
#   docker buildx imagetools inspect debian:trixie-slim
# and commit the new values). CI that vets its own digests passes them instead:
#   docker build --build-arg RUST_DIGEST=sha256:... --build-arg DEBIAN_DIGEST=sha256:... .
ARG RUST_DIGEST=sha256:28846ec5a6bcfcddb93f403ba7071bd579787852b2f2ac3839965620e8bd9456
ARG DEBIAN_DIGEST=sha256:a29215f6a35e51e22adffa17f89e9d2ef06214e64a2bad10d765c46aea49f11f

FROM rust:${RUST_VERSION}-slim-${DEBIAN_RELEASE}@${RUST_DIGEST} AS build
# The commit the services report in their dmkv_*_build_info metric:
#   docker build --build-arg DMKV_BUILD_COMMIT=$(git rev-parse HEAD) .
# Left empty, the metric has no commit label.
ARG DMKV_BUILD_COMMIT=
WORKDIR /src
COPY . .
# The binaries are built with the `rdma` feature (memnode --transport rdma, clients on
# the rdma transport): its bindings are generated at build time (cmake, libclang);
# libibverbs itself is loaded at run time, so a host without RDMA still runs everything
# else. The workspace's release profile keeps line tables (debug = 1) for profiling;
# the image's binaries are stripped instead (a fraction of the size).
RUN apt-get update \
 && apt-get install -y --no-install-recommends cmake libclang-dev clang \
 && rm -rf /var/lib/apt/lists/*
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/src/target,sharing=locked \
    cargo build --release --locked --bins --features memnode/rdma,ycsb/rdma \
      --config profile.release.strip=true \
 && mkdir -p /out \
 && for bin in memnode metadata accel-p4 ycsb dmkv; do cp "target/release/$bin" /out/; done

FROM debian:${DEBIAN_RELEASE}-slim@${DEBIAN_DIGEST} AS runtime
ARG UID=10001
# rdma-core's user-space verbs library and its providers (mlx5, rxe, efa, ...), which the
# `rdma` transport loads at run time.
RUN apt-get update \
 && apt-get install -y --no-install-recommends libibverbs1 ibverbs-providers \
 && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid "${UID}" dmkv \
 && useradd --system --uid "${UID}" --gid dmkv --home-dir /nonexistent --no-create-home \
      --shell /usr/sbin/nologin dmkv \
 && mkdir -p /data \
 && chown dmkv:dmkv /data
COPY --from=build /out/ /usr/local/bin/
# YCSB's standard workload files, for `ycsb ... -P /usr/local/share/dmkv/workloads/workloada`.
COPY --from=build /src/ycsb/workloads/ /usr/local/share/dmkv/workloads/
# Numeric, so that Kubernetes' runAsNonRoot can verify it.
USER 10001:10001
WORKDIR /data
# Soft RoCE (UDP: memnode, switch), memnode admin, metadata, switch admin (HTTP). RDMA
# NICs carry their own traffic (RoCEv2 on UDP 4791 of the NIC's address, or InfiniBand).
EXPOSE 4791/udp 4792/udp 9791/tcp 9700/tcp 9400/tcp
ENV RUST_LOG=info
# The metadata service's sled directory: mount a volume here.
VOLUME ["/data"]
CMD ["memnode", "--help"]
