# One task runner for people and CI alike.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit replay-cache-off bench sim steady mypyc soak chaos clean k8s-bins toxiproxy-bins fuse browser node-bins e2e cluster cluster-down crds

# The cluster `make cluster` brings up: never the e2e suite's wayline-e2e (`make e2e` tears that
# one down), so a test run and a first install do not remove each other's cluster.
CLUSTER ?= wayline-dev

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/orders.py

lint: $(STAMP)
	$(BIN)/ruff check runtime operator tests examples bench tools
	$(BIN)/ruff format --check runtime operator tests examples bench tools
	$(BIN)/lint-imports --no-logo

typecheck: $(STAMP)
	$(BIN)/mypy
	MYPYPATH=runtime $(BIN)/mypy --strict examples  # user code type-checks against the SDK
	$(BIN)/pytest -q -p no:cacheprovider tests/typing  # pass_*/fail_* files under mypy --strict

# The suite spends most of its time waiting (timers, leases, processes starting), so it runs in
# PYTEST_WORKERS processes, a test file per process at a time (tests of one file share its
# fixtures and order). PYTEST_WORKERS=0 runs it in this process.
PYTEST_WORKERS ?= 3

# A test that fails is run once more, and one that then passes is listed as rerun ("R") in the
# summary: it is a flaky test to mend (docs/testing.md, "Reruns"), not a pass to trust. A
# failure that repeats fails the run. RERUNS=0 runs each test once.
RERUNS ?= 1
PYTEST_RERUNS = --reruns $(RERUNS) -rfER

unit: $(STAMP) k8s-bins toxiproxy-bins fuse browser
	$(BIN)/pytest -q -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_RERUNS)  # tests/e2e is left out (pyproject addopts): `make e2e` runs it

# The engine scenarios again with the worker's cache of live replays off (every wake replayed
# from the log's first event, as a worker that never saw the run does): results must not
# depend on it. `unit` runs them with it on, the default.
REPLAY_CACHE_OFF = tests/runtime/test_deferred.py tests/runtime/test_children.py \
	tests/runtime/test_pause.py tests/runtime/test_redrive.py tests/runtime/test_compensation.py \
	tests/runtime/test_ported_hooks_children_and_retries.py tests/runtime/test_replay_cost.py \
	tests/runtime/test_wait_for_hook.py tests/runtime/test_live_replays.py

replay-cache-off: $(STAMP)
	WAYLINE_REPLAY_CACHE_RUNS=0 $(BIN)/pytest -q -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_RERUNS) $(REPLAY_CACHE_OFF)

test: lint typecheck unit replay-cache-off

bench: $(STAMP)
	$(BIN)/python bench/steps.py

# The deterministic simulator (wayline.sim): `make sim SEEDS=N` runs seeds 0..N-1 (FIRST=S
# starts elsewhere), `make sim SEED=s` runs one seed and prints its full trace. The hash seed
# is fixed because the order of a set of strings depends on it: with it, a seed replays the
# same trace in any process.
SEEDS ?= 100
FIRST ?= 0
JOBS ?= 1
sim: $(STAMP)
	PYTHONHASHSEED=0 $(BIN)/python -m wayline.sim $(if $(SEED),--seed $(SEED),--seeds $(SEEDS) --first $(FIRST) --jobs $(JOBS))

# Loop turns, tasks, futures, syscalls (strace), WAL page writes and round trips per step; an
# interleaved A/B against another commit: make steady STEADY_ARGS="--against main"
steady: $(STAMP)
	$(BIN)/python bench/steady.py $(STEADY_ARGS)

# Opt-in, not part of `make test` (minutes of C compilation): wayline._core compiled with mypyc
# into build/mypyc/runtime, a copy of the runtime that a process uses when it comes first on its
# path (PYTHONPATH=build/mypyc/runtime); docs/performance.md says what it measured (no saving).
mypyc: $(STAMP)
	$(BIN)/python tools/mypyc_build.py
	$(BIN)/pytest -q -p no:cacheprovider -o addopts= tests/mypyc

