"""Hand-written accepted and refused strings for the real grammars of `tests/data/grammars` (by file name).

Each list exercises the dialect constructs the grammar uses (ignore placement, bounded repetition, escapes,
`%json`, `%lark`, left recursion, common terminals) rather than the file's quirks; the same expectations hold
for llguidance on the Lark files (checked when the benchmark runs).
"""

from __future__ import annotations

JSON_ACCEPTED = ['{"a": [1, 2.5, -3e2, true, false, null, "x\\"y"]}', "[]", "{}", '"str"', "-0.5", '[{"k":{}}]',
                 "[1 ,2]", '{"a" :\n [ ] }\t']
JSON_REFUSED = ['{"a" 1}', "[1,]", "tru", '["a"b"]', '{"a":1,}', "'x'", "[1 2]", "", ' "a"', '"a\nb"', "[1]]"]

CASES: dict[str, tuple[list[str], list[str]]] = {
    "lark_json_official.lark": (JSON_ACCEPTED, JSON_REFUSED),
    "llamacpp_arithmetic.gbnf": (
        ["1+2= 3\n", "x=(a*b)\n", "a = b\n", "(1+2)*x=y\n1=2\n", "( a_1 -2 )/z9=\t0\n", "1=2\n\n"],
        ["1+2=3", "=3\n", "1+=3\n", "A=1\n", "(1=2\n", "1=2\nx", "", " 1=2\n", "a - 2=1\n"],
    ),
    "llamacpp_json.gbnf": (
        ['{"a": 1}', '{"a":[1,2,{"b":null}]}', "{}", '{"k": "v\\u00e9"}', '{"n": -1.5e3}', '{"n": 1e19}',
         '{\n  "a": true}', '{"a" : 1} ', '{"é€": "中"}'],
        ["[]", '{"a":01}', '{"a":1,}', '{"a":1}  ', '{"a":"\x01"}', '{"a":tru}', '{"a":"\\x"}', "", ' {"a":1}',
         '{"a": 12345678901234567890}', '{"n": 1e10}'],
    ),
    "vllm_sql_subset.ebnf": (
        ["SELECTcol_1fromtable_1wherecol_1=1", "SELECTcol_2fromtable_2wherecol_2=2"],
        ["SELECT col_1 from table_1 where col_1=1", "SELECTcol_3fromtable_1wherecol_1=1",
         "selectcol_1fromtable_1wherecol_1=1", "SELECTcol_1fromtable_1wherecol_1=", ""],
    ),
    "llg_llama31_json_toolcall.lark": (
        ["hello", "hi {there}\nsecond line", '{"name":"get_weather","parameters":{"city":"Paris"}}'],
        ['{"name":"other","parameters":{"city":"Paris"}}', '{"name":"get_weather"}', "", "{hello",
         '{"name":"get_weather","parameters":{}}'],
    ),
    "llg_ignore_once_bounded_ws.lark": (
        ["A!", "A !", "A \t!", "A" + " " * 8 + "!"],
        [" A!", "A" + " " * 9 + "!", "A", "A!!", "a!"],
    ),
    "xgr_ids_ignore_ws.lark": (
        ["id=1", "id=1,id=22", "id=1 , id=2", "id= 1", "id=1 ", "id=1,\n\tid=0"],
        [" id=1", "id = 1", "id=", "id=1,", "id=1 id=2", "id=a", "ID=1"],
    ),
    "xgr_nested_lark.lark": (
        ["[x:1]", "[((x)):-5]", "[x : 1]", "[( x ):2]"],
        ["[x:1.5]", "[(x:1]", "x:1", "[x:]", "[:1]", "[x:01]"],
    ),
    "xgr_ebnf_json_string.ebnf": (
        ['"abc"', '"a\\nb"', '"\\u00e9"', '""', '"é中"', '"a/b\\/"'],
        ['"a', "abc", '"\\x"', '"a"b"', '"\x01"', '"\\u12"', ""],
    ),
    "outlines_arithmetic.lark": (
        ["1+2*3", "-(1.5 - 2)/4", "1 + 2", "((3))", "--1", "2e3*.5", "1\t*\t2 "],
        ["1+", "(1", "1 2", " 1", "1\n+2", "+1", "1+*2", "()", ""],
    ),
    "llg_llama31_brave_wolfram_special_tokens.lark": (
        ["hello world", "", '<|python_tag|>brave_search.call(query="x y")<|eom_id|>',
         '<|python_tag|>wolfram_alpha.call(query="2+2\\n")<|eom_id|>'],
        ['<|python_tag|>brave_search.call(query="x")', '<|python_tag|>brave_search.call(query=x)<|eom_id|>',
         'hi <|python_tag|>wolfram_alpha.call(query="1")<|eom_id|>', '<|eom_id|>'],
    ),
    "llg_reasoning_then_json.lark": (
        ['<think>\nhmm\n</think>{"street": "Main", "city": "Oslo", "zip": 1, "state": "N"}',
         '<think>\n</think>{"street":"a","city":"c","zip":2.5,"state":"b"}'],
        ['<think>\nhmm</think>{"street": "Main", "city": "Oslo", "zip": 1}',
         '<think>hmm</think>{"street": "Main", "city": "Oslo", "zip": 1, "state": "N"}',
         '<think>\na</think>b</think>{"street": "Main", "city": "Oslo", "zip": 1, "state": "N"}',
         '{"street": "Main", "city": "Oslo", "zip": 1, "state": "N"}'],
    ),
    "vllm_sql_subset.lark": (
        ["SELECTcol_1fromtable_1wherecol_1=1", "SELECTcol_1fromtable_2wherecol_2=2"],
        ["SELECT col_1 from table_1 where col_1=1", "SELECTcol_1fromtable_1wherecol_1=3", ""],
    ),
}

MAY_BE_REFUSED = {
    "llg_lazy_text_interleaved_toolcalls.lark": "[lazy] lexemes change the language",
}
"""Files the front end may refuse (with a GrammarError at a line and column) instead of compiling."""

PLAIN_TEXT_ACCEPTED = {
    "llg_llama31_brave_wolfram_special_tokens.lark": ["hello world", "", "line\nbreak"],
    "llg_lazy_text_interleaved_toolcalls.lark": ["hello", "", "just text\n"],
}
"""Where such a file compiles, free text with no special token or call must still be accepted."""
