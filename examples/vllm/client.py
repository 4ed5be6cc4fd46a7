"""Ask a `vllm serve ... --logits-processors stdsl.integrations.vllm:StdslLogitsProcessor` server for a schema
value and a grammar value through the openai client, and show a refusal.

    python examples/vllm/client.py http://127.0.0.1:8000/v1 /tmp/smollm2-hf
"""

import json
import sys

from openai import BadRequestError, OpenAI

base_url, model = sys.argv[1], sys.argv[2]  # the request's model is the name vLLM serves: here the folder path
client = OpenAI(base_url=base_url, api_key="unused")
person = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}
spec = {"kind": "json_schema", "schema": person}
reply = client.chat.completions.create(
    model=model, messages=[{"role": "user", "content": "Invent a person as JSON."}], max_tokens=64,
    extra_body={"vllm_xargs": {"stdsl": json.dumps(spec)}})
print("json_schema:", json.loads(reply.choices[0].message.content))

grammar = 'start: pair ("," pair)*\npair: KEY "=" VALUE\nKEY: /[a-z]{1,8}/\nVALUE: /[0-9]{1,4}/'
reply = client.completions.create(
    model=model, prompt="Settings as key=value pairs:", max_tokens=32,  # /v1/completions defaults to 16
    extra_body={"vllm_xargs": {"stdsl": json.dumps({"kind": "grammar", "grammar": grammar, "syntax": "lark"})}})
print("grammar:", reply.choices[0].text)

try:  # no valid value fits in 4 tokens: refused before decoding, never an empty or cut reply
    client.completions.create(model=model, prompt="A person:", max_tokens=4,
                              extra_body={"vllm_xargs": {"stdsl": json.dumps(spec)}})
    raise SystemExit("expected HTTP 400")
except BadRequestError as error:
    print("refused:", error.status_code, error.body["message"] if isinstance(error.body, dict) else error.body)
