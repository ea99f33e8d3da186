# Thin wrapper behind the README's commands; CMake does the real work. Every target can be run
# again at any time: dependencies are installed only when missing, CMake rebuilds what changed,
# and the local ClickHouse is reused when it is already running.
#
#   make run    install what is missing, build, start the local ClickHouse, serve chgate against
#               it in the foreground (Ctrl-C drains and exits)
#   make query  the same build, then one query through chgate's one-shot mode
#   make test   the same, with warnings as errors, then every test (ctest)

ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))

BUILD_DIR ?= build
ASAN_BUILD_DIR ?= build-asan
FUZZ_BUILD_DIR ?= build-fuzz
FUZZ_SECONDS ?= 30
FUZZERS := frame_fuzz block_fuzz packet_fuzz type_name_fuzz sql_fuzz spool_fuzz settings_fuzz insert_request_fuzz
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= 2
CMAKE_ARGS ?=
CTEST_ARGS ?=
CLANG_FORMAT ?= clang-format
QUERY ?= SELECT version(), uptime()
RUN_ARGS ?=

# The local ClickHouse (deploy/clickhouse/clickhousectl.sh reads the same variables).
CHGATE_CH_TCP_PORT ?= 29000
CHGATE_CH_HTTP_PORT ?= 28123
CHGATE_CH_TLS_PORT ?= 29440
CHGATE_CH_STATE_DIR ?= $(ROOT)/.local/clickhouse
export CHGATE_CH_TCP_PORT CHGATE_CH_HTTP_PORT CHGATE_CH_TLS_PORT CHGATE_CH_STATE_DIR
# chgate itself without them: it warns about CHGATE_* variables that name none of its options.
CHGATE_ALONE := env -u CHGATE_CH_TCP_PORT -u CHGATE_CH_HTTP_PORT -u CHGATE_CH_TLS_PORT \
	-u CHGATE_CH_STATE_DIR -u CHGATE_CH_INTERSERVER_PORT -u CHGATE_ZK_PORT

DEPS := $(ROOT)/deploy/install-deps.sh
CTL := $(ROOT)/deploy/clickhouse/clickhousectl.sh

TEST_ENV := CHGATE_CLICKHOUSE=127.0.0.1:$(CHGATE_CH_TCP_PORT) \
	CHGATE_CLICKHOUSE_HTTP=127.0.0.1:$(CHGATE_CH_HTTP_PORT) \
	CHGATE_CLICKHOUSE_SECURE=127.0.0.1:$(CHGATE_CH_TLS_PORT) \
	CHGATE_CLICKHOUSE_SECURE_CA=$(CHGATE_CH_STATE_DIR)/tls/ca.crt \
	CHGATE_REQUIRE_CLICKHOUSE=1 \
	CHGATE_REQUIRE_PROMTOOL=1 \
	CHGATE_CLICKHOUSE_CTL=$(CTL)

