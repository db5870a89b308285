# The two commands of the README, plus their parts. CMake does the real building.
#   make demo   set up, build, and stream the default model's answer to a chat prompt
#   make test   set up, build (warnings are errors), run every test, fuzz the GGUF reader
MODEL ?= models/SmolLM2-135M-Instruct.Q4_1.gguf
PROMPT ?= What are three good reasons to learn the C programming language?
FUZZ_SECONDS ?= 120
JOBS ?= $(shell nproc)

.PHONY: all setup setup-test build build-test demo test unit-test python-test fuzz clean

all: build

setup:
	@scripts/setup.sh

setup-test:
	@scripts/setup.sh --test

build: setup
	@cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DSWIFTINFER_TESTS=OFF >/dev/null
	@cmake --build build -j$(JOBS)

demo: build
	build/swiftinfer chat -m $(MODEL) -p "$(PROMPT)" -n 256 --temp 0.7 --seed 42

# The optimised build the Python tests drive, and a sanitised one for the unit tests.
build-test: setup-test
	@cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DSWIFTINFER_WERROR=ON -DSWIFTINFER_TESTS=ON >/dev/null
	@cmake --build build -j$(JOBS)
	@cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSWIFTINFER_WERROR=ON -DSWIFTINFER_SANITIZE=ON -DSWIFTINFER_CUDA=OFF >/dev/null
	@cmake --build build-asan -j$(JOBS)

# The unit tests in the sanitised build; then, where nvcc built the CUDA backend, the GPU's weight
# decoders run on the host (label cuda_host: sanitised too, no GPU needed).
unit-test: build-test
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j$(JOBS)
	cd build && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -L cuda_host

python-test: build-test
	SI_BUILD_DIR=$(CURDIR)/build .venv/bin/python -m pytest -q tests/python

fuzz: setup
	scripts/fuzz.sh $(FUZZ_SECONDS)

test: unit-test python-test fuzz

clean:
	rm -rf build build-asan build-fuzz
