# cdplace — build and test entry points. `make test` is what CI runs (.ci/run).
CARGO ?= cargo
CC ?= cc
GUEST_DIR := target/wasm32-wasip2/guest
GUEST := $(GUEST_DIR)/cdplace_guest.wasm
FAULTY := $(GUEST_DIR)/cdplace_faulty_guest.wasm
LINK_LIBS := -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc

.PHONY: all guest build test test-rust test-c lint bench bench-smoke demo clean

all: build

## guest: the policy component (and the test-only faulty component), wasm32-wasip2
guest:
	$(CARGO) build -p cdplace-guest -p cdplace-faulty-guest --target wasm32-wasip2 --profile guest

## build: the guest, the `cdplace` CLI and libcdplace_host.a (release), guest copied beside the CLI
build: guest
	$(CARGO) build --release -p cdplace-host
	cp $(GUEST) target/release/cdplace_guest.wasm

## test: everything CI checks
test: guest lint test-rust test-c bench-smoke

test-rust: guest
	$(CARGO) test --workspace

## test-c: the C ABI driven from C through include/cdplace.h
test-c: guest
	$(CARGO) build -p cdplace-host
	$(CC) -Wall -Wextra -Werror -O1 -o target/debug/cabi-smoke host-shim/tests/c/smoke.c \
		-Ihost-shim/include target/debug/libcdplace_host.a $(LINK_LIBS)
	target/debug/cabi-smoke $(GUEST) $(FAULTY)

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) clippy -p cdplace-guest -p cdplace-faulty-guest --target wasm32-wasip2 --profile guest -- -D warnings

## bench: wasm vs native policy cost at 500 / 5,000 / 20,000 trays (results in target/bench/)
bench: guest
	$(CARGO) bench -p cdplace-host --bench policy

bench-smoke: guest
	$(CARGO) bench -p cdplace-host --bench policy -- --quick

## demo: explain where an example ComputeDomain pod goes on a two-clique cluster snapshot
demo: build
	target/release/cdplace explain --snapshot examples/snapshot.yaml --pod training/trainer-1
	target/release/cdplace explain --snapshot examples/snapshot.yaml --pod training/big-0

clean:
	$(CARGO) clean
