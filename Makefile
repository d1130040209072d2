# The project's three entry points. Each installs what it needs first:
# the toolchain pinned in rust-toolchain.toml and its wasm32-wasip2 target.

CARGO ?= cargo
COMPONENTS := lab-bytes lab-journal lab-coord lab-coord-auth lab-probe lab-kit lab-guest lab-tool-reach
# Releases build without the standard library; checked on their own, so
# that the service components' features (wit-bindgen's `std`) stay apart.
TOOLS := lab-tool-guest lab-tool-upper lab-tool-hostile lab-tool-effects lab-tool-jsonschema lab-tool-unpack lab-tool-profile

.PHONY: setup run test lint bench api-check

setup:
	@command -v rustup >/dev/null || { echo "rustup is required (https://rustup.rs)"; exit 1; }
	rustup toolchain install --no-self-update
	rustup target add wasm32-wasip2

## make run: build everything, serve every service on its default port
## with its state under ./data.
run: setup
	$(CARGO) run --release -p labd --

## make test: formatting, lints, unit tests and the black-box tests.
test: setup lint
	$(CARGO) test --workspace

lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) clippy --target wasm32-wasip2 $(addprefix -p ,$(COMPONENTS)) -- -D warnings
	$(CARGO) clippy --target wasm32-wasip2 $(addprefix -p ,$(TOOLS)) -- -D warnings

## make api-check: schemathesis (pinned in scripts/api-check/requirements.txt,
## installed into target/api-check/venv) against the openapi.json each
## service serves, on a labd with a temporary data directory (not part of
## make test: it takes a few minutes).
api-check: setup
	CARGO="$(CARGO)" scripts/api-check/run.sh

## make bench: throughput against same-run baselines (not part of CI).
bench: setup
	$(CARGO) build --release -p labd -p lab-bench
	./target/release/lab-bench --labd ./target/release/labd