# Under the sanitizers the spool's kill -9 loop runs 4 rounds (the sanitizers check the code paths;
# the 12 rounds of `make test` check the odds).
ASAN_ENV := ASAN_OPTIONS=$${ASAN_OPTIONS:-detect_leaks=1:detect_stack_use_after_return=1} \
	UBSAN_OPTIONS=$${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
	CHGATE_SPOOL_CRASHES=$${CHGATE_SPOOL_CRASHES:-4}

# $(call cmake_build,<build dir>,<extra cmake args>[,<targets>]): configure (Ninja for a new build
# dir; an existing one keeps its generator and cached options) and build the targets (all of
# them without).
define cmake_build
	cmake -S $(ROOT) -B $(1) $(if $(wildcard $(1)/CMakeCache.txt),,-G Ninja) \
		-DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(2) $(CMAKE_ARGS)
	cmake --build $(1) --parallel $(JOBS) $(if $(3),--target $(3))
endef

# build, run, query and test share one configuration of $(BUILD_DIR): the same compile lines, so
# `make test` after `make run` builds only what run did not need (the tests), never again what
# it did. Warnings are errors in it (CI's rule).
MAIN_CMAKE_ARGS := -DCHGATE_WERROR=ON
RUN_TARGETS := chgate chgate-cli

.DEFAULT_GOAL := help
# Steps run in the order written even under `make -j`.
.NOTPARALLEL:
.PHONY: help deps build run query test test-asan fuzz clickhouse-start clickhouse-stop clickhouse-status \
	format format-check clean validate-deploy api-check

help:
	@echo "make run                install deps, build, start the local ClickHouse, serve chgate"
	@echo "                        against it in the foreground (Ctrl-C drains and exits);"
	@echo "                        RUN_ARGS='--log-level=debug' passes chgate options"
	@echo "make query              the same build, then run one query and exit"
	@echo "                        (QUERY='...' picks it; default: $(QUERY))"
	@echo "make test               install deps, build with -Werror, run every test"
	@echo "make test-asan          the same under ASan+UBSan, in $(ASAN_BUILD_DIR)/"
	@echo "make fuzz               build the libFuzzer targets with clang in $(FUZZ_BUILD_DIR)/ and run"
	@echo "                        each for FUZZ_SECONDS (default $(FUZZ_SECONDS)) from its corpus"
	@echo "make build              configure and build in $(BUILD_DIR)/"
	@echo "make deps               install missing Debian packages"
	@echo "make clickhouse-start   start the local ClickHouse (127.0.0.1:$(CHGATE_CH_TCP_PORT)) and its ZooKeeper"
	@echo "make clickhouse-stop    stop them"
	@echo "make clickhouse-status  is it running?"
	@echo "make format             clang-format every tracked .h/.cc file"
	@echo "make format-check       fail if a tracked .h/.cc file is not formatted"
	@echo "make validate-deploy    offline checks of the Dockerfile, compose, Kubernetes, dashboard and"
	@echo "                        alerts, live against chgate and a real Prometheus (tests/ops/)"
	@echo "make api-check          buf lint and buf breaking (against the last release) on proto/"
	@echo "make clean              remove $(BUILD_DIR)/, $(ASAN_BUILD_DIR)/ and $(FUZZ_BUILD_DIR)/"

deps:
	$(DEPS)

build:
	$(call cmake_build,$(BUILD_DIR),$(MAIN_CMAKE_ARGS))

run:
	$(DEPS)
	$(call cmake_build,$(BUILD_DIR),$(MAIN_CMAKE_ARGS),$(RUN_TARGETS))
	$(CTL) start
	$(ROOT)/deploy/run-local.sh $(BUILD_DIR)/server/chgate $(BUILD_DIR)/client/chgate-cli $(RUN_ARGS)

query:
	$(DEPS)
	$(call cmake_build,$(BUILD_DIR),$(MAIN_CMAKE_ARGS),chgate)
	$(CTL) start
	$(CHGATE_ALONE) $(BUILD_DIR)/server/chgate --endpoints=127.0.0.1:$(CHGATE_CH_TCP_PORT) --query="$(QUERY)"

test:
	$(DEPS)
	$(call cmake_build,$(BUILD_DIR),$(MAIN_CMAKE_ARGS))
	$(CTL) start
	$(TEST_ENV) ctest --test-dir $(BUILD_DIR) --output-on-failure -j $(JOBS) $(CTEST_ARGS)

test-asan:
	$(DEPS)
	$(call cmake_build,$(ASAN_BUILD_DIR),-DCHGATE_SANITIZE=ON -DCHGATE_WERROR=ON -DCHGATE_BENCH=OFF)
	$(CTL) start
	$(TEST_ENV) $(ASAN_ENV) ctest --test-dir $(ASAN_BUILD_DIR) --output-on-failure -j $(JOBS) \
		$(CTEST_ARGS)

# The libFuzzer targets (clang, ASan+UBSan), each run FUZZ_SECONDS from its corpus.
fuzz:
	$(DEPS)
	$(if $(wildcard $(FUZZ_BUILD_DIR)/CMakeCache.txt),,CC=clang CXX=clang++ cmake -S $(ROOT) \
		-B $(FUZZ_BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DCHGATE_FUZZ=ON \
		-DCHGATE_BENCH=OFF $(CMAKE_ARGS))
	cmake --build $(FUZZ_BUILD_DIR) --target $(FUZZERS) --parallel $(JOBS)
	FUZZ_JOBS=$(JOBS) $(ROOT)/tests/fuzz/run.sh $(FUZZ_BUILD_DIR) $(FUZZ_SECONDS) $(FUZZERS)

clickhouse-start:
	$(CTL) start

clickhouse-stop:
	$(CTL) stop

clickhouse-status:
	$(CTL) status

format:
	cd $(ROOT) && git ls-files -z -- '*.h' '*.cc' | xargs -0 -r $(CLANG_FORMAT) -i

format-check:
	cd $(ROOT) && git ls-files -z -- '*.h' '*.cc' | xargs -0 -r $(CLANG_FORMAT) --dry-run --Werror

# Deployment files (tests/ops/validate.sh): installs the ops tools, builds chgate and chgate-cli,
# starts the local ClickHouse. VALIDATE_ARGS=--skip-rootfs skips the debootstrap check.
validate-deploy:
	$(DEPS)
	$(ROOT)/deploy/install-ops-deps.sh --rootfs
	$(if $(wildcard $(BUILD_DIR)/CMakeCache.txt),,cmake -S $(ROOT) -B $(BUILD_DIR) -G Ninja \
		-DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_ARGS))
	cmake --build $(BUILD_DIR) --target chgate chgate-cli --parallel $(JOBS)
	$(CTL) start
	CHGATE_CLICKHOUSE=127.0.0.1:$(CHGATE_CH_TCP_PORT) CHGATE_CLICKHOUSE_CTL=$(CTL) \
		$(ROOT)/tests/ops/validate.sh --chgate $(BUILD_DIR)/server/chgate $(VALIDATE_ARGS)

# The API: buf lint, and buf breaking against the newest image in proto/release/ (buf itself is
# installed from npm into .local/buf/ when missing).
api-check:
	$(DEPS)
	$(ROOT)/tests/api/buf_check.sh

clean:
	rm -rf $(BUILD_DIR) $(ASAN_BUILD_DIR) $(FUZZ_BUILD_DIR)
