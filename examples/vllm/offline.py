"""vLLM's offline `LLM` with the stdsl processor: a regex and a grammar constraint on one batch.

    VLLM_CPU_KVCACHE_SPACE=2 python examples/vllm/offline.py /tmp/smollm2-hf
"""

import sys

from vllm import LLM, SamplingParams

from stdsl.integrations.vllm import StdslLogitsProcessor

if __name__ == "__main__":  # vLLM starts its engine in a new process, which imports this file again
    llm = LLM(model=sys.argv[1], dtype="float32", enforce_eager=True, max_model_len=1024,
              logits_processors=[StdslLogitsProcessor])
    email = {"kind": "regex", "pattern": r"[a-z]{1,8}@[a-z]{2,8}\.com"}
    nested = {"kind": "grammar", "grammar": 'root ::= "(" root ")" | "x"'}
    params = [SamplingParams(max_tokens=24, extra_args={"stdsl": spec}) for spec in (email, nested)]
    for output in llm.generate(["Email:", "Balanced brackets:"], params):
        print(output.outputs[0].text)
