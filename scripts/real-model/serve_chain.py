"""Send one long agent conversation through optimize serve (student.sh's
proxy) with the openai client and report which link of the compressor
chain made its summary (X-Ctxopt-Backend), with the proxy's other headers.

The conversation is built from the first training row of the dataset: its
compressor input, cut into search results, so the history passes the
proxy's threshold. LABEL goes into the system message: each label is its
own session, with its own summary. Prints one JSON line."""

import json
import sys
from pathlib import Path

import openai
import pyarrow.parquet as pq

SEARCH = {"type": "function", "function": {"name": "search", "description": "search the documents",
                                           "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}}
PIECES = 6


def conversation(data: Path, label: str) -> list[dict]:
    row = pq.read_table(data / "data" / "train.parquet", columns=["prompt"]).slice(0, 1).to_pylist()[0]
    text = "\n".join(m["content"] for m in row["prompt"])
    step = max(1, len(text) // PIECES)
    msgs = [{"role": "system", "content": f"You answer questions with the search tool. ({label})"},
            {"role": "user", "content": "Answer the questions in the documents below, searching as needed."}]
    for i in range(PIECES):
        msgs.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": f"c{i}", "type": "function", "function": {"name": "search", "arguments": json.dumps({"query": f"part {i + 1}"})}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": text[i * step:(i + 1) * step]})
    msgs.append({"role": "user", "content": "Which facts have you found so far? One line."})
    return msgs


def main() -> None:
    proxy, data, label = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    client = openai.OpenAI(base_url=proxy + "/v1", api_key="ctxopt-student-chain", max_retries=0, timeout=1800)
    raw = client.chat.completions.with_raw_response.create(
        model="qwen2.5-coder-1.5b-instruct", temperature=0, max_tokens=32,
        messages=conversation(data, label), tools=[SEARCH])
    reply = raw.parse()
    h = {k: v for k, v in raw.headers.items() if k.lower().startswith("x-ctxopt-")}
    print(json.dumps({"label": label, "link": h.get("x-ctxopt-backend", "none (not compressed)"),
                      "headers": h, "reply": (reply.choices[0].message.content or "")[:200]}))


if __name__ == "__main__":
    main()
