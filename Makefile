# ParaTwin's two set-up commands: `make run` and `make test`. Each installs what is missing first.
BUILD     ?= build
JOBS      ?= $(shell nproc)
FUZZ_TIME ?= 60
FUZZ_TARGETS ?=
CMAKE_ARGS ?=

.PHONY: all deps configure build run test bench fuzzers fuzz fuzz-corpus screenshots format clean

all: build

deps:
	@bash scripts/install-deps.sh

configure: deps
	@test -f $(BUILD)/CMakeCache.txt || cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

run: build
	@$(BUILD)/bin/paratwin plan scenarios/quickstart.yaml

test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE long

bench: build
	@bash bench/run.sh $(BUILD)

# The sanitized libFuzzer build (tests/fuzz, clang + ASan + UBSan), not part of `make build`.
fuzzers: build
	@cmake --build $(BUILD) --target fuzzers

# Fuzzes each reader for FUZZ_TIME seconds (FUZZ_TARGETS picks some); findings in $(BUILD)/fuzz/crashes.
fuzz: fuzzers
	@bash scripts/fuzz.sh $(BUILD) $(FUZZ_TIME) $(FUZZ_TARGETS)

# Folds what `make fuzz` found into the committed seed corpus (tests/fuzz/corpus/), kept small: a merge,
# then a set cover of at most CAP inputs per target (scripts/fuzz_corpus.py).
fuzz-corpus: fuzzers
	@python3 scripts/fuzz_corpus.py $(BUILD) $(FUZZ_TARGETS)

# Each GUI view as a PNG (written by the headless view tests into $(BUILD)/screenshots/), copied to
# docs/screenshots/ for docs/gui.md.
screenshots: build
	@cd $(BUILD) && ctest -R test_gui_views --output-on-failure
	@mkdir -p docs/screenshots && cp $(BUILD)/screenshots/*.png docs/screenshots/

format:
	@find plan sim exec cli gui viz tests bench -name '*.cpp' -o -name '*.hpp' -o -name '*.cu' | xargs clang-format -i

clean:
	@rm -rf $(BUILD)
