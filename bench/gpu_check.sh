#!/usr/bin/env bash
# The GPU machine's checks, most telling first, each under a time limit, so that all of them fit one command of
# at most 7 minutes; reports and a log under $OUT. On a machine that lacks some of the project's dependencies and
# reaches no package index, put their wheels in .whl/ first: the script installs them into /tmp/site.
#
#   OUT=D bash bench/gpu_check.sh           # the checks on cuda, into D
#   OUT=D bash bench/gpu_check.sh --quick   # tiny shapes on the CPU: checks the script only
#
# 1. python -m bench gpu for bert-base and gpt2-medium: the bare forward pass against the job, broken down;
# 2. python -m bench forward_variants: the bare forward pass by attention kernels (torch's choice, the job's) and width;
# 3. python -m bench gpu for the Llama-2-7B shape;
# 4. python -m bench job_parts: an extraction job's parts timed on the card (the GPU's path outside the batches);
# 5. the extraction and layer-major integration tests on the device (CTXVAR_TEST_DEVICE): layer-major against
#    whole-model bit for bit, the declared sums against the CPU's brute force.
# A step cut short by its limit keeps what it wrote (bench/gpu.py writes its report after each model).
set -u
quick=""
device=cuda
models="bert-base gpt2-medium llama-2-7b"
if [ "${1:-}" = "--quick" ]; then
  quick="--quick" device=cpu models="bert-base llama-2-7b"
elif compgen -G ".whl/*.whl" > /dev/null; then  # the GPU machine's missing wheels, carried along
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site:$PWD/src:$PWD/tests PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1 || exit 1
fi
out=${OUT:?set OUT to the reports folder}
work=${WORK:-${TMPDIR:-/tmp}/ctxvar-gpu-check-work}
log=$out/gpu_check.log
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >> "$log" 2>&1
python3 -c "import torch, transformers; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version(), 'transformers', transformers.__version__)" >> "$log" 2>&1

step() {
  local limit=$1 start=$SECONDS
  shift
  echo "== $* (limit ${limit} s)" >> "$log"
  timeout "$limit" "$@" >> "$log" 2>&1
  echo "== rc=$? after $((SECONDS - start)) s" >> "$log"
}

# shellcheck disable=SC2086
step 150 python3 -m bench gpu --device $device $quick --models ${models% *} --out "$out" --work "$work"
step 40 python3 -m bench forward_variants --device $device $quick --out "$out" --work "$work"
step 115 python3 -m bench gpu --device $device $quick --models ${models##* } --out "$out" --work "$work"
step 50 python3 -m bench job_parts --device $device $quick --out "$out" --work "$work/job-parts"
export CTXVAR_TEST_DEVICE=$device
step 65 python3 -m pytest -q -x -p no:cacheprovider --basetemp="$work/pytest" \
  tests/integration/extraction/test_extract.py tests/integration/extraction/test_layer_major.py
