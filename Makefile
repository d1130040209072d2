# The project's three entry points. Each installs what it needs first:
# the toolchain pinned in rust-toolchain.toml and its wasm32-wasip2 target.

CARGO ?= cargo
COMPONENTS := lab-bytes lab-journal lab-coord lab-coord-auth lab-probe lab-kit lab-guest lab-tool-reach
# The black-box suites (modules of tests/black_box.rs) that run again on
# two labd sharing PostgreSQL and S3.
STORE_SUITES := bytes journal coord coord_declare coord_apply coord_authority coord_views coord_subscribe coord_ws coord_tools events reproduce
# Releases build without the standard library; checked on their own, so
# that the service components' features (wit-bindgen's `std`) stay apart.
TOOLS := lab-tool-guest lab-tool-upper lab-tool-hostile lab-tool-effects lab-tool-jsonschema lab-tool-unpack lab-tool-profile

.PHONY: setup postgres run run-cluster test lint format bench api-check

setup:
	@command -v rustup >/dev/null || { echo "rustup is required (https://rustup.rs)"; exit 1; }
	rustup toolchain install --no-self-update
	rustup target add wasm32-wasip2

# PostgreSQL's server binaries, which the shared-store tests start a
# throw-away cluster from: Debian's package, where they are absent.
postgres:
	@ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || { \
		apt-get update && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y --no-install-recommends postgresql; }

## make run: build everything, serve every service on its default port
## with its state under ./data.
run: setup
	$(CARGO) run --release -p labd --

## make run-cluster: a PostgreSQL cluster, an S3 server and two labd sharing them, on
## this machine (scripts/run-cluster.sh; docs/scale-out.md).
run-cluster: setup postgres
	scripts/run-cluster.sh

## make test: formatting and lints, unit tests and the black-box tests;
## then the services' black-box suites again on two labd sharing one
## PostgreSQL store and one S3 bucket (a database and an S3 server of each
## test's own, on one cluster; lab-s3server: nothing to install),
## each request going to either; and the bytes suite on S3 alone.
##
## The tests' build is the lint: the workspace's own crates, the
## components' nested build included (host/build.rs), are compiled by
## clippy's driver with warnings denied (scripts/clippy-rustc), so nothing
## is built twice, once for the tests and once more to check it. Every
## phase names the whole workspace, so that features unify as in the first;
## lab-embed, a build dependency without tests of its own, is left out of
## the first, so that it is built once, as the build dependency all use.
LINTED := RUSTC_WORKSPACE_WRAPPER=$(CURDIR)/scripts/clippy-rustc LAB_COMPONENTS_RUSTC_WRAPPER=$(CURDIR)/scripts/clippy-rustc
test: setup postgres format
	$(LINTED) $(CARGO) test --workspace --exclude lab-embed
	LAB_TEST_STORE=postgres LAB_TEST_HOSTS=2 LAB_TEST_BLOBS=s3 $(LINTED) $(CARGO) test --workspace --test black_box -- $(addsuffix ::,$(STORE_SUITES))
	LAB_TEST_BLOBS=s3 $(LINTED) $(CARGO) test --workspace --test black_box -- bytes::

## make lint: the checks of make test alone, by clippy's check-only
## builds of the same crates.
lint: format
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) clippy --target wasm32-wasip2 $(addprefix -p ,$(COMPONENTS)) -- -D warnings
	$(CARGO) clippy --target wasm32-wasip2 $(addprefix -p ,$(TOOLS)) -- -D warnings

format:
	$(CARGO) fmt --all --check

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