# Not part of `make test`: 200 runs x 20 steps on a real nats-server, three workers of two
# applications, SIGKILLs of workers and of the server; at most 15 minutes, then it stops
# everything it started. A quick one: make soak SOAK_ARGS="--runs 40 --minutes 5"
soak: $(STAMP)
	nice $(BIN)/python bench/soak.py $(SOAK_ARGS)

# Not part of `make test` (which runs each fault once, shorter, in tests/chaos): every suite of
# tests/chaos/__main__.py's SUITES (network faults through toxiproxy today), each fault three
# times, on real servers; writes its table to bench/RESULTS.md. Exit status 1 on a lost, stuck
# or re-run body. A quick one: make chaos CHAOS_ARGS="--repeat 1 --runs 10 --only latency"
# The long fault suites: networks (tests.chaos writes its table to bench/RESULTS.md), then the
# power cuts and full disks, whose figures the tests print (-s) for their tables there.
chaos: $(STAMP) toxiproxy-bins fuse
	nice $(BIN)/python -m tests.chaos $(CHAOS_ARGS)
	WAYLINE_REQUIRE_ALL_COMPONENTS=1 nice $(BIN)/pytest -q -s -p no:cacheprovider tests/powercut tests/faults/test_full_disk.py

k8s-bins:  # kube-apiserver, etcd and helm for tests/operator, cached outside the repo
	bash tools/build-k8s.sh

toxiproxy-bins:  # toxiproxy-server for the network-fault tests, cached outside the repo
	bash tools/build-toxiproxy.sh

fuse:  # fuse3 for tests/powercut's power-loss filesystem (mfusepy loads its libfuse3); once
	@command -v fusermount3 >/dev/null || { apt-get update -q && apt-get install -y -q fuse3; }

browser:  # Debian's headless chromium and its chromedriver for tests/console's browser tests; once
	@{ command -v chromium && command -v chromedriver; } >/dev/null || \
	  { apt-get update -q && apt-get install -y -q chromium chromium-driver; }

node-bins:  # kubelet, scheduler, controller-manager, kube-proxy, pause for tools/cluster
	bash tools/cluster/build-node.sh

# The e2e suite on a real cluster: kind where Docker and kind exist, else tools/cluster (root).
# The cluster is torn down by the suite's fixture, and once more here whatever happened to
# pytest (a no-op when nothing is left), so a failed or killed run leaves nothing behind.
# E2E_ARGS picks tests, e.g. E2E_ARGS=tests/e2e/test_workflowworker_burst.py.
E2E_ARGS ?= tests/e2e
e2e: $(STAMP) k8s-bins
	@status=0; $(BIN)/pytest -o addopts= -p no:cacheprovider -v --durations=0 $(E2E_ARGS) || status=$$?; \
	  if [ -d "$${WAYLINE_CLUSTER_STATE:-/var/lib/wayline-cluster/wayline-e2e}" ]; then \
	    KUBECTL=$(CURDIR)/$(BIN)/kubectl bash tools/cluster/down.sh || status=1; fi; \
	  exit $$status

crds:  # regenerate crds/ (the single source) and the chart's copy (a test compares the two)
	$(BIN)/python -m wayline_operator crds crds
	$(BIN)/python -m wayline_operator crds charts/wayline/crds

# A first install (root, Linux): images, the one-node cluster $(CLUSTER), the chart with values
# that match the images; prints the KUBECONFIG to export and where helm and kubectl are.
cluster: $(STAMP) k8s-bins
	WAYLINE_CLUSTER_NAME=$(CLUSTER) KUBECTL=$(CURDIR)/$(BIN)/kubectl bash tools/cluster/install.sh

# Tear down `make cluster`'s cluster, or (CLUSTER=wayline-e2e) one an interrupted e2e run left,
# and show the check.
cluster-down:
	WAYLINE_CLUSTER_NAME=$(CLUSTER) KUBECTL=$(CURDIR)/$(BIN)/kubectl bash tools/cluster/down.sh

clean:
	rm -rf $(VENV) .wayline .pytest_cache .mypy_cache
