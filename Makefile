GO ?= go
BIN := bin/optimize

.PHONY: demo test bench lint build tools clean real real-quality student

build:
	@$(GO) build -o $(BIN) ./cmd/optimize

# The main job on the embedded offline model: no key, no network. runs/ is
# the demo's own: what an earlier demo left there is reused where its inputs
# are unchanged and redone where they changed (another build of the embedded
# model, another job), never refused (--replace). Last, the selected
# guideline is promoted past the gate of the run's own test-split evaluation
# (success not 5 points below the starting guideline's, on the paired 95%
# interval) into the registry serve.example.yaml serves, so
# `optimize serve --config serve.example.yaml` starts as it is. Between the
# two, every strategy on jobs/demo-strategies.yaml's task set (the same qa
# questions answered one at a time under a search budget, where what each
# strategy keeps shows; README, "Reading the demo table"), the guideline
# strategy with the run's selected guideline; cmd/optimize's
# TestDemoStrategies runs this command on 30 of its tasks.
demo: build
	@./$(BIN) run --config jobs/demo.yaml --out runs/demo --replace
	@./$(BIN) eval --config jobs/demo-strategies.yaml --split test --run runs/demo --replace \
	  --candidate none=none --candidate fifo=fifo --candidate retrieval=retrieval \
	  --candidate llmlingua=llmlingua --candidate prompting=prompting \
	  --candidate guideline=guideline,guideline=selected \
	  --candidate pace=pace --candidate plan-aware=plan-aware --out runs/demo-strategies
	@echo "demo: promoting the selected guideline for serve.example.yaml, gated against its starting guideline (prompting), not none as the verdict above"
	@./$(BIN) guideline promote --run runs/demo --gate runs/demo/eval --against prompting \
	  --rule "success >= -0.05" selected

# A real model in the loop (llama.cpp serving Qwen2.5-Coder-1.5B-Instruct on
# loopback) playing every role of a small run; see scripts/real-model/README.md.
# Installs into .cache/real-model; make test needs none of it.
real:
	bash scripts/real-model/real.sh

# Does ctxopt's optimization improve a real compressor? The mixed and the
# all-real setting, none / prompting / keep-facts / the selected guideline,
# paired statistics; about 60 minutes of model time on two idle cores, plus
# the downloads on a fresh machine (docs/real-quality.md).
real-quality:
	bash scripts/real-model/quality.sh

# A LoRA student (Qwen2.5-Coder-0.5B) trained from real-quality's export with
# the dataset's own recipe, converted to GGUF, served and evaluated against
# its teacher; then optimize serve's chain student -> teacher -> truncation.
# About 45 minutes on two idle cores; needs make real-quality's output.
student:
	bash scripts/real-model/student.sh

# vet + race tests; the project's own script installs test tools (DuckDB, the
# OpenAI and Anthropic SDKs, chromium for the report's browser test).
# The race detector needs cgo, so a machine without a C compiler (where Go
# turns cgo off by itself) or CGO_ENABLED=0 runs the same tests without it.
RACE := $(if $(filter 1,$(shell $(GO) env CGO_ENABLED)),-race,)

# gotestsum (installed by tools into .cache/bin) runs the same go test and
# prints go test's own lines, "ok"/"FAIL" as each package finishes, then the
# failed tests again and a closing "DONE N tests, M failures in Ts" line; when
# it could not be installed, or GO names another go than PATH's (gotestsum
# runs PATH's), plain go test runs. The two longest packages start first
# (go test runs two at once on 2 cores). About 7 minutes on 2 cores.
GOTESTSUM := .cache/bin/gotestsum
TESTCMD = $(if $(and $(wildcard $(GOTESTSUM)),$(filter go,$(GO))),$(GOTESTSUM) --format standard-quiet --,$(GO) test)

test: tools
	$(GO) vet ./...
	CTXOPT_REQUIRE_DUCKDB=1 CTXOPT_REQUIRE_NODE_SDKS=1 CTXOPT_REQUIRE_CHROMIUM=1 CTXOPT_REQUIRE_TEMPORAL=1 $(TESTCMD) $(RACE) -timeout 20m ./pipeline ./cmd/optimize ./...

tools:
	bash scripts/install-test-tools.sh

# Each benchmark prints its figure: agent calls/s through the client against
# the embedded model (50 ms per call, 64 in flight), incremental token
# counting per step, PAACE-Syn workflows generated and executed (dual
# execution and acceptance filter) per second with the embedded model at
# 2 ms per answer, and the peak heap at 10,000 workflows,
# the rollout step's non-LLM cost as the history grows,
# the PACE builder on a 5,000-chunk history, PACE's answers with glimpse on
# and off on the long-horizon qa, optimize distill's rows/s and peak RSS at
# 100,000 rows (and Parquet alone, ours against DuckDB, for information; a
# run takes minutes, most of it redaction), optimize serve's added latency,
# throughput against nginx, memory under 2,000 held connections and long
# conversations with a slow summarizer (bench/serve.sh, about 4 minutes),
# peak RSS of a rollout at 1,000 vs 100 tasks, and the cache file under a
# 10 MB limit over three seeds.
bench: build tools
	$(GO) test -run '^$$' -bench 'AgentCallsThroughClient' -benchtime 3x ./llm/sim/
	$(GO) test -run '^$$' -bench 'CounterIncremental' -benchtime 1x ./rollout/
	$(GO) test -run '^$$' -bench 'GenerateEmbedded' -benchtime 10000x ./synth/
	$(GO) test -run '^$$' -bench 'RunEmbedded' -benchtime 10000x -timeout 30m ./synth/
	$(GO) test -run '^$$' -bench 'StepOverhead' -benchtime 5x ./rollout/
	$(GO) test -run '^$$' -bench 'PACEBuilder' ./compress/
	$(GO) test -run '^$$' -bench 'GlimpseAblation' -benchtime 1x ./pipeline/
	$(GO) test -run '^$$' -bench 'Count|TokenizerIncremental' ./llm/
	$(GO) test -run '^$$' -bench 'Redact' ./redact/
	bash bench/distill.sh
	bash bench/serve.sh
	bash bench/rollout-rss.sh
	bash bench/cache-limit.sh
	bash bench/temporal.sh

lint:
	gofmt -l . | (! grep .)
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

clean:
	rm -rf bin runs .cache
