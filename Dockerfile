# chgate container image: build and unit-test on Debian 12, run on debian slim as UID 10001.
# First draft; the run command, ports and probes follow once the gRPC service lands.

FROM debian:12.8 AS build
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config \
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
      prometheus-cpp-dev libabsl-dev libasio-dev liblz4-dev libzstd-dev \
      libgtest-dev libgmock-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# No ClickHouse in this stage: integration tests skip, unit tests must pass.
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCHGATE_BENCH=OFF \
 && cmake --build /build --parallel \
 && ctest --test-dir /build --output-on-failure \
 && install -D -m 0755 -s /build/server/chgate /out/chgate

FROM debian:12.8-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libgrpc++1.51 libprometheus-cpp-pull1.0 liblz4-1 libzstd1 ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 10001 chgate \
 && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin chgate
COPY --from=build /out/chgate /usr/local/bin/chgate
USER 10001:10001
ENTRYPOINT ["/usr/local/bin/chgate"]
