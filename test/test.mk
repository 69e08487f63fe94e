# test.mk - the project's own entry points around PGXS: set-up, unit tests,
# PostgreSQL suites on a throwaway cluster, TAP, fuzzing, demo and bench.

.PHONY: setup demo test unit check-pg sdk tap pg-net citus load http fuzz fuzz-build bench bench-http

BUILD_DIR = build
CORE_TEST_FLAGS = -std=c++17 -g -O1 -Wall -Wextra -I$(CURDIR)/src
FUZZ_SECONDS ?= 15

setup:
	bash scripts/setup.sh

demo: setup
	$(MAKE) all
	$(MAKE) install
	bash demo/run.sh

test: setup
	$(MAKE) all
	$(MAKE) install
	$(MAKE) unit
	$(MAKE) check-pg
	$(MAKE) sdk
	$(MAKE) tap
	$(MAKE) load
	$(MAKE) http
	$(MAKE) fuzz
	bash demo/run.sh
	@echo "make test: all suites passed"

# GoogleTest for the pure C++ core (no server involved).
$(BUILD_DIR)/unit_tests: $(CORE_SRCS) $(wildcard src/core/*.h src/core/schemes/*.h) $(wildcard test/unit/*.cpp test/unit/*.h)
	@mkdir -p $(BUILD_DIR)
	$(CXX) $(CORE_TEST_FLAGS) -o $@ $(CORE_SRCS) $(wildcard test/unit/*.cpp) \
		-lgtest -lgtest_main -pthread -lssl -lcrypto

unit: $(BUILD_DIR)/unit_tests
	$(BUILD_DIR)/unit_tests --gtest_brief=1

# pg_regress and pg_isolation_regress against a throwaway cluster.
PG_MAJOR = $(shell $(PG_CONFIG) --version 2>/dev/null | sed -n 's/^PostgreSQL \([0-9]*\).*/\1/p')
check-pg:
	pg_virtualenv -t -v $(PG_MAJOR) $(MAKE) installcheck

# Deliveries signed and judged by the providers' own SDKs (npm), decided
# again by verify_signature on a throwaway cluster.
sdk:
	pg_virtualenv -t -v $(PG_MAJOR) bash test/sdk/run.sh

# TAP tests (crashes, restarts) run as the postgres user. The relay suite
# needs pg_net: pg-net uses an installed one or builds PG_NET_SRC (a release
# tarball; .ci/run passes the one in ../shared/vendor), else 040_relay.pl
# skips itself. The scale-out suite (050_citus.pl) needs Citus: citus uses an
# installed one or builds CITUS_SRC once, else the suite skips itself.
pg-net:
	bash scripts/pg_net.sh

tap: pg-net citus
	bash test/run_tap.sh

citus:
	bash scripts/citus.sh

# The bounded load test: receivers and workers together on a throwaway cluster.
load:
	bash test/load/run.sh

# The HTTP layers (examples/express, examples/receiver.py) over real HTTP,
# driven with SDK-signed deliveries (npm ci from the lockfiles).
http:
	pg_virtualenv -t -v $(PG_MAJOR) bash test/http/run.sh

# libFuzzer targets (ASan + UBSan) over every parser of untrusted input.
FUZZ_SRCS = $(sort $(wildcard test/fuzz/fuzz_*.cpp))
FUZZ_BINS = $(patsubst test/fuzz/%.cpp,$(BUILD_DIR)/fuzz/%,$(FUZZ_SRCS))

# The core is compiled once for all targets (instrumented, not linked with
# libFuzzer's main), then each target links its own file against it.
FUZZ_FLAGS = $(CORE_TEST_FLAGS) -fno-sanitize-recover=undefined
FUZZ_CORE_OBJS = $(patsubst src/core/%.cpp,$(BUILD_DIR)/fuzz/core/%.o,$(CORE_SRCS))

$(BUILD_DIR)/fuzz/core/%.o: src/core/%.cpp $(wildcard src/core/*.h src/core/schemes/*.h)
	@mkdir -p $(dir $@)
	clang++ $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link,address,undefined -c -o $@ $<

$(BUILD_DIR)/fuzz/%: test/fuzz/%.cpp $(FUZZ_CORE_OBJS) $(wildcard src/core/*.h src/core/schemes/*.h test/fuzz/*.h test/unit/sign_util.h test/unit/*_util.h)
	@mkdir -p $(BUILD_DIR)/fuzz
	clang++ $(FUZZ_FLAGS) -fsanitize=fuzzer,address,undefined \
		-o $@ $< $(FUZZ_CORE_OBJS) -lssl -lcrypto

fuzz-build: $(FUZZ_BINS)

fuzz: fuzz-build
	bash test/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_BINS)

bench:
	bash scripts/setup.sh bench
	$(MAKE) all
	$(MAKE) install
	bash bench/run.sh $(if $(QUICK),--quick,)
	bash bench/http/run.sh $(if $(QUICK),--quick,)
	$(MAKE) bench-micro

# End to end over HTTP alone (wrk; examples/express against the second seed
# re-created in bench/http/seed2); QUICK=1 runs in under 3 minutes.
bench-http:
	bash scripts/setup.sh bench
	$(MAKE) all
	$(MAKE) install
	bash bench/http/run.sh $(if $(QUICK),--quick,)
