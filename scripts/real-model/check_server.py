"""Check the llama.cpp server of serve.py with the official openai client:
its model, generation speed (llama.cpp's own timings and wall clock), a
tool call (forced, and left to the model: whether the server parsed one,
or the model wrote it as text) and embeddings. Prints one JSON line; exits
1 when chat or embeddings do not work."""

import json
import sys
import time

import openai

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "current weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
ASK = [{"role": "user", "content": "What is the weather in Paris? Use the tool."}]


def main() -> None:
    chat_url, embed_url = sys.argv[1], sys.argv[2]
    chat = openai.OpenAI(base_url=chat_url, api_key="unused", max_retries=0, timeout=600)
    embed = openai.OpenAI(base_url=embed_url, api_key="unused", max_retries=0, timeout=600)
    model = chat.models.list().data[0].id
    out = {"model": model.rsplit("/", 1)[-1]}

    start = time.monotonic()
    r = chat.chat.completions.create(
        model=model, temperature=0, max_tokens=64,
        messages=[{"role": "user", "content": "Write a short paragraph about the history of Paris."}],
    )
    wall = time.monotonic() - start
    timings = (r.model_extra or {}).get("timings", {})
    out["speed"] = {
        "completion_tokens": r.usage.completion_tokens,
        "generation_tokens_per_s": round(timings.get("predicted_per_second", 0.0), 1),
        "prompt_tokens_per_s": round(timings.get("prompt_per_second", 0.0), 1),
        "wall_tokens_per_s": round(r.usage.completion_tokens / wall, 1),
    }
    if not r.choices[0].message.content:
        raise SystemExit(f"chat: empty reply {r.model_dump()}")

    # Qwen2.5-Coder-1.5B under llama.cpp writes the call as a fenced JSON
    # object even under required; the server leaves it in the content and
    # ctxopt's client recovers it (tool_call_in_text). Recorded, not fatal.
    for choice in ("required", "auto"):
        try:
            r = chat.chat.completions.create(model=model, temperature=0, max_tokens=64, messages=ASK,
                                             tools=[WEATHER], tool_choice=choice)
            calls = r.choices[0].message.tool_calls or []
            out[f"tool_call_{choice}"] = {"tool_calls": len(calls), "content": (r.choices[0].message.content or "")[:80]}
        except openai.APIStatusError as e:
            out[f"tool_call_{choice}"] = {"status": e.status_code, "error": str(e.message)[:120]}

    texts = ["the capital of France is Paris", "Paris is the capital of France", "a recipe for bread"]
    e = embed.embeddings.create(model=model, input=texts)
    vecs = [d.embedding for d in sorted(e.data, key=lambda d: d.index)]
    if len(vecs) != 3 or not vecs[0]:
        raise SystemExit(f"embeddings: {len(vecs)} vectors")

    def cos(a, b):
        return sum(x * y for x, y in zip(a, b)) / ((sum(x * x for x in a) ** 0.5) * (sum(y * y for y in b) ** 0.5))

    out["embeddings"] = {"dim": len(vecs[0]), "cos_paraphrase": round(cos(vecs[0], vecs[1]), 3), "cos_unrelated": round(cos(vecs[0], vecs[2]), 3)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
