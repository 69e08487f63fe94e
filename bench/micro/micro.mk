# micro.mk - the verification micro-benchmark (Google Benchmark): every
# scheme verifying a 1 KiB body against raw OpenSSL HMAC of the same bytes.
#
#   make bench-micro                                    build and run
#   make bench-micro BENCH_MICRO_ARGS=--benchmark_repetitions=5

.PHONY: bench-micro

MICRO_CORE_SRCS = $(sort $(wildcard src/core/*.cpp src/core/schemes/*.cpp))
MICRO_BENCH_BIN = build/verify_bench
BENCH_MICRO_ARGS ?=

$(MICRO_BENCH_BIN): bench/micro/verify_bench.cpp $(MICRO_CORE_SRCS) $(wildcard src/core/*.h src/core/schemes/*.h)
	@mkdir -p $(dir $@)
	g++ -std=c++17 -O2 -DNDEBUG -Wall -Wextra -I$(CURDIR)/src -o $@ \
		bench/micro/verify_bench.cpp $(MICRO_CORE_SRCS) \
		-lbenchmark -lpthread -lssl -lcrypto

bench-micro: $(MICRO_BENCH_BIN)
	$(MICRO_BENCH_BIN) $(BENCH_MICRO_ARGS)
