# chgate container image.
#
#   docker build -t chgate:dev .
#
# Stage "build": Debian 12 with the same -dev packages as deploy/install-deps.sh; builds chgate and
# chgate-cli and runs the unit tests (no ClickHouse here: integration and end-to-end tests are
# excluded; CI runs them). Stage "runtime": Debian 12 slim with only the shared libraries the
# binaries link, running as UID/GID 10001.
#
# The runtime package list below is what tests/ops/runtime_rootfs.sh installs into a minimal
# bookworm root filesystem to prove, without a Docker engine, that the binary starts, serves and
# drains with exactly these packages. Keep the `apt-get install` of the runtime stage on one list.

FROM debian:12.11 AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config \
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
      prometheus-cpp-dev libabsl-dev libasio-dev liblz4-dev libzstd-dev libssl-dev \
      libspdlog-dev libcli11-dev libgtest-dev libgmock-dev openssl \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY CMakeLists.txt ./
COPY cmake/ cmake/
COPY text/ text/
COPY columnar/ columnar/
COPY proto/ proto/
COPY server/ server/
COPY client/ client/
COPY tests/ tests/
# The image has no .git: pass the revision for chgate_build_info, e.g.
# docker build --build-arg CHGATE_REVISION=$(git rev-parse --short=12 HEAD) .
ARG CHGATE_REVISION=unknown
RUN cmake -S /src -B /build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCHGATE_BENCH=OFF \
      -DCHGATE_REVISION=${CHGATE_REVISION} \
 && cmake --build /build --parallel \
 && ctest --test-dir /build --output-on-failure -E 'integration|e2e' \
 && install -D -m 0755 -s /build/server/chgate /out/chgate \
 && install -D -m 0755 -s /build/client/chgate-cli /out/chgate-cli

FROM debian:12.11-slim AS runtime
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libgrpc++1.51 libprometheus-cpp-core1.0 liblz4-1 libzstd1 libssl3 libspdlog1.10 libfmt9 \
      ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 10001 chgate \
 && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin chgate
COPY --from=build /out/chgate /out/chgate-cli /usr/local/bin/
COPY deploy/docker/healthcheck.sh /usr/local/bin/chgate-healthcheck
COPY THIRD_PARTY_NOTICES.md /usr/share/doc/chgate/THIRD_PARTY_NOTICES.md
LABEL org.opencontainers.image.title="chgate" \
      org.opencontainers.image.description="gRPC sidecar that batches rows into ClickHouse" \
      org.opencontainers.image.licenses="NOASSERTION"
# The API stays on 127.0.0.1:50051 (the application in the same pod reaches it); health
# (grpc.health.v1) and Prometheus metrics listen on all addresses.
EXPOSE 50052 9464
USER 10001:10001
HEALTHCHECK --interval=10s --timeout=3s --retries=3 \
  CMD ["/usr/local/bin/chgate-healthcheck"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/chgate"]
