# Two commands do everything on a fresh machine: `make serve` and `make test`.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUNTIME := $(VENV)/.runtime
INSTALLED := $(VENV)/.installed
# No single test of CI's stages runs near this: one that does is stuck, and fails with every
# thread's stack instead of holding CI to its own limit. `make test-slow` has none.
STUCK := --timeout 600

.PHONY: serve test test-system test-slow test-deploy lint release-baseline example-go bench bench-rules bench-par par-sheets rtp-table par-plot bench-fairness bench-audit bench-service bench-watch bench-metrics bench-key-check bench-failover \
	bench-takeover bench-witness bench-quorum bench-par-montecarlo bench-replicas bench-sequencer bench-cli bench-http-edge \
	bench-grpc-edge bench-monitor bench-tiles bench-tile-serving \
	evidence nist-evidence fairness-evidence dieharder-evidence dieharder-all-evidence clean

# The runtime alone (what `make serve` needs): no test tools, no npm.
$(RUNTIME): pyproject.toml clients/python/pyproject.toml
	$(PYTHON) -c 'import sys; sys.exit("Python 3.11 or newer is needed" if sys.version_info < (3, 11) else 0)'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e ./clients/python -e .
	touch $@

# Everything `make test` needs besides: the test extra and the Node packages.
$(INSTALLED): $(RUNTIME) pyproject.toml clients/python/pyproject.toml clients/node/package-lock.json \
		examples/node-table-service/package-lock.json
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
	npm ci --prefix clients/node --no-audit --no-fund --loglevel=error
	npm ci --prefix examples/node-table-service --no-audit --no-fund --loglevel=error
	touch $@

## serve: set up and run the service on SQLite in ./gnau-data, on 127.0.0.1:50051, with one worker
## process per core (GNAU_WORKERS=1 make serve: one process)
serve: $(RUNTIME)
	GNAU_WORKERS=$${GNAU_WORKERS:-auto} $(BIN)/gnau serve --log-format console

## test: set up, then lint, type-check and run every test that needs no process of its own, no
## real timer, browser or other language, on every core (one test file to a worker: a file's
## servers and databases are set up once)
test: $(INSTALLED) lint
	$(BIN)/python -m pytest -q $(STUCK) -n auto --dist loadfile tests gnau_service --doctest-modules

## test-system: the tests marked system: `gnau serve` and worker processes, killed, frozen and
## cut off; real timers (leases, stalls, grace periods); chromium; Node.js and Go; and the
## service's tests again on PostgreSQL
test-system: $(INSTALLED)
	$(BIN)/python -m pytest -q $(STUCK) -n auto --dist loadfile tests -m "system and not slow and not containers"

lint: $(INSTALLED)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy --strict gnau_service clients/python/src
	$(BIN)/lint-imports
	$(BIN)/buf lint
	$(BIN)/buf breaking --against proto/release-baseline.binpb

## release-baseline: at a release, make the proto of HEAD the contract `buf breaking` holds
## later changes to (docs/api.md, "Compatibility"); commit proto/release-baseline.binpb
release-baseline: $(INSTALLED)
	$(BIN)/buf build --exclude-source-info -o proto/release-baseline.binpb

## example-go: build examples/go-table-service (Debian's Go packages, offline; see its build.sh)
example-go:
	examples/go-table-service/build.sh

## test-slow: the exhaustive, statistical and long runs, and every property under Hypothesis's
## "thorough" profile (500 examples where a test names no number; `make test` gives 50)
test-slow: $(INSTALLED)
	GNAU_HYPOTHESIS=thorough $(BIN)/python -m pytest -q tests -m "slow or hypothesis"

## test-deploy: deploy/ for real under podman (as root): the base image from Debian packages,
## the image, the Compose stack and the Kubernetes pod; prints each phase's time (about 3 min)
test-deploy: $(INSTALLED)
	$(BIN)/python -m pytest -q $(STUCK) tests/containers -m containers

## bench: every benchmark (several minutes; each prints its same-run baseline)
bench: bench-rules bench-par bench-fairness bench-audit bench-service bench-watch bench-metrics bench-key-check \
	bench-failover bench-takeover bench-witness bench-quorum bench-par-montecarlo bench-replicas bench-sequencer \
	bench-cli bench-http-edge bench-tiles bench-tile-serving bench-monitor

bench-rules: $(INSTALLED)
	$(BIN)/python bench/bench_rules.py

## bench-par: seconds of CPU per exact PAR sheet, each rule set in a fresh process
bench-par: $(INSTALLED)
	$(BIN)/python bench/bench_par.py

## par-sheets: regenerate the published PAR sheets under docs/par (a test checks them)
par-sheets: $(INSTALLED)
	$(BIN)/python bench/par_sheets.py

## rtp-table: regenerate gnau_service/rules/return_to_player.csv, every rule set's exact return to
## player, from its PAR sheet (tens of CPU-minutes; RTP_PROCESSES=2 processes; a test checks it)
rtp-table: $(INSTALLED)
	$(BIN)/python bench/rtp_table.py --processes $${RTP_PROCESSES:-2}

## par-plot: docs/par/house-edge.png (matplotlib: the [evidence] extra, which [test] includes)
par-plot: $(INSTALLED)
	$(BIN)/python bench/par_sheets.py --plot

## bench-par-montecarlo: the numpy batch evaluator against Evaluator.rank, and simulated rounds/s
bench-par-montecarlo: $(INSTALLED)
	$(BIN)/python bench/bench_par_montecarlo.py

bench-fairness: $(INSTALLED)
	$(BIN)/python bench/bench_shuffle.py

bench-audit: $(INSTALLED)
	$(BIN)/python bench/bench_audit_log.py

bench-service: $(INSTALLED)
	$(BIN)/python bench/bench_service.py --workers 1,2

bench-watch: $(INSTALLED)
	$(BIN)/python bench/bench_watch.py

## bench-monitor: `gnau audit monitor` from a cold start through a log's tiles, entries/s beside
## verify_bundle on the same log's export, best of two each (about 3 minutes; bench/bench_monitor.py
## --entries 1000000: the target)
bench-monitor: $(INSTALLED)
	$(BIN)/python bench/bench_monitor.py --http --repeat 2

bench-metrics: $(INSTALLED)
	$(BIN)/python bench/bench_metrics.py

bench-key-check: $(INSTALLED)
	$(BIN)/python bench/bench_key_check.py

## bench-witness: cosignatures/s and CPU per add-checkpoint of `gnau witness` (about 10 s)
bench-witness: $(INSTALLED)
	$(BIN)/python bench/bench_witness.py

## bench-tiles: `gnau tiles publish`: tiles/s to a directory and to SeaweedFS, bytes per million
## rounds, on SQLite and PostgreSQL (about a minute; bench/bench_tiles.py --large: ten times more)
bench-tiles: $(INSTALLED)
	$(BIN)/python bench/bench_tiles.py

## bench-tile-serving: requests/s for a hot tile, bundle and checkpoint from the HTTP port,
## beside a page file (about half a minute)
bench-tile-serving: $(INSTALLED)
	$(BIN)/python bench/bench_tile_serving.py

## bench-quorum: what a verifier pays for a witness quorum (a few seconds)
bench-quorum: $(INSTALLED)
	$(BIN)/python bench/bench_quorum.py

## bench-replicas: 1, 2 and 4 gnau serve replicas on one PostgreSQL log: rounds/s, CPU per round
## of all of them, lock waits per step (about 2 minutes)
bench-replicas: $(INSTALLED)
	$(BIN)/python bench/bench_replicas.py

## bench-sequencer: the log's sequencing alone (events queued first, signing included), SQLite and
## PostgreSQL, on one core, beside raw Ed25519 signing (about a minute)
bench-sequencer: $(INSTALLED)
	$(BIN)/python bench/bench_sequencer.py

## bench-cli: each gnau command's start-up as a whole process, beside `python -c pass` (half a minute)
bench-cli: $(INSTALLED)
	$(BIN)/python bench/bench_cli_startup.py

## bench-http-edge: rounds and receipts while 2,000 idle, 300 slowloris connections and a flood of
## malformed requests hit each HTTP port, servers under a 1,024 descriptor limit (about a minute)
bench-http-edge: $(INSTALLED)
	$(BIN)/python bench/bench_http_edge.py

## bench-grpc-edge: rounds, health and receipts while each hostile client of issue 39 hits the gRPC
## port (idle, preface-only, rapid reset, 1 MB bodies, header-only calls, one token's streams) or
## the HTTP ports, the server under a 1,024 descriptor limit (about two minutes)
bench-grpc-edge: $(INSTALLED)
	$(BIN)/python bench/bench_grpc_edge.py

## bench-failover: the PostgreSQL primary killed under load, the standby promoted (about 30 s a
## run; needs the postgresql-15 server binaries)
bench-failover: $(INSTALLED)
	$(BIN)/python bench/bench_failover.py

## bench-takeover: the sequencer's leader killed, or frozen five ways (in its COPY, at random points
## of its transaction...), on three replicas with the default 5 s lease: the stop to the log's next
## entry, median and worst of 10 tries of each, beside the takeover bound (about 15 minutes;
## `bench/bench_takeover.py --lease 2 --tries 3`: 3 minutes)
bench-takeover: $(INSTALLED)
	$(BIN)/python bench/bench_takeover.py

## evidence: every report in docs/evidence/, from fixed seeds, so a fresh clone rewrites the same
## numbers (docs/evidence/README.md: what each shows, its size and its time). Hours on 2 cores
## (dieharder -a for its first hour only: see dieharder-all-evidence); the parts run on their own. Blocks of work are kept in bench/results,
## so an interrupted run resumes.
evidence: nist-evidence fairness-evidence dieharder-evidence dieharder-all-evidence

## nist-evidence: NIST SP 800-22 Rev. 1a, all 15 tests, 1,000 sequences of 1,000,000 bits of the
## shuffle DRBG's output, with section 4.2's checks (sp80022suite: the [evidence] extra)
nist-evidence: $(INSTALLED)
	nice $(BIN)/python bench/nist_sts.py --sequences 1000 --seed 00 \
		--out docs/evidence/nist_sp800_22.md --cache bench/results/evidence-cache

## fairness-evidence: 10,000,000 rounds dealt through the real pipeline, the outcome tests and
## figures (scipy, matplotlib: the [evidence] extra, which [test] includes), fixed seed
fairness-evidence: $(INSTALLED)
	nice $(BIN)/python bench/fairness_stats.py --shuffles 10000000 --seed 00 \
		--out-dir docs/evidence --cache bench/results/evidence-cache

## dieharder-evidence: the shuffle DRBG's output through 15 dieharder tests, each from round 0
## (Debian: apt-get install dieharder), fixed seed, so it rewrites docs/evidence/dieharder.md
## with the same table (about 11 to 20 minutes on 2 cores)
dieharder-evidence: $(INSTALLED)
	nice $(BIN)/python bench/drbg_stream.py --dieharder docs/evidence/dieharder.md

## dieharder-all-evidence: dieharder -a on long runs of the shuffle's DRBG, fixed seed, stopped
## after DIEHARDER_ALL_SECONDS (an hour, as the committed report was: the tests -a reaches in it);
## the whole battery reads about 250 GB, days on 2 cores: DIEHARDER_ALL_SECONDS= runs it to the end
DIEHARDER_ALL_SECONDS ?= 3600
dieharder-all-evidence: $(INSTALLED)
	nice $(BIN)/python bench/drbg_stream.py --dieharder-all docs/evidence/dieharder_all.md \
		--generates 1048576 $(if $(DIEHARDER_ALL_SECONDS),--time-limit $(DIEHARDER_ALL_SECONDS))

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis clients/node/node_modules \
		examples/node-table-service/node_modules
